"""The `.cck` artifact codec (docs/spec/sync.md §1).

A `.cck` is the manifest line plus one canonical-JSON line per chunk, every line
LF-terminated. Embeddings travel as base64 of little-endian f64s, so no float text
is ever parsed or printed here. The manifest checksum is the SHA-256 of the whole
stream with the checksum value blanked.

Verification re-serialises the *typed* values (as the reference does) rather than
hashing the received bytes, so we accept exactly the byte variants it accepts.

Decoding has two paths (docs/design.md says which runs when): this module's strict
one, and the native accelerator (`accelerator.py`), which renders canonical artifacts
and hands anything unusual back here, so the strict code alone decides errors. Push's
store-file export (`fast_export_store_bytes`) likewise falls back to the model path.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import math
import mmap
import os
import re
import struct
import sys
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any, Literal, TypeVar

from cce_knowledge.core.errors import SyncError
from cce_knowledge.core.jsonout import canonical, json_str
from cce_knowledge.core.rustcompat import is_u64, serde_f64
from cce_knowledge.store.snapshots import (
    CHUNK_FIELD_KINDS,
    KnowledgeChunk,
    KnowledgeStore,
    chunk_json,
)

PHASE_A_REFUSAL = (
    "refusing to export a knowledge store without persisted embeddings (a Phase-A "
    "snapshot). Re-ingest the feed with this version: `cce knowledge index <feed>`."
)

_U64 = 2**64
#: An artifact's bytes as the fast paths read them: in memory, or a mapped file.
Artifact = bytes | mmap.mmap


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


def _digest(manifest: CckManifest, body: bytes | memoryview) -> str:
    """The checksum over (manifest with the checksum blanked, body); `body` may be a
    view of a mapped artifact (hashlib drops the GIL for it)."""
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


# Typed field readers; `owner` ("manifest" or "chunk") words the reference's error.


def _nullable(o: dict[str, Any], k: str, owner: str) -> str | None:
    if k not in o or not (o[k] is None or isinstance(o[k], str)):
        raise CckError(f"{owner} missing nullable string field `{k}`")
    return o[k]


def _str(o: dict[str, Any], k: str, owner: str) -> str:
    v: Any = o.get(k)
    if not isinstance(v, str):
        raise CckError(f"{owner} missing string field `{k}`")
    return v


def _int(o: dict[str, Any], k: str, owner: str) -> int:
    v: Any = o.get(k)
    if not is_u64(v):
        raise CckError(f"{owner} missing integer field `{k}`")
    return int(v)


def _array(o: dict[str, Any], k: str, owner: str) -> list[str]:
    v: Any = o.get(k)
    if not isinstance(v, list):
        raise CckError(f"{owner} missing array field `{k}`")
    return [s for s in v if isinstance(s, str)]


_FieldReader = Callable[[dict[str, Any], str, str], Any]

#: The manifest's fields in the order the reference checks them (the first bad one is named).
_MANIFEST_FIELDS: tuple[tuple[str, _FieldReader], ...] = (
    ("data_as_of", _nullable),
    ("contract", _str),
    ("corpus_id", _str),
    ("snapshot", _str),
    ("records", _int),
    ("chunk_count", _int),
    ("checksum", _str),
)

#: A chunk's fields (all but `embedding`), checked in store order as the reference does.
_CHUNK_FIELDS: tuple[tuple[str, _FieldReader], ...] = tuple(
    (k, {"str": _str, "int": _int, "nullable": _nullable, "strings": _array}[kind])
    for k, kind in CHUNK_FIELD_KINDS
)


def _typed(
    o: dict[str, Any], fields: tuple[tuple[str, _FieldReader], ...], owner: str
) -> dict[str, Any]:
    """`o`'s `fields`, each checked by its reader in order."""
    return {k: read(o, k, owner) for k, read in fields}


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
    c = KnowledgeChunk(**_typed(o, _CHUNK_FIELDS, "chunk"), embedding=embedding)
    # The embedding text was checked canonical above, so it re-encodes to itself.
    return c, canonical(_chunk_obj(c, emb_text))


def _manifest(mo: dict[str, Any]) -> CckManifest:
    """The typed manifest, fields checked in the reference's order."""
    return CckManifest(**_typed(mo, _MANIFEST_FIELDS, "manifest"))


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
    m = _manifest(_loads(pieces[0], "manifest"))
    chunk_count = m.chunk_count
    if len(pieces) != chunk_count + 1:
        raise CckError(
            f"artifact line count {len(pieces)} does not match chunk_count {chunk_count} "
            f"(expected {chunk_count + 1})"
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


def _fork_pool(workers: int) -> Any:
    """A forked worker pool (imported here: multiprocessing costs every CLI start ~12 ms)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("fork"))


def _can_fork() -> bool:
    import multiprocessing as mp  # lazy: see _fork_pool

    return "fork" in mp.get_all_start_methods()


def _workers(jobs: int | None) -> int:
    if jobs is not None:
        return max(1, jobs)
    try:
        cpus = max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = max(1, os.cpu_count() or 1)
    # Forked workers cost a fork plus the result transfer: on a clearly oversubscribed
    # machine (measured: 2 cores at load ~5) that costs more than it saves, while at
    # load ~2.3 two workers still won on the 100k artifact. The output bytes never
    # depend on the worker count.
    try:
        busy = os.getloadavg()[0] >= cpus + 1
    except OSError:  # pragma: no cover - no load average
        busy = False
    return 1 if busy else cpus


def _run_slices(
    pieces: list[str], fn: Callable[[tuple[int, int]], _T], jobs: int | None
) -> list[_T]:
    """fn over contiguous slices of pieces[1:], in order; forked workers when it pays."""
    global _WORK_PIECES
    n = len(pieces) - 1
    workers = min(_workers(jobs), max(1, n // (PARALLEL_MIN_CHUNKS // 2)))
    _WORK_PIECES = pieces  # inherited by forked workers, never pickled
    try:
        if n < PARALLEL_MIN_CHUNKS or workers < 2 or not _can_fork():
            return [fn((1, n + 1))]
        step = -(-n // (workers * 4))
        bounds = [(lo, min(lo + step, n + 1)) for lo in range(1, n + 1, step)]
        with _fork_pool(workers) as pool:
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
    artifacts are parsed and rendered by forked workers over contiguous slices. Pull
    uses the streamed form below, after the native accelerator when it is built."""
    m, pieces = _split(data)
    parts = _run_slices(pieces, _render_slice, jobs)
    _verify_parts(m, [body for body, _ in parts])
    head = _store_head(m)
    segs = [seg for _, seg in parts if seg]
    if not segs:
        return m, head + b'  "chunks": []\n}\n'
    return m, head + b'  "chunks": [\n' + b",\n".join(segs) + b"\n  ]\n}\n"


# ---------------------------------------------------------------- strict path, streamed
#
# `import_to_store_bytes` holds the decoded text, its lines and the rendered
# store at once (~15x a damaged 300 MB artifact). Pull uses this streamed form of the
# same procedure instead: a first pass checks UTF-8 and counts lines (the same first
# errors, in the same order), then each line is parsed, hashed and rendered in turn;
# the checksum is compared after the last line, before the install renames anything.

#: Store text handed to the writer per part.
_STREAM_PART = 8 << 20


def _utf8_error(e: UnicodeDecodeError, offset: int) -> str:
    """Python's UnicodeDecodeError text, with positions in the whole artifact."""
    start, end = e.start + offset, e.end + offset
    if e.end - e.start == 1:
        bad = e.object[e.start]
        return f"'utf-8' codec can't decode byte 0x{bad:02x} in position {start}: {e.reason}"
    return f"'utf-8' codec can't decode bytes in position {start}-{end - 1}: {e.reason}"


def _lines(data: Artifact) -> Iterator[tuple[int, int]]:
    """(start, end) of each piece of `data.split("\n")` minus a trailing empty one."""
    n, pos = len(data), 0
    while pos < n:
        end = data.find(b"\n", pos)
        if end < 0:
            yield pos, n
            return
        yield pos, end
        pos = end + 1


def strict_stream_store_parts(data: Artifact) -> tuple[CckManifest, Iterator[bytes]]:
    """`import_to_store_bytes` in bounded memory: (manifest, store parts).

    Same checks, same first error, same bytes. The iterator raises CckError on a bad
    chunk line or, after the last part, on a checksum mismatch."""
    count = 0
    first: tuple[int, int] | None = None
    for start, end in _lines(data):
        try:  # with its newline, so a sequence cut by the line end reads as in the whole
            bytes(data[start : end + 1]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise CckError(f"artifact is not UTF-8: {_utf8_error(e, start)}") from e
        first = first or (start, end)
        count += 1
    if first is None:
        raise CckError("artifact too short: need at least a manifest line")
    m = _manifest(_loads(bytes(data[first[0] : first[1]]).decode("utf-8"), "manifest"))
    if count != m.chunk_count + 1:
        raise CckError(
            f"artifact line count {count} does not match chunk_count {m.chunk_count} "
            f"(expected {m.chunk_count + 1})"
        )

    def parts() -> Iterator[bytes]:
        h = hashlib.sha256((canonical(m.as_dict(checksum="")) + "\n").encode("utf-8"))
        yield _store_head(m)
        if m.chunk_count == 0:
            _check(m, h.hexdigest())
            yield b'  "chunks": []\n}\n'
            return
        yield b'  "chunks": [\n'
        texts: list[str] = []
        size = 0
        lines = _lines(data)
        next(lines)  # the manifest
        for i, (start, end) in enumerate(lines):
            c, line = _parse_chunk(bytes(data[start:end]).decode("utf-8"))
            h.update((line + "\n").encode("utf-8"))
            texts.append(chunk_json(c))
            size += len(texts[-1])
            if size >= _STREAM_PART and i + 1 < m.chunk_count:
                yield (",\n".join(texts) + ",\n").encode("utf-8")
                texts, size = [], 0
        _check(m, h.hexdigest())
        yield (",\n".join(texts) + "\n  ]\n}\n").encode("utf-8")

    return m, parts()


# ---------------------------------------------------------------- canonical-token helpers
#
# Used by push's store-file export below and by the native accelerator's Python side.
# The store writer escapes strings exactly like the canonical writer (both serde_json
# rules, raw non-ASCII), so string tokens are copied between the two unchanged.

# A string token as serde_json writes it: raw UTF-8 except `"`, `\` and C0 controls;
# the five short escapes; lowercase `\u00xx` for the other controls.
_STR = rb'"(?:[^"\\\x00-\x1f]++|\\(?:["\\bfnrt]|u00(?:0[0-7bef]|1[0-9a-f])))*+"'
_NSTR = rb"(null|" + _STR + rb")"
_INT = rb"(0|[1-9][0-9]{0,19})"  # u64 range: 20-digit values are checked in Python
_STR_TOKEN = re.compile(_STR)


@functools.cache
def _compiled(pattern: bytes) -> re.Pattern[bytes]:
    # The two line patterns are large; compiling them at import would tax every
    # command (and pull's native path never needs them).
    return re.compile(pattern)


# Canonical base64 leaves the unused low bits of the last symbol zero.
_ITEM_SEP = b",\n        "
_BITS_TEXT_MAX = 1_000_000
_FAST_DATA: Artifact = b""


def _bits_text(k: int) -> bytes:
    x = struct.unpack("<d", struct.pack("<Q", k))[0]
    r = repr(x)
    # Both writers print the shortest round-trip digits; they differ only in when they
    # switch to exponent form (repr: e < -4 or e >= 16; serde: e < -5 or e > 15), so a
    # finite non-zero repr without an exponent is already serde's text.
    if "e" in r or "n" in r or x == 0.0:
        r = serde_f64(x)
    return r.encode("ascii")


#: Work per range: bounds the transient token copies a range holds (peak memory).
_RANGE_BYTES = 16 << 20


def _range_count(size: int, workers: int) -> int:
    return max(workers * 4 if workers > 1 else 1, -(-size // _RANGE_BYTES))


def _line_ranges(data: bytes, lo: int, hi: int, parts: int) -> list[tuple[int, int]]:
    """Split data[lo:hi] (whole LF-terminated lines) into about `parts` line-aligned ranges."""
    bounds: list[tuple[int, int]] = []
    step = max(1, (hi - lo) // parts)
    start = lo
    while start < hi:
        cut = data.find(b"\n", min(start + step, hi) - 1, hi)
        end = hi if cut < 0 else cut + 1
        bounds.append((start, end))
        start = end
    return bounds


def fast_head(data: Artifact) -> tuple[CckManifest, int] | None:
    """(manifest, offset of the first chunk line) for the fast paths; None leaves the
    artifact to the strict path (no LF, no final LF, a bad manifest, a big-endian host)."""
    if sys.byteorder != "little":
        return None
    nl = data.find(b"\n")
    if nl < 0 or data[len(data) - 1] != 10:
        return None
    try:
        return _manifest(_loads(bytes(data[:nl]).decode("utf-8"), "manifest")), nl + 1
    except (CckError, UnicodeDecodeError):
        return None


def _store_head(m: CckManifest) -> bytes:
    return (
        "{\n"
        f'  "schema": {json_str(m.contract)},\n'
        f'  "snapshot": {json_str(m.snapshot)},\n'
        f'  "records": {m.records},\n'
    ).encode()


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

    What the shrink guard needs, without materialising embeddings. (The caller tries
    the native accelerator first: `accelerator.chunk_digests`.)"""
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


# ---------------------------------------------------------------- fast path: store file -> .cck
#
# The reverse of the pull fast path, for push. A store file in the writer's exact layout
# (our writer's and the reference's) is cut into chunks by `_STORE_OBJ_PATTERN`; string tokens in
# canonical spelling are copied into the canonical line unchanged (same escaping rules),
# integers likewise, and only the embedding is converted (float text -> f64 -> base64).
# Anything else — another layout, a non-canonical string spelling, a number serde would
# not read as a finite f64 — returns None and the caller takes the model path, which
# owns every error message.

_PARR = rb"(\[\]|\[\n        " + _STR + rb"(?:,\n        " + _STR + rb")*+\n      \])"
_STORE_OBJ_PATTERN = (
    rb'    \{\n      "chunk_id": (' + _STR + rb'),\n      "record_id": (' + _STR
    + rb'),\n      "kind": (' + _STR + rb'),\n      "name": (' + _STR
    + rb'),\n      "start_line": ' + _INT + rb',\n      "end_line": ' + _INT
    + rb',\n      "token_count": ' + _INT + rb',\n      "content": (' + _STR
    + rb'),\n      "source": (' + _STR + rb'),\n      "url": ' + _NSTR
    + rb',\n      "state": ' + _NSTR + rb',\n      "state_reason": ' + _NSTR
    + rb',\n      "updated_at": ' + _NSTR + rb',\n      "group": ' + _NSTR
    + rb',\n      "labels": ' + _PARR + rb',\n      "title": (' + _STR
    + rb'),\n      "links": ' + _PARR
    + rb',\n      "embedding": (\[\]|\[\n        [-+.eE0-9]++(?:,\n        [-+.eE0-9]++)*+\n      \])'
    + rb"\n    \}"
)  # fmt: skip
_JSON_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_CCK_LINE = (
    b'{"chunk_id":%b,"content":%b,"embedding":"%b","end_line":%b,"group":%b,"kind":%b,'
    b'"labels":%b,"links":%b,"name":%b,"record_id":%b,"source":%b,"start_line":%b,'
    b'"state":%b,"state_reason":%b,"title":%b,"token_count":%b,"updated_at":%b,"url":%b}\n'
)
_STORE_OPEN = b'\n  "chunks": [\n'
_STORE_CLOSE = b"\n  ]\n}\n"
_STORE_EMPTY = b'\n  "chunks": []\n}\n'
#: store float text -> f64 (only finite values that `_JSON_NUMBER` admits)
_TEXT_F64: dict[bytes, float] = {}

#: one slice's (canonical lines, (record_id, digest) pairs, newest updated_at, phase-A)
ExportSlice = tuple[bytes, list[tuple[str, bytes]], str | None, bool]
#: The native export: (store bytes, ranges, jobs) -> slices, or None to use Python.
NativeSlices = Callable[[bytes, list[tuple[int, int]], int | None], list[ExportSlice] | None]
#: Bytes of store per natively exported range (push): larger than the pull's ranges,
#: each range returns Python lists.
EXPORT_RANGE_BYTES = 8 << 20


def _text_f64(tok: bytes) -> float | None:
    if _JSON_NUMBER.fullmatch(tok) is None:
        return None
    x = float(tok)
    return x if math.isfinite(x) else None


def _embedding_b64(text: bytes) -> bytes | None:
    """base64 of the LE f64s written in a store `embedding` array; None when unusual."""
    toks = text[10:-8].split(_ITEM_SEP)  # strip "[\n        " and "\n      ]"
    cache = _TEXT_F64
    try:
        vals = list(map(cache.__getitem__, toks))
    except KeyError:
        for t in set(toks).difference(cache):
            x = _text_f64(t)
            if x is None:
                return None
            if len(cache) < _BITS_TEXT_MAX:
                cache[t] = x
        vals = [cache[t] if t in cache else float(t) for t in toks]
    return binascii.b2a_base64(array("d", vals).tobytes(), newline=False)


def _token_str(tok: bytes) -> str:
    """The value of a (validated) JSON string token."""
    if b"\\" not in tok:
        return tok[1:-1].decode("utf-8")
    return str(scanstring(tok.decode("utf-8"), 1)[0])


def _u64_ok(*ints: bytes) -> bool:
    return all(len(i) < 20 or int(i) < _U64 for i in ints)


def _fast_export_range(bounds: tuple[int, int]) -> ExportSlice | None:
    """Canonical `.cck` lines for the chunk objects in _FAST_DATA[lo:hi]."""
    data = _FAST_DATA
    lo, hi = bounds
    match = _compiled(_STORE_OBJ_PATTERN).match
    lines: list[bytes] = []
    pairs: list[tuple[str, bytes]] = []
    newest: str | None = None
    phase_a = False
    pos = lo
    while pos < hi:
        mo = match(data, pos, hi)
        if mo is None:
            return None
        pos = mo.end()
        if pos < hi:
            if data[pos : pos + 2] != b",\n":
                return None
            pos += 2
        g = mo.groups()
        for t in g:  # UTF-8 validity, token by token: `_STR` admits any byte >= 0x20
            if not t.isascii():
                try:
                    t.decode("utf-8")
                except UnicodeDecodeError:
                    return None
        if g[17] == b"[]":
            phase_a = True  # refused after the whole layout is checked (errors first)
            continue
        if phase_a:
            continue
        emb = _embedding_b64(g[17])
        if emb is None or not _u64_ok(g[4], g[5], g[6]):
            return None
        labels = b"[" + b",".join(_STR_TOKEN.findall(g[14])) + b"]"
        links = b"[" + b",".join(_STR_TOKEN.findall(g[16])) + b"]"
        lines.append(
            _CCK_LINE
            % (
                g[0], g[7], emb, g[5], g[13], g[2], labels, links, g[3], g[1], g[8],
                g[4], g[10], g[11], g[15], g[6], g[12], g[9],
            )
        )  # fmt: skip
        pairs.append((_token_str(g[1]), chunk_digest(_token_str(g[7]))))
        if g[12] != b"null":
            u = _token_str(g[12])
            if newest is None or u > newest:
                newest = u
    return b"".join(lines), pairs, newest, phase_a


def _chunk_ranges(data: Artifact, lo: int, hi: int, parts: int) -> list[tuple[int, int]]:
    """Cut data[lo:hi] (chunk objects joined by ",\\n") into about `parts` ranges of whole
    objects. A raw newline never occurs inside a JSON string, so the separator is exact."""
    sep = b"\n    },\n    {\n"
    bounds: list[tuple[int, int]] = []
    step = max(1, (hi - lo) // parts)
    start = lo
    while start < hi:
        cut = data.find(sep, min(start + step, hi), hi)
        end = hi if cut < 0 else cut + len(b"\n    },\n")
        bounds.append((start, end))
        start = end
    return bounds


def fast_export_store_bytes(
    data: bytes,
    corpus_id: str,
    jobs: int | None = None,
    native_slices: NativeSlices | None = None,
) -> tuple[CckManifest, bytes, list[tuple[str, bytes]]] | Literal[True] | None:
    """The sealed `.cck` for a store file: (manifest, bytes, (record_id, digest) pairs).

    True means Phase-A (a chunk without embeddings); None means "use the model path".
    `native_slices` (the accelerator's `export_slices`, passed by the caller so this
    module stays below it) renders the ranges natively when it can.
    """
    layout = _store_layout(data)
    if layout is None:
        return None
    head, lo, hi = layout
    native = None
    if native_slices is not None:
        native_bounds = _chunk_ranges(data, lo, hi, max(2, -(-(hi - lo) // EXPORT_RANGE_BYTES)))
        native = native_slices(data, native_bounds, jobs)
    parts = list(native) if native is not None else _python_export_slices(data, lo, hi, jobs)
    if any(p is None for p in parts):
        return None
    done = [p for p in parts if p is not None]
    if any(p[3] for p in done):
        return True
    sealed, out = _seal_export(head, corpus_id, done)
    return sealed, out, [x for p in done for x in p[1]]


def _store_layout(data: Artifact) -> tuple[dict[str, Any], int, int] | None:
    """(head object, start, end of the chunk objects) when `data` is a store file in the
    writer's exact layout on a little-endian host; None otherwise."""
    if sys.byteorder != "little":
        return None
    at = data.find(_STORE_OPEN)
    if at < 0:
        at = data.find(_STORE_EMPTY)
        if at < 0 or at + len(_STORE_EMPTY) != len(data):
            return None
        lo = hi = at
    elif data[len(data) - len(_STORE_CLOSE) :] != _STORE_CLOSE:  # a map has no endswith
        return None
    else:
        lo, hi = at + len(_STORE_OPEN), len(data) - len(_STORE_CLOSE)
    try:
        head = json.loads(data[:at].rstrip(b",") + b"\n}")
    except ValueError:
        return None
    if (
        not isinstance(head, dict)
        or list(head) != ["schema", "snapshot", "records"]
        or not isinstance(head["schema"], str)
        or not isinstance(head["snapshot"], str)
        or not is_u64(head["records"])
        or not data[:at].endswith(b",")
    ):
        return None
    return head, lo, hi


def _python_export_slices(
    data: Artifact, lo: int, hi: int, jobs: int | None
) -> list[ExportSlice | None]:
    """`_fast_export_range` over data[lo:hi], in forked workers when the store is big."""
    global _FAST_DATA
    n_guess = _count(data, b"\n    },\n    {\n", lo, hi) + 1 if hi > lo else 0
    workers = min(_workers(jobs), max(1, n_guess // (PARALLEL_MIN_CHUNKS // 2)))
    use_pool = n_guess >= PARALLEL_MIN_CHUNKS and workers > 1 and _can_fork()
    bounds = _chunk_ranges(data, lo, hi, _range_count(hi - lo, workers if use_pool else 1))
    _FAST_DATA = data  # inherited by forked workers, never pickled
    try:
        if use_pool:
            with _fork_pool(workers) as pool:
                return list(pool.map(_fast_export_range, bounds))
        return [_fast_export_range(b) for b in bounds]
    finally:
        _FAST_DATA = b""


def _count(data: Artifact, sub: bytes, lo: int, hi: int) -> int:
    """`bytes.count` for a mapped file too (a map has none)."""
    n = 0
    at = data.find(sub, lo, hi)
    while at >= 0:
        n += 1
        at = data.find(sub, at + len(sub), hi)
    return n


#: Renders the chunk objects of a store's byte ranges on the native path, one slice at
#: a time (None for a range not in the writer's exact layout); None: no native module.
NativeIter = Callable[
    [Any, list[tuple[int, int]], "int | None"], "Iterator[ExportSlice | None] | None"
]


def export_store_spooled(
    data: Artifact,
    corpus_id: str,
    spool_dir: str | os.PathLike[str],
    jobs: int | None = None,
    native_iter: NativeIter | None = None,
) -> tuple[CckManifest, mmap.mmap, list[tuple[str, bytes]]] | Literal[True] | None:
    """`fast_export_store_bytes` written to an unlinked file in `spool_dir` instead of
    memory: each rendered range is written as it comes, so memory holds a few ranges
    and the (record_id, digest) pairs, never the artifact. Returns the artifact mapped
    from that file (file-backed: the kernel can drop its pages). Same bytes."""
    layout = _store_layout(data)
    if layout is None:
        return None
    head, lo, hi = layout
    if native_iter is not None:
        native_bounds = _chunk_ranges(data, lo, hi, max(2, -(-(hi - lo) // EXPORT_RANGE_BYTES)))
        slices = native_iter(data, native_bounds, jobs)
        if slices is not None:
            got = _spool_slices(head, corpus_id, spool_dir, slices)
            if got is not None:
                return got
            # An object out of the writer's layout: the Python path decides.
    return _spool_slices(head, corpus_id, spool_dir, _python_export_slices(data, lo, hi, jobs))


def _spool_slices(
    head: dict[str, Any],
    corpus_id: str,
    spool_dir: str | os.PathLike[str],
    slices: Iterator[ExportSlice | None] | list[ExportSlice | None],
) -> tuple[CckManifest, mmap.mmap, list[tuple[str, bytes]]] | Literal[True] | None:
    """Write the slices' bodies to a spool, then the sealed artifact (manifest line,
    bodies) to a second one, mapped. None/True as `fast_export_store_bytes`."""
    import shutil  # lazy: only a spooled export copies files
    import tempfile  # lazy: only a spooled export makes spools

    pairs: list[tuple[str, bytes]] = []
    newest: list[str] = []
    count = 0
    with tempfile.TemporaryFile(dir=spool_dir, prefix=".cck-body-") as body:
        for p in slices:
            if p is None:
                return None
            if p[3]:
                return True
            body.write(p[0])
            count += p[0].count(b"\n")
            pairs += p[1]
            if p[2] is not None:
                newest.append(p[2])
            del p
        body.flush()
        if body.tell():
            with mmap.mmap(body.fileno(), 0, access=mmap.ACCESS_READ) as mb:
                sealed = _sealed(head, corpus_id, count, newest, [mb])
        else:
            sealed = _sealed(head, corpus_id, count, newest, [])
        out = tempfile.TemporaryFile(dir=spool_dir, prefix=".cck-")
        try:
            out.write((canonical(sealed.as_dict()) + "\n").encode("utf-8"))
            body.seek(0)
            shutil.copyfileobj(body, out, 1 << 20)
            out.flush()
            mapped = mmap.mmap(out.fileno(), 0, access=mmap.ACCESS_READ)
        finally:
            out.close()  # the map keeps the unlinked file's pages
    return sealed, mapped, pairs


def _sealed(
    head: dict[str, Any], corpus_id: str, count: int, newest: list[str], bodies: list[Any]
) -> CckManifest:
    """The export's manifest, its checksum over the blanked manifest line and `bodies`
    (bytes, or a mapped spool) in order."""
    m = CckManifest(
        checksum="",
        chunk_count=count,
        contract=head["schema"],
        corpus_id=corpus_id,
        data_as_of=max(newest) if newest else None,
        records=head["records"],
        snapshot=head["snapshot"],
    )
    h = hashlib.sha256((canonical(m.as_dict(checksum="")) + "\n").encode("utf-8"))
    for b in bodies:
        h.update(b)
    return CckManifest(**{**m.as_dict(), "checksum": h.hexdigest()})


def _seal_export(
    head: dict[str, Any], corpus_id: str, done: list[ExportSlice]
) -> tuple[CckManifest, bytes]:
    """The manifest (checksum over its blanked self and the bodies) and the artifact."""
    bodies = [p[0] for p in done]
    newest = [p[2] for p in done if p[2] is not None]
    sealed = _sealed(head, corpus_id, sum(b.count(b"\n") for b in bodies), newest, bodies)
    return sealed, b"".join([(canonical(sealed.as_dict()) + "\n").encode("utf-8"), *bodies])
