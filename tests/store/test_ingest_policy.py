"""The index step with a chunk policy: a record no rule selects goes through the
reference chunker byte for byte; a selected one is cut by its policy on the same
redacted document; a policy that selects nothing gives the reference's exact store."""

from __future__ import annotations

import hashlib
import json

import pytest

from cce_knowledge.contract.chunk_policy import ChunkPolicy, load_chunk_policy, policy_problems
from cce_knowledge.core.rustcompat import RUST_WS_CHARS
from cce_knowledge.engine.policy_chunker import normalise, split_lines
from cce_knowledge.store import ingest
from cce_knowledge.store.ingest import (
    index_feed,
    ingest_feed,
    parse_records,
    record_chunks,
    render_document,
)
from cce_knowledge.store.snapshots import dumps, loads
from tests.helpers.paths import TESTS

CURATED = (TESTS / "vectors" / "knowledge" / "curated.jsonl").read_bytes()
ASK_CORPUS = (TESTS / "vectors" / "ask" / "corpus.knowledge.jsonl").read_bytes()
MIXED = (TESTS / "fixtures" / "feeds" / "policy_mixed.jsonl").read_bytes()
POLICIES = TESTS / "fixtures" / "chunk_policies"
CURATED_SHA = "ab66052f618f84693cd229a1926dfb28d2570697d803fa9006281ee584a41110"


def policy_of(doc: dict[str, object]) -> ChunkPolicy:
    problems, _, p = policy_problems(json.dumps(doc))
    assert not problems and p is not None, problems
    return p


@pytest.fixture(scope="module")
def nothing() -> ChunkPolicy:
    return load_chunk_policy(POLICIES / "selects-nothing.json")


@pytest.fixture(scope="module")
def discussions() -> ChunkPolicy:
    return load_chunk_policy(POLICIES / "discussions.json")


def test_policy_selecting_nothing_keeps_the_curated_golden(nothing: ChunkPolicy) -> None:
    _, data = index_feed(CURATED, policy=nothing)
    assert hashlib.sha256(data).hexdigest() == CURATED_SHA
    assert hashlib.sha256(dumps(ingest_feed(CURATED, policy=nothing))).hexdigest() == CURATED_SHA


@pytest.mark.parametrize("workers", [1, 2])
def test_policy_selecting_nothing_is_byte_identical(nothing: ChunkPolicy, workers: int) -> None:
    for raw in (ASK_CORPUS, MIXED):
        assert index_feed(raw, workers=workers, policy=nothing) == index_feed(raw, workers=workers)


def test_unselected_records_keep_reference_chunks(discussions: ChunkPolicy) -> None:
    records = parse_records(MIXED)
    for rec in records:
        ref = record_chunks(rec, 400)
        got = record_chunks(rec, 400, policy=discussions)
        if rec.source == "discussion":
            assert got != ref
            assert [c.kind for c in got][:2] == [rec.title, "Discussion Map"]
        else:
            assert got == ref


def test_policy_chunks_are_slices_of_the_redacted_document(discussions: ChunkPolicy) -> None:
    rec = parse_records(MIXED)[0]
    rec.body += "\n\n## Notes\n\nCall with api_key = s3cr3tvalue123 set.\n"
    chunks = record_chunks(rec, 400, policy=discussions)
    lines = split_lines(normalise(render_document(rec)))
    for c in chunks:
        joined = "\n".join(lines[c.start_line - 1 : c.end_line]).rstrip(RUST_WS_CHARS)
        if "api_key" in joined:
            # Redaction ran before chunking: the stored content is the redacted slice.
            assert "s3cr3tvalue123" not in c.content
            assert "api_key = [REDACTED:SECRET]" in c.content
        else:
            assert joined == c.content
    assert any("[REDACTED:SECRET]" in c.content for c in chunks)


def test_policy_store_is_deterministic_and_readable(
    discussions: ChunkPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    r1, data1 = index_feed(MIXED, policy=discussions)
    # Small feeds normally stay in-process: force the worker pool (the policy travels
    # to the workers with each slice).
    monkeypatch.setattr(ingest, "_PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(ingest, "_MIN_SEGMENT", 1)
    r2, data2 = index_feed(MIXED, workers=2, policy=discussions)
    assert data1 == data2 and r1.chunks == r2.chunks
    store = loads(data1)
    assert store.records == 3
    assert dumps(store) == data1
    assert dumps(ingest_feed(MIXED, policy=discussions)) == data1
    ids = [c.chunk_id for c in store.chunks]
    assert len(ids) == len(set(ids))
    assert not any("2026-03-02: opened" in c.content for c in store.chunks)


def test_first_matching_rule_wins_and_keys_combine() -> None:
    p = policy_of(
        {
            "schema": "cce.chunk-policy/v1",
            "rules": [
                {"match": {"source": "discussion", "label": "draft"}, "policy": {"max_lines": 5}},
                {"match": {"id": "docs/discussions/*.md"}, "policy": {"max_lines": 6}},
                {"match": {"group": "Identity"}, "policy": {"max_lines": 7}},
                {"match": {}, "policy": {"max_lines": 8}},
            ],
        }
    )
    pick = p.policy_for
    assert pick("discussion", None, ["draft"], "x").max_lines == 5  # type: ignore[union-attr]
    assert pick("discussion", None, ["final"], "docs/discussions/a.md").max_lines == 6  # type: ignore[union-attr]
    assert pick("discussion", None, [], "docs/Discussions/a.md").max_lines == 8  # type: ignore[union-attr]
    assert pick("issues", "Identity", [], "gh#1").max_lines == 7  # type: ignore[union-attr]
    only = policy_of(
        {"schema": "cce.chunk-policy/v1", "rules": [{"match": {"label": "x"}, "policy": {}}]}
    )
    assert only.policy_for("s", None, ["y"], "i") is None
