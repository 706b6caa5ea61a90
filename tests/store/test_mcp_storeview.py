"""The mapped store view agrees with a full parse of the store, byte for byte."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cce_knowledge.health.status import store_facts
from cce_knowledge.mcp.render import compact_body
from cce_knowledge.store import snapshots as S
from cce_knowledge.store.ingest import ingest_feed
from cce_knowledge.store.view import LoadedView, StoreView, open_view

text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=60
)
body = st.lists(
    st.one_of(text, st.sampled_from(["## Heading", "# Top", "", "```", 'para \\ " quote'])),
    min_size=1,
    max_size=12,
).map("\n".join)
record = st.fixed_dictionaries(
    {"id": text.filter(bool), "title": text, "body": body, "source": st.just("docs")},
    optional={
        "updated_at": st.one_of(st.none(), text),
        "state": st.one_of(st.none(), text),
        "url": st.one_of(st.none(), text),
    },
)


def build(records: list[dict[str, object]], root: Path) -> S.KnowledgeStore:
    raw = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    store = ingest_feed(raw)
    S.save(root, store)
    return store


def assert_same(view: StoreView, store: S.KnowledgeStore) -> None:
    assert (view.schema, view.snapshot, view.records) == (
        store.schema,
        store.snapshot,
        store.records,
    )
    assert view.chunk_count == len(store.chunks)
    assert view.chunk_ids == [c.chunk_id for c in store.chunks]
    assert view.record_ids == [c.record_id for c in store.chunks]
    assert view.data_as_of() == store.data_as_of()
    for i, c in enumerate(store.chunks):
        sec = view.section(i)
        assert (sec.chunk_id, sec.record_id, sec.kind, sec.content) == (
            c.chunk_id, c.record_id, c.kind, c.content
        )  # fmt: skip
        assert (sec.start_line, sec.end_line) == (c.start_line, c.end_line)
        assert view.index_of(c.chunk_id) == next(
            j for j, d in enumerate(store.chunks) if d.chunk_id == c.chunk_id
        )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(record, min_size=0, max_size=6))
def test_view_matches_a_full_parse(records: list[dict[str, object]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        store = build(records, root)
        view = StoreView(S.store_path(root, store.snapshot))
        assert not isinstance(view, LoadedView)
        assert_same(view, store)


def test_reformatted_store_falls_back_to_a_full_parse(tmp_path: Path) -> None:
    store = build([{"id": "a", "title": "T", "body": "## x\n\nhello", "source": "d"}], tmp_path)
    p = S.store_path(tmp_path, store.snapshot)
    p.write_text(json.dumps(json.loads(p.read_bytes())))  # same data, compact layout
    view = open_view(p)
    assert isinstance(view, LoadedView)
    assert_same(view, store)


def test_trailing_whitespace_is_still_a_store(tmp_path: Path) -> None:
    store = build([{"id": "a", "title": "T", "body": "x", "source": "d"}], tmp_path)
    p = S.store_path(tmp_path, store.snapshot)
    p.write_bytes(p.read_bytes() + b"\n \n")
    assert_same(StoreView(p), store)


@pytest.mark.parametrize("cut", [2, 10, 500])
def test_truncated_store_is_refused(tmp_path: Path, cut: int) -> None:
    store = build([{"id": "a", "title": "T", "body": "x " * 200, "source": "d"}], tmp_path)
    p = S.store_path(tmp_path, store.snapshot)
    p.write_bytes(p.read_bytes()[:-cut])
    with pytest.raises(ValueError):
        open_view(p)


def test_store_facts_match_the_store(tmp_path: Path) -> None:
    store = build(
        [
            {"id": "a", "title": "A", "body": "x", "source": "d", "updated_at": "2026-01-01"},
            {"id": "b", "title": "B", "body": "y", "source": "d", "updated_at": "2026-02-01"},
            {"id": "c", "title": "C", "body": "z", "source": "d"},
        ],
        tmp_path,
    )
    f = store_facts(tmp_path)
    assert (f.snapshot, f.records, f.chunks, f.data_as_of) == (
        store.snapshot, 3, len(store.chunks), "2026-02-01"
    )  # fmt: skip


@given(content=st.text(alphabet=" \t\na\u3000b\r", max_size=30))
def test_compact_body_rule(content: str) -> None:
    out = compact_body(content)
    from cce_knowledge.core.rustcompat import rs_is_blank, rs_lines, rs_trim_end

    lines = rs_lines(content)
    idx = [i for i, ln in enumerate(lines) if not rs_is_blank(ln)]
    if not idx:
        assert out == ""
        return
    first = rs_trim_end(lines[idx[0]])
    rest = len(lines) - idx[0] - 1
    assert out == (first if rest == 0 else f"{first}\n… (+{rest} lines)")
