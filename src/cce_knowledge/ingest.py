"""Feed → knowledge store (conformance-core.md §2, §3.2, §5.1).

Each record renders to a markdown document (`# {trim(title)}\\n\\n{body}`), which is
redacted as a whole, then chunked at its headings; every facet is redacted on its
own. `ingest_feed` returns the store model; `index_feed` renders the store bytes
directly and can spread records over worker processes, reassembling them in feed
order so the bytes never depend on the worker count.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from cce_knowledge import KNOWLEDGE_SCHEMA
from cce_knowledge.contract.ndjson import parse_feed
from cce_knowledge.contract.record import KnowledgeRecord
from cce_knowledge.engine.embed import hash_embed
from cce_knowledge.engine.markdown import chunk_markdown
from cce_knowledge.engine.redactor import redact
from cce_knowledge.errors import ContractError
from cce_knowledge.rustcompat import rs_trim
from cce_knowledge.store import KnowledgeChunk, KnowledgeStore, chunk_json, store_bytes_from_parts

DEFAULT_BUDGET = 400


def render_document(rec: KnowledgeRecord) -> str:
    """The markdown document of a record: `# {trim(title)}\\n\\n{body}` (body verbatim)."""
    return "# " + rs_trim(rec.title) + "\n\n" + rec.body


def snapshot_id(raw: bytes) -> str:
    """First 16 hex of sha256 over the raw feed bytes."""
    return hashlib.sha256(raw).hexdigest()[:16]


def _opt(v: str | None) -> str | None:
    return None if v is None else redact(v)


def record_chunks(rec: KnowledgeRecord, budget: int) -> list[KnowledgeChunk]:
    """The store chunks of one record, in chunker order."""
    doc = redact(render_document(rec))
    md = chunk_markdown(rec.id, doc, budget)
    if not md:
        return []
    source = redact(rec.source)
    url = _opt(rec.url)
    state = _opt(rec.state)
    state_reason = _opt(rec.state_reason)
    updated_at = _opt(rec.updated_at)
    group = _opt(rec.group)
    labels = [redact(x) for x in rec.labels]
    title = redact(rs_trim(rec.title))
    links = [redact(x) for x in rec.links]
    return [
        KnowledgeChunk(
            chunk_id=c.chunk_id,
            record_id=rec.id,
            kind=c.kind,
            name=c.name,
            start_line=c.start_line,
            end_line=c.end_line,
            token_count=c.token_count,
            content=c.content,
            source=source,
            url=url,
            state=state,
            state_reason=state_reason,
            updated_at=updated_at,
            group=group,
            labels=list(labels),
            title=title,
            links=list(links),
            embedding=hash_embed(c.content),
        )
        for c in md
    ]


def _decode_feed(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        # serde_json reads the file as UTF-8 text first; name the line of the bad byte.
        line = raw.count(b"\n", 0, e.start) + 1
        raise ContractError(
            f"line {line}: invalid cce.knowledge/v1 record: stream did not contain valid UTF-8"
        ) from e


def parse_records(raw: bytes) -> list[KnowledgeRecord]:
    """Parse feed bytes into records (raises ContractError naming the line)."""
    return parse_feed(_decode_feed(raw))


def ingest_records(records: Sequence[KnowledgeRecord], snapshot: str, budget: int = DEFAULT_BUDGET) -> KnowledgeStore:
    chunks: list[KnowledgeChunk] = []
    for rec in records:
        chunks.extend(record_chunks(rec, budget))
    return KnowledgeStore(snapshot=snapshot, records=len(records), chunks=chunks)


def ingest_feed(raw: bytes, budget: int = DEFAULT_BUDGET) -> KnowledgeStore:
    """Parse and ingest a whole `cce.knowledge/v1` feed into a store model."""
    if budget == 0:
        budget = DEFAULT_BUDGET
    return ingest_records(parse_records(raw), snapshot_id(raw), budget)


# ---------------------------------------------------------------- fast path


@dataclass(slots=True)
class IndexResult:
    snapshot: str
    records: int
    chunks: int


def _render_batch(args: tuple[list[KnowledgeRecord], int]) -> tuple[int, list[str]]:
    recs, budget = args
    texts: list[str] = []
    for rec in recs:
        texts.extend(chunk_json(c) for c in record_chunks(rec, budget))
    return len(texts), texts


def _batches(records: Sequence[KnowledgeRecord], size: int) -> Iterator[list[KnowledgeRecord]]:
    for i in range(0, len(records), size):
        yield list(records[i : i + size])


def default_workers() -> int:
    return max(1, min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8))


def render_store(
    records: Sequence[KnowledgeRecord], snapshot: str, budget: int = DEFAULT_BUDGET, workers: int = 1
) -> tuple[IndexResult, bytes]:
    """Store bytes for parsed records; `workers > 1` renders batches in parallel."""
    if budget == 0:
        budget = DEFAULT_BUDGET
    texts: list[str] = []
    if workers <= 1 or len(records) < 64:
        for rec in records:
            texts.extend(chunk_json(c) for c in record_chunks(rec, budget))
    else:
        size = max(16, min(512, len(records) // (workers * 8) or 1))
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for _, part in pool.map(_render_batch, ((b, budget) for b in _batches(records, size))):
                texts.extend(part)
    data = store_bytes_from_parts(KNOWLEDGE_SCHEMA, snapshot, len(records), texts)
    return IndexResult(snapshot, len(records), len(texts)), data


def index_feed(raw: bytes, budget: int = DEFAULT_BUDGET, workers: int = 1) -> tuple[IndexResult, bytes]:
    """Parse, ingest and render a feed straight to store bytes."""
    return render_store(parse_records(raw), snapshot_id(raw), budget, workers)
