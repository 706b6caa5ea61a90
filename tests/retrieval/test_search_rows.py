"""The search index's kept rows (retrieval/search_rows.py): a build that reuses an
earlier build's rows writes the same bytes as a build from scratch, and a rows file
that is damaged or not ours only makes the build a full one."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cce_knowledge.engine.embed import hash_embed
from cce_knowledge.retrieval import search_index as si
from cce_knowledge.retrieval import search_rows as sr
from cce_knowledge.store.snapshots import KnowledgeChunk, KnowledgeStore
from tests.helpers.corpora import RECORD_IDS, SNAP, make_store, text, varied_stores, write_store


def _build(path: Path, previous: sr.Rows | None = None) -> tuple[bytes, sr.Rows]:
    """The index bytes of the store at `path`, and the rows the build kept (through
    the file, as the next build reads them: the build spends its arrays)."""
    kept = path.with_name(path.name + ".rows")
    parts = si.index_parts(
        path,
        workers=1,
        with_reference=False,
        previous=previous,
        on_rows=lambda rows: sr.write_rows(kept, SNAP, si.INDEX_KEY, rows),
    )
    return b"".join(parts), sr.read_rows(kept, si.INDEX_KEY)


def _kept_build(path: Path, previous: sr.Rows | None = None) -> tuple[bytes, bytes, sr.Rows]:
    """As `_build`, through a `RowsKeeper` (batched analysis, streamed rows file, spooled
    sections): the index bytes, the kept file's bytes and its rows."""
    kept = path.with_name(path.name + ".kept.rows")
    parts = si.index_parts(
        path,
        workers=1,
        with_reference=False,
        previous=previous,
        keeper=sr.RowsKeeper(kept, SNAP, si.INDEX_KEY),
        spool_dir=path.parent,
    )
    data = b"".join(parts)
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".batch-")]  # none left
    return data, kept.read_bytes(), sr.read_rows(kept, si.INDEX_KEY)


def _file_bytes(rows: sr.Rows, d: Path, name: str) -> bytes:
    p = d / name
    sr.write_rows(p, SNAP, si.INDEX_KEY, rows)
    return p.read_bytes()


@st.composite
def edited(draw: st.DrawFn, store: KnowledgeStore) -> KnowledgeStore:
    """`store` after a night: chunks kept, changed, dropped, added, the order shuffled."""
    out: list[KnowledgeChunk] = []
    for c in store.chunks:
        what = draw(st.sampled_from(["keep", "keep", "keep", "change", "drop"]))
        if what == "keep":
            out.append(c)
        elif what == "change":
            content = c.content + " " + draw(text)
            out.append(replace(c, content=content, embedding=hash_embed(content)))
    for k in range(draw(st.integers(0, 3))):
        rid = draw(st.sampled_from([*RECORD_IDS, f"new-{k}"]))
        content = draw(text)
        base = (
            store.chunks[0]
            if store.chunks
            else make_store([(rid, "", "", None, None, [], [])]).chunks[0]
        )
        out.append(
            replace(
                base,
                chunk_id=f"{k:016x}",
                record_id=rid,
                content=content,
                title=draw(text),
                embedding=hash_embed(content),
            )
        )
    if out and draw(st.booleans()):
        out = draw(st.permutations(out))
    records = len({c.record_id for c in out})
    return KnowledgeStore(snapshot=SNAP, records=records, chunks=out)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), before=varied_stores())
def test_a_build_from_kept_rows_equals_a_build_from_scratch(
    data: st.DataObject, before: KnowledgeStore
) -> None:
    after = data.draw(edited(before))
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        _, previous = _build(write_store(root / "a", before))
        path = write_store(root / "b", after)
        want, rows_want = _build(path)
        got, rows_got = _build(path, previous)
        assert got == want
        assert _file_bytes(rows_got, root, "got") == _file_bytes(rows_want, root, "want")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    before=varied_stores(),
    batch=st.integers(1, 4),
    copy=st.integers(1, 5),
    reuse=st.booleans(),
)
def test_a_batched_streamed_build_equals_one_in_memory(
    data: st.DataObject, before: KnowledgeStore, batch: int, copy: int, reuse: bool
) -> None:
    """Batches of a few chunks, rows copied a few at a time: the same index and the same
    rows file as the build that gathers every record at once, in memory."""
    from cce_knowledge.retrieval import search_index_build as sib

    after = data.draw(edited(before))
    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as mp:
        root = Path(d)
        _, previous = _build(write_store(root / "a", before))
        path = write_store(root / "b", after)
        want, rows_want = _build(path)
        mp.setattr(sib, "BATCH_CHUNKS", batch)
        mp.setattr(sr, "COPY_ROWS", copy)
        got, kept, _ = _kept_build(path, previous if reuse else None)
        assert got == want
        assert kept == _file_bytes(rows_want, root, "want")


@pytest.mark.parametrize("batch", [1, 2, 3, 100])
def test_scattered_changes_in_batches_give_the_bytes_of_a_full_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    """Changed records between kept ones: fresh runs start inside a batch."""
    from cce_knowledge.retrieval import search_index_build as sib

    specs = [
        (f"r{i}", f"lock retry {i} backoff pool{i % 5}", f"title {i}", None, None, [], [])
        for i in range(40)
    ]
    _, previous = _build(write_store(tmp_path / "a", make_store(specs)))
    for i in (3, 5, 6, 9, 22, 39):
        specs[i] = (f"r{i}", f"changed {i} redis shard{i}", f"title {i}", None, None, [], [])
    specs.append(("r40", "a new record about queues", "new", None, None, [], []))
    del specs[17]
    path = write_store(tmp_path / "b", make_store(specs))
    want, rows_want = _build(path)
    monkeypatch.setattr(sib, "BATCH_CHUNKS", batch)
    monkeypatch.setattr(sr, "COPY_ROWS", 2)
    got, kept, _ = _kept_build(path, previous)
    assert got == want
    assert kept == _file_bytes(rows_want, tmp_path, "want")


def test_only_changed_records_are_analysed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cce_knowledge.retrieval import search_index_build as sib

    specs = [
        (f"r{i}", f"lock retry {i} backoff", f"title {i}", None, None, [], []) for i in range(40)
    ]
    first = make_store(specs)
    _, rows = _build(write_store(tmp_path / "a", first))
    specs[7] = ("r7", "a different body about redis pools", "title 7", None, None, [], [])
    second = make_store(specs)
    analysed: list[int] = []
    real = sib._gathered

    def counting(view: object, groups: dict[str, list[int]], **kw: object) -> object:
        analysed.append(len(groups))
        return real(view, groups, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(sib, "_gathered", counting)
    path = write_store(tmp_path / "b", second)
    got, _ = _build(path, rows)
    assert analysed == [1]
    monkeypatch.setattr(sib, "_gathered", real)
    want, _ = _build(path)
    assert got == want


def test_index_and_rows_files_follow_the_snapshot(tmp_path: Path) -> None:
    """build_search_index keeps the rows beside the index, reuses them, prunes old ones."""
    specs = [(f"r{i}", f"lock retry {i}", f"t {i}", None, None, [], []) for i in range(12)]
    write_store(tmp_path, make_store(specs))
    built = si.build_search_index(tmp_path)
    rows_file = sr.rows_path(built.path)
    assert rows_file.is_file()
    # A second build of another store (same snapshot name: the files are replaced).
    specs[3] = ("r3", "pool exhausted", "t 3", None, None, [], [])
    write_store(tmp_path, make_store(specs))
    again = si.build_search_index(tmp_path)
    fresh = si.build_search_index(tmp_path, reuse=False)
    assert again.path.read_bytes() == fresh.path.read_bytes()
    assert sorted(
        p.suffix for p in built.path.parent.iterdir() if p.suffix in (".idx", ".rows")
    ) == [
        ".idx",
        ".rows",
    ]


def test_a_damaged_rows_file_is_refused(tmp_path: Path) -> None:
    specs = [(f"r{i}", f"lock retry {i}", f"t {i}", None, None, [], []) for i in range(8)]
    _, rows = _build(write_store(tmp_path / "a", make_store(specs)))
    good = tmp_path / "good.rows"
    sr.write_rows(good, SNAP, si.INDEX_KEY, rows)
    raw = good.read_bytes()
    assert sr.read_rows(good, si.INDEX_KEY).records == 8
    bad = tmp_path / "bad.rows"
    for broken in (
        raw[:100],
        b"CCESRW01" + b"\xff" * 8,
        raw.replace(b'"format": 1', b'"format": 9'),
    ):
        bad.write_bytes(broken)
        with pytest.raises(sr.RowsError):
            sr.read_rows(bad, si.INDEX_KEY)
    with pytest.raises(sr.RowsError):
        sr.read_rows(good, "another-key")


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_corruption_is_refused_or_still_adds_up(data: st.DataObject) -> None:
    """Random byte flips: the reader refuses the file, or what it returns passes its
    checks, and a splice over it never reads out of bounds."""
    specs = [(f"r{i}", f"lock retry {i} pool", f"t {i}", None, None, [], []) for i in range(6)]
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        path = write_store(root / "a", make_store(specs))
        _, rows = _build(path)
        f = root / "x.rows"
        sr.write_rows(f, SNAP, si.INDEX_KEY, rows)
        raw = bytearray(f.read_bytes())
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] = data.draw(st.integers(0, 255))
        f.write_bytes(bytes(raw))
        try:
            prev = sr.read_rows(f, si.INDEX_KEY)
        except sr.RowsError:
            return
        _build(path, prev)  # no exception: every slice it takes is within its checks
        _kept_build(path, prev)  # nor when the kept file is streamed from it


def test_a_batch_left_by_a_killed_build_is_never_reused_and_is_pruned(tmp_path: Path) -> None:
    """A kill mid-build can leave a batch file beside the index: the next build neither
    takes it for an earlier build's rows nor keeps it."""
    specs = [(f"r{i}", f"lock retry {i}", f"t {i}", None, None, [], []) for i in range(10)]
    write_store(tmp_path, make_store(specs))
    built = si.build_search_index(tmp_path)
    rows_file = sr.rows_path(built.path)
    # A batch holding rows for only some records, under the name a build gives batches.
    _, partial = _build(write_store(tmp_path / "other", make_store(specs[:3])))
    stale = rows_file.with_name(f".batch-99999-0-{rows_file.name}")
    sr.write_rows(stale, SNAP, si.INDEX_KEY, partial)
    rows_file.unlink()  # no earlier build's rows: the batch must not stand in for them
    assert si.previous_rows(rows_file.parent) is None
    notes: list[str] = []
    again = si.build_search_index(tmp_path, on_note=notes.append)
    assert not stale.exists()
    assert notes == []
    got = again.path.read_bytes()
    assert got == si.build_search_index(tmp_path, reuse=False).path.read_bytes()


def test_a_batch_that_fails_to_write_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Disk full while a batch is written: the half-written file does not stay."""
    keeper = sr.RowsKeeper(tmp_path / f"{SNAP}-{si.INDEX_KEY}.rows", SNAP, si.INDEX_KEY)
    specs = [(f"r{i}", f"lock retry {i}", f"t {i}", None, None, [], []) for i in range(4)]
    _, rows = _build(write_store(tmp_path / "a", make_store(specs)))

    def full_disk(path: Path, *args: object, **kw: object) -> None:
        path.write_bytes(b"CCESRW01 half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sr, "write_rows", full_disk)
    with pytest.raises(OSError):
        keeper.batch(0, rows)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".batch-")]
