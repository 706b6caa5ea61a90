"""A tampered cache is untrusted input (issue 12; docs/security.md).

Real bare repositories over file:// with git-LFS, symlinks committed into them, and
real processes for the concurrency cases. Each test failed before its fix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.sync import bare_file, clean_env, feed, index, refs, store_files
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


def _pull_proc(
    env: SyncEnv, dest: Path, *extra: str, environ: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        _cce(
            "knowledge", "pull", "--corpus", "kn", "--remote", env.url, "--dir", str(dest), *extra
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env({"CCE_HOME": str(env.tmp / "home-proc"), **(environ or {})}),
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
        snapshots = [p.name for p in kdir.glob("????????????????.json")]
        assert snapshots == [f"{current}.json"]


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
            "from cce_knowledge.store.snapshots import writer_lock\n"
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


# ------------------------------------------------------------------ item 3: marker vs `current`


def test_marker_that_disagrees_with_current_is_reported_and_repaired(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    a, b = _two_snapshots(env, capsys)
    dest = env.root("c")
    kdir = dest / ".cce" / "knowledge"
    assert cli(capsys, "knowledge", "pull", "--corpus", "kn", "--snapshot", a,
               "--remote", env.url, "--dir", str(dest))[0] == 0  # fmt: skip
    # The state a pull of B killed between its marker and `current` leaves: the
    # marker names B (whose store file was written), `current` still names A.
    assert cli(capsys, "knowledge", "pull", "--corpus", "kn", "--snapshot", b,
               "--remote", env.url, "--dir", str(env.root("scratch")))[0] == 0  # fmt: skip
    scratch = env.tmp / "scratch" / ".cce" / "knowledge"
    (kdir / f"{b}.json").write_bytes((scratch / f"{b}.json").read_bytes())
    (kdir / "synced.json").write_bytes((scratch / "synced.json").read_bytes())
    assert (kdir / "current").read_text() == f"{a}\n"
    # A dead writer's temp file (pid 2**22 + 1 is above Linux's pid_max default range).
    dead = kdir / f".{b}.json.tmp.{2**22 + 1}.0"
    dead.write_bytes(b"x" * 1000)

    stale = (
        f"the sync marker records kn@{b} but `current` names {a}: the active store is not "
        "the pulled snapshot"
    )
    rc, out, err = cli(capsys, "sync", "verify", "--checksum-only", "--dir", str(dest))
    assert rc == 1 and stale in err, (out, err)
    rc, out, err = cli(capsys, "doctor", "--dir", str(dest))
    assert stale in out + err
    assert "pulled snapshot bytes match" not in out + err

    rc, out, err = cli(capsys, "sync", "pull", "--all", "--into", str(dest), "--remote", env.url)
    assert rc == 0, err
    assert f"  knowledge        pulled      kn@{b}" in out
    assert "summary       : 1 pulled · 0 up-to-date · 0 skipped\n" in out
    assert (kdir / "current").read_text() == f"{b}\n"
    assert not dead.exists()  # the next lock holder removed the dead writer's temp file
    rc, out, err = cli(capsys, "sync", "verify", "--checksum-only", "--dir", str(dest))
    assert rc == 0 and out.startswith(f"verify OK (checksum-only): knowledge corpus kn@{b}\n")
    # Now it is up to date, and the summary counts it.
    rc, out, _ = cli(capsys, "sync", "pull", "--all", "--into", str(dest), "--remote", env.url)
    assert rc == 0 and f"  knowledge        up-to-date  kn@{b}\n" in out
    assert "summary       : 0 pulled · 1 up-to-date · 0 skipped\n" in out


def test_a_live_writers_temp_file_is_left_alone(tmp_path: Path) -> None:
    from cce_knowledge.core.atomic import remove_dead_temps

    mine = tmp_path / f".x.json.tmp.{os.getpid()}.0"
    theirs = tmp_path / f".x.json.tmp.{2**22 + 1}.3"
    other = tmp_path / ".x.json.tmp.notapid.0"
    for p in (mine, theirs, other):
        p.write_bytes(b"")
    assert remove_dead_temps(tmp_path) == [theirs.name]
    assert mine.exists() and other.exists() and not theirs.exists()


# ------------------------------------------------------------------ items 5 and 10: values and files


def test_hostile_pointer_is_refused_and_escaped_by_pull_and_push(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    root = env.root("p")
    index(root, feed(["kn:1"]))
    assert _push(env, capsys, root)[0] == 0
    evil = "0123456789abcdef\n::warning title=x::pwned\n\x1b[31m"
    env.seed({f"{PREFIX}/current": evil.encode()})
    shown = "0123456789abcdef\\x0a::warning title=x::pwned\\x0a\\x1b[31m"
    for home in ("home-a", "home-b"):  # in place (file://) and through the working clone
        env.home(home)
        rc, out, err = cli(
            capsys, "knowledge", "pull", "--corpus", "kn", "--remote", env.url,
            "--dir", str(env.root("c")),
        )  # fmt: skip
        assert rc == 1 and out == ""
        assert err == (
            "error: the cache's `current` pointer for corpus kn is not a snapshot id (16 "
            f"lowercase hex digits): `{shown}` — the cache was written by something other "
            "than cce; a `cce knowledge push --force` replaces it\n"
        )
    rc, _, err = _push(env, capsys, root)
    assert rc == 1
    assert err.count("\n") == 2 and "\x1b" not in err and "\n::" not in err
    assert err.startswith(
        f"error: push guard: could not verify the remote's current snapshot (kn@{shown})"
    )
    # --force replaces the bad pointer.
    rc, _, err = _push(env, capsys, root, "--force")
    assert rc == 0, err
    assert cli(capsys, "knowledge", "pull", "--corpus", "kn", "--remote", env.url,
               "--dir", str(env.root("c")))[0] == 0  # fmt: skip


def test_sync_list_escapes_control_characters_from_the_cache(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    root = env.root("p")
    index(root, feed(["kn:1"]))
    assert _push(env, capsys, root)[0] == 0
    meta = json.loads(bare_file(env.bare, f"{PREFIX}/corpus.json") or b"{}")
    meta["data_as_of"] = "2026\x1b]0;owned\x07\u202e"
    env.seed({f"{PREFIX}/corpus.json": json.dumps(meta).encode()})
    rc, out, err = cli(capsys, "sync", "list", "--remote", env.url)
    assert rc == 0, err
    assert "2026\\x1b]0;owned\\x07\\u202e\n" in out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out


def test_lfs_object_that_is_a_fifo_never_hangs_pull(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = sync_env
    root = env.root("p")
    index(root, feed(["kn:1"]))
    assert _push(env, capsys, root)[0] == 0
    objects = [p for p in (env.bare / "lfs" / "objects").rglob("*") if p.is_file()]
    assert len(objects) == 1
    obj = objects[0]
    fifo = env.tmp / "fifo"
    os.mkfifo(fifo)
    obj.unlink()
    obj.symlink_to(fifo)
    for in_place in ("1", "0"):  # read in place, and through `git lfs fetch`
        proc = _pull_proc(env, env.root(f"c{in_place}"), environ={"CCE_LFS_IN_PLACE": in_place})
        try:
            out, err = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"pull hung on an LFS object that is a FIFO (CCE_LFS_IN_PLACE={in_place})")
        assert proc.returncode == 1 and err.startswith("error: "), (out, err)
        assert "Traceback" not in err
        if in_place == "1":
            assert "is a symbolic link, not a regular file" in err
        else:  # git-lfs itself refuses to copy a non-regular object
            assert "could not read knowledge/v1/kn/" in err
    # A FIFO in place of the object (no symlink) is refused the same way.
    obj.unlink()
    os.mkfifo(obj)
    proc = _pull_proc(env, env.root("c2"))
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 1 and "is a FIFO, not a regular file" in err, err


# ------------------------------------------------------------------ item 8: bad content, good checksum


def _bad_artifacts(store_bytes: bytes) -> dict[str, tuple[bytes, str, str]]:
    """name -> (artifact with a valid checksum, its snapshot, the expected refusal)."""
    from cce_knowledge.store.snapshots import loads
    from cce_knowledge.sync.cck import export_cck

    def art(corpus: str = "kn", **change: object) -> tuple[bytes, str]:
        st = loads(store_bytes)
        for k, v in change.items():
            setattr(st, k, v)
        return export_cck(st, corpus).data, st.snapshot

    def emb(value: float) -> tuple[bytes, str]:
        st = loads(store_bytes)
        st.chunks[-1].embedding[3] = value
        return export_cck(st, "kn").data, st.snapshot

    def dup() -> tuple[bytes, str]:
        st = loads(store_bytes)
        st.chunks[1].chunk_id = st.chunks[0].chunk_id
        return export_cck(st, "kn").data, st.snapshot

    cases = {
        "nan": (*emb(float("nan")), "an embedding holds a non-finite value (NaN or infinity)"),
        "inf": (*emb(float("inf")), "an embedding holds a non-finite value (NaN or infinity)"),
        "corpus": (*art("other"), "the artifact's manifest names corpus `other`, not `kn`"),
        "contract": (*art(schema="evil/v9"), "the artifact's contract is `evil/v9`"),
        "records": (*art(records=2**64 - 1), "record count 18446744073709551615 does not fit"),
        "fewer-records": (*art(records=1), "the manifest says 1 records but the chunks carry 2"),
        "duplicate-chunk": (*dup(), "appears twice"),
        "snapshot": (*art(snapshot="0123456789abcdef"), "names snapshot `0123456789abcdef`"),
        # A manifest snapshot that would be a path out of the knowledge directory.
        "snapshot-path": (*art(snapshot="../../escape"), "names snapshot `../../escape`"),
    }
    return {k: (a, s, why) for k, (a, s, why) in cases.items()}


@pytest.mark.parametrize("native", ["1", "0"])
def test_valid_checksum_bad_content_never_replaces_a_good_store(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str], native: str
) -> None:
    env = sync_env
    root = env.root("p")
    good = index(root, feed(["kn:1", ("kn:2", "Second body with words.")]))
    assert _push(env, capsys, root)[0] == 0
    store_bytes = (root / ".cce" / "knowledge" / f"{good}.json").read_bytes()
    dest = env.root("c")
    assert cli(capsys, "knowledge", "pull", "--corpus", "kn", "--remote", env.url,
               "--dir", str(dest))[0] == 0  # fmt: skip
    before = store_files(dest)
    for name, (artifact, snap, why) in _bad_artifacts(store_bytes).items():
        # Published as `current` under the key the pull asks for (the snapshot case keeps
        # the good snapshot's key, so its manifest disagrees with it).
        key_snap = good if name.startswith("snapshot") else snap
        env.seed(
            {
                f"{PREFIX}/{key_snap}.cck": artifact,
                f"{PREFIX}/current": f"{key_snap}\n".encode(),
                ".gitattributes": None,
            },
            message=name,
        )
        proc = _pull_proc(env, dest, environ={"CCE_NATIVE": native})
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, (name, out, err)
        assert why in err and "Traceback" not in err, (name, err)
        assert store_files(dest) == before, name
        rc, out, err = cli(capsys, "knowledge", "search", "Second body", "--dir", str(dest))
        assert rc == 0 and "kn:2" in out, (name, err)
