"""Signed corpora end to end: a real bare cache with git-LFS, keys from ssh-keygen, real
`cce` processes for the refusals (docs/security.md, docs/cache.md)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from cce_knowledge.config.settings import Settings
from cce_knowledge.core.errors import CceError
from cce_knowledge.sync import sshsig
from cce_knowledge.sync.clone import open_cache
from cce_knowledge.sync.pull import pull_corpus
from cce_knowledge.sync.remote import make_remote
from cce_knowledge.sync.signing import SignatureRefused
from cce_knowledge.sync.statement import Statement
from cce_knowledge.sync.statement import parse as parse_statement
from tests.helpers.sshkeys import SSH_KEYGEN, allowed_line, make_key, needs_ssh_keygen
from tests.helpers.sync import bare_file, bare_ls, clean_env, feed, index, refs
from tests.helpers.sync_env import SyncEnv, cli, push_cli

pytestmark = pytest.mark.slow

P = "knowledge/v1/kn"


def _cce(
    env: SyncEnv, *argv: str, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cce_knowledge", *argv],
        capture_output=True,
        text=True,
        env=clean_env({"CCE_HOME": str(env.tmp / "home-proc"), **(extra or {})}),
        check=False,
    )


def _push(env: SyncEnv, capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> str:
    rc, out, err = push_cli(env, capsys, root, *extra)
    assert rc == 0, err
    return out


def _snapshot_of_store(root: Path) -> dict[str, tuple[bytes, int]]:
    kd = root / ".cce" / "knowledge"
    return {
        p.name: (p.read_bytes(), p.stat().st_mtime_ns)
        for p in kd.iterdir()
        if p.is_file() and p.name != ".lock"
    }


@pytest.fixture
def key(tmp_path: Path) -> Path:
    return make_key(tmp_path, "ed25519", "publisher")


@pytest.fixture
def allowed(tmp_path: Path, key: Path) -> Path:
    p = tmp_path / "allowed_signers"
    p.write_text(allowed_line(key, "ci@example.com,kn"))
    return p


def test_signed_push_writes_statement_and_sig_beside_the_artifact(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], key: Path, allowed: Path
) -> None:
    env = sync_env
    root = env.root("p")
    snap = index(root, feed(["kn:1", "kn:2"]))
    out = _push(env, capsys, root, "--sign-key", str(key))
    signer = sshsig.describe(sshsig.public_blob(sshsig.load_private_key_file(key).public_key()))
    assert f"  signed by  : {signer} (counter " in out
    names = bare_ls(env.bare, P)
    assert f"{P}/{snap}.statement.json" in names and f"{P}/{snap}.statement.json.sig" in names
    st_bytes = bare_file(env.bare, f"{P}/{snap}.statement.json")
    sig_bytes = bare_file(env.bare, f"{P}/{snap}.statement.json.sig")
    assert st_bytes is not None and sig_bytes is not None
    st = parse_statement(st_bytes)
    assert (st.corpus_id, st.snapshot) == ("kn", snap)
    # The statement hashes the artifact's bytes as stored in LFS.
    pointer = bare_file(env.bare, f"{P}/{snap}.cck") or b""
    assert pointer.startswith(b"version https://git-lfs")
    assert f"oid sha256:{st.cck_sha256}".encode() in pointer
    # Plain blobs, not LFS pointers: listing and verifying need no LFS.
    assert st_bytes.startswith(b"{") and sig_bytes.startswith(b"-----BEGIN SSH SIGNATURE-----")
    if SSH_KEYGEN is not None:
        (env.tmp / "st").write_bytes(st_bytes)
        (env.tmp / "st.sig").write_bytes(sig_bytes)
        r = subprocess.run(
            f"{SSH_KEYGEN} -Y verify -f {allowed} -I ci@example.com -n cce-knowledge -s st.sig < st",
            shell=True,
            cwd=env.tmp,
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr
    # A second push of a new snapshot has a larger counter.
    snap2 = index(root, feed(["kn:1", "kn:2", "kn:3"]))
    _push(env, capsys, root, "--sign-key", str(key), "--json")
    st2 = parse_statement(bare_file(env.bare, f"{P}/{snap2}.statement.json") or b"")
    assert st2.counter > st.counter


@needs_ssh_keygen
def test_a_statement_signed_by_ssh_keygen_is_accepted_by_pull(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], key: Path, allowed: Path
) -> None:
    """The other direction of interop: a publisher that signs with OpenSSH itself."""
    env = sync_env
    root = env.root("p")
    snap = index(root, feed(["kn:1"]))
    _push(env, capsys, root)  # unsigned
    st_bytes = bare_file(env.bare, f"{P}/{snap}.statement.json")
    assert st_bytes is None
    import hashlib

    with open_cache(make_remote(env.url)) as cache:
        art = cache.read_artifact(f"{P}/{snap}.cck")
    from cce_knowledge.sync.cck import CckManifest  # noqa: F401  (manifest checksum below)

    manifest = json.loads(art.split(b"\n", 1)[0])
    st = Statement("kn", snap, hashlib.sha256(art).hexdigest(), manifest["checksum"], len(art),
                   "2026-07-01T00:00:00Z", 5)  # fmt: skip
    f = env.tmp / "statement.json"
    f.write_bytes(st.to_bytes())
    subprocess.run([SSH_KEYGEN, "-Y", "sign", "-n", "cce-knowledge", "-f", str(key), str(f)],
                   check=True, capture_output=True)  # fmt: skip
    env.seed({f"{P}/{snap}.statement.json": f.read_bytes(),
              f"{P}/{snap}.statement.json.sig": (env.tmp / "statement.json.sig").read_bytes()})  # fmt: skip
    cons = env.root("c")
    rc, out, err = cli(capsys, "knowledge", "pull", "--corpus", "kn", "--remote", env.url,
                       "--dir", str(cons), "--allowed-signers", str(allowed))  # fmt: skip
    assert rc == 0, err
    assert (
        "  signed   : by ci@example.com,kn (ED25519 SHA256:" in out
        and "(verified, counter 5)" in out
    )


def test_pull_verifies_and_status_doctor_verify_show_the_signer(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], key: Path, allowed: Path
) -> None:
    env = sync_env
    root = env.root("p")
    index(root, feed(["kn:1", "kn:2"]))
    _push(env, capsys, root, "--sign-key", str(key))
    cons = env.root("c")
    rc, out, err = cli(capsys, "knowledge", "pull", "--corpus", "kn", "--remote", env.url,
                       "--dir", str(cons), "--allowed-signers", str(allowed), "--json")  # fmt: skip
    assert rc == 0, err
    sig = json.loads(out)["signature"]
    assert sig["verified"] is True and sig["signed_by"].startswith(
        "ci@example.com,kn (ED25519 SHA256:"
    )
    # Configured rather than passed: status verifies, --json carries signer and time.
    (cons / ".cce" / "config").write_text(f"knowledge:\n  sync:\n    allowed_signers: {allowed}\n")
    rc, out, _ = cli(capsys, "knowledge", "status", "--dir", str(cons), "--offline", "--json")
    assert rc == 0
    s = json.loads(out)["signature"]
    assert s["state"] == "verified" and s["signer"].startswith("ci@example.com,kn (ED25519")
    assert s["published_at"] == sig["published_at"] and s["counter"] == sig["counter"]
    rc, out, _ = cli(capsys, "knowledge", "status", "--dir", str(cons), "--offline")
    assert "  signature      : signed by ci@example.com,kn (ED25519" in out
    assert f"at {sig['published_at']} (verified)" in out
    rc, out, _ = cli(capsys, "doctor", "--dir", str(cons))
    assert "  ok        pulled snapshot signed by ci@example.com" in out
    rc, out, err = cli(capsys, "sync", "verify", "--checksum-only", "--dir", str(cons))
    assert rc == 0, err
    assert "  signed by ci@example.com,kn (ED25519" in out
    # The statement no longer matches the installed snapshot: verify and doctor fail.
    kd = cons / ".cce" / "knowledge"
    (kd / "statement.json.sig").write_bytes(b"garbage")
    rc, _, err = cli(capsys, "sync", "verify", "--checksum-only", "--dir", str(cons))
    assert rc == 1 and "verify FAILED" in err and "not an armored SSH signature" in err
    rc, out, _ = cli(capsys, "doctor", "--dir", str(cons))
    assert "  FAIL      pulled snapshot: signature NOT accepted" in out


def test_without_allowed_signers_everything_works_and_status_says_unverified(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], key: Path
) -> None:
    env = sync_env
    root = env.root("p")
    index(root, feed(["kn:1"]))
    _push(env, capsys, root, "--sign-key", str(key))
    cons = env.root("c")
    rc, out, err = cli(capsys, "knowledge", "pull", "--corpus", "kn", "--remote", env.url,
                       "--dir", str(cons))  # fmt: skip
    assert rc == 0, err
    assert "(not verified: no allowed signers configured)" in out
    rc, out, _ = cli(capsys, "knowledge", "status", "--dir", str(cons), "--offline")
    assert "  signature      : signed by ED25519 SHA256:" in out
    assert "(not verified: no allowed signers configured)" in out
    rc, out, _ = cli(capsys, "knowledge", "status", "--dir", str(cons), "--offline", "--json")
    assert json.loads(out)["signature"]["state"] == "unverified"
    # An unsigned corpus without allowed signers: no signature line at all, as before.
    env.home("home-b")
    other = env.root("p2")
    index(other, feed(["kn:9"]))
    rc, _, err = cli(capsys, "knowledge", "push", "--corpus", "un", "--remote", env.url,
                     "--dir", str(other))  # fmt: skip
    assert rc == 0, err
    cons2 = env.root("c2")
    rc, out, err = cli(capsys, "knowledge", "pull", "--corpus", "un", "--remote", env.url,
                       "--dir", str(cons2))  # fmt: skip
    assert rc == 0 and "signed" not in out
    rc, out, _ = cli(capsys, "knowledge", "status", "--dir", str(cons2), "--offline", "--json")
    assert "signature" not in json.loads(out)


def _refused(env: SyncEnv, cons: Path, allowed: Path, reason: str, *extra: str) -> None:
    """A real `cce` pull: exit 1, the reason named, the installed store untouched."""
    before = _snapshot_of_store(cons)
    r = _cce(env, "knowledge", "pull", "--corpus", "kn", "--remote", env.url, "--dir", str(cons),
             "--allowed-signers", str(allowed), *extra)  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.startswith("error: ") and reason in r.stderr, r.stderr
    assert _snapshot_of_store(cons) == before


def test_the_four_refusals_leave_the_installed_store_untouched(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], key: Path, allowed: Path, tmp_path: Path
) -> None:
    env = sync_env
    root = env.root("p")
    index(root, feed(["kn:1"]))
    _push(env, capsys, root, "--sign-key", str(key))
    cons = env.root("c")
    ok = _cce(env, "knowledge", "pull", "--corpus", "kn", "--remote", env.url, "--dir", str(cons),
              "--allowed-signers", str(allowed))  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    installed = _snapshot_of_store(cons)
    assert "statement.json" in installed and "trusted-statements.json" in installed

    # 1. unsigned
    index(root, feed(["kn:1", "kn:2"]))
    _push(env, capsys, root)
    _refused(env, cons, allowed, "refusing an unsigned snapshot (no statement on the cache)")

    # 2. a key that is not listed, and a listed key outside the namespace
    stranger = make_key(tmp_path, "ecdsa", "stranger")
    snap3 = index(root, feed(["kn:1", "kn:2", "kn:3"]))
    _push(env, capsys, root, "--sign-key", str(stranger))
    _refused(env, cons, allowed, "which is not in")
    ns_only_git = tmp_path / "allowed_git"
    ns_only_git.write_text(allowed_line(stranger, "s@example.com", 'namespaces="git"'))
    _refused(env, cons, ns_only_git, "not allowed to sign in namespace `cce-knowledge`")

    # 3. a statement (signed by the allowed key) that does not match the artifact
    st = parse_statement(bare_file(env.bare, f"{P}/{snap3}.statement.json") or b"")
    forged = Statement(st.corpus_id, st.snapshot, "0" * 64, st.cck_checksum, st.cck_size,
                       st.published_at, st.counter + 1)  # fmt: skip
    data = forged.to_bytes()
    env.seed({f"{P}/{snap3}.statement.json": data,
              f"{P}/{snap3}.statement.json.sig": sshsig.sign(sshsig.load_private_key_file(key), data)})  # fmt: skip
    _refused(env, cons, allowed, "the statement does not match the artifact")

    # 4. rollback: a properly signed newer snapshot is installed, then `current` goes back
    newer = index(root, feed(["kn:1", "kn:2", "kn:3", "kn:4"]))
    _push(env, capsys, root, "--sign-key", str(key))
    r = _cce(env, "knowledge", "pull", "--corpus", "kn", "--remote", env.url, "--dir", str(cons),
             "--allowed-signers", str(allowed))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (cons / ".cce" / "knowledge" / "current").read_text() == f"{newer}\n"
    old_snap = json.loads((cons / ".cce" / "knowledge" / "synced.json").read_text())["snapshot"]
    first = index(env.root("p-old"), feed(["kn:1"]))
    assert old_snap == newer
    env.seed({f"{P}/current": f"{first}\n".encode()})
    _refused(env, cons, allowed, "refusing a rollback")
    # --snapshot asks for the old one explicitly: still a rollback; --force does not bypass it.
    _refused(env, cons, allowed, "refusing a rollback", "--snapshot", first, "--force")


def test_pull_all_and_verify_apply_the_same_rules(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], key: Path, allowed: Path
) -> None:
    env = sync_env
    root = env.root("p")
    index(root, feed(["kn:1"]))
    _push(env, capsys, root)  # unsigned
    into = env.root("into")
    before = refs(env.bare)
    r = _cce(env, "sync", "pull", "--all", "--into", str(into), "--remote", env.url,
             "--allowed-signers", str(allowed))  # fmt: skip
    assert r.returncode == 1, r.stdout
    assert "  error: refused knowledge corpus kn — " in r.stdout
    assert "refusing an unsigned snapshot" in r.stderr
    assert not (into / ".cce" / "knowledge" / "current").exists()
    assert refs(env.bare) == before
    # Pulled without allowed signers, then verified with them: the unsigned store fails.
    r = _cce(env, "sync", "pull", "--all", "--into", str(into), "--remote", env.url)
    assert r.returncode == 0, r.stderr
    r = _cce(env, "sync", "verify", "--checksum-only", "--dir", str(into),
             "--allowed-signers", str(allowed))  # fmt: skip
    assert r.returncode == 1 and "the installed snapshot is unsigned" in r.stderr
    # Signed: pull --all installs it and verify passes.
    index(root, feed(["kn:1", "kn:2"]))
    _push(env, capsys, root, "--sign-key", str(key))
    r = _cce(env, "sync", "pull", "--all", "--into", str(into), "--remote", env.url,
             "--allowed-signers", str(allowed))  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "  knowledge        pulled      kn@" in r.stdout
    r = _cce(env, "sync", "verify", "--checksum-only", "--dir", str(into),
             "--allowed-signers", str(allowed))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "signed by ci@example.com" in r.stdout


def test_retention_prunes_statements_with_their_snapshot(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], key: Path
) -> None:
    env = sync_env
    root = env.root("p")
    (root / ".cce").mkdir()
    (root / ".cce" / "config").write_text(
        f"knowledge:\n  sync:\n    corpus_id: kn\n    retention: keep-last-1\n    signing_key: {key}\n"
    )
    snaps = []
    for ids in (["a"], ["a", "b"], ["a", "b", "c"]):
        snaps.append(index(root, feed(ids)))
        rc, out, err = cli(capsys, "knowledge", "push", "--remote", env.url, "--dir", str(root))
        assert rc == 0, err
        assert "  signed by  : " in out  # from knowledge.sync.signing_key
    left = bare_ls(env.bare, P)
    assert sorted(k for k in left if k != f"{P}/corpus.json" and k != f"{P}/current") == sorted(
        f"{P}/{snaps[-1]}{ext}" for ext in (".cck", ".statement.json", ".statement.json.sig")
    )


def test_the_reference_ignores_the_extra_files(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], key: Path
) -> None:
    """docs/spec/sync.md: the reference reads `current` and `<snapshot>.cck`, lists and
    counts `*.cck` keys, lists corpora as directories under knowledge/v1/, and prunes
    only `.cck` keys. A signed cache looks the same to every one of those rules."""
    env = sync_env
    root = env.root("p")
    snap = index(root, feed(["kn:1", "kn:2"]))
    _push(env, capsys, root, "--sign-key", str(key))
    names = bare_ls(env.bare, "knowledge/v1")
    extra = [n for n in names if ".statement.json" in n]
    assert len(extra) == 2
    # The reference's rules, applied literally to the cache's keys:
    read = {f"{P}/current", f"{P}/{snap}.cck"}
    listed = {n for n in names if n.startswith(f"{P}/") and n.endswith(".cck")}
    corpora = {n.split("/")[2] for n in names if n.count("/") >= 3}
    assert not read & set(extra) and not listed & set(extra)
    assert listed == {f"{P}/{snap}.cck"} and corpora == {"kn"}
    # No LFS pattern matches them (the reference would otherwise try to smudge them).
    attrs = (bare_file(env.bare, ".gitattributes") or b"").decode()
    assert ".json" not in attrs and ".sig" not in attrs
    # Our own listing (the reference's table) is that of an unsigned cache.
    rc, out, _ = cli(capsys, "sync", "list", "--remote", env.url, "--json")
    row = json.loads(out)["knowledge"][0]
    assert (row["corpus_id"], row["snapshots"], row["current"]) == ("kn", 1, snap)
    # And a plain pull, as the reference pulls, installs the same bytes as before.
    cons = env.root("c")
    rc, _, err = cli(capsys, "knowledge", "pull", "--corpus", "kn", "--remote", env.url,
                     "--dir", str(cons))  # fmt: skip
    assert rc == 0, err
    assert (cons / ".cce" / "knowledge" / f"{snap}.json").read_bytes() == (
        root / ".cce" / "knowledge" / f"{snap}.json"
    ).read_bytes()


def test_bad_keys_and_allowed_signers_refuse_before_anything_is_pushed(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    env = sync_env
    root = env.root("p")
    index(root, feed(["kn:1"]))
    bad = tmp_path / "bad_key"
    bad.write_text(
        "-----BEGIN OPENSSH PRIVATE KEY-----\nbm90IGEga2V5\n-----END OPENSSH PRIVATE KEY-----\n"
    )
    before = refs(env.bare)
    r = _cce(env, "knowledge", "push", "--corpus", "kn", "--remote", env.url, "--dir", str(root),
             "--sign-key", str(bad))  # fmt: skip
    assert r.returncode == 1 and f"error: {bad}: cannot load the private key" in r.stderr
    r = _cce(env, "knowledge", "push", "--corpus", "kn", "--remote", env.url, "--dir", str(root),
             extra={"CCE_SIGNING_KEY": "not a key"})  # fmt: skip
    assert r.returncode == 1 and "error: CCE_SIGNING_KEY: not an OpenSSH private key" in r.stderr
    assert refs(env.bare) == before
    bad_as = tmp_path / "allowed"
    bad_as.write_text("# ok\nci@example.com ssh-ed25519\n")
    r = _cce(env, "knowledge", "pull", "--corpus", "kn", "--remote", env.url, "--dir", str(root),
             "--allowed-signers", str(bad_as))  # fmt: skip
    assert (
        r.returncode == 1
        and f"error: {bad_as}:2: the ssh-ed25519 public key (base64) is missing" in r.stderr
    )


def test_the_key_from_the_environment_never_reaches_output_or_disk(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], key: Path
) -> None:
    env = sync_env
    root = env.root("p")
    index(root, feed(["kn:1"]))
    text = key.read_text()
    key.unlink()  # the only copy is now the variable's
    body = "".join(text.strip().split("\n")[1:-1])
    secrets = [
        text,
        text.strip(),
        body,
        # each line but the first (the first bytes are the same for every key)
        *(ln for ln in text.strip().split("\n")[2:-1] if len(ln) >= 20),
        base64.b64encode(text.encode()).decode()[200:240],
    ]
    r = _cce(env, "knowledge", "push", "--corpus", "kn", "--remote", env.url, "--dir", str(root),
             "--json", extra={"CCE_SIGNING_KEY": text})  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["signature"]["signed_by"].startswith("ED25519 SHA256:")
    # A broken key's error does not quote it either.
    broken = text.replace(body[10:20], "!!!!!!!!!!")
    r2 = _cce(env, "knowledge", "push", "--corpus", "kn", "--remote", env.url, "--dir", str(root),
              extra={"CCE_SIGNING_KEY": broken})  # fmt: skip
    assert r2.returncode == 1
    logs = r.stdout + r.stderr + r2.stdout + r2.stderr
    logs += subprocess.run(["git", "-C", str(env.bare), "log", "--all", "-p"], capture_output=True,
                           text=True).stdout  # fmt: skip
    for s in secrets:
        assert s not in logs
    for p in env.tmp.rglob("*"):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            for s in secrets:
                assert s.encode() not in data, p


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pos=hs.integers(0, 10**6), bit=hs.integers(0, 7))
def test_a_flipped_bit_in_the_artifact_is_refused(
    tmp_path_factory: pytest.TempPathFactory, pos: int, bit: int
) -> None:
    tmp = tmp_path_factory.mktemp("flip")
    from tests.helpers.sync import make_bare

    url = make_bare(tmp / "cache.git")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CCE_HOME", str(tmp / "home"))
        _flip_and_pull(tmp, url, pos, bit)


def _flip_and_pull(tmp: Path, url: str, pos: int, bit: int) -> None:
    k = make_key(tmp, "ed25519", "k")
    (tmp / "allowed").write_text(allowed_line(k, "ci@example.com,kn"))
    prod = tmp / "p"
    index(prod, feed(["kn:1", "kn:2"]))
    from cce_knowledge.sync.push import push_corpus

    push_corpus(prod, corpus="kn", remote=url, lfs=False, sign_key=str(k), settings=Settings())
    with open_cache(make_remote(url), for_write=True) as cache:
        snap = cache.read_text(f"{P}/current")
        art = bytearray(cache.read_artifact(f"{P}/{snap}.cck"))
        art[pos % len(art)] ^= 1 << bit
        cache.put_many([(f"{P}/{snap}.cck", bytes(art))], "flip", label="test")
    cons = tmp / "c"
    with pytest.raises(CceError) as e:
        pull_corpus(
            cons, corpus="kn", remote=url, allowed_signers=str(tmp / "allowed"), settings=Settings()
        )
    assert isinstance(e.value, SignatureRefused)
    assert "does not match the artifact" in e.value.message
    assert not (cons / ".cce" / "knowledge" / "current").exists()
