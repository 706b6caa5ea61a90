"""Feed → knowledge store (docs/spec/core.md §2, §3.2, §5.1).

Each record renders to a markdown document (`# {trim(title)}\\n\\n{body}`), which is
redacted as a whole, then chunked at its headings; every facet is redacted on its
own. `ingest_feed` returns the store model; `index_feed` renders the store bytes
directly and can spread records over worker processes, reassembling them in feed
order so the bytes never depend on the worker count.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import mmap
import multiprocessing as mp
import os
import re
import struct
import tempfile
from array import array
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, cast

from cce_knowledge import KNOWLEDGE_SCHEMA
from cce_knowledge.config.settings import Settings
from cce_knowledge.contract.chunk_policy import ChunkPolicy
from cce_knowledge.contract.manifest import (
    LeftOut,
    parse_manifest,
    read_left_out,
    verify_manifest,
)
from cce_knowledge.contract.ndjson import (
    FeedLineError,
    locate_feed_error,
    parse_feed,
    parse_line,
    read_text_file,
)
from cce_knowledge.contract.record import KnowledgeRecord
from cce_knowledge.core import progress
from cce_knowledge.core.errors import CceError, ContractError
from cce_knowledge.core.fields import attrs_of
from cce_knowledge.core.jsonout import json_str
from cce_knowledge.core.rustcompat import RUST_WS_CHARS, io_error_text, rs_trim
from cce_knowledge.engine.embed import embed_sparse, hash_embed_bytes
from cce_knowledge.engine.markdown import MdChunk, chunk_markdown
from cce_knowledge.engine.policy_chunker import chunk_markdown_policy
from cce_knowledge.engine.record_cost import RecordBudget, RecordCostError
from cce_knowledge.engine.redaction.modes import DEFAULT_REDACTION, Redaction, redactor_for
from cce_knowledge.extract.feed import sanitize_record
from cce_knowledge.store.chunkmap import (
    DIGEST_SIZE,
    MARK,
    MARK_SIZE,
    ROW,
    ChunkMap,
    fingerprint,
    line_digest,
    load_map,
    write_map,
)
from cce_knowledge.store.left_out import record_left_out
from cce_knowledge.store.snapshots import (
    KnowledgeChunk,
    KnowledgeStore,
    chunk_json,
    display_dir,
    embedding_json_sparse,
    knowledge_dir,
    read_current,
    save_store_bytes,
    writer_lock,
)

if TYPE_CHECKING:
    from cce_knowledge.store.snapshots import SearchBuild

DEFAULT_BUDGET = 400
#: What `index` does with a record past its cost bounds (engine/record_cost.py).
OnBadRecord = Literal["fail", "skip"]
#: A feed's bytes: read (tests, small tools) or mapped (`index`, `open_feed`).
Feed = bytes | mmap.mmap


def render_document(rec: KnowledgeRecord) -> str:
    """The markdown document of a record: `# {trim(title)}\\n\\n{body}` (body verbatim)."""
    return "# " + rs_trim(rec.title) + "\n\n" + rec.body


def snapshot_id(raw: bytes) -> str:
    """First 16 hex of sha256 over the raw feed bytes."""
    return hashlib.sha256(raw).hexdigest()[:16]


_FACET_CACHE: dict[tuple[Redaction, str], str] = {}
_FACET_CACHE_MAX = 200_000


def _redact_facet(v: str, mode: Redaction) -> str:
    """The facet redaction memoised for short values: labels, sources, states and
    links repeat."""
    r = _FACET_CACHE.get((mode, v))
    if r is None:
        r = redactor_for(mode)(v)
        if len(v) <= 512 and len(_FACET_CACHE) < _FACET_CACHE_MAX:
            _FACET_CACHE[(mode, v)] = r
    return r


def _opt(v: str | None, mode: Redaction) -> str | None:
    return None if v is None else _redact_facet(v, mode)


def _facets(rec: KnowledgeRecord, mode: Redaction) -> dict[str, Any]:
    """Every facet redacted on its own (title after trimming); the id stays raw."""
    return {
        "record_id": rec.id,
        "source": _redact_facet(rec.source, mode),
        "url": _opt(rec.url, mode),
        "state": _opt(rec.state, mode),
        "state_reason": _opt(rec.state_reason, mode),
        "updated_at": _opt(rec.updated_at, mode),
        "group": _opt(rec.group, mode),
        "labels": [_redact_facet(x, mode) for x in rec.labels],
        "title": _redact_facet(rs_trim(rec.title), mode),
        "links": [_redact_facet(x, mode) for x in rec.links],
    }


def _sections(
    rec: KnowledgeRecord, budget: int, mode: Redaction, policy: ChunkPolicy | None = None
) -> list[MdChunk]:
    """Render, redact, chunk: by the reference chunker, unless a chunk policy's rule
    selects the record (then by its policy, on the same redacted document)."""
    doc = redactor_for(mode)(render_document(rec))
    limits = RecordBudget.of_record(doc, rec)  # past them: RecordCostError (issue 34.3)
    if policy is not None:
        chosen = policy.policy_for(rec.source, rec.group, rec.labels, rec.id)
        if chosen is not None:
            return chunk_markdown_policy(rec.id, doc, chosen, limits)
    return chunk_markdown(rec.id, doc, budget, limits)


#: A stored chunk's fields its section gives; the others are its record's facets.
_SECTION_FIELDS = ("chunk_id", "kind", "name", "start_line", "end_line", "token_count", "content")


def _store_chunk(c: MdChunk, facets: dict[str, Any], embedding: list[float]) -> KnowledgeChunk:
    # The record's chunks share its facet lists: nothing mutates a stored chunk.
    return KnowledgeChunk(**attrs_of(c, _SECTION_FIELDS), **facets, embedding=embedding)


def without_hidden(rec: KnowledgeRecord, redaction: Redaction) -> KnowledgeRecord:
    """The record as `redaction` indexes it: `extended` first removes hidden text (HTML
    comments outside code, tag, bidi and zero-width characters; core/hidden_text.py),
    before the secret rules, so a secret split by a zero-width space is still found.
    `reference` keeps everything, as the reference engine does. A record without
    hidden text is returned as is: the store bytes are the reference's."""
    if redaction == "reference":
        return rec
    return sanitize_record(rec)[0]


def record_chunks(
    rec: KnowledgeRecord,
    budget: int,
    redaction: Redaction = DEFAULT_REDACTION,
    policy: ChunkPolicy | None = None,
) -> list[KnowledgeChunk]:
    """The store chunks of one record, in chunker order."""
    rec = without_hidden(rec, redaction)
    md = _sections(rec, budget, redaction, policy)
    if not md:
        return []
    facets = _facets(rec, redaction)
    return [_store_chunk(c, facets, hash_embed_bytes(c.raw)) for c in md]


def record_chunk_texts(
    rec: KnowledgeRecord,
    budget: int,
    cache: dict[bytes, str],
    redaction: Redaction = DEFAULT_REDACTION,
    policy: ChunkPolicy | None = None,
) -> list[str]:
    """`chunk_json` of each chunk of one record. `cache` maps section bytes to their
    embedding text: identical sections (templates, boilerplate) embed and format once."""
    rec = without_hidden(rec, redaction)
    md = _sections(rec, budget, redaction, policy)
    if not md:
        return []
    facets = _facets(rec, redaction)
    out: list[str] = []
    for c in md:
        emb = cache.get(c.raw)
        if emb is None:
            emb = embedding_json_sparse(embed_sparse(c.raw))
            if len(c.raw) <= _EMBED_CACHE_KEY_MAX and len(cache) < _EMBED_CACHE_MAX:
                cache[c.raw] = emb
        out.append(chunk_json(_store_chunk(c, facets, []), emb))
    return out


_EMBED_CACHE_MAX = 4096
_EMBED_CACHE_KEY_MAX = 8192  # bytes: bounds the cache at ~60 MB per process
#: Per-process (so per-worker) section bytes -> embedding text.
_EMBED_TEXT_CACHE: dict[bytes, str] = {}


def _decode_feed(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        # The reference reads the feed as UTF-8 text before parsing: a read error.
        raise ContractError(UTF8_ERROR) from e


def parse_records(raw: bytes) -> list[KnowledgeRecord]:
    """Parse feed bytes into records (raises ContractError naming the line)."""
    return parse_feed(_decode_feed(raw))


def ingest_records(
    records: Sequence[KnowledgeRecord],
    snapshot: str,
    budget: int = DEFAULT_BUDGET,
    redaction: Redaction = DEFAULT_REDACTION,
    policy: ChunkPolicy | None = None,
) -> KnowledgeStore:
    chunks: list[KnowledgeChunk] = []
    for rec in records:
        chunks.extend(record_chunks(rec, budget, redaction, policy))
    return KnowledgeStore(snapshot=snapshot, records=len(records), chunks=chunks)


def ingest_feed(
    raw: bytes,
    budget: int = DEFAULT_BUDGET,
    redaction: Redaction = DEFAULT_REDACTION,
    policy: ChunkPolicy | None = None,
) -> KnowledgeStore:
    """Parse and ingest a whole `cce.knowledge/v1` feed into a store model."""
    if budget == 0:
        budget = DEFAULT_BUDGET
    return ingest_records(parse_records(raw), snapshot_id(raw), budget, redaction, policy)


# ---------------------------------------------------------------- fast path


@dataclass(slots=True)
class IndexResult:
    snapshot: str
    records: int
    chunks: int
    store_display: str = ""
    #: the snapshot `current` named before this index (None: there was none)
    previous: str | None = None
    #: the derived search index built with the store
    search: SearchBuild | None = None
    #: records whose chunks were copied from the previous store (0: a full index)
    reused: int = 0
    #: records left out past their cost bounds (`--on-bad-record skip`): (line, reason)
    refused: list[tuple[int, str]] = field(default_factory=list)


_LINE_PREFIX = re.compile(r"^line (\d+):")


def _render_segment(
    args: tuple[bytes, int, int, Redaction, ChunkPolicy | None],
) -> _Result:
    """Parse and render one line-aligned slice of the feed.

    Returns `(status, records, chunks, payload, marks, refused)`: status "ok" with the chunk
    objects joined by `,\n` as UTF-8, "utf8" for undecodable bytes, or "parse" with the
    error message (line numbers counted in the whole feed) as payload. `marks` holds one
    `_MARK` row per record: the digest of its line, and the length and chunk count of
    its part of the payload (what a later index reuses, store/chunkmap.py). `refused`
    names the records past their cost bounds (engine/record_cost.py), left out of the
    payload: `(line, reason)`, the line in the whole feed.
    """
    seg, first_line, budget, redaction, policy = args
    try:
        text = seg.decode("utf-8")
    except UnicodeDecodeError:
        return "utf8", 0, 0, b"", b"", ()
    # `parse_feed`'s lines (`_feed_lines`), each beside its bytes: "\n" is one byte in
    # UTF-8, so the two splits line up.
    lines = text.split("\n")
    blines = seg.split(b"\n")
    if lines[-1] == "":
        lines.pop()
        blines.pop()
    bodies: list[bytes] = []
    marks = bytearray()
    records = chunks = 0
    refused: list[tuple[int, str]] = []
    for k, line in enumerate(lines):
        raw_line = blines[k]
        if line.endswith("\r"):
            line = line[:-1]
            raw_line = raw_line[:-1]
        if not line.strip(RUST_WS_CHARS):
            continue
        rec = parse_line(line, first_line + k)
        if isinstance(rec, FeedLineError):
            return "parse", 0, 0, rec.contract_message().encode("utf-8"), b"", ()
        try:
            texts = record_chunk_texts(rec, budget, _EMBED_TEXT_CACHE, redaction, policy)
        except RecordCostError as e:
            # Left out, with no chunk-map row: a later index renders (and names) it again.
            refused.append((first_line + k, e.reason))
            continue
        body = ",\n".join(texts).encode("utf-8")
        if texts:
            bodies.append(body)
        marks += line_digest(raw_line) + MARK.pack(len(body), len(texts))
        records += 1
        chunks += len(texts)
    return "ok", records, chunks, b",\n".join(bodies), bytes(marks), tuple(refused)


def _count_lines(raw: Feed, start: int = 0, end: int | None = None) -> int:
    """Newlines in raw[start:end], a block at a time (a mapping has no `count`)."""
    end = len(raw) if end is None else end
    n = 0
    for a in range(start, end, _SPOOL_BLOCK):
        n += raw[a : min(end, a + _SPOOL_BLOCK)].count(b"\n")
    return n


def _segments(raw: Feed, target: int) -> list[tuple[int, int, int]]:
    """Cut `raw` after newlines into pieces of about `target` bytes: (start, end, first line)."""
    out: list[tuple[int, int, int]] = []
    start, line, n = 0, 1, len(raw)
    while start < n:
        cut = raw.find(b"\n", min(start + target, n) - 1)
        end = n if cut < 0 else cut + 1
        out.append((start, end, line))
        line += _count_lines(raw, start, end)
        start = end
    return out


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def render_feed(
    raw: bytes,
    budget: int = DEFAULT_BUDGET,
    workers: int = 1,
    redaction: Redaction = DEFAULT_REDACTION,
    policy: ChunkPolicy | None = None,
) -> tuple[IndexResult, bytes]:
    """Parse, ingest and render a feed straight to store bytes (see `render_feed_parts`)."""
    result, parts = render_feed_parts(raw, budget, workers, redaction, policy)
    return result, b"".join(parts)


_Result = tuple[str, int, int, bytes, bytes, tuple[tuple[int, str], ...]]
#: The feed, shared with forked workers through the parent's (file-backed) mapping
#: instead of pickling every slice (set only while a pool is running).
_SHARED_RAW: Feed | None = None
#: Slices in flight per worker: bounds the rendered text waiting to be written.
_IN_FLIGHT = 3


def _render_shared(args: tuple[int, int, int, int, Redaction, ChunkPolicy | None]) -> _Result:
    start, end, first_line, budget, redaction, policy = args
    assert _SHARED_RAW is not None
    return _render_segment((_SHARED_RAW[start:end], first_line, budget, redaction, policy))


def iter_rendered(
    raw: Feed,
    budget: int,
    workers: int,
    redaction: Redaction = DEFAULT_REDACTION,
    policy: ChunkPolicy | None = None,
) -> Iterator[_Result]:
    """`_render_segment` results for line-aligned slices of `raw`, in feed order."""
    for _span, r in iter_rendered_spans(raw, budget, workers, redaction, policy):
        yield r


def iter_rendered_spans(
    raw: Feed,
    budget: int,
    workers: int,
    redaction: Redaction = DEFAULT_REDACTION,
    policy: ChunkPolicy | None = None,
) -> Iterator[tuple[tuple[int, int], _Result]]:
    """Each line-aligned slice of `raw` (start, end) with its `_render_segment` result,
    in feed order.

    With `workers > 1` the slices are rendered by worker processes; the iterator still
    yields them in order, so callers can stream the output and the bytes never depend
    on the worker count. At most `_IN_FLIGHT` slices per worker are submitted and not
    yet consumed, so the rendered text in memory does not grow with the feed.
    """
    global _SHARED_RAW
    if workers <= 1 or len(raw) < _PARALLEL_MIN_BYTES:
        # Slices bound the transient text of one render to a few MB.
        segs = _segments(raw, _MAX_SEGMENT) or [(0, 0, 1)]
        for a, b, ln in segs:
            yield (a, b), _render_segment((raw[a:b], ln, budget, redaction, policy))
        return
    target = max(_MIN_SEGMENT, min(_MAX_SEGMENT, len(raw) // (workers * 8)))
    segs = _segments(raw, target)
    fork = "fork" in mp.get_all_start_methods()
    try:
        if fork:
            _SHARED_RAW = raw
            with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as pool:
                yield from _ordered(
                    pool,
                    _render_shared,
                    [((a, b), (a, b, ln, budget, redaction, policy)) for a, b, ln in segs],
                    workers * _IN_FLIGHT,
                )
        else:  # pragma: no cover - platforms without fork pickle each slice
            with ProcessPoolExecutor(workers) as pool:
                yield from _ordered(
                    pool,
                    _render_segment,
                    [((a, b), (raw[a:b], ln, budget, redaction, policy)) for a, b, ln in segs],
                    workers * _IN_FLIGHT,
                )
    except BrokenProcessPool as e:
        raise CceError(f"an index worker process died: {e}") from e
    finally:
        _SHARED_RAW = None


def _ordered(
    pool: ProcessPoolExecutor,
    fn: Callable[[Any], _Result],
    jobs: Sequence[tuple[tuple[int, int], Any]],
    window: int,
) -> Iterator[tuple[tuple[int, int], _Result]]:
    """`pool.map(fn, args)` in order with at most `window` jobs submitted and not yet
    consumed (`Executor.map` submits every job at once and keeps every result until it
    is read)."""
    pending: deque[tuple[tuple[int, int], Future[_Result]]] = deque()
    todo = iter(jobs)
    try:
        for span, args in itertools.islice(todo, window):
            pending.append((span, pool.submit(fn, args)))
        while pending:
            span, fut = pending.popleft()
            r = fut.result()
            for nspan, nargs in itertools.islice(todo, 1):
                pending.append((nspan, pool.submit(fn, nargs)))
            yield span, r
    finally:
        for _, fut in pending:
            fut.cancel()


class _Collector:
    """Folds rendered slices into counts and chunk bodies; keeps the first error.

    With `marks`, also appends the chunk map's row of each record (store/chunkmap.py),
    its offset counted from the start of the store body."""

    def __init__(self, sink: Callable[[bytes], object], marks: bytearray | None = None) -> None:
        self.sink = sink
        self.records = 0
        self.chunks = 0
        self.utf8 = False
        self.parse_error: str | None = None
        self.marks = marks
        self.written = 0  # bytes of the store body so far
        #: records left out past their cost bounds: (line, reason)
        self.refused: list[tuple[int, str]] = []

    def add(self, r: _Result) -> None:
        status, records, chunks, payload, marks, refused = r
        self.refused.extend(refused)
        if status == "ok":
            if not self.utf8 and self.parse_error is None:
                at = self.written
                if chunks:
                    if self.chunks:
                        self.sink(b",\n")
                        at += 2
                    self.sink(payload)
                    self.written = at + len(payload)
                if self.marks is not None:
                    self._rows(at, marks)
            self.records += records
            self.chunks += chunks
        elif status == "utf8":
            self.utf8 = True
        elif self.parse_error is None:
            self.parse_error = payload.decode("utf-8")

    def _rows(self, at: int, marks: bytes) -> None:
        assert self.marks is not None
        first = True
        for k in range(0, len(marks), MARK_SIZE):
            n_bytes, n_chunks = MARK.unpack_from(marks, k + DIGEST_SIZE)
            if n_chunks and not first:
                at += 2  # the ",\n" between two records' chunks
            self.marks += marks[k : k + DIGEST_SIZE] + _ROW_TAIL.pack(at, n_bytes, n_chunks)
            if n_chunks:
                at += n_bytes
                first = False

    def check(self, feed: str = "", on_bad_record: OnBadRecord = "fail") -> None:
        # Invalid UTF-8 anywhere is a read error and beats the first malformed line.
        if self.utf8:
            raise ContractError(UTF8_ERROR)
        if self.parse_error is not None:
            raise ContractError(self.parse_error)
        if self.refused and on_bad_record == "fail":
            line, reason = self.refused[0]
            raise CceError(
                f"{feed or 'line '}{':' if feed else ''}{line}: the record is refused: {reason}"
                " (--on-bad-record skip leaves such records out with a warning)"
            )


_ROW_TAIL = struct.Struct("<QQI")


def _store_head(snapshot: str, records: int, chunks: int) -> bytes:
    head = (
        "{\n"
        f'  "schema": {json_str(KNOWLEDGE_SCHEMA)},\n'
        f'  "snapshot": {json_str(snapshot)},\n'
        f'  "records": {records},\n'
    )
    return (head + ('  "chunks": [\n' if chunks else '  "chunks": []\n}\n')).encode()


_STORE_TAIL = b"\n  ]\n}\n"


def render_feed_parts(
    raw: bytes,
    budget: int = DEFAULT_BUDGET,
    workers: int = 1,
    redaction: Redaction = DEFAULT_REDACTION,
    policy: ChunkPolicy | None = None,
) -> tuple[IndexResult, list[bytes]]:
    """Parse, ingest and render a feed to store-file parts (concatenate to get the file).

    Errors follow the reference's precedence: invalid UTF-8 anywhere (a read error)
    beats the first malformed line.
    """
    if budget == 0:
        budget = DEFAULT_BUDGET
    body: list[bytes] = []
    col = _Collector(body.append)
    for r in iter_rendered(raw, budget, workers, redaction, policy):
        col.add(r)
    col.check()
    snapshot = snapshot_id(raw)
    parts = [_store_head(snapshot, col.records, col.chunks), *body]
    if col.chunks:
        parts.append(_STORE_TAIL)
    return IndexResult(snapshot, col.records, col.chunks), parts


#: The store-bytes fast path under the name the tests and benches know it by.
index_feed = render_feed


_PARALLEL_MIN_BYTES = 256 * 1024
_MIN_SEGMENT = 64 * 1024
_MAX_SEGMENT = 4 * 1024 * 1024
UTF8_ERROR = "stream did not contain valid UTF-8"


# ---------------------------------------------------------------- feed manifest


def check_manifest(path: str, raw: Feed, records: int, sha256: str | None = None) -> LeftOut | None:
    """Read, parse and verify a `cce.feed-manifest/v1` sidecar against a parsed feed
    (§9); what it says the extractor left out by author (ours), if anything. `sha256`:
    the feed's digest when the caller has it already."""
    _, text = read_text_file(path, "feed manifest ")
    # A mapping reads as bytes do (`find`, slices, the buffer protocol).
    verify_manifest(parse_manifest(text), cast(bytes, raw), records, sha256)
    return read_left_out(text)


# ---------------------------------------------------------------- the index step

#: The largest record (feed line, bytes) index takes by default. Parsing, redacting
#: and chunking one record holds ~36x its size in memory (measured: a 20 MiB record
#: peaks at 770 MiB), so 8 MiB keeps a record's peak near 300 MiB. The reference has
#: no limit; no real issue or page comes near it.
MAX_RECORD_BYTES = 8 << 20


def check_record_sizes(raw: Feed, feed: str, limit: int | None) -> None:
    """Refuse the first line longer than `limit` bytes, naming it (`FILE:LINE`)."""
    limit = MAX_RECORD_BYTES if limit is None else limit
    if len(raw) <= limit:
        return
    start, line = 0, 1
    while start < len(raw):
        end = raw.find(b"\n", start)
        if end < 0:
            end = len(raw)
        if end - start > limit:
            raise CceError(
                f"{feed}:{line}: the record is {end - start} bytes; index takes records of up "
                f"to {limit} bytes (--max-record-bytes) — indexing one costs ~36x its size in "
                "memory; split the record or raise the limit"
            )
        start, line = end + 1, line + 1


@contextlib.contextmanager
def open_feed(feed: str) -> Iterator[Feed]:
    """The feed's bytes, mapped read-only: pages come from the file and the kernel can
    drop them, so memory does not follow the feed's size (an empty file is b"")."""
    try:
        with open(feed, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                yield b""
                return
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                with contextlib.suppress(AttributeError, OSError):
                    mm.madvise(mmap.MADV_SEQUENTIAL)
                yield mm
    except OSError as e:
        raise CceError(f"could not read {feed}: {io_error_text(e)}") from e


def index_to_root(
    feed: str,
    *,
    root: str = ".",
    manifest: str | None = None,
    jobs: int | None = None,
    settings: Settings,
    redaction: Redaction | None = None,
    max_record_bytes: int | None = None,
    after_save: Callable[[str], SearchBuild] | None = None,
    chunk_policy: ChunkPolicy | None = None,
    incremental: bool = True,
    on_note: Callable[[str], None] | None = None,
    on_bad_record: OnBadRecord = "skip",
) -> IndexResult:
    """`cce knowledge index`: checks in the reference order, then one atomic save.

    `redaction` (default: `knowledge.redaction`, else extended) picks the redactor.

    A record (feed line) longer than `max_record_bytes` (default MAX_RECORD_BYTES) is
    refused up front, naming its line: indexing one costs ~36 bytes of memory per byte.

    `chunk_policy` (already loaded and checked, docs/chunk-policies.md) chunks the
    records its rules select; the others go through the reference chunker.

    The feed is mapped, not read into memory, and hashed for the snapshot id as it is
    rendered. With `incremental` (the default), when the current store was indexed
    under the same settings, the chunks of every record whose line is unchanged are
    copied from it (store/chunkmap.py) and only the other lines are rendered: the same
    bytes as a full index. Otherwise `on_note` hears why the index is a full one (only
    when a store is there to reuse).

    A record past its cost bounds (engine/record_cost.py: chunks, breadcrumb bytes,
    output bytes) is left out and named in `IndexResult.refused` (`on_bad_record="skip"`,
    the default: one hostile issue must not stop an organisation's nightly corpus), or
    refused with its line and the reason (`"fail"`).

    Nothing is written before the save; the save writes the snapshot (and its chunk
    map), then `current`, then prunes older snapshots, under the knowledge directory's
    writer lock. `after_save(snapshot)` runs under that lock too (the CLI builds the
    search index).
    """
    if not Path(feed).is_file():
        raise CceError(f"not a file: {feed}")
    if not settings.knowledge.enabled:
        raise CceError("knowledge is disabled (knowledge.enabled: false in .cce/config)")
    budget = settings.markdown.max_section_tokens
    if redaction is None:
        redaction = settings.knowledge.redaction
    if budget == 0:
        budget = DEFAULT_BUDGET
    fp = fingerprint(budget, redaction, chunk_policy)
    with open_feed(feed) as raw:
        check_record_sizes(raw, feed, max_record_bytes)
        # Read before the lock, checked again under it: a moved `current` is a full build.
        prev = load_map(root, fp) if incremental else "--full"
        if isinstance(prev, str) and on_note is not None and _has_current(root):
            on_note(f"full index: {prev}")
        plan: _Plan
        try:
            if isinstance(prev, ChunkMap):
                plan = _plan_incremental(raw, prev, budget, redaction, chunk_policy, root)
            else:
                plan = _plan_full(raw, budget, jobs, redaction, chunk_policy, root)
        except ContractError as e:
            if e.message == UTF8_ERROR:
                raise CceError(f"could not read {feed}: {UTF8_ERROR}") from e
            raise _located(e, raw, feed) from e
        except OSError as e:  # a spool could not be written
            raise CceError(f"could not write knowledge store: {io_error_text(e)}") from e
        with plan:
            _check_refused(plan.refused, feed, on_bad_record)
            left: LeftOut | None = None
            if manifest is not None:
                left = check_manifest(manifest, raw, plan.records + len(plan.refused), plan.sha256)
            snapshot = plan.sha256[:16]
            result = IndexResult(snapshot, plan.records, plan.chunks, refused=plan.refused)
            head = _store_head(snapshot, plan.records, plan.chunks)
            try:
                with writer_lock(root, "knowledge index"):
                    try:
                        result.previous = read_current(root)
                    except (OSError, UnicodeDecodeError):
                        result.previous = None
                    # Another writer may have moved `current` meanwhile: the copied
                    # spans are still right (a snapshot's bytes never change, and the
                    # plan reads them through the handle it opened), so this index
                    # writes the same bytes as a full one, and the last writer wins.

                    def with_map() -> None:
                        write_map(root, snapshot, fp, len(head), plan.records, bytes(plan.rows))

                    save_store_bytes(root, snapshot, plan.parts(head), before_current=with_map)
                    record_left_out(root, snapshot, left)
                    if after_save is not None:
                        # Under the same lock: no other writer moves `current` in between.
                        result.search = after_save(snapshot)
            except OSError as e:
                raise CceError(f"could not write knowledge store: {io_error_text(e)}") from e
    result.reused = plan.reused
    result.store_display = f"{display_dir(root)}/{result.snapshot}.json"
    return result


def _check_refused(refused: list[tuple[int, str]], feed: str, on_bad_record: OnBadRecord) -> None:
    """Under `--on-bad-record fail`, the first record past its cost bounds refuses the
    feed, with its line and the reason."""
    if refused and on_bad_record == "fail":
        line, reason = refused[0]
        raise CceError(
            f"{feed}:{line}: the record is refused: {reason}"
            " (--on-bad-record skip leaves such records out with a warning)"
        )


def _add_piece(
    pieces: list[list[Any]], body_at: int, src: BinaryIO, off: int, length: int, old: BinaryIO
) -> int:
    """Append one record's chunk objects (`length` bytes at `off` in `src`) to the body
    plan, after a ",\n" when the body has chunks already; a span that follows the last
    one in the previous store (its separator included) extends it: one copy for a run
    of unchanged records. Returns the body's new length."""
    if body_at:
        last = pieces[-1]
        if src is old and last[0] is old and last[1] + last[2] + 2 == off:
            last[2] += 2 + length
            return body_at + 2 + length
        pieces.append([None, 0, 2])
        body_at += 2
    pieces.append([src, off, length])
    return body_at + length


def _has_current(root: str) -> bool:
    return (knowledge_dir(root) / "current").exists()


class _Plan:
    """The store body of one index, ready to write: counts, the feed's sha256, the new
    chunk map's rows, and `parts(head)`, the store file's bytes in order. The spool is
    an unlinked temporary file (disk, not memory), closed on exit."""

    def __init__(self, root: str) -> None:
        # Beside the store when there is one (its filesystem has room for it); a failed
        # first index must not leave even an empty knowledge dir behind.
        d = knowledge_dir(root)
        self.spool = tempfile.TemporaryFile(prefix=".cce-index-", dir=d if d.is_dir() else None)
        self.records = 0
        self.chunks = 0
        self.sha256 = ""
        self.rows = bytearray()
        self.reused = 0
        #: records left out past their cost bounds: (line, reason)
        self.refused: list[tuple[int, str]] = []
        #: [file, offset, length] pieces of the body, in order (full: one spool piece;
        #: file None: the ",\n" between two records' chunks)
        self.pieces: list[list[Any]] = []
        self.extra: list[BinaryIO] = []

    def __enter__(self) -> _Plan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for f in (self.spool, *self.extra):
            with contextlib.suppress(OSError):
                f.close()

    def parts(self, head: bytes) -> Iterator[bytes]:
        yield head
        if not self.chunks:
            return
        for f, off, length in self.pieces:
            if f is None:
                yield b",\n"
                continue
            fd = f.fileno()
            end = off + length
            while off < end:
                block = os.pread(fd, min(_SPOOL_BLOCK, end - off), off)
                if not block:
                    raise OSError(
                        errno.EIO, "a spool or the previous store is shorter than expected"
                    )
                off += len(block)
                yield block
        yield _STORE_TAIL


def _plan_full(
    raw: Feed,
    budget: int,
    jobs: int | None,
    redaction: Redaction,
    policy: ChunkPolicy | None,
    root: str,
) -> _Plan:
    """Render every record; chunk bodies stream into the spool as workers finish, so
    memory holds the slices in flight, never the feed or the store."""
    plan = _Plan(root)
    try:
        col = _Collector(plan.spool.write, plan.rows)
        sha = hashlib.sha256()
        # Lines are a cheap upper bound on the record count (blank lines are skipped).
        lines = _count_lines(raw) + (0 if not raw or raw[-1:] == b"\n" else 1)
        with progress.task("index", total=lines, unit="records") as bar:
            workers = jobs or default_workers()
            for (a, b), r in iter_rendered_spans(raw, budget, workers, redaction, policy):
                sha.update(raw[a:b])
                col.add(r)
                bar.advance(r[1])
            bar.set_total(col.records)
        col.check(on_bad_record="skip")  # index_to_root decides on the refused ones
        plan.refused = col.refused
        plan.records, plan.chunks, plan.sha256 = col.records, col.chunks, sha.hexdigest()
        plan.pieces = [[plan.spool, 0, col.written]]
        plan.spool.flush()
    except BaseException:
        plan.close()
        raise
    return plan


def _plan_incremental(
    raw: Feed,
    prev: ChunkMap,
    budget: int,
    redaction: Redaction,
    policy: ChunkPolicy | None,
    root: str,
) -> _Plan:
    """Copy the chunks of every line the map knows from the previous store; render the
    others (in feed order, so errors come in the reference's precedence)."""
    # Lazy: numpy costs ~0.1-0.2 s; only an index needs it.
    import numpy as np

    plan = _Plan(root)
    try:
        old = open(prev.store, "rb")  # closed with the plan
        plan.extra.append(old)
        sha = hashlib.sha256()
        starts = array("q")
        ends = array("q")
        digests = bytearray()
        n = len(raw)
        pos = 0
        while pos < n:
            nl = raw.find(b"\n", pos)
            end = n if nl < 0 else nl
            line = raw[pos:end]
            stop = end - 1 if line.endswith(b"\r") else end
            starts.append(pos)
            # The render strips one `\r` itself, as a full index's does: handing it the
            # stripped line would strip a second one from a `\r\r` ending (and key the
            # new map row by other bytes than a full index's).
            ends.append(end)
            digests += line_digest(line[: stop - pos])
            pos = end + 1
        for a in range(0, n, _SPOOL_BLOCK):
            sha.update(raw[a : min(n, a + _SPOOL_BLOCK)])
        found = prev.lookup(bytes(digests))
        del digests
        rows = prev.rows
        col = _Collector(plan.spool.write)
        new: dict[int, tuple[int, int, int, bytes]] = {}
        for k in np.nonzero(found < 0)[0].tolist():
            a, b = starts[k], ends[k]
            spooled = col.written + (2 if col.chunks else 0)
            before = col.chunks
            r = _render_segment((raw[a:b] + b"\n", k + 1, budget, redaction, policy))
            col.add(r)
            if r[0] == "ok" and r[1]:
                new[k] = (spooled if col.chunks > before else col.written, len(r[3]), r[2], r[4])
        col.check(on_bad_record="skip")  # index_to_root decides on the refused ones
        plan.refused = col.refused
        records = col.records
        chunks = col.chunks
        reuse = found >= 0
        plan.reused = int(np.count_nonzero(reuse))
        records += plan.reused
        chunks += int(rows["n"][found[reuse]].sum()) if plan.reused else 0
        plan.spool.flush()
        body_at = 0
        for k in range(len(starts)):
            row = int(found[k])
            if row >= 0:
                dig, off, length, nch = ROW.unpack_from(prev.data, row * ROW.size)
                src: BinaryIO = old
                off += prev.body_start
            elif k in new:
                off, length, nch, marks = new[k]
                dig, src = marks[:DIGEST_SIZE], plan.spool
            else:
                continue  # a blank line
            at = body_at + (2 if nch and body_at else 0)
            if nch:
                body_at = _add_piece(plan.pieces, body_at, src, off, length, old)
            plan.rows += dig + _ROW_TAIL.pack(at, length, nch)
        plan.records, plan.chunks, plan.sha256 = records, chunks, sha.hexdigest()
    except BaseException:
        plan.close()
        raise
    return plan


def _located(e: ContractError, raw: Feed, feed: str) -> ContractError:
    """The workers report the reference's `line N: …` text; the command names the file
    and the field too, as `validate` does."""
    m = _LINE_PREFIX.match(e.message)
    located = locate_feed_error(cast(bytes, raw), int(m.group(1)), feed) if m else None
    return ContractError(located) if located else e


_SPOOL_BLOCK = 8 * 1024 * 1024
