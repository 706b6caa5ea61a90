"""The `.cck` artifact codec (conformance-sync.md §1).

A `.cck` is the manifest line plus one canonical-JSON line per chunk, every line
LF-terminated. Embeddings travel as base64 of little-endian f64s, so no float text
is ever parsed or printed here. The manifest checksum is the SHA-256 of the whole
stream with the checksum value blanked.

Verification re-serialises the *typed* values (as the reference does) rather than
hashing the received bytes, so we accept exactly the byte variants it accepts.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import multiprocessing as mp
import os
import struct
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from cce_knowledge.errors import SyncError
from cce_knowledge.jsonout import canonical, json_str
from cce_knowledge.store import KnowledgeChunk, KnowledgeStore, chunk_json

PHASE_A_REFUSAL = (
    "refusing to export a knowledge store without persisted embeddings (a Phase-A "
    "snapshot). Re-ingest the feed with this version: `cce knowledge index <feed>`."
)

_U64 = 2**64


class CckError(SyncError):
    """A `.cck` that cannot be parsed or does not verify."""


@dataclass(frozen=True, slots=True)
class CckManifest:
    checksum: str
    chunk_count: int
    contract: str
    corpus_id: str
    data_as_of: str | None
    records: int
    snapshot: str

    def as_dict(self, checksum: str | None = None) -> dict[str, Any]:
        return {
            "checksum": self.checksum if checksum is None else checksum,
            "chunk_count": self.chunk_count,
            "contract": self.contract,
            "corpus_id": self.corpus_id,
            "data_as_of": self.data_as_of,
            "records": self.records,
            "snapshot": self.snapshot,
        }


@dataclass(frozen=True, slots=True)
class CckArtifact:
    manifest: CckManifest
    store: KnowledgeStore
    data: bytes

    @property
    def checksum(self) -> str:
        return self.manifest.checksum


# ---------------------------------------------------------------- embeddings


def encode_embedding(values: list[float]) -> str:
    """Standard base64 (padded) of the little-endian f64 bytes."""
    return base64.b64encode(struct.pack(f"<{len(values)}d", *values)).decode("ascii")


def decode_embedding(text: str) -> list[float]:
    """Strict inverse of `encode_embedding` (canonical padding and trailing bits)."""
    raw = _embedding_bytes(text)
    return list(struct.unpack(f"<{len(raw) // 8}d", raw))


def _embedding_bytes(text: str) -> bytes:
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as e:
        raise CckError(f"bad embedding base64: {e}") from e
    # b64decode tolerates non-zero trailing bits; the reference's engine does not.
    if base64.b64encode(raw).decode("ascii") != text:
        raise CckError("bad embedding base64: non-canonical encoding")
    if len(raw) % 8:
        raise CckError(f"embedding byte length {len(raw)} is not a multiple of 8")
    return raw


# ---------------------------------------------------------------- export


def _chunk_obj(c: KnowledgeChunk, embedding: str) -> dict[str, Any]:
    return {
        "chunk_id": c.chunk_id,
        "content": c.content,
        "embedding": embedding,
        "end_line": c.end_line,
        "group": c.group,
        "kind": c.kind,
        "labels": c.labels,
        "links": c.links,
        "name": c.name,
        "record_id": c.record_id,
        "source": c.source,
        "start_line": c.start_line,
        "state": c.state,
        "state_reason": c.state_reason,
        "title": c.title,
        "token_count": c.token_count,
        "updated_at": c.updated_at,
        "url": c.url,
    }


def _body(chunk_lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in chunk_lines).encode("utf-8")


def _digest(manifest: CckManifest, body: bytes) -> str:
    h = hashlib.sha256((canonical(manifest.as_dict(checksum="")) + "\n").encode("utf-8"))
    h.update(body)
    return h.hexdigest()


def _seal(manifest: CckManifest, chunk_lines: list[str]) -> tuple[bytes, str]:
    """(final bytes, checksum): hash with the checksum blanked, then fill it in."""
    body = _body(chunk_lines)
    digest = _digest(manifest, body)
    head = (canonical(manifest.as_dict(checksum=digest)) + "\n").encode("utf-8")
    return head + body, digest


def export_cck(store: KnowledgeStore, corpus_id: str) -> CckArtifact:
    """Serialise a loaded store as the `.cck` for `corpus_id`."""
    if any(not c.embedding for c in store.chunks):
        raise SyncError(PHASE_A_REFUSAL)
    lines = [canonical(_chunk_obj(c, encode_embedding(c.embedding))) for c in store.chunks]
    m = CckManifest(
        checksum="",
        chunk_count=len(store.chunks),
        contract=store.schema,
        corpus_id=corpus_id,
        data_as_of=store.data_as_of(),
        records=store.records,
        snapshot=store.snapshot,
    )
    data, digest = _seal(m, lines)
    sealed = CckManifest(**{**m.as_dict(), "checksum": digest})
    return CckArtifact(manifest=sealed, store=store, data=data)


# ---------------------------------------------------------------- import


def _m_nullable(o: dict[str, Any], k: str) -> str | None:
    if k not in o or not (o[k] is None or isinstance(o[k], str)):
        raise CckError(f"manifest missing nullable string field `{k}`")
    return o[k]


def _m_str(o: dict[str, Any], k: str) -> str:
    v: Any = o.get(k)
    if not isinstance(v, str):
        raise CckError(f"manifest missing string field `{k}`")
    return v


def _is_u64(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < _U64


def _m_int(o: dict[str, Any], k: str) -> int:
    v: Any = o.get(k)
    if not _is_u64(v):
        raise CckError(f"manifest missing integer field `{k}`")
    return int(v)


def _c_str(o: dict[str, Any], k: str) -> str:
    v: Any = o.get(k)
    if not isinstance(v, str):
        raise CckError(f"chunk missing string field `{k}`")
    return v


def _c_int(o: dict[str, Any], k: str) -> int:
    v: Any = o.get(k)
    if not _is_u64(v):
        raise CckError(f"chunk missing integer field `{k}`")
    return int(v)


def _c_nullable(o: dict[str, Any], k: str) -> str | None:
    if k not in o or not (o[k] is None or isinstance(o[k], str)):
        raise CckError(f"chunk missing nullable string field `{k}`")
    return o[k]


def _c_array(o: dict[str, Any], k: str) -> list[str]:
    v: Any = o.get(k)
    if not isinstance(v, list):
        raise CckError(f"chunk missing array field `{k}`")
    return [s for s in v if isinstance(s, str)]


def _loads(piece: str, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(piece)
    except ValueError as e:
        raise CckError(f"bad {what} JSON: {e}") from e
    if not isinstance(obj, dict):
        raise CckError(f"bad {what} JSON: invalid type: expected a JSON object")
    return obj


def _parse_chunk(piece: str, unpack: bool = True) -> tuple[KnowledgeChunk, str]:
    """(typed chunk, canonical line). `unpack=False` validates but skips the floats."""
    o = _loads(piece, "chunk")
    emb_text = o.get("embedding")
    if not isinstance(emb_text, str):
        raise CckError("chunk missing string field `embedding`")
    raw = _embedding_bytes(emb_text)
    embedding = list(struct.unpack(f"<{len(raw) // 8}d", raw)) if unpack else []
    c = KnowledgeChunk(
        chunk_id=_c_str(o, "chunk_id"),
        record_id=_c_str(o, "record_id"),
        kind=_c_str(o, "kind"),
        name=_c_str(o, "name"),
        start_line=_c_int(o, "start_line"),
        end_line=_c_int(o, "end_line"),
        token_count=_c_int(o, "token_count"),
        content=_c_str(o, "content"),
        source=_c_str(o, "source"),
        url=_c_nullable(o, "url"),
        state=_c_nullable(o, "state"),
        state_reason=_c_nullable(o, "state_reason"),
        updated_at=_c_nullable(o, "updated_at"),
        group=_c_nullable(o, "group"),
        labels=_c_array(o, "labels"),
        title=_c_str(o, "title"),
        links=_c_array(o, "links"),
        embedding=embedding,
    )
    # The embedding text was checked canonical above, so it re-encodes to itself.
    return c, canonical(_chunk_obj(c, emb_text))


def _split(data: bytes) -> tuple[CckManifest, list[str]]:
    """Steps 1-4 of §1.8: decode, split, parse the manifest, check the line count."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CckError(f"artifact is not UTF-8: {e}") from e
    pieces = text.split("\n")
    if pieces and pieces[-1] == "":
        pieces.pop()
    if not pieces:
        raise CckError("artifact too short: need at least a manifest line")
    mo = _loads(pieces[0], "manifest")
    data_as_of = _m_nullable(mo, "data_as_of")
    contract = _m_str(mo, "contract")
    corpus_id = _m_str(mo, "corpus_id")
    snapshot = _m_str(mo, "snapshot")
    records = _m_int(mo, "records")
    chunk_count = _m_int(mo, "chunk_count")
    checksum = _m_str(mo, "checksum")
    if len(pieces) != chunk_count + 1:
        raise CckError(
            f"artifact line count {len(pieces)} does not match chunk_count {chunk_count} "
            f"(expected {chunk_count + 1})"
        )
    m = CckManifest(
        checksum=checksum,
        chunk_count=chunk_count,
        contract=contract,
        corpus_id=corpus_id,
        data_as_of=data_as_of,
        records=records,
        snapshot=snapshot,
    )
    return m, pieces


def _check(m: CckManifest, recomputed: str) -> None:
    if recomputed != m.checksum:
        raise CckError(f"checksum mismatch: manifest says {m.checksum}, recomputed {recomputed}")


def import_cck(data: bytes) -> CckArtifact:
    """Parse and verify a `.cck` (§1.8). Raises CckError with the reference's wording."""
    m, pieces = _split(data)
    chunks: list[KnowledgeChunk] = []
    lines: list[str] = []
    for piece in pieces[1:]:
        c, line = _parse_chunk(piece)
        chunks.append(c)
        lines.append(line)
    _check(m, _digest(m, _body(lines)))
    store = KnowledgeStore(snapshot=m.snapshot, records=m.records, chunks=chunks, schema=m.contract)
    return CckArtifact(manifest=m, store=store, data=data)


# ---------------------------------------------------------------- import straight to store bytes

#: Below this many chunks a worker pool costs more than it saves.
PARALLEL_MIN_CHUNKS = 4000
_WORK_PIECES: list[str] = []
_T = TypeVar("_T")


def _render_slice(bounds: tuple[int, int]) -> tuple[bytes, bytes]:
    """(canonical body bytes, store chunk texts joined by ",\\n") for a slice."""
    lo, hi = bounds
    canon: list[str] = []
    texts: list[str] = []
    for piece in _WORK_PIECES[lo:hi]:
        c, line = _parse_chunk(piece)
        canon.append(line)
        texts.append(chunk_json(c))
    return _body(canon), ",\n".join(texts).encode("utf-8")


def _workers(jobs: int | None) -> int:
    if jobs is not None:
        return max(1, jobs)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _run_slices(
    pieces: list[str], fn: Callable[[tuple[int, int]], _T], jobs: int | None
) -> list[_T]:
    """fn over contiguous slices of pieces[1:], in order; forked workers when it pays."""
    global _WORK_PIECES
    n = len(pieces) - 1
    workers = min(_workers(jobs), max(1, n // (PARALLEL_MIN_CHUNKS // 2)))
    _WORK_PIECES = pieces  # inherited by forked workers, never pickled
    try:
        if n < PARALLEL_MIN_CHUNKS or workers < 2 or "fork" not in mp.get_all_start_methods():
            return [fn((1, n + 1))]
        step = -(-n // (workers * 4))
        bounds = [(lo, min(lo + step, n + 1)) for lo in range(1, n + 1, step)]
        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("fork")) as pool:
            return list(pool.map(fn, bounds))
    finally:
        _WORK_PIECES = []


def _verify_parts(m: CckManifest, bodies: list[bytes]) -> None:
    h = hashlib.sha256((canonical(m.as_dict(checksum="")) + "\n").encode("utf-8"))
    for body in bodies:
        h.update(body)
    _check(m, h.hexdigest())


def import_to_store_bytes(data: bytes, jobs: int | None = None) -> tuple[CckManifest, bytes]:
    """Verify a `.cck` and render the native store bytes without building the model.

    Same checks, same first error, same bytes as `dumps(import_cck(data).store)`; large
    artifacts are parsed and rendered by forked workers over contiguous slices.
    """
    m, pieces = _split(data)
    parts = _run_slices(pieces, _render_slice, jobs)
    _verify_parts(m, [body for body, _ in parts])
    head = (
        "{\n"
        f'  "schema": {json_str(m.contract)},\n'
        f'  "snapshot": {json_str(m.snapshot)},\n'
        f'  "records": {m.records},\n'
    ).encode()
    segs = [seg for _, seg in parts if seg]
    if not segs:
        return m, head + b'  "chunks": []\n}\n'
    return m, head + b'  "chunks": [\n' + b",\n".join(segs) + b"\n  ]\n}\n"


def chunk_digest(content: str) -> bytes:
    """SHA-256 of a chunk's (u64 LE byte length, UTF-8 content): the guard's unit of change."""
    b = content.encode("utf-8")
    return hashlib.sha256(struct.pack("<Q", len(b)) + b).digest()


def _digest_slice(bounds: tuple[int, int]) -> tuple[bytes, list[tuple[str, bytes]]]:
    lo, hi = bounds
    canon: list[str] = []
    ids: list[tuple[str, bytes]] = []
    for piece in _WORK_PIECES[lo:hi]:
        c, line = _parse_chunk(piece, unpack=False)
        canon.append(line)
        ids.append((c.record_id, chunk_digest(c.content)))
    return _body(canon), ids


def import_chunk_digests(
    data: bytes, jobs: int | None = None
) -> tuple[CckManifest, list[tuple[str, bytes]]]:
    """Verify a `.cck`; return its manifest and (record_id, chunk digest) in store order.

    What the shrink guard needs, without materialising embeddings.
    """
    m, pieces = _split(data)
    parts = _run_slices(pieces, _digest_slice, jobs)
    _verify_parts(m, [body for body, _ in parts])
    return m, [x for _, ids in parts for x in ids]


def import_keyed(key: str, data: bytes) -> CckArtifact:
    """`import_cck` for an artifact fetched from the cache: errors name the key."""
    try:
        return import_cck(data)
    except CckError as e:
        raise CckError(f"{key}: {e.message}") from e


def import_keyed_chunk_digests(
    key: str, data: bytes, jobs: int | None = None
) -> tuple[CckManifest, list[tuple[str, bytes]]]:
    try:
        return import_chunk_digests(data, jobs)
    except CckError as e:
        raise CckError(f"{key}: {e.message}") from e


def import_keyed_to_store_bytes(
    key: str, data: bytes, jobs: int | None = None
) -> tuple[CckManifest, bytes]:
    try:
        return import_to_store_bytes(data, jobs)
    except CckError as e:
        raise CckError(f"{key}: {e.message}") from e
