"""Fault injection: racing pushers, a pusher killed mid-push, a damaged working clone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cce_knowledge.sync.listing import read_remote_current
from cce_knowledge.sync.remote import RemoteCurrent, clone_dir, make_remote
from tests.helpers.sync import bare_file, bare_ls, clean_env, feed, index
from tests.helpers.sync_env import SyncEnv, cli

pytestmark = pytest.mark.slow


def _hook(bare: Path, body: str) -> None:
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\n" + body + "\nexit 0\n")
    hook.chmod(0o755)


def _push_proc(root: Path, home: Path, url: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cce_knowledge", "knowledge", "push", "--corpus", "c",
         "--remote", url, "--dir", str(root), *extra],
        env=clean_env({"CCE_HOME": str(home)}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )  # fmt: skip


def _assert_consistent(env: SyncEnv, capsys: pytest.CaptureFixture[str], expect: set[str]) -> None:
    """The remote `current` names an artifact that exists, verifies and installs."""
    cur = (bare_file(env.bare, "knowledge/v1/c/current") or b"").decode().strip()
    assert cur in expect
    assert f"knowledge/v1/c/{cur}.cck" in bare_ls(env.bare, "knowledge/v1/c")
    merges = subprocess.run(
        ["git", "-C", str(env.bare), "rev-list", "--merges", "main"], capture_output=True, text=True
    ).stdout
    assert merges == ""  # linear history only
    env.home(f"verify-{time.monotonic_ns()}")
    rc, _, err = cli(
        capsys, "knowledge", "pull", "--corpus", "c", "--remote", env.url,
        "--dir", str(env.root(f"check-{time.monotonic_ns()}")),
    )  # fmt: skip
    assert rc == 0, err


def test_two_pushers_racing_from_separate_processes(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    # Seed so both pushers start from the same non-empty remote, then widen the window.
    a, b = env.root("a"), env.root("b")
    snap_a = index(a, feed(["a:1", "a:2"]))
    snap_b = index(b, feed(["b:1"]))
    _hook(env.bare, "sleep 1")
    procs = [
        _push_proc(a, env.tmp / "home-pa", env.url, "--force"),
        _push_proc(b, env.tmp / "home-pb", env.url, "--force"),
    ]
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    ok = [r for r in results if r[0] == 0]
    assert ok, results
    for rc, out, err in results:
        if rc != 0:  # the loser must fail loudly, never silently
            assert "error: push to origin/main failed after 5 attempts" in err, err
        else:
            assert out.startswith("Pushed corpus c@")
    published = {snap for snap, r in zip((snap_a, snap_b), results, strict=True) if r[0] == 0}
    for snap in published:
        assert f"knowledge/v1/c/{snap}.cck" in bare_ls(env.bare, "knowledge/v1/c")
    _assert_consistent(env, capsys, published)


def test_killed_mid_push_then_next_push_heals(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    root = env.root("p")
    home = env.tmp / "home-p"
    index(root, feed(["k:1"]))
    p = _push_proc(root, home, env.url)
    assert p.wait(timeout=120) == 0, p.communicate()
    first = (bare_file(env.bare, "knowledge/v1/c/current") or b"").decode().strip()

    trigger, started = env.tmp / "trigger", env.tmp / "started"
    trigger.touch()
    # Stall only the publish push (the one that carries `current`), then SIGKILL the pusher.
    _hook(
        env.bare,
        f"while read old new ref; do\n"
        f'  if [ -f "{trigger}" ] && git ls-tree -r --name-only "$new" | grep -q "/current$"; then\n'
        f'    touch "{started}"; sleep 60\n  fi\ndone',
    )
    second = index(root, feed(["k:1", "k:2"]))
    p = _push_proc(root, home, env.url)
    deadline = time.monotonic() + 60
    while not started.exists():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    trigger.unlink()

    # Nothing half-published: the remote still names the first snapshot, which verifies.
    _assert_consistent(env, capsys, {first})
    clone = clone_dir(make_remote(env.url)).name
    assert (home / "sync" / clone / ".git").is_dir()

    # Leave extra debris a crash could leave behind, then push again with the same clone.
    (home / "sync" / clone / ".git" / "index.lock").write_text("")
    (home / "sync" / clone / ".git" / "rebase-merge").mkdir()
    p = _push_proc(root, home, env.url)
    rc = p.wait(timeout=120)
    out, err = p.communicate()
    assert rc == 0, err
    assert out.startswith(f"Pushed corpus c@{second}")
    _assert_consistent(env, capsys, {second})
    env.monkeypatch.setenv("CCE_HOME", str(home))
    assert read_remote_current(env.url, "c").current == second


def test_offline_with_existing_clone_reads_stale_state_and_push_fails_cleanly(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    root = env.root("p")
    snap = index(root, feed(["x:1"]))
    assert (
        cli(capsys, "knowledge", "push", "--corpus", "c", "--remote", env.url, "--dir", str(root))[
            0
        ]
        == 0
    )
    # The host goes away: the clone's origin now points at nothing reachable.
    moved = env.tmp / "moved.git"
    env.bare.rename(moved)
    cons = env.root("cons")
    rc, out, err = cli(
        capsys, "knowledge", "pull", "--corpus", "c", "--remote", env.url, "--dir", str(cons)
    )
    assert rc == 0, err  # served from the last-fetched state, like the reference
    assert out.startswith(f"Pulled corpus c@{snap}")
    index(root, feed(["x:1", "x:2"]))
    rc, out, err = cli(
        capsys, "knowledge", "push", "--corpus", "c", "--remote", env.url, "--dir", str(root)
    )
    assert rc == 1 and out == ""
    assert err.startswith("error: push to origin/main failed after 5 attempts")
    moved.rename(env.bare)


def test_remote_current_is_best_effort_against_a_hostile_cache(sync_env: SyncEnv) -> None:
    """Status and the MCP server read the remote `current` through this one function:
    a broken corpus.json loses only `pushed_at`; a pointer that is not a snapshot id is
    never passed on; the answer always says why it is unknown."""
    snap = "0123456789abcdef"
    sync_env.seed(
        {
            "knowledge/v1/c1/current": f"{snap}\n".encode(),
            "knowledge/v1/c1/corpus.json": b'\xff{"pushed_at": 1',
        }
    )
    assert read_remote_current(sync_env.url, "c1") == RemoteCurrent(current=snap)
    sync_env.seed({"knowledge/v1/c1/corpus.json": b'{"pushed_at": "2026-01-01T00:00:00Z"}'})
    got = read_remote_current(sync_env.url, "c1")
    assert (got.current, got.pushed_at) == (snap, "2026-01-01T00:00:00Z")
    sync_env.seed({"knowledge/v1/c1/current": b"../../../etc/passwd\n"})
    got = read_remote_current(sync_env.url, "c1")
    assert got == RemoteCurrent(problem="`current` on the remote is not a snapshot id")
    assert read_remote_current(sync_env.url, "c2").problem == "no `current` pointer on the remote"
    assert read_remote_current(sync_env.url, "..").problem == "invalid corpus id `..`"
    # status prints the problem: a control character in the id is escaped, not sent.
    assert read_remote_current(sync_env.url, "c\x1b[2J").problem == "invalid corpus id `c\\x1b[2J`"
    gone = read_remote_current((sync_env.tmp / "gone.git").as_uri(), "c1")
    assert gone.current is None and gone.problem is not None
    assert gone.problem.startswith("unreachable (")
