"""Hypothesis strategies for small random knowledge stores (shared by retrieval tests)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from hypothesis import strategies as st

from cce_knowledge.engine.embed import hash_embed
from cce_knowledge.engine.tokenizer import estimate_tokens
from cce_knowledge.store.snapshots import KnowledgeChunk, KnowledgeStore, save

# A small vocabulary so documents and queries overlap; identifiers, digits, a
# non-ASCII word and words that are substrings of others exercise every rule.
WORDS = [
    "login",
    "logins",
    "locked",
    "lock",
    "account",
    "getUserName",
    "user_name",
    "aws_eks_cluster",
    "retry",
    "retries",
    "backoff",
    "Jitter",
    "pool",
    "db",
    "a",
    "the",
    "is",
    "café",
    "x1",
    "session",
    "redis",
    "migration",
    "spec",
    "function",
    "main.rs",
    "policy",
    "Policy",
]
RECORD_IDS = ["gh:o/r#1", "gh:o/r#2", "tests/t#3", "plan-4", "docs/x#5", "r6", "r7"]
DATES = [None, "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", "2026-1-9", ""]
REASONS = [None, None, None, "completed", "not_planned", "wontfix", "Not_Planned"]
LINKS = [
    [],
    [],
    ["https://x.test/o/r/pull/9"],
    ["https://x.test/MERGE_REQUESTS/1"],
    ["https://x.test/issues/2"],
]

text = st.lists(st.sampled_from(WORDS), min_size=0, max_size=12).map(" ".join)


@st.composite
def chunk_specs(
    draw: st.DrawFn,
) -> tuple[str, str, str, str | None, str | None, list[str], list[str]]:
    rid = draw(st.sampled_from(RECORD_IDS))
    content = draw(text)
    title = draw(text)
    return (
        rid,
        content,
        title,
        draw(st.sampled_from(DATES)),
        draw(st.sampled_from(REASONS)),
        draw(st.sampled_from(LINKS)),
        draw(st.lists(st.sampled_from(["auth", "policy", "ops"]), max_size=2)),
    )


def make_store(
    specs: list[tuple[str, str, str, str | None, str | None, list[str], list[str]]],
) -> KnowledgeStore:
    """Chunks grouped by record (as ingest emits them) with unique chunk ids."""
    chunks: list[KnowledgeChunk] = []
    by_rec: dict[str, list[int]] = {}
    for i, s in enumerate(specs):
        by_rec.setdefault(s[0], []).append(i)
    for rid, idxs in by_rec.items():
        first = specs[idxs[0]]
        for line, i in enumerate(idxs, start=1):
            _, content, _, _, _, _, _ = specs[i]
            cid = hashlib.sha256(f"{rid}:{i}".encode()).hexdigest()[:16]
            chunks.append(
                KnowledgeChunk(
                    chunk_id=cid,
                    record_id=rid,
                    kind="Section",
                    name="# " + first[2],
                    start_line=line,
                    end_line=line,
                    token_count=estimate_tokens(content),
                    content=content,
                    source="test",
                    url="https://x.test/" + rid,
                    state="closed",
                    state_reason=first[4],
                    updated_at=first[3],
                    labels=list(first[6]),
                    title=first[2],
                    links=list(first[5]),
                    embedding=hash_embed(content),
                )
            )
    return KnowledgeStore(snapshot="0123456789abcdef", records=len(by_rec), chunks=chunks)


stores = st.lists(chunk_specs(), min_size=0, max_size=24).map(make_store)
queries = st.one_of(
    text,
    st.lists(
        st.sampled_from([*WORDS, "where is", "find", "defined", "?", "!!!", "lib.rs", "  "]),
        max_size=6,
    ).map(" ".join),
)


SNAP = "0123456789abcdef"


@st.composite
def varied_stores(draw: st.DrawFn) -> KnowledgeStore:
    """`stores` with a record's chunks scattered and one embedding empty, nudged or short
    (snapshot SNAP)."""
    store = draw(stores)
    chunks = list(store.chunks)
    if chunks and draw(st.booleans()):
        chunks = draw(st.permutations(chunks))  # a record's chunks need not be adjacent
    if chunks and draw(st.booleans()):
        i = draw(st.integers(0, len(chunks) - 1))
        how = draw(st.sampled_from(["empty", "nudged", "short"]))
        c = chunks[i]
        if how == "empty":
            emb: list[float] = []
        elif how == "nudged":
            emb = [x + 1e-3 for x in c.embedding]
        else:
            emb = c.embedding[:7]
        chunks[i] = replace(c, embedding=emb)
    return KnowledgeStore(snapshot=SNAP, records=store.records, chunks=chunks)


def write_store(root: Path, store: KnowledgeStore) -> Path:
    """Save `store` under root (a SNAP store) and return its store file."""
    save(root, store)
    return root / ".cce" / "knowledge" / f"{SNAP}.json"
