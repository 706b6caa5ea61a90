"""Feed → knowledge store (docs/spec/core.md §2, §3.2, §5.1).

Each record renders to a markdown document (`# {trim(title)}\\n\\n{body}`), which is
redacted as a whole, then chunked at its headings; every facet is redacted on its
own. `ingest_feed` returns the store model; `index_feed` renders the store bytes
directly and can spread records over worker processes, reassembling them in feed
order so the bytes never depend on the worker count.
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

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
    locate_feed_error,
    parse_feed,
    parse_feed_numbered,
    read_text_file,
)
from cce_knowledge.contract.record import KnowledgeRecord
from cce_knowledge.core import progress
from cce_knowledge.core.errors import CceError, ContractError
from cce_knowledge.core.fields import attrs_of
from cce_knowledge.core.jsonout import json_str
from cce_knowledge.core.rustcompat import io_error_text, rs_trim
from cce_knowledge.engine.embed import embed_sparse, hash_embed_bytes
from cce_knowledge.engine.markdown import MdChunk, chunk_markdown
from cce_knowledge.engine.policy_chunker import chunk_markdown_policy
from cce_knowledge.engine.record_cost import RecordBudget, RecordCostError
from cce_knowledge.engine.redaction.modes import DEFAULT_REDACTION, Redaction, redactor_for
from cce_knowledge.extract.feed import sanitize_record
from cce_knowledge.store.left_out import record_left_out
from cce_knowledge.store.snapshots import (
    KnowledgeChunk,
    KnowledgeStore,
    chunk_json,
    display_dir,
    embedding_json_sparse,
    read_current,
    save_store_bytes,
    writer_lock,
)

if TYPE_CHECKING:
    from cce_knowledge.store.snapshots import SearchBuild

DEFAULT_BUDGET = 400
#: What `index` does with a record past its cost bounds (engine/record_cost.py).
OnBadRecord = Literal["fail", "skip"]


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
    #: records left out past their cost bounds (`--on-bad-record skip`): (line, reason)
    refused: list[tuple[int, str]] = field(default_factory=list)


_LINE_PREFIX = re.compile(r"^line (\d+):")
_Result = tuple[str, int, int, bytes, tuple[tuple[int, str], ...]]


def _render_segment(
    args: tuple[bytes, int, int, Redaction, ChunkPolicy | None],
) -> _Result:
    """Parse and render one line-aligned slice of the feed.

    Returns `(status, records, chunks, payload, refused)`: status "ok" with the chunk
    objects joined by `,\n` as UTF-8, "utf8" for undecodable bytes, or "parse" with the
    error message (line numbers shifted to the whole feed) as payload. `refused` names
    the records past their cost bounds (engine/record_cost.py), left out of the payload:
    `(line, reason)`, the line in the whole feed.
    """
    seg, first_line, budget, redaction, policy = args
    try:
        text = seg.decode("utf-8")
    except UnicodeDecodeError:
        return "utf8", 0, 0, b"", ()
    try:
        records = parse_feed_numbered(text)
    except ContractError as e:
        msg = _LINE_PREFIX.sub(
            lambda m: f"line {int(m.group(1)) + first_line - 1}:", e.message, count=1
        )
        return "parse", 0, 0, msg.encode("utf-8"), ()
    texts: list[str] = []
    refused: list[tuple[int, str]] = []
    for line_no, rec in records:
        try:
            texts.extend(record_chunk_texts(rec, budget, _EMBED_TEXT_CACHE, redaction, policy))
        except RecordCostError as e:
            refused.append((line_no + first_line - 1, e.reason))
    ok = len(records) - len(refused)
    return "ok", ok, len(texts), ",\n".join(texts).encode("utf-8"), tuple(refused)


def _segments(raw: bytes, target: int) -> list[tuple[int, int, int]]:
    """Cut `raw` after newlines into pieces of about `target` bytes: (start, end, first line)."""
    out: list[tuple[int, int, int]] = []
    start, line, n = 0, 1, len(raw)
    while start < n:
        cut = raw.find(b"\n", min(start + target, n) - 1)
        end = n if cut < 0 else cut + 1
        out.append((start, end, line))
        line += raw.count(b"\n", start, end)
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


#: The feed, shared with forked workers through copy-on-write memory instead of
#: pickling every slice (set only while a pool is running).
_SHARED_RAW: bytes | None = None


def _render_shared(args: tuple[int, int, int, int, Redaction, ChunkPolicy | None]) -> _Result:
    start, end, first_line, budget, redaction, policy = args
    assert _SHARED_RAW is not None
    return _render_segment((_SHARED_RAW[start:end], first_line, budget, redaction, policy))


def iter_rendered(
    raw: bytes,
    budget: int,
    workers: int,
    redaction: Redaction = DEFAULT_REDACTION,
    policy: ChunkPolicy | None = None,
) -> Iterator[_Result]:
    """`_render_segment` results for line-aligned slices of `raw`, in feed order.

    With `workers > 1` the slices are rendered by worker processes; the iterator still
    yields them in order, so callers can stream the output and the bytes never depend
    on the worker count.
    """
    global _SHARED_RAW
    if workers <= 1 or len(raw) < _PARALLEL_MIN_BYTES:
        # Slices bound the transient text of one render to a few MB.
        segs = _segments(raw, _MAX_SEGMENT) or [(0, 0, 1)]
        for a, b, ln in segs:
            yield _render_segment((raw[a:b], ln, budget, redaction, policy))
        return
    target = max(_MIN_SEGMENT, min(_MAX_SEGMENT, len(raw) // (workers * 8)))
    segs = _segments(raw, target)
    fork = "fork" in mp.get_all_start_methods()
    try:
        if fork:
            _SHARED_RAW = raw
            with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as pool:
                yield from pool.map(
                    _render_shared,
                    [(a, b, ln, budget, redaction, policy) for a, b, ln in segs],
                )
        else:  # pragma: no cover - platforms without fork pickle each slice
            with ProcessPoolExecutor(workers) as pool:
                yield from pool.map(
                    _render_segment,
                    ((raw[a:b], ln, budget, redaction, policy) for a, b, ln in segs),
                )
    except BrokenProcessPool as e:
        raise CceError(f"an index worker process died: {e}") from e
    finally:
        _SHARED_RAW = None


class _Collector:
    """Folds rendered slices into counts and chunk bodies; keeps the first error."""

    def __init__(self, sink: Callable[[bytes], object]) -> None:
        self.sink = sink
        self.records = 0
        self.chunks = 0
        self.utf8 = False
        self.parse_error: str | None = None
        #: records left out past their cost bounds: (line, reason)
        self.refused: list[tuple[int, str]] = []

    def add(self, r: _Result) -> None:
        status, records, chunks, payload, refused = r
        self.refused.extend(refused)
        if status == "ok":
            if chunks and not self.utf8 and self.parse_error is None:
                if self.chunks:
                    self.sink(b",\n")
                self.sink(payload)
            self.records += records
            self.chunks += chunks
        elif status == "utf8":
            self.utf8 = True
        elif self.parse_error is None:
            self.parse_error = payload.decode("utf-8")

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
    col.check()  # the library's callers get the strict behaviour
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


def check_manifest(path: str, raw: bytes, records: int) -> LeftOut | None:
    """Read, parse and verify a `cce.feed-manifest/v1` sidecar against a parsed feed
    (§9); what it says the extractor left out by author (ours), if anything."""
    _, text = read_text_file(path, "feed manifest ")
    verify_manifest(parse_manifest(text), raw, records)
    return read_left_out(text)


# ---------------------------------------------------------------- the index step

#: The largest record (feed line, bytes) index takes by default. Parsing, redacting
#: and chunking one record of prose holds ~36x its size in memory (measured: a 20 MiB
#: record peaks at 770 MiB); tree-sitter's tree of a record that is all markup (a
#: heading or list item every 4 bytes) takes up to ~300x (1.2 MB: 288 MiB). What its
#: chunks may add is bounded by engine/record_cost.py. The reference has no limit; no
#: real issue or page comes near it.
MAX_RECORD_BYTES = 8 << 20


def check_record_sizes(raw: bytes, feed: str, limit: int | None) -> None:
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
    on_bad_record: OnBadRecord = "skip",
) -> IndexResult:
    """`cce knowledge index`: checks in the reference order, then one atomic save.

    `redaction` (default: `knowledge.redaction`, else extended) picks the redactor.

    A record (feed line) longer than `max_record_bytes` (default MAX_RECORD_BYTES) is
    refused up front, naming its line: indexing one costs ~36 bytes of memory per byte.

    `chunk_policy` (already loaded and checked, docs/chunk-policies.md) chunks the
    records its rules select; the others go through the reference chunker.

    A record past its cost bounds (engine/record_cost.py: chunks, breadcrumb bytes,
    output bytes) is left out and named in `IndexResult.refused` (`on_bad_record="skip"`,
    the default: one hostile issue must not stop an organisation's nightly corpus), or
    refused with its line and the reason (`"fail"`).

    Nothing is written before the save; the save writes the snapshot, then `current`,
    then prunes older snapshots, under the knowledge directory's writer lock.
    `after_save(snapshot)` runs under that lock too (the CLI builds the search index).
    """
    if not Path(feed).is_file():
        raise CceError(f"not a file: {feed}")
    if not settings.knowledge.enabled:
        raise CceError("knowledge is disabled (knowledge.enabled: false in .cce/config)")
    budget = settings.markdown.max_section_tokens
    if redaction is None:
        redaction = settings.knowledge.redaction
    try:
        raw = Path(feed).read_bytes()
    except OSError as e:
        raise CceError(f"could not read {feed}: {io_error_text(e)}") from e
    if budget == 0:
        budget = DEFAULT_BUDGET
    check_record_sizes(raw, feed, max_record_bytes)
    # Chunk bodies stream into an anonymous spool file as workers finish, so memory
    # holds the feed plus the slices in flight, never the whole store.
    with tempfile.TemporaryFile(prefix="cce-index-") as spool:
        col = _Collector(spool.write)
        # Lines are a cheap upper bound on the record count (blank lines are skipped).
        lines = raw.count(b"\n") + (0 if raw.endswith(b"\n") or not raw else 1)
        try:
            with progress.task("index", total=lines, unit="records") as bar:
                workers = jobs or default_workers()
                for r in iter_rendered(raw, budget, workers, redaction, chunk_policy):
                    col.add(r)
                    bar.advance(r[1])
                bar.set_total(col.records)
            col.check(feed, on_bad_record)
        except ContractError as e:
            if e.message == UTF8_ERROR:
                raise CceError(f"could not read {feed}: {UTF8_ERROR}") from e
            raise _located(e, raw, feed) from e
        except OSError as e:  # the spool itself could not be written
            raise CceError(f"could not write knowledge store: {io_error_text(e)}") from e
        left: LeftOut | None = None
        if manifest is not None:
            left = check_manifest(manifest, raw, col.records + len(col.refused))
        snapshot = snapshot_id(raw)
        del raw
        result = IndexResult(snapshot, col.records, col.chunks, refused=col.refused)

        def parts() -> Iterator[bytes]:
            yield _store_head(snapshot, col.records, col.chunks)
            if col.chunks:
                spool.seek(0)
                while block := spool.read(_SPOOL_BLOCK):
                    yield block
                yield _STORE_TAIL

        try:
            with writer_lock(root, "knowledge index"):
                try:
                    result.previous = read_current(root)
                except (OSError, UnicodeDecodeError):
                    result.previous = None
                save_store_bytes(root, snapshot, parts())
                record_left_out(root, snapshot, left)
                if after_save is not None:
                    # Under the same lock: no other writer moves `current` in between.
                    result.search = after_save(snapshot)
        except OSError as e:
            raise CceError(f"could not write knowledge store: {io_error_text(e)}") from e
    result.store_display = f"{display_dir(root)}/{result.snapshot}.json"
    return result


def _located(e: ContractError, raw: bytes, feed: str) -> ContractError:
    """The workers report the reference's `line N: …` text; the command names the file
    and the field too, as `validate` does."""
    m = _LINE_PREFIX.match(e.message)
    located = locate_feed_error(raw, int(m.group(1)), feed) if m else None
    return ContractError(located) if located else e


_SPOOL_BLOCK = 8 * 1024 * 1024
