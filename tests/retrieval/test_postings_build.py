"""The default ranking's postings built a term range at a time (postings_build.py) and
spooled to disk (section_spool.py): the bytes are those of one range holding every
row, kept in memory, whatever the ranges, the scan slices and where the rows come from
(the gathered arrays, or the rows file's maps)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cce_knowledge.retrieval import postings_build as pb
from cce_knowledge.retrieval import search_index as si
from cce_knowledge.retrieval import search_rows as sr
from cce_knowledge.retrieval.section_spool import SectionSpool
from cce_knowledge.store.snapshots import KnowledgeStore
from tests.helpers.corpora import SNAP, varied_stores, write_store


def _parts(path: Path, *, spool_dir: Path | None = None, mapped: bool = False) -> bytes:
    kept = path.with_name("kept.rows")

    def keep(rows: sr.Rows) -> sr.Rows | None:
        sr.write_rows(kept, SNAP, si.INDEX_KEY, rows)
        return sr.read_rows(kept, si.INDEX_KEY) if mapped else None

    parts = si.index_parts(path, workers=1, with_reference=False, on_rows=keep, spool_dir=spool_dir)
    return b"".join(parts)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    store=varied_stores(),
    range_rows=st.integers(1, 5),
    scan_rows=st.integers(1, 7),
    mapped=st.booleans(),
    on_disk=st.booleans(),
)
def test_ranges_slices_spool_and_maps_give_the_same_bytes(
    store: KnowledgeStore, range_rows: int, scan_rows: int, mapped: bool, on_disk: bool
) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        path = write_store(root, store)
        want = _parts(path)
        spool = root / "spool"
        spool.mkdir()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(pb, "RANGE_ROWS", range_rows)
            mp.setattr(pb, "SCAN_ROWS", scan_rows)
            got = _parts(path, spool_dir=spool if on_disk else None, mapped=mapped)
        assert got == want
        assert os.listdir(spool) == []  # spool files are unlinked


def test_a_build_of_many_ranges_equals_one_of_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.helpers.corpora import make_store

    words = "lock retry backoff pool queue cache index shard token merge".split()
    specs = [
        (
            f"r{i % 23}",
            " ".join(words[(i * k) % len(words)] + str(k % 7) for k in range(1, 40)),
            f"title {words[i % len(words)]}",
            None,
            None,
            [],
            [],
        )
        for i in range(120)
    ]
    path = write_store(tmp_path, make_store(specs))
    want = _parts(path)
    monkeypatch.setattr(pb, "RANGE_ROWS", 16)
    monkeypatch.setattr(pb, "SCAN_ROWS", 64)
    ranges_seen: list[int] = []
    real = pb.term_ranges
    monkeypatch.setattr(
        pb, "term_ranges", lambda ptr, budget: ranges_seen.append(len(r := real(ptr, budget))) or r
    )
    assert _parts(path, spool_dir=tmp_path, mapped=True) == want
    assert max(ranges_seen) > 10  # the build really went range by range


@given(counts=st.lists(st.integers(0, 20), max_size=40), budget=st.integers(1, 30))
def test_term_ranges_cover_the_vocabulary_within_the_budget(counts: list[int], budget: int) -> None:
    ptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    ranges = pb.term_ranges(ptr, budget)
    if not counts:
        assert ranges == []
        return
    assert [a for a, _ in ranges] == [0, *(b for _, b in ranges[:-1])]
    assert ranges[-1][1] == len(counts)
    for a, b in ranges:
        assert b > a
        assert ptr[b] - ptr[a] <= budget or b == a + 1


@given(
    pieces=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.binary(max_size=50)), max_size=20
    )
)
def test_a_spool_on_disk_holds_what_one_in_memory_does(pieces: list[tuple[str, bytes]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        mem, disk = SectionSpool(), SectionSpool(Path(d))
        for name, data in pieces:
            mem.add(name, data)
            disk.add(name, data)
        want: dict[str, bytes] = {}
        for name, data in pieces:
            want[name] = want.get(name, b"") + data
        a, b = mem.sections(), disk.sections()
        assert list(a) == list(b) == list(want)
        assert {k: bytes(v) for k, v in a.items()} == {k: bytes(v) for k, v in b.items()} == want
        assert os.listdir(d) == []


def test_term_counts_count_a_slice_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pb, "SCAN_ROWS", 3)
    tids = np.array([4, 0, 4, 2, 2, 4, 1], dtype=np.int32)
    assert pb.term_counts(tids, 6).tolist() == [1, 1, 2, 0, 3, 0]
