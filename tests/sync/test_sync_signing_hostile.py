"""Signed corpora against a hostile cache and hostile allowed_signers files (issue 34,
points 1, 2 and 7) and what status says after a verified pull (issue 35, point 7).
Real `cce` processes against a real bare cache with git-LFS; keys and interop checks
by the real `ssh-keygen`."""

from __future__ import annotations

import base64
import calendar
import json
import struct
import subprocess
import time
from pathlib import Path

import pytest

from cce_knowledge.sync import allowed_signers as AS
from cce_knowledge.sync import sshsig
from cce_knowledge.sync.sshsig import SigningError
from cce_knowledge.sync.statement import MAX_COUNTER, Statement, StatementError
from cce_knowledge.sync.statement import parse as parse_statement
from tests.helpers.cce_proc import run_cce
from tests.helpers.redos import growth
from tests.helpers.sshkeys import SSH_KEYGEN, allowed_line, make_key, needs_ssh_keygen
from tests.helpers.sync import bare_file, clean_env, feed, index
from tests.helpers.sync_env import SyncEnv

pytestmark = pytest.mark.slow

P = "knowledge/v1/kn"


def _cce(env: SyncEnv, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_cce(*argv, env=clean_env({"CCE_HOME": str(env.tmp / "home-proc")}), timeout=timeout)


def _push(env: SyncEnv, root: Path, key: Path) -> subprocess.CompletedProcess[str]:
    r = _cce(env, "knowledge", "push", "--corpus", "kn", "--remote", env.url, "--dir", str(root),
             "--sign-key", str(key), "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r


def _pull(
    env: SyncEnv, cons: Path, allowed: Path | None, *extra: str
) -> subprocess.CompletedProcess[str]:
    signers = ["--allowed-signers", str(allowed)] if allowed is not None else []
    return _cce(env, "knowledge", "pull", "--corpus", "kn", "--remote", env.url, "--dir", str(cons),
                *signers, *extra)  # fmt: skip


def _current_statement(env: SyncEnv) -> tuple[str, bytes]:
    snap = (bare_file(env.bare, f"{P}/current") or b"").decode().strip()
    return snap, bare_file(env.bare, f"{P}/{snap}.statement.json") or b""


def _floor(cons: Path) -> Statement:
    obj = json.loads((cons / ".cce" / "knowledge" / "trusted-statements.json").read_text())
    return parse_statement(obj["corpora"]["kn"].encode())


@pytest.fixture
def key(tmp_path: Path) -> Path:
    return make_key(tmp_path, "ed25519", "publisher")


@pytest.fixture
def allowed(tmp_path: Path, key: Path) -> Path:
    p = tmp_path / "allowed_signers"
    p.write_text(allowed_line(key, "kn"))
    return p


def _canonical(obj: dict[str, object]) -> bytes:
    return (json.dumps(obj, sort_keys=True, separators=(",", ":")) + "\n").encode()


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


# ------------------------------------------------------------------ 34.1 counter poisoning


def test_an_edited_counter_on_the_cache_does_not_steer_the_next_push(
    sync_env: SyncEnv, key: Path, allowed: Path
) -> None:
    """Someone who can write to the cache but has no key sets the current statement's
    counter to 2^63-2: push ignores the (no longer verifying) statement, signs a counter
    from the clock, and every later publish keeps installing."""
    env = sync_env
    prod, cons = env.root("p"), env.root("c")
    index(prod, feed(["kn:1"]))
    first = json.loads(_push(env, prod, key).stdout)["signature"]["counter"]
    assert _pull(env, cons, allowed).returncode == 0
    snap, st = _current_statement(env)
    obj = json.loads(st)
    obj["counter"] = 2**63 - 2
    # The next counter comes from the clock, in whole seconds: a publish in the same
    # second as the last verified one could not be newer (nightly builds are hours apart).
    while time.time() < first + 1:
        time.sleep(0.05)
    env.seed({f"{P}/{snap}.statement.json": _canonical(obj)})
    for n in (2, 3, 4):
        index(prod, feed([f"kn:{i}" for i in range(n)]))
        r = _push(env, prod, key)
        counter = json.loads(r.stdout)["signature"]["counter"]
        assert counter < time.time() + 3600, counter  # from the clock, never 2^63-1
        if n == 2:
            assert "warning: ignored the remote's current statement for the counter: " in r.stderr
            assert "does not verify" in r.stderr
            assert json.loads(r.stdout)["signature"]["previous_ignored"]
        else:
            assert "warning" not in r.stderr  # its own verified statement counts again
        p = _pull(env, cons, allowed)
        assert p.returncode == 0, p.stderr
        assert _floor(cons).counter == counter


def test_an_implausible_statement_is_refused_by_pull_even_when_signed(
    sync_env: SyncEnv, key: Path, allowed: Path
) -> None:
    """A statement the allowed key did sign, with a counter far past its publish time or
    a publish time far ahead of the clock (a stolen moment of the key, or the old push
    that signed 2^63-1): pull refuses it and its floor stays put."""
    env = sync_env
    prod, cons = env.root("p"), env.root("c")
    index(prod, feed(["kn:1"]))
    _push(env, prod, key)
    assert _pull(env, cons, allowed).returncode == 0
    floor = _floor(cons)
    index(prod, feed(["kn:1", "kn:2"]))
    _push(env, prod, key)
    snap, st = _current_statement(env)
    priv = sshsig.load_private_key_file(key)
    now = time.time()
    for counter, published, why in (
        (2**63 - 1, _utc(now), "its counter 9223372036854775807 is implausible"),
        (int(now) + 10 * 86400, _utc(now), "is implausible: more than 24 hours past"),
        (int(now) + 10 * 86400, _utc(now + 10 * 86400), "ahead of this machine's clock"),
    ):
        obj = json.loads(st)
        obj["counter"], obj["published_at"] = counter, published
        data = _canonical(obj)
        env.seed({f"{P}/{snap}.statement.json": data,
                  f"{P}/{snap}.statement.json.sig": sshsig.sign(priv, data)})  # fmt: skip
        r = _pull(env, cons, allowed)
        assert r.returncode == 1 and why in r.stderr, r.stderr
        assert _floor(cons) == floor
    # The publisher's next push ignores that statement too, and consumers install it.
    index(prod, feed(["kn:1", "kn:2", "kn:3"]))
    r = _push(env, prod, key)
    assert "ignored the remote's current statement for the counter" in r.stderr
    assert _pull(env, cons, allowed).returncode == 0


def test_push_never_signs_what_pull_would_refuse() -> None:
    from cce_knowledge.sync.signing import new_statement

    kw = dict(corpus_id="kn", snapshot="0123456789abcdef", cck_sha256="a" * 64,
              cck_checksum="b" * 64, cck_size=1, published_at="2026-07-01T00:00:00Z",
              vectors={})  # fmt: skip
    ok = new_statement(previous=None, **kw)  # type: ignore[arg-type]
    assert ok.counter == 1782864000 and parse_statement(ok.to_bytes()) == ok
    for previous in (MAX_COUNTER, MAX_COUNTER - 1, 1782864000 + 86400):
        with pytest.raises(SigningError, match="refusing to sign"):
            new_statement(previous=previous, **kw)  # type: ignore[arg-type]
    with pytest.raises(StatementError, match="not a real time"):
        parse_statement(Statement("kn", "0" * 16, "a" * 64, "b" * 64, 1,
                                  "2026-02-30T00:00:00Z", 5).to_bytes())  # fmt: skip


def test_reset_trust_recovers_a_consumer_whose_floor_was_poisoned(
    sync_env: SyncEnv, key: Path, allowed: Path
) -> None:
    """A floor an older cce accepted (counter 2^63-1) refuses every publish with a
    message naming the way out; `pull --reset-trust` takes it, still verifying."""
    env = sync_env
    prod, cons = env.root("p"), env.root("c")
    index(prod, feed(["kn:1"]))
    _push(env, prod, key)
    assert _pull(env, cons, allowed).returncode == 0
    good = _floor(cons)
    poisoned = Statement(good.corpus_id, good.snapshot, good.cck_sha256, good.cck_checksum,
                         good.cck_size, good.published_at, 2**63 - 1, good.vectors)  # fmt: skip
    floor_file = cons / ".cce" / "knowledge" / "trusted-statements.json"
    body = {"corpora": {"kn": poisoned.to_bytes().decode()}, "schema": "cce.trustedstatements/v1"}
    floor_file.write_text(json.dumps(body))
    index(prod, feed(["kn:1", "kn:2"]))
    _push(env, prod, key)
    r = _pull(env, cons, allowed)
    assert r.returncode == 1
    assert "the rollback floor recorded for corpus `kn` is unusable" in r.stderr
    assert "cce knowledge pull --corpus kn --reset-trust" in r.stderr
    # --reset-trust needs allowed signers: it never installs unverified.
    r = _pull(env, cons, None, "--reset-trust")
    assert r.returncode == 2 and "--reset-trust" in r.stderr
    # A stranger's signature is still refused under --reset-trust.
    stranger = env.tmp / "strangers"
    stranger.write_text(allowed_line(make_key(env.tmp, "ed25519", "s"), "kn"))
    assert _pull(env, cons, stranger, "--reset-trust").returncode == 1
    r = _pull(env, cons, allowed, "--reset-trust")
    assert r.returncode == 0, r.stderr
    assert "--reset-trust: kn@" in r.stderr and "is now this root's rollback floor" in r.stderr
    assert _floor(cons).counter < time.time() + 3600
    index(prod, feed(["kn:1", "kn:2", "kn:3"]))
    _push(env, prod, key)
    assert _pull(env, cons, allowed).returncode == 0


# ------------------------------------------------------------------ 34.2 linear patterns


def test_many_stars_in_namespaces_answer_at_once(
    sync_env: SyncEnv, key: Path, tmp_path: Path
) -> None:
    """40 `*` before a literal that cannot match took minutes (exponential backtracking);
    the real pull now answers in the time of any pull, and ssh-keygen agrees."""
    env = sync_env
    prod, cons = env.root("p"), env.root("c")
    index(prod, feed(["kn:1"]))
    _push(env, prod, key)
    allowed = tmp_path / "allowed_stars"
    allowed.write_text(allowed_line(key, "kn", f'namespaces="git,{"*" * 40}x,cce-knowledge"'))
    r = _pull(env, cons, allowed)  # 120 s timeout: today's code is still matching
    assert r.returncode == 0, r.stderr
    refused = tmp_path / "allowed_refused"
    refused.write_text(allowed_line(key, "kn", f'namespaces="{"*" * 40}x,git"'))
    r = _pull(env, env.root("c2"), refused)
    assert r.returncode == 1 and "not allowed to sign in namespace" in r.stderr


def test_pattern_matching_grows_linearly_with_the_pattern() -> None:
    """Time at growing pattern sizes (4x apart): linear gives ~4x per step. Hostile
    shapes: runs of `*`, `*` between near-misses, and `?` runs."""
    shapes = {
        "stars then a miss": lambda n: "*" * n + "x",
        "star-literal pairs": lambda n: "*c" * (n // 2) + "x",
        "near misses": lambda n: ("*cce-knowledg" * (n // 13 + 1))[:n] + "x",
        "questions": lambda n: "*?" * (n // 2),
    }
    for name, build in shapes.items():
        for value in ("cce-knowledge", "kn", "team-" + "a" * 100):
            ratio, times = growth(
                lambda p, v=value: AS.match_pattern_list(v, p),  # type: ignore[misc]
                build,
                sizes=(25_000, 100_000, 400_000, 1_600_000),
            )
            assert ratio < 8, (name, value, ratio, times)


def test_match_pattern_agrees_with_a_glob_regex() -> None:
    import random
    import re

    rnd = random.Random(34)
    for _ in range(20_000):
        v = "".join(rnd.choice("ab-") for _ in range(rnd.randint(0, 6)))
        p = "".join(rnd.choice("ab-*?") for _ in range(rnd.randint(0, 8)))
        rx = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in p)
        assert AS.match_pattern(v, p) == (re.fullmatch(rx, v, re.DOTALL) is not None), (v, p)


def _name(i: int) -> str:
    """A distinct option-like name for each i (letters only)."""
    out = ""
    while True:
        out += "abcdefghijklmnopqrstuvwxyz"[i % 26]
        i //= 26
        if not i:
            return out


def test_many_options_on_one_line_parse_in_linear_time() -> None:
    """Options used to be matched on a fresh slice of the rest of the line: quadratic."""

    def build(n: int) -> str:
        # distinct unknown names: the old parser read them all before refusing one
        return "p " + ",".join(_name(i) for i in range(n // 6)) + ",frob ssh-ed25519 AAAA"

    def parse(line: str) -> None:
        try:
            AS.parse(line, "f")
        except SigningError:
            pass

    ratio, times = growth(parse, build, sizes=(320_000, 1_280_000))
    assert ratio < 8, (ratio, times)


# ------------------------------------------------------------------ 34.7 interop, principals


def _string(b: bytes) -> bytes:
    return struct.pack(">I", len(b)) + b


def _unverified_lines(tmp_path: Path) -> list[str]:
    """Lines for key types cce does not verify: a security key, a certificate (made by
    ssh-keygen when present), a DSA key."""
    sk = _string(b"sk-ssh-ed25519@openssh.com") + _string(b"k" * 32) + _string(b"ssh:")
    lines = [
        f'dev@example.com namespaces="git" sk-ssh-ed25519@openssh.com {base64.b64encode(sk).decode()}'
    ]
    if SSH_KEYGEN is not None:
        ca, user = make_key(tmp_path, "ed25519", "ca"), make_key(tmp_path, "ed25519", "user")
        subprocess.run([SSH_KEYGEN, "-q", "-s", str(ca), "-I", "id", "-n", "kn", f"{user}.pub"],
                       check=True, capture_output=True)  # fmt: skip
        kt, b64 = (tmp_path / "user-cert.pub").read_text().split()[:2]
        lines.append(f"kn {kt} {b64}")
    dss = _string(b"ssh-dss") + b"".join(_string(b"\x01" * 20) for _ in range(4))
    lines.append(f"old@example.com ssh-dss {base64.b64encode(dss).decode()}")
    return lines


def test_lines_for_key_types_cce_does_not_verify_are_skipped_with_file_and_line(
    sync_env: SyncEnv, key: Path, tmp_path: Path
) -> None:
    env = sync_env
    prod, cons = env.root("p"), env.root("c")
    index(prod, feed(["kn:1"]))
    _push(env, prod, key)
    extra = _unverified_lines(tmp_path)
    allowed = tmp_path / "allowed_mixed"
    allowed.write_text("\n".join(extra) + "\n" + allowed_line(key, "kn"))
    r = _pull(env, cons, allowed)
    assert r.returncode == 0, r.stderr
    for n, line in enumerate(extra, 1):
        kt = line.split()[-2]
        assert f"warning: {allowed}:{n}: skipped: cce does not verify {kt} keys" in r.stderr
    # A typo is still an error, never a skip.
    typo = tmp_path / "allowed_typo"
    typo.write_text("kn ssh-ed25591 AAAA\n" + allowed_line(key, "kn"))
    r = _pull(env, env.root("c2"), typo)
    assert r.returncode == 1 and f"error: {typo}:1: bad options" in r.stderr


@needs_ssh_keygen
def test_ssh_keygen_and_cce_agree_on_the_mixed_file_and_on_principals(
    sync_env: SyncEnv, key: Path, tmp_path: Path
) -> None:
    env = sync_env
    prod = env.root("p")
    index(prod, feed(["kn:1"]))
    _push(env, prod, key)
    snap, st = _current_statement(env)
    (tmp_path / "st").write_bytes(st)
    (tmp_path / "st.sig").write_bytes(bare_file(env.bare, f"{P}/{snap}.statement.json.sig") or b"")
    assert SSH_KEYGEN is not None
    extra = [ln for ln in _unverified_lines(tmp_path) if "ssh-dss" not in ln]
    for principals, accepted in (("kn", True), ("k*", True), ("a,kn", True), ("other-*", False),
                                 ("ci@example.com", False), ("*,!kn", False)):  # fmt: skip
        f = tmp_path / "allowed_p"
        f.write_text("\n".join(extra) + "\n" + allowed_line(key, principals))
        with open(tmp_path / "st", "rb") as stdin:
            keygen = subprocess.run([SSH_KEYGEN, "-Y", "verify", "-f", str(f), "-I", "kn", "-n",
                                     "cce-knowledge", "-s", str(tmp_path / "st.sig")],
                                    stdin=stdin, capture_output=True)  # fmt: skip
        r = _pull(env, env.root(f"c-{principals}"), f)
        assert (keygen.returncode == 0) == accepted, (principals, keygen.stderr)
        assert (r.returncode == 0) == accepted, (principals, r.stderr)
        if not accepted and "!" not in principals:
            assert f"{f}:{len(extra) + 1} lists for `{principals}`, not for corpus `kn`" in r.stderr


# ------------------------------------------------------------------ 35.7 status after a verified pull


def test_status_and_doctor_say_who_verified_the_pull(
    sync_env: SyncEnv, key: Path, allowed: Path
) -> None:
    env = sync_env
    prod, cons = env.root("p"), env.root("c")
    index(prod, feed(["kn:1"]))
    _push(env, prod, key)
    before = time.time()
    assert _pull(env, cons, allowed).returncode == 0  # --allowed-signers on the command line
    r = _cce(env, "knowledge", "status", "--offline", "--dir", str(cons))
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("  signature"))
    assert "signed by kn (ED25519 SHA256:" in line
    assert "(verified when pulled, " in line and f"against {allowed};" in line
    assert "not verified" not in line
    s = json.loads(
        _cce(env, "knowledge", "status", "--offline", "--json", "--dir", str(cons)).stdout
    )["signature"]
    assert (s["state"], s["checked"], s["principals"], s["allowed_signers"]) == (
        "verified",
        "pull",
        "kn",
        str(allowed),
    )
    at = calendar.timegm(time.strptime(s["verified_at"], "%Y-%m-%dT%H:%M:%SZ"))
    assert before - 2 <= at <= time.time() + 2
    d = _cce(env, "doctor", "--dir", str(cons))
    assert "  ok        pulled snapshot signed by kn (ED25519" in d.stdout
    assert "verified when pulled" in d.stdout
    # Configured: status checks again now, and still says when the pull verified it.
    (cons / ".cce" / "config").write_text(f"knowledge:\n  sync:\n    allowed_signers: {allowed}\n")
    s = json.loads(
        _cce(env, "knowledge", "status", "--offline", "--json", "--dir", str(cons)).stdout
    )["signature"]
    assert (s["state"], s["checked"], s["principals"]) == ("verified", "now", "kn")
    assert s["verified_at"] is not None
    (cons / ".cce" / "config").unlink()
    # A later pull without allowed signers installs unverified: the record goes.
    index(prod, feed(["kn:1", "kn:2"]))
    _push(env, prod, key)
    assert _pull(env, cons, None).returncode == 0
    s = json.loads(
        _cce(env, "knowledge", "status", "--offline", "--json", "--dir", str(cons)).stdout
    )["signature"]
    assert s["state"] == "unverified" and s["verified_at"] is None
