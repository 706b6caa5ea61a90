"""A tampered cache is untrusted input (issue 12; docs/security.md).

Real bare repositories over file:// with git-LFS, symlinks committed into them, and
real processes for the concurrency cases. Each test failed before its fix.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.sync import bare_file, feed, index, refs
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
