"""Incremental index (store/chunkmap.py): the same store, byte for byte, as a full index.

Random feeds get random nights of edits (records changed, added, deleted, reordered,
duplicated, blank lines, CRLF), sometimes under another setting; after each, the
incremental store must equal a full render of the same feed, and its chunk map must
equal a fresh full index's. A stale, foreign or corrupt map gives a full build and a
note. A real `index` process killed with SIGKILL leaves the previous store, `current`
and the map usable.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cce_knowledge.config.settings import MarkdownSettings, Settings
from cce_knowledge.engine.redaction.modes import Redaction
from cce_knowledge.store.chunkmap import map_path
from cce_knowledge.store.ingest import IndexResult, index_feed, index_to_root
from cce_knowledge.store.snapshots import read_current, store_path
from tests.helpers.cce_proc import CCE

WORDS = ["alpha", "beta", "gamma", "delta", "api_key = s3cr3tvalue123", "zeta", "éta", "日本"]


@st.composite
def records(draw: st.DrawFn, ident: int) -> bytes:
    sections = draw(st.lists(st.sampled_from(WORDS), min_size=0, max_size=4))
    body = "".join(f"## {w}\n\n{w} " * draw(st.integers(1, 3)) + "\n\n" for w in sections)
    rec = {
        "schema": "cce.knowledge/v1",
        "id": f"r:{ident}",
        "source": draw(st.sampled_from(["gh", "docs"])),
        "title": draw(st.sampled_from(WORDS)),
        "body": body,
        "labels": draw(st.lists(st.sampled_from(["a", "b"]), max_size=2)),
    }
    return json.dumps(rec, ensure_ascii=draw(st.booleans())).encode()


@st.composite
def nights(draw: st.DrawFn) -> tuple[list[bytes], list[bytes], int, int]:
    """A feed's lines, the next night's lines, and the budgets of the two indexes."""
    n = draw(st.integers(0, 12))
    first = [draw(records(k)) for k in range(n)]
    second = list(first)
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(["change", "add", "delete", "swap", "dup", "blank", "crlf"]))
        if op == "add" or not second:
            second.insert(draw(st.integers(0, len(second))), draw(records(100 + len(second))))
        elif op == "change":
            k = draw(st.integers(0, len(second) - 1))
            second[k] = draw(records(k))
        elif op == "delete":
            del second[draw(st.integers(0, len(second) - 1))]
        elif op == "swap":
            i, j = draw(st.integers(0, len(second) - 1)), draw(st.integers(0, len(second) - 1))
            second[i], second[j] = second[j], second[i]
        elif op == "dup":
            second.append(second[draw(st.integers(0, len(second) - 1))])
        elif op == "blank":
            second.insert(draw(st.integers(0, len(second))), b"  ")
        else:
            k = draw(st.integers(0, len(second) - 1))
            second[k] = second[k] + b"\r"
    budgets = draw(st.sampled_from([(400, 400), (400, 400), (400, 12)]))
    return first, second, *budgets


def _settings(budget: int) -> Settings:
    return replace(Settings(), markdown=MarkdownSettings(max_section_tokens=budget))


def _index(
    root: Path,
    feed: Path,
    budget: int = 400,
    redaction: Redaction = "extended",
    incremental: bool = True,
) -> tuple[IndexResult, list[str]]:
    notes: list[str] = []
    res = index_to_root(
        str(feed),
        root=str(root),
        settings=_settings(budget),
        jobs=1,
        redaction=redaction,
        incremental=incremental,
        on_note=notes.append,
    )
    return res, notes


def _rows(root: Path) -> bytes:
    """The map's rows (its header pins the store file's mtime)."""
    return map_path(root, read_current(root)).read_bytes().split(b"\n", 1)[1]


def _feed(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nights(), st.sampled_from(["extended", "reference"]))
def test_incremental_equals_full(
    case: tuple[list[bytes], list[bytes], int, int], redaction: Redaction
) -> None:
    first, second, b1, b2 = case
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        feed = t / "feed.jsonl"
        feed.write_bytes(_feed(first))
        _index(t / "root", feed, b1, redaction=redaction)
        feed.write_bytes(_feed(second))
        res, notes = _index(t / "root", feed, b2, redaction=redaction)
        want_res, want = index_feed(_feed(second), b2, 1, redaction=redaction)
        got = store_path(t / "root", res.snapshot).read_bytes()
        assert got == want
        assert (res.snapshot, res.records, res.chunks) == (
            want_res.snapshot,
            want_res.records,
            want_res.chunks,
        )
        if b1 == b2:
            assert not notes
            known = set(first)
            unchanged = [x[:-1] if x.endswith(b"\r") else x for x in second]
            assert res.reused == sum(1 for x in unchanged if x in known)
        else:
            assert notes and "settings changed" in notes[0]
            assert res.reused == 0
        # The new map is a full index's: the night after reuses just as well.
        _index(t / "fresh", feed, b2, redaction=redaction)
        assert _rows(t / "root") == _rows(t / "fresh")


FEED = _feed(
    [
        json.dumps(
            {"id": f"r:{k}", "source": "gh", "title": f"T{k}", "body": f"## S\n\nbody {k}\n"}
        ).encode()
        for k in range(40)
    ]
)


def _reused_after(tmp: Path, spoil: str) -> tuple[IndexResult, list[str]]:
    feed = tmp / "feed.jsonl"
    feed.write_bytes(FEED)
    root = tmp / "root"
    _index(root, feed)
    snap = read_current(root)
    if spoil == "map-gone":
        map_path(root, snap).unlink()
    elif spoil == "map-truncated":
        data = map_path(root, snap).read_bytes()
        map_path(root, snap).write_bytes(data[:-36])  # one row short
    elif spoil == "map-garbage":
        map_path(root, snap).write_bytes(b"\xff\xfe not json\n")
    elif spoil == "store-edited":
        p = store_path(root, snap)
        p.write_bytes(p.read_bytes().replace(b"body 3", b"body 9"))
    elif spoil == "store-gone":
        store_path(root, snap).unlink()
    feed.write_bytes(FEED + b'{"id": "r:new", "source": "gh", "title": "N", "body": "new"}\n')
    return _index(root, feed)


def test_unchanged_records_are_reused(tmp_path: Path) -> None:
    res, notes = _reused_after(tmp_path, "nothing")
    assert not notes and res.reused == 40


@pytest.mark.parametrize(
    ("spoil", "why"),
    [
        ("map-gone", "has no chunk map"),
        ("map-truncated", "corrupt"),
        ("map-garbage", "unreadable"),
        ("store-edited", "changed since it was indexed"),
        ("store-gone", "is missing"),
    ],
)
def test_spoiled_store_or_map_is_a_full_build(tmp_path: Path, spoil: str, why: str) -> None:
    res, notes = _reused_after(tmp_path, spoil)
    assert res.reused == 0
    assert len(notes) == 1 and notes[0].startswith("full index: ") and why in notes[0]
    feed = (tmp_path / "feed.jsonl").read_bytes()
    assert store_path(tmp_path / "root", res.snapshot).read_bytes() == index_feed(feed, 400, 1)[1]


def test_first_index_says_nothing(tmp_path: Path) -> None:
    (tmp_path / "feed.jsonl").write_bytes(FEED)
    res, notes = _index(tmp_path / "root", tmp_path / "feed.jsonl")
    assert notes == [] and res.reused == 0


def test_full_flag_renders_everything(tmp_path: Path) -> None:
    (tmp_path / "feed.jsonl").write_bytes(FEED)
    _index(tmp_path / "root", tmp_path / "feed.jsonl")
    res, notes = _index(tmp_path / "root", tmp_path / "feed.jsonl", incremental=False)
    assert res.reused == 0 and notes == ["full index: --full"]


def test_bad_changed_line_is_reported_with_its_line(tmp_path: Path) -> None:
    from cce_knowledge.core.errors import ContractError

    feed = tmp_path / "feed.jsonl"
    feed.write_bytes(FEED)
    _index(tmp_path / "root", feed)
    before = read_current(tmp_path / "root")
    feed.write_bytes(FEED + b'{"id": 5}\n')
    with pytest.raises(ContractError, match=r"feed.jsonl:41: \$.id: "):
        _index(tmp_path / "root", feed)
    assert read_current(tmp_path / "root") == before


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="watches /proc/<pid>/fd")
def test_killed_index_leaves_previous_store(tmp_path: Path) -> None:
    """SIGKILL a real `cce knowledge index` midway: the previous store, `current` and
    the chunk map stand, and the next index still reuses them."""
    root = tmp_path / "root"
    feed = tmp_path / "feed.jsonl"
    feed.write_bytes(FEED)
    subprocess.run([*CCE, "knowledge", "index", "-q", str(feed), "--dir", str(root)], check=True)
    snap = read_current(root)
    store = store_path(root, snap).read_bytes()
    rows = _rows(root)
    big = _feed(
        [
            json.dumps(
                {
                    "id": f"b:{k}",
                    "source": "gh",
                    "title": f"B{k}",
                    "body": f"## S\n\n{'word ' * 400}{k}\n" * 6,
                }
            ).encode()
            for k in range(3000)
        ]
    )
    feed.write_bytes(big)
    proc = subprocess.Popen(
        [*CCE, "knowledge", "index", str(feed), "--dir", str(root), "--jobs", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # The render is under way once its spool (unlinked, in the knowledge dir) is open.
    deadline = time.monotonic() + 120
    while not _spooling(proc.pid, (root / ".cce" / "knowledge").resolve()):
        assert proc.poll() is None, "index ended before it was killed"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert read_current(root) == snap
    assert store_path(root, snap).read_bytes() == store
    assert _rows(root) == rows
    feed.write_bytes(FEED)
    res, notes = _index(root, feed)
    assert not notes and res.reused == 40 and res.snapshot == snap


def _spooling(pid: int, kdir: Path) -> bool:
    """Does the process hold an unlinked file in `kdir` open (O_TMPFILE has no name)?"""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(kdir)) and target.endswith(" (deleted)"):
            return True
    return False
