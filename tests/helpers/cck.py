"""Shared builders and hypothesis strategies for the `.cck` tests (codec, fast paths,
native accelerator, outgoing export) and tools/fuzz_cckfast.py."""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterator

from hypothesis import strategies as st

import cce_knowledge.sync.cck as cck
from cce_knowledge.core.jsonout import canonical
from cce_knowledge.store.snapshots import KnowledgeChunk, KnowledgeStore


def chunk(**kw: object) -> KnowledgeChunk:
    base: dict[str, object] = dict(
        chunk_id="00112233aabbccdd", record_id="r:1", kind="T", name="# T", start_line=1,
        end_line=2, token_count=3, content="# T\nbody", source="s", embedding=[0.5, -0.25],
    )  # fmt: skip
    base.update(kw)
    return KnowledgeChunk(**base)  # type: ignore[arg-type]


plain_texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
plain_opt = st.none() | plain_texts
floats = st.floats(allow_nan=False, allow_infinity=False)


# Text with non-ASCII, C0 controls (short and \u00xx escapes), quotes and backslashes.
texts = st.text(
    st.characters(exclude_categories=["Cs"])
    | st.sampled_from(['"', "\\", "/", "\x00", "\x1f", "\x0b", "\x7f", "\u2028", "é", "\n"]),
    max_size=30,
)
opt = st.none() | texts
u64 = st.integers(0, 2**64 - 1)
# Any f64 bit pattern (NaN payloads, -0.0, subnormals, inf) or a hash-embedder-like value.
bit_floats = st.integers(0, 2**64 - 1).map(
    lambda b: struct.unpack("<d", b.to_bytes(8, "little"))[0]
)
embedder_like = st.builds(
    lambda c, s: c / math.sqrt(s), st.integers(-40, 40), st.integers(1, 10_000)
)
emb_values = st.lists(
    st.just(0.0) | st.just(-0.0) | embedder_like | bit_floats, min_size=0, max_size=24
)


@st.composite
def _stores(
    draw: st.DrawFn,
    text: st.SearchStrategy[str],
    opt: st.SearchStrategy[str | None],
    line: st.SearchStrategy[int],
    count: st.SearchStrategy[int],
    embedding: st.SearchStrategy[list[float]],
    max_chunks: int,
) -> KnowledgeStore:
    """A store of up to `max_chunks` chunks drawn field by field from the strategies."""
    chunks = [
        KnowledgeChunk(
            chunk_id=draw(text),
            record_id=draw(text),
            kind=draw(text),
            name=draw(text),
            start_line=draw(line),
            end_line=draw(u64),
            token_count=draw(count),
            content=draw(text),
            source=draw(text),
            url=draw(opt),
            state=draw(opt),
            state_reason=draw(opt),
            updated_at=draw(opt),
            group=draw(opt),
            labels=draw(st.lists(text, max_size=3)),
            title=draw(text),
            links=draw(st.lists(text, max_size=3)),
            embedding=draw(embedding),
        )
        for _ in range(draw(st.integers(0, max_chunks)))
    ]
    return KnowledgeStore(draw(text), draw(u64), chunks, draw(text))


@st.composite
def stores(draw: st.DrawFn, max_chunks: int = 5) -> KnowledgeStore:
    """Hostile-ish stores: any f64 bit pattern, empty embeddings, every escape."""
    return draw(_stores(texts, opt, u64, u64, emb_values, max_chunks))


@st.composite
def plain_stores(draw: st.DrawFn) -> KnowledgeStore:
    """Stores `export_cck` accepts: finite, non-empty embeddings."""
    return draw(
        _stores(
            plain_texts,
            plain_opt,
            st.integers(0, 2**63),
            st.integers(0, 10**6),
            st.lists(floats, min_size=1, max_size=8),
            4,
        )
    )


def raw_cck(store: KnowledgeStore) -> bytes:
    """A canonical `.cck` even for stores with empty embeddings (export refuses those)."""
    lines = [canonical(cck._chunk_obj(c, cck.encode_embedding(c.embedding))) for c in store.chunks]
    m = cck.CckManifest(
        "", len(lines), store.schema, "corpus", store.data_as_of(), store.records, store.snapshot
    )
    data, _ = cck._seal(m, lines)
    return data


def many(n: int, dim: int = 40) -> KnowledgeStore:
    def emb(i: int) -> list[float]:
        return [0.0 if (i * 7 + j) % 4 else (i + j) / math.sqrt(i + 3) for j in range(dim)]

    return KnowledgeStore(
        "00aa11bb22cc33dd",
        n,
        [
            KnowledgeChunk(
                chunk_id=f"{i:016x}",
                record_id=f"r:{i % 9}",
                kind="section",
                name=f"# é {i}",
                start_line=i,
                end_line=i + 2,
                token_count=i * 3,
                content=f'# é {i}\nbody "{i}"\t\\',
                source="s",
                labels=[f"l{i}"] * (i % 3),
                links=[],
                embedding=emb(i) if i % 11 else [],
            )
            for i in range(n)
        ],
    )


def mutations(line: bytes) -> list[bytes]:
    """Non-canonical spellings the reference still parses, and plain damage."""
    out = [
        line.replace(b'"kind":"', b'"kind": "', 1),  # whitespace
        line.replace(b'"source":"', b'"source":"\\/', 1),  # `\/` escape (changes the value)
        line.replace(b'"name":"#', b'"name":"\\u0023', 1),  # `\u0023` == "#": same value
        line.replace(b"\\u001f", b"\\u001F", 1),  # upper-case hex: same value
        line.replace(b'{"chunk_id"', b'{"zzz":1,"chunk_id"', 1),  # unknown field
        line.replace(b'"start_line":', b'"start_line":0', 1),  # leading zero (invalid JSON)
        line.replace(b'"token_count":', b'"token_count":-', 1),
        line.replace(b'"end_line":', b'"end_line":1e1,"x":', 1),
        line.replace(b'"labels":[', b'"labels":[1,', 1),  # non-string label (skipped)
        line.replace(b'"group":null', b'"group":7', 1),
        line.replace(b'","embedding":"', b'","embedding":"AB', 1),  # bad base64 length
        line.replace(b'=","end_line"', b'B","end_line"', 1),
        line.replace("\u00e9".encode(), b"\\u00e9", 1),  # escaped non-ASCII: same value
        line.replace(b'"url":null', b'"url":"\xff"', 1),  # not UTF-8
        line[:-1],  # truncated
        line + b" ",
    ]
    obj = json.loads(line)
    out.append(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode())  # key order
    out.append(json.dumps(obj, ensure_ascii=True, sort_keys=True, separators=(",", ":")).encode())
    return [m for m in out if m != line]


def mutated_artifacts(extra_content: str = "\x1f") -> Iterator[tuple[bytes, bytes]]:
    """(mutated line, whole artifact) for every `mutations` of three chunk lines."""
    store = many(6)
    store.chunks[2].content += extra_content
    lines = raw_cck(store).split(b"\n")
    for idx in (1, 3, 6):
        for mutated in mutations(lines[idx]):
            yield mutated, b"\n".join([*lines[:idx], mutated, *lines[idx + 1 :]])
