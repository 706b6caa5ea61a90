"""A tampered cache is untrusted input (issue 12; docs/security.md).

Real bare repositories over file:// with git-LFS, symlinks committed into them, and
real processes for the concurrency cases. Each test failed before its fix.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.sync import bare_file, clean_env, feed, index, refs
from tests.helpers.sync_env import Link, SyncEnv, cli

pytestmark = pytest.mark.slow

PREFIX = "knowledge/v1/kn"


def _push(
    env: SyncEnv, capsys: pytest.CaptureFixture[str], root: Path, *extra: str
) -> tuple[int, str, str]:
    return cli(
        capsys, "knowledge", "push", "--corpus", "kn", "--remote", env.url, "--dir", str(root),
        *extra,
    )  # fmt: skip


def _outside(env: SyncEnv) -> Path:
    victim = env.tmp / "outside" / "victim.txt"
    victim.parent.mkdir(parents=True, exist_ok=True)
    victim.write_bytes(b"precious\n")
    return victim


def _snapshot_of_outside(env: SyncEnv) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((env.tmp / "outside").iterdir())}


# ------------------------------------------------------------------ item 1: push


def test_push_refuses_a_symlinked_corpus_json(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    victim = _outside(env)
    root = env.root("p")
    index(root, feed(["kn:1"]))
    assert _push(env, capsys, root)[0] == 0
    env.seed({f"{PREFIX}/corpus.json": Link(str(victim))})
    before = refs(env.bare)
    index(root, feed(["kn:1", "kn:2"]))  # a superset: the shrink guard passes
    rc, out, err = _push(env, capsys, root)
    assert rc == 1 and out == ""
    assert err == (
        f"error: refusing to write to the cache: `{PREFIX}/corpus.json` is a symbolic link "
        "in the cache repository (push only writes and deletes regular files inside plain "
        "directories; someone with write access to the cache put it there — remove it from "
        "the cache)\n"
    )
    assert victim.read_bytes() == b"precious\n"
    assert refs(env.bare) == before


def test_push_refuses_a_symlinked_gitattributes(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    victim = _outside(env)
    env.seed({".gitattributes": Link(str(victim))})
    before = refs(env.bare)
    root = env.root("p")
    index(root, feed(["kn:1"]))
    rc, _, err = _push(env, capsys, root)
    assert rc == 1
    assert "`.gitattributes` is a symbolic link" in err
    assert victim.read_bytes() == b"precious\n"
    assert refs(env.bare) == before


def test_push_refuses_a_symlinked_corpus_directory(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    _outside(env)
    env.seed({PREFIX: Link(str(env.tmp / "outside"))})
    root = env.root("p")
    index(root, feed(["kn:1"]))
    rc, _, err = _push(env, capsys, root)
    assert rc == 1
    assert f"`{PREFIX}` is a symbolic link" in err
    assert _snapshot_of_outside(env) == {"victim.txt": b"precious\n"}
    # The same for a symlinked `knowledge/` higher up.
    env.seed({PREFIX: None, "knowledge": Link(str(env.tmp / "outside"))})
    rc, _, err = _push(env, capsys, root)
    assert rc == 1 and "`knowledge` is a symbolic link" in err
    assert _snapshot_of_outside(env) == {"victim.txt": b"precious\n"}


def test_retention_refuses_a_symlinked_artifact(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    victim = _outside(env)
    root = env.root("p")
    (root / ".cce").mkdir(parents=True)
    (root / ".cce" / "config").write_text(
        "knowledge:\n  sync:\n    retention: keep-last-1\n", encoding="utf-8"
    )
    index(root, feed(["kn:1"]))
    assert _push(env, capsys, root)[0] == 0
    # An old-looking artifact key that is a symlink: retention would prune it.
    env.seed({f"{PREFIX}/0000000000000000.cck": Link(str(victim))})
    index(root, feed(["kn:1", "kn:2"]))
    rc, out, err = _push(env, capsys, root)
    assert rc == 0, err
    assert (
        f"  warning: retention prune failed — refusing to delete from the cache: "
        f"`{PREFIX}/0000000000000000.cck` is a symbolic link" in out
    )
    assert victim.read_bytes() == b"precious\n"
    assert bare_file(env.bare, f"{PREFIX}/0000000000000000.cck") == str(victim).encode()


# ------------------------------------------------------------------ item 2: concurrent pulls


def _cce(*argv: str) -> list[str]:
    return [sys.executable, "-m", "cce_knowledge", *argv]


def _pull_proc(env: SyncEnv, dest: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        _cce(
            "knowledge", "pull", "--corpus", "kn", "--remote", env.url, "--dir", str(dest), *extra
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env({"CCE_HOME": str(env.tmp / "home-proc")}),
    )


def _two_snapshots(env: SyncEnv, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    root = env.root("p")
    a = index(root, feed(["kn:1"]))
    assert _push(env, capsys, root)[0] == 0
    b = index(root, feed(["kn:1", "kn:2"]))
    assert _push(env, capsys, root)[0] == 0
    return a, b


def test_concurrent_pulls_into_one_root_never_lose_the_installed_store(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    a, b = _two_snapshots(env, capsys)
    for round_ in range(8):
        dest = env.root(f"c{round_}")
        procs = [_pull_proc(env, dest, "--snapshot", s) for s in (a, b)]
        results = [(p.wait(timeout=120), p.communicate()) for p in procs]
        for rc, (_, err) in results:
            assert rc == 0, err
        kdir = dest / ".cce" / "knowledge"
        current = (kdir / "current").read_text().strip()
        assert current in (a, b)
        assert (kdir / f"{current}.json").is_file(), (
            f"round {round_}: `current` names a deleted file"
        )
        assert json.loads((kdir / "synced.json").read_text())["snapshot"] == current
        assert sorted(p.name for p in kdir.glob("*.json")) == sorted(
            [f"{current}.json", "synced.json"]
        )


def test_a_waiting_pull_says_it_is_waiting(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    _two_snapshots(env, capsys)
    dest = env.root("c")
    release = env.tmp / "release"
    holder = subprocess.Popen(
        [
            sys.executable, "-c",
            "import sys, time, pathlib\n"
            "from cce_knowledge.store.store_file import writer_lock\n"
            "with writer_lock(sys.argv[1], 'knowledge index'):\n"
            "    print('held', flush=True)\n"
            "    while not pathlib.Path(sys.argv[2]).exists(): time.sleep(0.05)\n",
            str(dest), str(release),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    pull = _pull_proc(env, dest)
    assert pull.stderr is not None
    line = pull.stderr.readline()
    assert line == (
        f"waiting for knowledge index (pid {holder.pid}) to finish "
        f"({dest / '.cce' / 'knowledge' / '.lock'}) …\n"
    )
    assert not (dest / ".cce" / "knowledge" / "current").exists()  # it really waits
    release.touch()
    assert holder.wait(timeout=30) == 0
    out, err = pull.communicate(timeout=120)
    assert pull.returncode == 0, err
    assert out.startswith("Pulled corpus kn@")
