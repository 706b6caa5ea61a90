"""The streamed search-index build (retrieval/search_index_build.py) against the in-memory one.

With documents inline the two must write the same bytes; with documents read from the
store (the default), every search must give the same hits. Stores are random: records
split over several chunks or scattered through the file, dropped states, empty and
non-reproducible embeddings.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cce_knowledge.retrieval import search_index as si
from cce_knowledge.store.snapshots import KnowledgeStore, dumps
from tests.helpers.corpora import SNAP, queries, varied_stores, write_store


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(store=varied_stores(), qs=st.lists(queries, min_size=1, max_size=4))
def test_streamed_build_equals_the_in_memory_build(
    tmp_path_factory: object, store: KnowledgeStore, qs: list[str]
) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        path = write_store(root, store)
        want = si.build_bytes(store, workers=1)
        inline = b"".join(si.index_parts(path, inline_docs=True, workers=1))
        assert inline == want  # same format: the very same bytes
        mapped = b"".join(si.index_parts(path, workers=1))
        ipath = si.index_path(root, SNAP)
        a = si.SearchIndex(ipath, want, lambda: store)
        b = si.SearchIndex(ipath, mapped, lambda: store)
        assert b.header["docs"] == "store" and "docs" not in b.header["sections"]
        for q in qs:
            for ranking in ("default", "reference"):
                for k in (1, 5, 30):
                    assert b.search(q, k, 0.0, ranking=ranking) == a.search(
                        q, k, 0.0, ranking=ranking
                    )
        for c in range(a.n_chunks):
            assert b.doc(c) == a.doc(c)


def test_parallel_streamed_build_gives_the_same_bytes(tmp_path: Path) -> None:
    from tests.helpers.corpora import make_store

    specs = [
        (f"r{i % 9}", f"lock retry {i} backoff pool", f"title {i % 4}", None, None, [], [])
        for i in range(60)
    ]
    store = make_store(specs)
    path = write_store(tmp_path, store)
    one = b"".join(si.index_parts(path, workers=1))
    two = b"".join(si.index_parts(path, workers=2))
    assert one == two


def test_store_docs_need_the_same_store_file(tmp_path: Path) -> None:
    from tests.helpers.corpora import make_store

    store = make_store([("r1", "retry with backoff", "Retries", None, None, [], [])])
    path = write_store(tmp_path, store)
    built = si.build_search_index(tmp_path)
    assert built.path == si.index_path(tmp_path, SNAP) and built.size > 0
    assert si.try_open(built.path, SNAP) is not None
    # A store file of another size (edited by hand) makes the index stale, never wrong.
    path.write_bytes(dumps(store) + b"\n")
    assert si.try_open(built.path, SNAP) is None
    assert si.status_for(tmp_path, SNAP) == "stale"


# ------------------------------------------- the reference ranking's own file


def _reference_store() -> KnowledgeStore:
    from tests.helpers.corpora import make_store

    return make_store(
        [
            (
                f"r{i % 7}",
                f"lock retry {i} backoff pool token",
                f"title {i % 3}",
                None,
                None,
                [],
                [],
            )
            for i in range(40)
        ]
    )


def _reference_hits(idx: si.SearchIndex) -> list[object]:
    return [idx.search(q, 10, 0.0, ranking="reference") for q in ("lock retry", "pool 7", "x")]


def test_index_builds_leave_the_reference_sections_to_their_first_use(tmp_path: Path) -> None:
    store = _reference_store()
    write_store(tmp_path, store)
    built = si.build_search_index(tmp_path)
    ref = si.reference_path(built.path)
    idx = si.try_open(built.path, SNAP)  # no store loader: the file must serve it all
    assert idx is not None and not idx.has("ref_meta") and not ref.exists()
    want = _reference_hits(si.SearchIndex(Path("mem"), si.build_bytes(store), lambda: store))
    assert _reference_hits(idx) == want  # built now, beside the index
    assert ref.is_file()
    stamp = ref.stat().st_mtime_ns, ref.stat().st_ino
    again = si.try_open(built.path, SNAP)
    assert again is not None and _reference_hits(again) == want
    assert (ref.stat().st_mtime_ns, ref.stat().st_ino) == stamp  # reused, not rebuilt
    # A new build of the index prunes it with the old files.
    si.build_search_index(tmp_path)
    assert not ref.exists()


def test_a_damaged_or_foreign_reference_file_is_rebuilt(tmp_path: Path) -> None:
    store = _reference_store()
    write_store(tmp_path, store)
    built = si.build_search_index(tmp_path)
    ref = si.reference_path(built.path)
    want = _reference_hits(si.SearchIndex(Path("mem"), si.build_bytes(store), lambda: store))
    for bad in (b"", b"CCESIX01" + b"\xff" * 40, built.path.read_bytes()):
        ref.write_bytes(bad)  # empty, garbage, and a file of the wrong kind
        idx = si.try_open(built.path, SNAP)
        assert idx is not None and _reference_hits(idx) == want
        assert si.IndexFile(ref, ref.read_bytes()).header.get("reference") is True


def test_an_unwritable_reference_path_still_serves_from_memory(tmp_path: Path) -> None:
    store = _reference_store()
    write_store(tmp_path, store)
    built = si.build_search_index(tmp_path)
    ref = si.reference_path(built.path)
    ref.mkdir()  # cannot be replaced by a file (this also holds for root)
    want = _reference_hits(si.SearchIndex(Path("mem"), si.build_bytes(store), lambda: store))
    idx = si.try_open(built.path, SNAP)
    assert idx is not None and _reference_hits(idx) == want
    assert ref.is_dir()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(store=varied_stores(), inline=st.booleans())
def test_default_sections_gathered_on_two_cores_give_the_same_bytes(
    store: KnowledgeStore, inline: bool
) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = write_store(Path(d), store)
        one = si.index_parts(path, workers=1, inline_docs=inline, with_reference=False)
        two = si.index_parts(path, workers=2, inline_docs=inline, with_reference=False)
        assert b"".join(two) == b"".join(one)
