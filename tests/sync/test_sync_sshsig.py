"""SSHSIG, allowed_signers and the publish statement: codecs, interop with the real
ssh-keygen, hostile input."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as hs

from cce_knowledge.sync import allowed_signers as AS
from cce_knowledge.sync import sshsig
from cce_knowledge.sync.signing import SignatureRefused, check_rollback, verify_publish
from cce_knowledge.sync.statement import Statement, StatementError
from cce_knowledge.sync.statement import parse as parse_statement
from tests.helpers.sshkeys import KINDS, SSH_KEYGEN, allowed_line, make_key, needs_ssh_keygen

MESSAGE = b'{"hello":"world"}\n'
SHA = "a" * 64


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("keys")
    out = {kind: make_key(d, kind) for kind in KINDS}
    out["other"] = make_key(d, "ed25519", "id_other")
    return out


def _statement(counter: int = 10, snapshot: str = "0123456789abcdef", sha: str = SHA) -> Statement:
    return Statement(
        corpus_id="c1",
        snapshot=snapshot,
        cck_sha256=sha,
        cck_checksum="b" * 64,
        cck_size=123,
        published_at="2026-07-01T00:00:00Z",
        counter=counter,
        vectors={"knowledge/v1/c1/vectors/0123456789abcdef-m.vec": "c" * 64},
    )


def _allowed(tmp_path: Path, *lines: str) -> AS.AllowedSigners:
    p = tmp_path / "allowed_signers"
    p.write_text("".join(lines))
    return AS.load(p)


# ------------------------------------------------------------------ sign / verify


@pytest.mark.parametrize("kind", KINDS)
def test_sign_then_verify_round_trip(keys: dict[str, Path], kind: str) -> None:
    key = sshsig.load_private_key_file(keys[kind])
    armored = sshsig.sign(key, MESSAGE)
    assert armored.startswith(b"-----BEGIN SSH SIGNATURE-----\n")
    assert armored.endswith(b"\n-----END SSH SIGNATURE-----\n")
    sig = sshsig.parse_signature(armored)
    assert sig.namespace == "cce-knowledge" and sig.hash_alg == "sha512"
    assert sig.public_key == sshsig.public_blob(key.public_key())
    sshsig.check_signature(sig, MESSAGE)
    with pytest.raises(sshsig.SigningError, match="does not verify"):
        sshsig.check_signature(sig, MESSAGE + b" ")
    with pytest.raises(sshsig.SigningError, match="namespace"):
        sshsig.check_signature(sig, MESSAGE, "git")


@needs_ssh_keygen
@pytest.mark.parametrize("kind", KINDS)
def test_ssh_keygen_verifies_our_signatures(
    keys: dict[str, Path], kind: str, tmp_path: Path
) -> None:
    (tmp_path / "msg").write_bytes(MESSAGE)
    key = sshsig.load_private_key_file(keys[kind])
    (tmp_path / "msg.sig").write_bytes(sshsig.sign(key, MESSAGE))
    (tmp_path / "allowed").write_text(allowed_line(keys[kind], "ci@example.com"))
    r = subprocess.run(
        f"{SSH_KEYGEN} -Y verify -f allowed -I ci@example.com -n cce-knowledge -s msg.sig < msg",
        shell=True,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert 'Good "cce-knowledge" signature for ci@example.com' in r.stdout
    # ssh-keygen also refuses it under another namespace: the namespace is signed.
    r = subprocess.run(
        f"{SSH_KEYGEN} -Y verify -f allowed -I ci@example.com -n git -s msg.sig < msg",
        shell=True,
        cwd=tmp_path,
        capture_output=True,
    )
    assert r.returncode != 0


@needs_ssh_keygen
@pytest.mark.parametrize("kind", KINDS)
def test_we_verify_ssh_keygen_signatures(keys: dict[str, Path], kind: str, tmp_path: Path) -> None:
    msg = tmp_path / "statement.json"
    msg.write_bytes(MESSAGE)
    subprocess.run(
        [SSH_KEYGEN, "-Y", "sign", "-n", "cce-knowledge", "-f", str(keys[kind]), str(msg)],
        check=True,
        capture_output=True,
    )
    armored = (tmp_path / "statement.json.sig").read_bytes()
    sig = sshsig.parse_signature(armored)
    allowed = _allowed(tmp_path, allowed_line(keys[kind], "ci@example.com"))
    signer = allowed.find(sig.public_key, "cce-knowledge")
    assert signer is not None and signer.principals == "ci@example.com"
    sshsig.check_signature(sig, MESSAGE)
    with pytest.raises(sshsig.SigningError):
        sshsig.check_signature(sig, MESSAGE[:-1])


# ------------------------------------------------------------------ keys


def test_malformed_and_passphrase_keys_are_named_errors(tmp_path: Path) -> None:
    bad = tmp_path / "not-a-key"
    bad.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n")
    with pytest.raises(sshsig.SigningKeyError, match=f"^{bad}: cannot load the private key"):
        sshsig.load_private_key_file(bad)
    pub = tmp_path / "pub"
    pub.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKQ x\n")
    with pytest.raises(sshsig.SigningKeyError, match=f"^{pub}: not an OpenSSH private key"):
        sshsig.load_private_key_file(pub)
    with pytest.raises(sshsig.SigningKeyError, match="cannot read the signing key"):
        sshsig.load_private_key_file(tmp_path / "missing")


@needs_ssh_keygen
def test_passphrase_protected_key_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "id_enc"
    subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "s3cret-pass", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    with pytest.raises(sshsig.SigningKeyError, match="protected by a passphrase") as e:
        sshsig.load_private_key_file(path)
    assert "s3cret" not in e.value.message


# ------------------------------------------------------------------ allowed_signers


def test_allowed_signers_principals_namespaces_and_options(
    keys: dict[str, Path], tmp_path: Path
) -> None:
    ed, other, ec_ = keys["ed25519"], keys["other"], keys["ecdsa"]
    text = (
        "# comment\n\n"
        + allowed_line(ed, "alice@example.com,bob@example.com", 'namespaces="git,cce-*"')
        + allowed_line(other, "mallory@example.com", 'namespaces="git"')
        + allowed_line(ec_, '"Carol Example"', "")
        + allowed_line(keys["rsa"], "old@example.com", 'valid-before="20000101Z"')
    )
    allowed = _allowed(tmp_path, text)
    pub = sshsig.public_blob(sshsig.load_private_key_file(ed).public_key())
    s = allowed.find(pub, "cce-knowledge")
    assert s is not None and s.principals == "alice@example.com,bob@example.com" and s.line == 3
    opub = sshsig.public_blob(sshsig.load_private_key_file(other).public_key())
    assert allowed.find(opub, "cce-knowledge") is None  # listed, other namespace
    cpub = sshsig.public_blob(sshsig.load_private_key_file(ec_).public_key())
    carol = allowed.find(cpub, "cce-knowledge")
    assert carol is not None and carol.principals == "Carol Example"
    rpub = sshsig.public_blob(sshsig.load_private_key_file(keys["rsa"]).public_key())
    assert allowed.find(rpub, "cce-knowledge") is None  # expired


def test_pattern_lists() -> None:
    assert AS.match_pattern_list("cce-knowledge", "git,cce-*")
    assert not AS.match_pattern_list("cce-knowledge", "*,!cce-knowledge")
    assert not AS.match_pattern_list("cce-knowledge", "git")
    assert AS.match_pattern_list("cce-knowledge", "cce-knowledg?")


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("alice@example.com ssh-ed25519 !!!!", "bad base64 public key"),
        ("alice@example.com", "expected a key type"),
        ('alice@example.com namespaces="x ssh-ed25519 AAAA', "unterminated quote"),
        ("alice@example.com bogus=1 ssh-ed25519 AAAA", "bad options"),
        ('alice@example.com frob="x" ssh-ed25519 AAAA', "unknown option"),
        ('alice@example.com valid-after="2020" ssh-ed25519 AAAA', "bad time"),
        (
            "alice@example.com ssh-rsa "
            + base64.b64encode(b"\0\0\0\x0bssh-ed25519\0\0\0\x20" + b"k" * 32).decode(),
            "is not a ssh-rsa key",
        ),
    ],
)
def test_malformed_allowed_signers_lines_name_file_and_line(
    tmp_path: Path, line: str, why: str
) -> None:
    p = tmp_path / "allowed_signers"
    p.write_text("# first\n" + line + "\n")
    with pytest.raises(sshsig.SigningError) as e:
        AS.load(p)
    assert e.value.message.startswith(f"{p}:2: ")
    assert why in e.value.message


# ------------------------------------------------------------------ hostile signatures


def test_huge_or_garbage_signatures_are_refused_bounded() -> None:
    with pytest.raises(sshsig.SigningError, match="larger than"):
        sshsig.parse_signature(b"-----BEGIN SSH SIGNATURE-----\n" + b"A" * 10_000_000)
    for junk in (
        b"",
        b"\xff\xfe",
        b"hello",
        b"-----BEGIN SSH SIGNATURE-----\n!!\n-----END SSH SIGNATURE-----\n",
    ):
        with pytest.raises(sshsig.SigningError):
            sshsig.parse_signature(junk)
    # A length field claiming 4 GiB is checked against what is there, not allocated.
    blob = b"SSHSIG" + (1).to_bytes(4, "big") + b"\xff\xff\xff\xff"
    armored = (
        b"-----BEGIN SSH SIGNATURE-----\n"
        + base64.b64encode(blob)
        + b"\n-----END SSH SIGNATURE-----\n"
    )
    with pytest.raises(sshsig.SigningError, match="truncated"):
        sshsig.parse_signature(armored)


@settings(max_examples=200, deadline=None)
@given(hs.binary(max_size=4096))
def test_any_bytes_as_a_signature_never_crash(data: bytes) -> None:
    try:
        sshsig.parse_signature(data)
    except sshsig.SigningError:
        pass


# ------------------------------------------------------------------ the statement


def test_statement_is_canonical_and_strict() -> None:
    st = _statement()
    data = st.to_bytes()
    assert data.startswith(b'{"cck":{"checksum":"') and data.endswith(b"}\n")
    assert parse_statement(data) == st
    for bad in (
        data.replace(b"\n", b""),
        data.replace(b'"counter":10', b'"counter":10.0'),
        data.replace(b'"counter":10', b'"counter":-1'),
        data.replace(b'{"cck"', b'{"extra":1,"cck"'),
        data.replace(b'"corpus_id":"c1"', b'"corpus_id":"../x"'),
        b" " + data,
        b"x" * 70_000,
    ):
        with pytest.raises(StatementError):
            parse_statement(bad)


@settings(max_examples=300, deadline=None)
@given(hs.binary(max_size=600))
def test_any_bytes_as_a_statement_never_crash(data: bytes) -> None:
    try:
        parse_statement(data)
    except StatementError:
        pass


# ------------------------------------------------------------------ verification


@pytest.fixture(scope="module")
def signed(keys: dict[str, Path]) -> tuple[bytes, bytes]:
    key = sshsig.load_private_key_file(keys["ed25519"])
    data = _statement().to_bytes()
    return data, sshsig.sign(key, data)


@pytest.fixture(scope="module")
def allowed_ed(
    keys: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> AS.AllowedSigners:
    return _allowed(
        tmp_path_factory.mktemp("as"), allowed_line(keys["ed25519"], "ci@example.com,c1")
    )


def _verify(
    allowed: AS.AllowedSigners, st: bytes | None, sig: bytes | None, sha: str = SHA
) -> None:
    verify_publish(
        allowed,
        st,
        sig,
        where="k",
        corpus_id="c1",
        snapshot="0123456789abcdef",
        artifact_sha256=sha,
        floor=None,
    )


def test_verify_accepts_then_names_each_refusal(
    signed: tuple[bytes, bytes],
    allowed_ed: AS.AllowedSigners,
    keys: dict[str, Path],
    tmp_path: Path,
) -> None:
    st, sig = signed
    _verify(allowed_ed, st, sig)
    with pytest.raises(SignatureRefused, match="unsigned snapshot"):
        _verify(allowed_ed, st, None)
    with pytest.raises(SignatureRefused, match="does not match the artifact"):
        _verify(allowed_ed, st, sig, "d" * 64)
    other = _allowed(tmp_path, allowed_line(keys["other"], "x@example.com"))
    with pytest.raises(SignatureRefused, match="which is not in"):
        _verify(other, st, sig)
    ns = _allowed(tmp_path, allowed_line(keys["ed25519"], "ci@example.com", 'namespaces="git"'))
    with pytest.raises(SignatureRefused, match="not allowed to sign in namespace"):
        _verify(ns, st, sig)
    git_sig = sshsig.sign(sshsig.load_private_key_file(keys["ed25519"]), st, "git")
    with pytest.raises(SignatureRefused, match="signed for namespace `git`"):
        _verify(allowed_ed, st, git_sig)


def test_rollback_rule() -> None:
    floor = _statement(counter=10)
    check_rollback(_statement(counter=11, snapshot="1" * 16), floor, "k")
    check_rollback(_statement(counter=10), floor, "k")  # the same statement again
    with pytest.raises(SignatureRefused, match="refusing a rollback"):
        check_rollback(_statement(counter=9, snapshot="1" * 16), floor, "k")
    with pytest.raises(SignatureRefused, match="refusing a rollback"):
        check_rollback(_statement(counter=10, snapshot="1" * 16), floor, "k")


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    which=hs.sampled_from(["statement", "signature"]),
    pos=hs.integers(0, 10**6),
    bit=hs.integers(0, 7),
)
def test_a_flipped_bit_in_statement_or_signature_is_refused(
    signed: tuple[bytes, bytes], allowed_ed: AS.AllowedSigners, which: str, pos: int, bit: int
) -> None:
    st, sig = signed
    target = bytearray(st if which == "statement" else sig)
    i = pos % len(target)
    target[i] ^= 1 << bit
    flipped = bytes(target)
    if which == "signature":
        # Base64 padding bits and line breaks the decoder ignores are not signed content;
        # a flip there that still decodes to the same blob is not a change.
        try:
            same = sshsig.parse_signature(flipped) == sshsig.parse_signature(sig)
        except sshsig.SigningError:
            same = False
        assume(not same)
    with pytest.raises(SignatureRefused):
        if which == "statement":
            _verify(allowed_ed, flipped, sig)
        else:
            _verify(allowed_ed, st, flipped)
