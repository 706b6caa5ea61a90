"""OpenSSH signatures (SSHSIG, `ssh-keygen -Y sign|verify`) with `cryptography`.

The wire format is OpenSSH's PROTOCOL.sshsig: an armored blob holding the signer's
public key, a namespace, the hash algorithm and the signature over

    "SSHSIG" ‖ string(namespace) ‖ string("") ‖ string(hash alg) ‖ string(H(message))

Keys: ssh-ed25519, ecdsa-sha2-nistp256/384/521 and ssh-rsa (signing with rsa-sha2-512,
as ssh-keygen does). A signature read from a cache is hostile input: its size is bounded
before it is decoded, every length is checked against what is left, and nothing in it
is trusted until its public key matched an allowed signer (allowed_signers.py) — only
then does any public-key arithmetic run.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

from cce_knowledge.core.errors import CceError

NAMESPACE = "cce-knowledge"
MAGIC = b"SSHSIG"
VERSION = 1
BEGIN = "-----BEGIN SSH SIGNATURE-----"
END = "-----END SSH SIGNATURE-----"
#: An armored signature of the largest key we accept (RSA 16384) is under 8 KiB.
MAX_SIG_BYTES = 16 * 1024
#: A private key file (an OpenSSH RSA-16384 key is ~12 KiB).
MAX_KEY_BYTES = 64 * 1024
_HASHES = {"sha256": hashlib.sha256, "sha512": hashlib.sha512}

PrivateKey = ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
PublicKey = ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey | rsa.RSAPublicKey

_CURVES = {"secp256r1": "nistp256", "secp384r1": "nistp384", "secp521r1": "nistp521"}
_CURVE_HASH: dict[str, type[hashes.SHA256 | hashes.SHA384 | hashes.SHA512]] = {
    "nistp256": hashes.SHA256,
    "nistp384": hashes.SHA384,
    "nistp521": hashes.SHA512,
}


class SigningError(CceError):
    """A key, an allowed_signers file or a signature that cannot be used."""


class SigningKeyError(SigningError):
    """A private signing key that cannot be loaded (malformed, encrypted, unsupported)."""


# ------------------------------------------------------------------ SSH wire primitives


def _string(b: bytes) -> bytes:
    return struct.pack(">I", len(b)) + b


class _Reader:
    """Length-prefixed fields of an SSH blob; every length is checked against the rest."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def take(self, n: int) -> bytes:
        if n > len(self.data) - self.pos:
            raise SigningError(f"{self.what}: truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def u32(self) -> int:
        return int(struct.unpack(">I", self.take(4))[0])

    def string(self) -> bytes:
        return self.take(self.u32())

    def end(self) -> None:
        if self.pos != len(self.data):
            raise SigningError(f"{self.what}: {len(self.data) - self.pos} trailing bytes")


# ------------------------------------------------------------------ keys


def public_blob(key: PublicKey) -> bytes:
    """The key in SSH wire format (what allowed_signers and SSHSIG carry)."""
    line = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return base64.b64decode(line.split()[1])


def key_type(blob: bytes) -> str:
    try:
        return _Reader(blob, "public key").string().decode("ascii")
    except (SigningError, UnicodeDecodeError):
        return "unknown"


def fingerprint(blob: bytes) -> str:
    """`SHA256:…` as `ssh-keygen -l` prints it."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


def describe(blob: bytes) -> str:
    """`ED25519 SHA256:…`, the key's type and fingerprint."""
    kt = key_type(blob)
    short = {"ssh-ed25519": "ED25519", "ssh-rsa": "RSA"}.get(kt)
    if short is None:
        short = "ECDSA" if kt.startswith("ecdsa-sha2-") else kt.upper()
    return f"{short} {fingerprint(blob)}"


def public_from_blob(blob: bytes) -> PublicKey:
    kt = key_type(blob)
    line = kt.encode() + b" " + base64.b64encode(blob)
    try:
        key = serialization.load_ssh_public_key(line)
    except (ValueError, UnsupportedAlgorithm) as e:
        raise SigningError(f"unsupported or malformed public key ({kt}): {e}") from None
    if not isinstance(key, ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey | rsa.RSAPublicKey):
        raise SigningError(f"unsupported public key type {kt}")
    if public_blob(key) != blob:
        raise SigningError(f"non-canonical public key encoding ({kt})")
    return key


ENCRYPTED = (
    "the private key is protected by a passphrase, and cce signs without prompting: use a "
    "key without a passphrase, kept where only the publisher can read it (a CI secret "
    "through CCE_SIGNING_KEY, or a file readable only by you)"
)


def load_private_key(data: bytes, where: str) -> PrivateKey:
    """An OpenSSH (or PEM) private key. Errors name `where` (a path, or the variable the
    text came from) and never quote the key."""
    if len(data) > MAX_KEY_BYTES:
        raise SigningKeyError(f"{where}: not a private key (larger than {MAX_KEY_BYTES} bytes)")
    text = data.strip()
    if b"ENCRYPTED" in text[:200] or b"Proc-Type: 4,ENCRYPTED" in text:
        raise SigningKeyError(f"{where}: {ENCRYPTED}")
    key: object
    try:
        if text.startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----"):
            key = serialization.load_ssh_private_key(text + b"\n", None)
        elif text.startswith(b"-----BEGIN ") and b"PRIVATE KEY-----" in text[:64]:
            key = serialization.load_pem_private_key(text + b"\n", None)
        else:
            raise SigningKeyError(
                f"{where}: not an OpenSSH private key (expected a "
                "`-----BEGIN OPENSSH PRIVATE KEY-----` block, as `ssh-keygen -t ed25519` writes)"
            )
    except (TypeError, ValueError, UnsupportedAlgorithm) as e:
        reason = str(e).split("\n", 1)[0] or type(e).__name__
        if "password" in reason.lower() or "bcrypt" in reason.lower():
            raise SigningKeyError(f"{where}: {ENCRYPTED}") from None
        raise SigningKeyError(f"{where}: cannot load the private key: {reason}") from None
    if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name not in _CURVES:
        raise SigningKeyError(f"{where}: unsupported ECDSA curve {key.curve.name}")
    if not isinstance(
        key, ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
    ):
        raise SigningKeyError(
            f"{where}: unsupported key type {type(key).__name__} (use ed25519, ecdsa or rsa)"
        )
    return key


def read_capped(path: Path, limit: int, what: str, error: type[SigningError]) -> bytes:
    """At most `limit` + 1 bytes of `path` (one more than `limit` says the file is too
    large, without reading the rest); unreadable: `error`, `cannot read {what} {path}: …`."""
    try:
        with open(path, "rb") as f:
            return f.read(limit + 1)
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror or e}") from None


def load_private_key_file(path: str | os.PathLike[str]) -> PrivateKey:
    p = Path(path)
    return load_private_key(
        read_capped(p, MAX_KEY_BYTES, "the signing key", SigningKeyError), str(p)
    )


# ------------------------------------------------------------------ signing


def _signed_data(namespace: str, hash_alg: str, message_hash: bytes) -> bytes:
    return (
        MAGIC
        + _string(namespace.encode())
        + _string(b"")
        + _string(hash_alg.encode())
        + _string(message_hash)
    )


def _raw_sign(key: PrivateKey, data: bytes) -> bytes:
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return _string(b"ssh-ed25519") + _string(key.sign(data))
    if isinstance(key, ec.EllipticCurvePrivateKey):
        curve = _CURVES[key.curve.name]
        r, s = decode_dss_signature(key.sign(data, ec.ECDSA(_CURVE_HASH[curve]())))
        inner = _mpint(r) + _mpint(s)
        return _string(f"ecdsa-sha2-{curve}".encode()) + _string(inner)
    sig = key.sign(data, padding.PKCS1v15(), hashes.SHA512())
    return _string(b"rsa-sha2-512") + _string(sig)


def _mpint(n: int) -> bytes:
    raw = n.to_bytes((n.bit_length() + 8) // 8, "big") if n else b""
    return _string(raw)


def sign(key: PrivateKey, message: bytes, namespace: str = NAMESPACE) -> bytes:
    """The armored signature `ssh-keygen -Y sign -n NAMESPACE` would write (sha512)."""
    data = _signed_data(namespace, "sha512", hashlib.sha512(message).digest())
    blob = (
        MAGIC
        + struct.pack(">I", VERSION)
        + _string(public_blob(key.public_key()))
        + _string(namespace.encode())
        + _string(b"")
        + _string(b"sha512")
        + _string(_raw_sign(key, data))
    )
    b64 = base64.b64encode(blob).decode()
    lines = [b64[i : i + 70] for i in range(0, len(b64), 70)]
    return ("\n".join([BEGIN, *lines, END]) + "\n").encode()


# ------------------------------------------------------------------ verifying


@dataclass(frozen=True)
class SshSig:
    public_key: bytes
    namespace: str
    hash_alg: str
    signature: bytes

    @property
    def signer(self) -> str:
        return describe(self.public_key)


def parse_signature(armored: bytes, where: str = "signature") -> SshSig:
    """Decode an armored SSHSIG, bounded: at most MAX_SIG_BYTES are looked at."""
    if len(armored) > MAX_SIG_BYTES:
        raise SigningError(f"{where}: larger than {MAX_SIG_BYTES} bytes: not an SSH signature")
    try:
        text = armored.decode("ascii")
    except UnicodeDecodeError:
        raise SigningError(f"{where}: not an SSH signature (not ASCII)") from None
    lines = [ln.strip() for ln in text.strip().split("\n")]
    if len(lines) < 3 or lines[0] != BEGIN or lines[-1] != END:
        raise SigningError(f"{where}: not an armored SSH signature ({BEGIN} … {END})")
    try:
        blob = base64.b64decode("".join(lines[1:-1]), validate=True)
    except (binascii.Error, ValueError):
        raise SigningError(f"{where}: bad base64 in the SSH signature") from None
    r = _Reader(blob, where)
    if r.take(6) != MAGIC:
        raise SigningError(f"{where}: bad magic (not SSHSIG)")
    if r.u32() != VERSION:
        raise SigningError(f"{where}: unsupported SSHSIG version")
    pub = r.string()
    try:
        namespace = r.string().decode("utf-8")
        r.string()  # reserved
        hash_alg = r.string().decode("ascii")
    except UnicodeDecodeError:
        raise SigningError(f"{where}: malformed SSHSIG fields") from None
    sig = r.string()
    r.end()
    if hash_alg not in _HASHES:
        raise SigningError(f"{where}: unsupported hash algorithm {hash_alg!r}")
    return SshSig(pub, namespace, hash_alg, sig)


def check_signature(sig: SshSig, message: bytes, namespace: str = NAMESPACE) -> None:
    """Raise SigningError unless `sig` is a valid signature of `message` in `namespace`
    by the key it names. Call it only for a key already known to be allowed."""
    if sig.namespace != namespace:
        raise SigningError(f"signature namespace is {sig.namespace!r}, not {namespace!r}")
    key = public_from_blob(sig.public_key)
    data = _signed_data(namespace, sig.hash_alg, _HASHES[sig.hash_alg](message).digest())
    r = _Reader(sig.signature, "signature blob")
    alg = r.string().decode("ascii", "replace")
    raw = r.string()
    r.end()
    try:
        if isinstance(key, ed25519.Ed25519PublicKey):
            if alg != "ssh-ed25519":
                raise SigningError(f"signature algorithm {alg} does not match an ed25519 key")
            key.verify(raw, data)
        elif isinstance(key, ec.EllipticCurvePublicKey):
            curve = _CURVES.get(key.curve.name)
            if curve is None or alg != f"ecdsa-sha2-{curve}":
                raise SigningError(f"signature algorithm {alg} does not match the ECDSA key")
            inner = _Reader(raw, "ECDSA signature")
            rr = int.from_bytes(inner.string(), "big")
            ss = int.from_bytes(inner.string(), "big")
            inner.end()
            key.verify(encode_dss_signature(rr, ss), data, ec.ECDSA(_CURVE_HASH[curve]()))
        else:
            algs: dict[str, type[hashes.SHA256 | hashes.SHA512]] = {
                "rsa-sha2-512": hashes.SHA512,
                "rsa-sha2-256": hashes.SHA256,
            }
            if alg not in algs:
                # ssh-rsa (SHA-1) signatures are refused, as ssh-keygen refuses them.
                raise SigningError(f"signature algorithm {alg} is not accepted for an RSA key")
            key.verify(raw, data, padding.PKCS1v15(), algs[alg]())
    except InvalidSignature:
        raise SigningError(
            "the signature does not verify (statement or signature altered)"
        ) from None
