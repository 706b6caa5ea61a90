"""OpenSSH keys for the signing tests: made by the real `ssh-keygen` when it is
installed (CI installs openssh-client), else written in the same OpenSSH format by
`cryptography` so the non-interop tests still run."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

SSH_KEYGEN = shutil.which("ssh-keygen")
needs_ssh_keygen = pytest.mark.skipif(
    SSH_KEYGEN is None,
    reason="ssh-keygen (OpenSSH) is not installed: interop needs the real tool "
    "(apt-get install openssh-client; .ci/run installs it)",
)
KINDS = ("ed25519", "ecdsa", "rsa")


def make_key(directory: Path, kind: str = "ed25519", name: str | None = None) -> Path:
    """A private key file (0600) and its `.pub` beside it; returns the private key's path."""
    path = directory / (name or f"id_{kind}")
    if SSH_KEYGEN is not None:
        bits = ["-b", "2048"] if kind == "rsa" else []
        subprocess.run(
            [SSH_KEYGEN, "-q", "-t", kind, *bits, "-N", "", "-C", f"test-{kind}", "-f", str(path)],
            check=True,
            capture_output=True,
        )
        return path
    key: ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
    if kind == "ed25519":
        key = ed25519.Ed25519PrivateKey.generate()
    elif kind == "ecdsa":
        key = ec.generate_private_key(ec.SECP256R1())
    else:
        key = rsa.generate_private_key(65537, 2048)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    pub = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    (directory / f"{path.name}.pub").write_bytes(pub + f" test-{kind}\n".encode())
    return path


def allowed_line(key: Path, principal: str, options: str = 'namespaces="cce-knowledge"') -> str:
    """An allowed_signers line for `key`'s public half."""
    kt, b64 = (key.parent / f"{key.name}.pub").read_text().split()[:2]
    return f"{principal} {options} {kt} {b64}\n" if options else f"{principal} {kt} {b64}\n"
