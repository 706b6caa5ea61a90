"""Feed -> store (docs/spec/core.md §2, §3.2, §5.1, §5.2): goldens, facets, properties."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cce_knowledge.contract.record import KnowledgeRecord
from cce_knowledge.core.errors import ContractError
from cce_knowledge.engine.embed import hash_embed
from cce_knowledge.engine.markdown import chunk_markdown
from cce_knowledge.engine.redaction.reference import redact
from cce_knowledge.store.ingest import (
    UTF8_ERROR,
    _segments,
    index_feed,
    ingest_feed,
    render_document,
    snapshot_id,
)
from cce_knowledge.store.snapshots import dumps, loads
from tests.helpers.paths import TESTS

CURATED = (TESTS / "vectors" / "knowledge" / "curated.jsonl").read_bytes()
FEEDS = TESTS / "fixtures" / "feeds"
ASK_CORPUS = (TESTS / "vectors" / "ask" / "corpus.knowledge.jsonl").read_bytes()


def test_curated_golden() -> None:
    store = ingest_feed(CURATED)
    assert store.snapshot == "598e1b3891572bbb"
    assert [c.chunk_id for c in store.chunks] == ["5fb9ad2eca3c1ee6", "64a595c97b7c78af"]
    data = dumps(store)
    assert hashlib.sha256(data).hexdigest() == (
        "ab66052f618f84693cd229a1926dfb28d2570697d803fa9006281ee584a41110"
    )


def test_curated_facets() -> None:
    c0, c1 = ingest_feed(CURATED).chunks
    assert c0.record_id == "gh:acme/app#12"
    assert (c0.state, c0.state_reason, c0.updated_at) == (
        "closed",
        "completed",
        "2026-02-01T10:00:00Z",
    )
    assert c0.group == "Identity" and c0.labels == ["policy", "auth"]
    assert (
        c1.state == "open" and c1.state_reason is None and c1.updated_at is None and c1.url is None
    )
    assert "api_key = [REDACTED:SECRET]" in c1.content
    assert "s3cr3tvalue123" not in dumps(ingest_feed(CURATED)).decode()


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_fast_path_bytes_equal_model_bytes(workers: int) -> None:
    for raw in (CURATED, ASK_CORPUS, b"", (FEEDS / "crlf.jsonl").read_bytes()):
        res, data = index_feed(raw, 400, workers)
        assert data == dumps(ingest_feed(raw))
        assert res.snapshot == snapshot_id(raw)


def test_parallel_segments_are_order_preserving(tmp_path: Path) -> None:
    # Enough bytes to take the multi-process path with several segments.
    lines = [
        json.dumps(
            {
                "id": f"r{i}",
                "title": f"T {i}",
                "body": f"## S\n\n{'word ' * 200}{i}\n",
                "source": "s",
            }
        )
        for i in range(400)
    ]
    raw = ("\n".join(lines) + "\n").encode()
    assert len(raw) > 256 * 1024
    _, serial = index_feed(raw, 400, 1)
    _, parallel = index_feed(raw, 400, 2)
    assert serial == parallel


def test_parallel_error_line_numbers_are_global() -> None:
    lines = [
        json.dumps({"id": f"r{i}", "title": "t", "body": "b" * 2000, "source": "s"})
        for i in range(300)
    ]
    lines[250] = '{"id": "bad"'
    raw = ("\n".join(lines) + "\n").encode()
    for workers in (1, 2):
        with pytest.raises(ContractError, match=r"^line 251: invalid cce.knowledge/v1 record: "):
            index_feed(raw, 400, workers)


def test_utf8_error_beats_earlier_parse_error() -> None:
    raw = b'not json\n{"id":"x","title":"\xff","body":"b","source":"s"}\n'
    with pytest.raises(ContractError) as e:
        index_feed(raw, 400, 1)
    assert e.value.message == UTF8_ERROR


def test_segments_cut_after_newlines() -> None:
    raw = b"a\nbb\n\nccc\nd"
    segs = _segments(raw, 2)
    assert b"".join(raw[a:b] for a, b, _ in segs) == raw
    for a, b, line in segs:
        assert raw.count(b"\n", 0, a) + 1 == line
        assert b == len(raw) or raw[b - 1 : b] == b"\n"


def test_empty_feed_store_bytes() -> None:
    store = ingest_feed(b"")
    assert (store.records, store.chunks) == (0, [])
    assert hashlib.sha256(dumps(store)).hexdigest() == (
        "0311f7b25746f9c0a4a318a3622ad5df24b19bcca7583817b36cf93f45c4401d"
    )


def test_render_document() -> None:
    rec = KnowledgeRecord(id="x", title="  Login policy  ", body="## Why\n\nBecause.", source="s")
    assert render_document(rec) == "# Login policy\n\n## Why\n\nBecause."
    rec = KnowledgeRecord(id="x", title=" \u3000", body="b", source="s")
    assert render_document(rec) == "# \n\nb"


def test_facets_redacted_id_kept() -> None:
    raw = (FEEDS / "secrets.jsonl").read_bytes()
    store = ingest_feed(raw)
    c = store.chunks[0]
    assert c.record_id == "gh:acme/app#9 token=abcdefghijklmnop"  # never redacted at rest
    assert c.title == "Leaked password = [REDACTED:SECRET]"  # trimmed, then redacted
    assert c.url == "https://x.test/?token=[REDACTED:SECRET]"
    assert c.labels == ["secret: [REDACTED:SECRET]"]
    assert "s3cr3tvalue123" not in c.content and "hunter2secret" not in c.content
    # the chunk-id path is the raw id
    rec_doc = redact(
        "# Leaked password = hunter2secret\n\n## Setup\n\nexport api_key=s3cr3tvalue123\n"
    )
    want = chunk_markdown("gh:acme/app#9 token=abcdefghijklmnop", rec_doc, 400)
    assert [x.chunk_id for x in store.chunks] == [x.chunk_id for x in want]


def test_records_count_includes_chunkless_records() -> None:
    # A record always renders `# title`, so it has at least one chunk; a budget
    # change alters chunks but never the record count.
    store = ingest_feed((FEEDS / "blank_lines.jsonl").read_bytes())
    assert store.records == 1 and len(store.chunks) == 1


def test_embedding_is_hash_embed_of_content() -> None:
    for c in ingest_feed(ASK_CORPUS).chunks:
        assert c.embedding == hash_embed(c.content)


def test_budget_zero_means_default() -> None:
    assert dumps(ingest_feed(ASK_CORPUS, 0)) == dumps(ingest_feed(ASK_CORPUS, 400))


def test_store_round_trip() -> None:
    for raw in (CURATED, ASK_CORPUS, b""):
        data = dumps(ingest_feed(raw))
        assert dumps(loads(data)) == data
        assert loads(data) == loads(dumps(loads(data)))


_TEXT = st.text(alphabet=st.characters(codec="utf-8", blacklist_categories=("Cs",)), max_size=80)
_BODY = st.lists(
    st.one_of(
        st.sampled_from(["## A", "### B", "# C", "text", "", "```", "password = abcdefghij"]), _TEXT
    ),
    max_size=12,
).map("\n".join)
_REC = st.builds(
    lambda i, t, b: json.dumps({"id": i, "title": t, "body": b, "source": "s"}, ensure_ascii=False),
    _TEXT,
    _TEXT,
    _BODY,
)


@settings(max_examples=120, deadline=None)
@given(st.lists(_REC, max_size=6), st.sampled_from([1, 10, 400]))
def test_same_bytes_in_same_bytes_out(lines: list[str], budget: int) -> None:
    raw = ("\n".join(lines) + "\n").encode()
    a = dumps(ingest_feed(raw, budget))
    assert a == dumps(ingest_feed(raw, budget))
    assert index_feed(raw, budget, 1)[1] == a
    store = loads(a)
    assert store.records == len(lines)
    for c in store.chunks:
        assert redact(c.content) == c.content


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=300)
    | st.text(max_size=300).map(lambda s: s.encode("utf-8", "surrogatepass"))
)
def test_arbitrary_bytes_raise_only_typed_errors(raw: bytes) -> None:
    try:
        res, data = index_feed(raw, 400, 1)
    except ContractError as e:
        assert e.message == UTF8_ERROR or e.message.startswith("line ")
    else:
        assert data == dumps(ingest_feed(raw))
        assert res.snapshot == snapshot_id(raw)
