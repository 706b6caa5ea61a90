"""The nightly builder's incremental path, driven without act (tests/action/
test_action_act.py runs the same through the workflow): each night starts on an empty
runner, pulls the published store, adopts the chunk map the CI cache kept, and indexes
only what changed — a store byte-identical to a full index of the same feed."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cce_knowledge.action import driver as ac
from cce_knowledge.store.chunkmap import adopt_map, export_map, map_path
from tests.helpers.cce_proc import run_cce
from tests.helpers.nightly_feed import write_feed
from tests.helpers.sync import isolated_git_home

pytestmark = pytest.mark.slow


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    return {"remote": isolated_git_home(tmp_path, monkeypatch).as_uri()}


def night(
    tmp: Path, name: str, feed: Path, remote: str, maps: Path | None, **inputs: str
) -> subprocess.CompletedProcess[str]:
    """One builder run on an empty runner: a fresh working directory and CCE_HOME."""
    runner = tmp / name
    runner.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CCE_IN_", "GITHUB_"))}
    env["CCE_HOME"] = str(runner / "cce-home")
    env["GITHUB_OUTPUT"] = str(runner / "out")
    env["GITHUB_STEP_SUMMARY"] = str(runner / "summary.md")
    if maps is not None:
        env[ac.CHUNK_MAPS_ENV] = str(maps)
    all_inputs = {"feed": str(feed), "corpus": "c1", "remote": remote, "working-directory": "wd"}
    all_inputs.update(inputs)
    for k, v in all_inputs.items():
        env[ac.env_name(k)] = v
    return run_cce("action", "run", cwd=runner, env=env)


def store_bytes(root: Path) -> bytes:
    k = root / ".cce" / "knowledge"
    return (k / f"{(k / 'current').read_text().strip()}.json").read_bytes()


def test_second_night_pulls_adopts_the_cached_map_and_indexes_incrementally(
    tmp_path: Path, env: dict[str, str]
) -> None:
    maps = tmp_path / "actions-cache" / "maps"
    feed1, feed2 = tmp_path / "n1.jsonl", tmp_path / "n2.jsonl"
    write_feed(feed1, 200)
    write_feed(feed2, 200, frozenset({3, 97, 150}))

    p = night(tmp_path, "night1", feed1, env["remote"], maps)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "note: full index: nothing is published yet" in p.stdout
    snap1 = (tmp_path / "night1" / "wd" / ".cce" / "knowledge" / "current").read_text().strip()
    assert sorted(x.name for x in maps.iterdir()) == [f"{snap1}.map"]

    p = night(tmp_path, "night2", feed2, env["remote"], maps)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "full index" not in p.stdout + p.stderr
    assert f"chunk map of snapshot {snap1} restored from the CI cache" in p.stdout
    wd2 = tmp_path / "night2" / "wd"
    snap2 = (wd2 / ".cce" / "knowledge" / "current").read_text().strip()
    assert snap2 != snap1
    # Both maps stay: the new one, and the published one in case this is not published.
    assert sorted(x.name for x in maps.iterdir()) == sorted([f"{snap1}.map", f"{snap2}.map"])

    full = tmp_path / "full"
    full.mkdir()
    p = run_cce("knowledge", "index", str(feed2), "--dir", str(full), "--full")
    assert p.returncode == 0, p.stderr
    assert store_bytes(wd2) == store_bytes(full)


def test_without_a_cached_map_the_index_is_full_and_says_why(
    tmp_path: Path, env: dict[str, str]
) -> None:
    feed1, feed2 = tmp_path / "n1.jsonl", tmp_path / "n2.jsonl"
    write_feed(feed1, 30)
    write_feed(feed2, 30, frozenset({1}))
    assert night(tmp_path, "night1", feed1, env["remote"], None).returncode == 0
    maps = tmp_path / "empty-cache"
    p = night(tmp_path, "night2", feed2, env["remote"], maps)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "note: full index: the CI cache holds no chunk map of snapshot" in p.stdout
    # incremental: false skips the pull altogether (the reference's full build).
    p = night(tmp_path, "night3", feed2, env["remote"], maps, incremental="false")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "previous store (pull)" not in p.stdout


def _published_store_and_map(tmp_path: Path, n: int = 20) -> tuple[Path, bytes]:
    root = tmp_path / "built"
    write_feed(tmp_path / "f.jsonl", n)
    p = run_cce("knowledge", "index", str(tmp_path / "f.jsonl"), "--dir", str(root))
    assert p.returncode == 0, p.stderr
    snap = (root / ".cce" / "knowledge" / "current").read_text().strip()
    data = export_map(root, snap)
    assert data is not None
    map_path(root, snap).unlink()  # as after a pull: the store has no map of its own
    return root, data


def test_adopt_refuses_a_map_for_other_bytes_or_a_corrupt_one(tmp_path: Path) -> None:
    root, data = _published_store_and_map(tmp_path)
    head, _, rows = data.partition(b"\n")
    doc = json.loads(head)
    bad_sha = json.dumps({**doc, "store_sha256": "0" * 64}, sort_keys=True).encode()
    assert "made for other bytes" in (adopt_map(root, bad_sha + b"\n" + rows) or "")
    # A row pointing past the store's body.
    off_past = rows[:16] + (10**12).to_bytes(8, "little") + rows[24:]
    assert adopt_map(root, head + b"\n" + off_past) == "the cached chunk map is corrupt"
    # Rows cut short, a foreign schema, another snapshot, no header at all.
    assert adopt_map(root, head + b"\n" + rows[:-1]) == "the cached chunk map is corrupt"
    local = json.dumps({**doc, "schema": "cce.knowledge.chunkmap/v1"}).encode()
    assert "not an exported chunk map" in (adopt_map(root, local + b"\n" + rows) or "")
    other = json.dumps({**doc, "snapshot": "0" * 16}, sort_keys=True).encode()
    assert "does not describe snapshot" in (adopt_map(root, other + b"\n" + rows) or "")
    assert "not an exported chunk map" in (adopt_map(root, b"\x00" * 64) or "")
    snap = doc["snapshot"]
    assert not map_path(root, snap).exists()  # nothing refused was installed
    assert adopt_map(root, data) is None
    assert map_path(root, snap).is_file()


def test_a_symlinked_cached_map_is_not_read(tmp_path: Path) -> None:
    target = tmp_path / "secret"
    target.write_bytes(b"x" * 100)
    (tmp_path / "maps").mkdir()
    link = tmp_path / "maps" / "0123456789abcdef.map"
    link.symlink_to(target)
    assert ac._read_cached_map(link) is None
    assert ac._read_cached_map(tmp_path / "maps" / "absent.map") is None
    assert ac._read_cached_map(target) == b"x" * 100
