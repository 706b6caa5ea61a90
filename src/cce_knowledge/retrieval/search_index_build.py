"""Build the derived search index by streaming the store file (`search_index.py` reads it).

Loading a store as Python objects costs ~40x its chunk text (256 Python floats per
embedding, a dict per object); at 100k records that was 4-5 GB. This builder walks
the mapped store one chunk object at a time (`StoreView.head`: the members before
the embedding, parsed; the embedding's text only compared) and keeps the numbers it
derives in flat integer arrays, turning them into sorted postings with numpy at the
end. Every value and every byte equals what `search_index.build_bytes` derives from
the loaded store (tests/retrieval/test_index_build.py checks this on random stores).

The default ranking's sections come from one pass over the live chunks in record
order, the reference ranking's from another in store order. On a big store with an
idle core the reference pass runs in a forked child at the same time. The default
pass's analysis and counting run in C when the optional `_analyzefast` module is built
(`_gather_native`); without it, a build without the reference pass (`index`, `pull`: the
reference sections are built on their first use) gives the child the second half of the
records' default pass instead. Every path writes the same bytes.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
import math
import os
import threading
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from itertools import pairwise, repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from cce_knowledge.core import progress
from cce_knowledge.core.errors import StoreError
from cce_knowledge.core.memory import release_freed_memory
from cce_knowledge.core.rustcompat import ascii_lower
from cce_knowledge.engine.embed import DIM, hash_embed, sparse_counts
from cce_knowledge.engine.tokenizer import tokenize_bytes
from cce_knowledge.retrieval.analyze import analyze
from cce_knowledge.retrieval.analyze_native import native_gatherer
from cce_knowledge.retrieval.default import (
    LEAD_TERMS,
    idf,
)
from cce_knowledge.retrieval.hits import DROPPED_REASONS
from cce_knowledge.retrieval.postings_build import (
    SCAN_ROWS,
    narrow,
    record_postings,
    section_postings,
)
from cce_knowledge.retrieval.reference import PER_RECORD_CAP, has_pr_link, path_penalised
from cce_knowledge.retrieval.search_rows import (
    DIGEST,
    Rows,
    RowsKeeper,
    Vocabulary,
    reuse_plan,
    splice,
)
from cce_knowledge.retrieval.search_rows import (
    plan_runs as _plan_runs,
)
from cce_knowledge.retrieval.section_spool import Section, SectionSpool
from cce_knowledge.store.snapshots import KnowledgeChunk, embedding_json_sparse

if TYPE_CHECKING:
    import numpy as np

    from cce_knowledge.store.snapshots import KnowledgeStore
    from cce_knowledge.store.view import StoreView


DOC_FIELDS = (
    "chunk_id",
    "record_id",
    "title",
    "kind",
    "name",
    "state",
    "updated_at",
    "url",
    "start_line",
    "end_line",
    "content",
)


def doc_fields(o: dict[str, Any]) -> list[Any]:
    """The fields a hit shows, in the index's document order."""
    return [o[k] for k in DOC_FIELDS]


#: Below this many live sections the reference sections are built in-process: a
#: fork + result transfer costs more than it saves on a small store.
PARALLEL_MIN_CHUNKS = 20_000
#: The same for index and pull (`eager`), whose cores are idle once the store is
#: written: the fork (~20-50 ms) pays from a few thousand sections (rfcs: 9,624).
EAGER_MIN_CHUNKS = 2_000


def _parallel_ok(n_chunks: int, workers: int | None, *, eager: bool = False) -> bool:
    """Use a forked child (for the reference pass, or else half of the default one)?
    Only on a big store, in a single-threaded process (fork with live threads is
    unsafe), with a second core — idle unless `eager` (index and pull, whose store
    step already used every core)."""
    if workers is not None:
        return workers > 1 and hasattr(os, "fork")
    least = EAGER_MIN_CHUNKS if eager else PARALLEL_MIN_CHUNKS
    if n_chunks < least or not hasattr(os, "fork") or threading.active_count() > 1:
        return False
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    if eager:
        return cpus > 1
    try:
        idle = cpus - os.getloadavg()[0] + 1  # +1: the load includes ourselves
    except OSError:  # pragma: no cover - no load average
        idle = cpus
    return cpus > 1 and idle >= 1.5


def _start_child(fn: Callable[[], dict[str, bytes]]) -> Callable[[], dict[str, bytes]]:
    """Run fn in a forked child now; the returned callable waits for its result."""
    # Lazy: multiprocessing costs ~15-45 ms; only a build that forks needs it.
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)

    def child() -> None:
        try:
            send.send((True, fn()))
        except BaseException as e:  # reported to the parent as an error
            send.send((False, f"{type(e).__name__}: {e}"))

    proc = ctx.Process(target=child, daemon=True)
    proc.start()
    send.close()

    def wait() -> dict[str, bytes]:
        try:
            ok, value = recv.recv()  # before join: the child blocks until its result is read
        except EOFError:
            ok, value = False, "worker exited without a result"
        finally:
            recv.close()
            proc.join()
        if not ok:
            raise StoreError(f"building the search index failed: {value}")
        return value

    return wait


def int_code(nbytes: int, count: int) -> str:
    """ "i" (int32) or "q" (int64): which one `count` entries in `nbytes` bytes are."""
    if count and nbytes == 8 * count:
        return "q"
    if nbytes != 4 * count:
        raise ValueError("section length does not match its entry count")
    return "i"


#: Chunks between two `release` calls of the mapped store (see StoreView.release).
_RELEASE_EVERY = 2048


class _Ids(dict[Any, int]):
    """term -> id in first-seen order (`map(ids.__getitem__, terms)` runs in C)."""

    def __missing__(self, term: Any) -> int:
        n = self[term] = len(self)
        return n

    def add(self, terms: Iterable[Any]) -> None:
        """Number the terms not seen yet, in order: one test per term and one C-level
        update, where a lookup that misses costs a Python call per new term."""
        new = dict.fromkeys([t for t in terms if t not in self])
        if new:
            n = len(self)
            self.update(zip(new, range(n, n + len(new)), strict=True))


def doc_json(o: dict[str, Any]) -> bytes:
    """One document of the inline `docs` section."""
    return json.dumps(doc_fields(o), ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class LoadedChunks:
    """A loaded store through the part of `StoreView` the builder reads (chunk i's
    "span" is (i, i + 1)), so in-memory stores build with the same code."""

    def __init__(self, store: KnowledgeStore) -> None:
        self.store = store
        self.snapshot = store.snapshot
        self.chunk_count = len(store.chunks)
        self.chunk_ids = [c.chunk_id for c in store.chunks]
        self.record_ids = [c.record_id for c in store.chunks]

    def span(self, i: int) -> tuple[int, int]:
        return i, i + 1

    def raw_chunk(self, i: int) -> dict[str, Any]:
        c = self.store.chunks[i]
        return {f: getattr(c, f) for f in _CHUNK_FIELDS}

    def head_at(self, start: int, end: int) -> tuple[dict[str, Any], bytes | None]:
        return self.raw_chunk(start), None

    def head(self, i: int) -> tuple[dict[str, Any], bytes | None]:
        return self.raw_chunk(i), None

    def state_reason(self, i: int) -> str | None:
        return self.store.chunks[i].state_reason

    def release(self) -> None:
        """Nothing is mapped."""

    def record_digest(self, idxs: list[int]) -> bytes:
        """`StoreView.record_digest` for loaded chunks (their members but the embedding)."""
        h = hashlib.blake2b(digest_size=DIGEST)
        for i in idxs:
            o = self.raw_chunk(i)
            o.pop("embedding", None)
            h.update(json.dumps(o, sort_keys=True).encode())
        return h.digest()


Chunks = Union["StoreView", LoadedChunks]


def _chunk_field_names() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(KnowledgeChunk))


_CHUNK_FIELDS = _chunk_field_names()


def live_groups(view: Chunks) -> tuple[list[int], dict[str, list[int]]]:
    """Live chunks (store indexes, store order) and their grouping by record, records in
    order of first appearance — the grouping `default.build_model` makes."""
    rids = view.record_ids
    live = [i for i in range(view.chunk_count) if view.state_reason(i) not in DROPPED_REASONS]
    groups: dict[str, list[int]] = {}
    for i in live:
        groups.setdefault(rids[i], []).append(i)
    view.release()  # the scan touched every page of the store
    return live, groups


def doc_numbers(live: list[int], groups: dict[str, list[int]]) -> list[int]:
    """Each live chunk's document number: documents go record by record (`groups`)."""
    order = [i for g in groups.values() for i in g]
    doc_of = {s: d for d, s in enumerate(order)}
    return [doc_of[i] for i in live]


def _sorted_terms(ids: _Ids) -> tuple[list[Any], np.ndarray]:
    """The vocabulary sorted, and each first-seen id's rank in it."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    # `_Ids` numbers terms 0, 1, 2, ... in insertion order, so the keys in order are
    # the terms by id: one sort of the ids by term gives both results (no lookups).
    keys = list(ids)
    order = sorted(range(len(keys)), key=keys.__getitem__)
    rank = np.empty(len(keys), dtype=np.int32)
    rank[np.array(order, dtype=np.int64)] = np.arange(len(keys), dtype=np.int32)
    return list(map(keys.__getitem__, order)), rank


def _column(code: str) -> Any:
    """A dataclass field holding a fresh, empty `array(code)`."""
    return dataclasses.field(default_factory=lambda: array(code))


@dataclasses.dataclass(slots=True)
class _RecordRows:
    """What the gathering pass keeps per record (records in group order)."""

    # One row per (record, term) of title ∪ body: the term's first-seen id and its tf in
    # title, body and lead; `n` counts each record's rows.
    tid: array[int] = _column("i")
    tf_title: array[int] = _column("i")
    tf_body: array[int] = _column("i")
    tf_lead: array[int] = _column("i")
    n: array[int] = _column("q")
    # Each record's distinct title terms.
    title_tid: array[int] = _column("i")
    title_n: array[int] = _column("q")
    # Field lengths in analysed terms.
    title_len: array[int] = _column("q")
    body_len: array[int] = _column("q")
    lead_len: array[int] = _column("q")
    # Record r's sections are documents chunk_ptr[r] .. chunk_ptr[r + 1].
    chunk_ptr: array[int] = dataclasses.field(default_factory=lambda: array("q", [0]))


@dataclasses.dataclass(slots=True)
class _SectionRows:
    """What the gathering pass keeps per section (= document, in document order)."""

    # Term rows (first-seen id, tf); `n` counts each section's rows (0 for the only
    # section of a record).
    tid: array[int] = _column("i")
    tf: array[int] = _column("i")
    n: array[int] = _column("q")
    length: array[int] = _column("q")
    # Inline documents (`docs`, `doc_off`) or the chunks' byte spans in the store.
    docs: bytearray = dataclasses.field(default_factory=bytearray)
    doc_off: array[int] = dataclasses.field(default_factory=lambda: array("q", [0]))
    spans: array[int] = _column("q")

    def drop_rows(self) -> None:
        """Let go of the term rows (the documents stay): `Rows` holds what is needed."""
        self.tid, self.tf, self.n, self.length = array("i"), array("i"), array("q"), array("q")


def _gather(
    view: Chunks,
    groups: dict[str, list[int]],
    *,
    inline_docs: bool,
    tick: Callable[[], None],
) -> tuple[_Ids, _RecordRows, _SectionRows]:
    """The one pass over the live chunks, record by record: every term's first-seen id,
    the per-record rows and the per-section rows (with the documents or their spans)."""
    ids = _Ids()
    recs = _RecordRows()
    secs = _SectionRows()
    for idxs in groups.values():
        body, body_len, lead, title = _gather_sections(
            view, idxs, ids, secs, inline_docs=inline_docs, tick=tick
        )
        _add_record(recs, ids, body, body_len, lead, title, len(idxs))
    return ids, recs, secs


def _each_section(
    view: Chunks,
    idxs: list[int],
    secs: _SectionRows,
    *,
    inline_docs: bool,
    tick: Callable[[], None],
) -> Iterator[dict[str, Any]]:
    """Each of one record's chunk objects (members before the embedding), its document
    or span appended to `secs` once the caller has used it."""
    for i in idxs:
        start, end = view.span(i)
        o, _ = view.head_at(start, end)
        yield o
        if inline_docs:
            secs.docs += doc_json(o)
            secs.doc_off.append(len(secs.docs))
            done = len(secs.doc_off) - 1
        else:
            secs.spans.append(start)
            secs.spans.append(end)
            done = len(secs.spans) // 2
        tick()
        if done % _RELEASE_EVERY == 0:
            view.release()


def _gather_sections(
    view: Chunks,
    idxs: list[int],
    ids: _Ids,
    secs: _SectionRows,
    *,
    inline_docs: bool,
    tick: Callable[[], None],
) -> tuple[dict[str, int] | None, int, list[str], str]:
    """Append one record's sections to `secs`; return the record's body term counts
    (None without sections), body length, lead terms and title."""
    get = ids.__getitem__
    rec_terms: list[str] = []
    title = ""
    # A one-section record's section scores come from its record postings (body
    # tf) at query time: only records with several sections get section postings.
    several = len(idxs) > 1
    # Batched appends: `array.extend` of an iterator converts item by item, while
    # `fromlist` sizes once (the ids and counts of one record at a time).
    tid: list[int] = []
    tf: list[int] = []
    for o in _each_section(view, idxs, secs, inline_docs=inline_docs, tick=tick):
        terms = analyze(o["content"])
        if several:
            cnt = Counter(terms)
            ids.add(cnt)
            tid += map(get, cnt)
            tf += cnt.values()
            secs.n.append(len(cnt))
        else:
            secs.n.append(0)
        secs.length.append(len(terms))
        rec_terms += terms
        title = o["title"]  # facets come from the record's last chunk
    secs.tid.fromlist(tid)
    secs.tf.fromlist(tf)
    # The record's body counts are the sum of its sections', in first-seen order:
    # exactly one count over the concatenated terms (in C, not a merge per section).
    body = Counter(rec_terms) if idxs else None
    return body, len(rec_terms), rec_terms[:LEAD_TERMS], title


def _gather_native(
    gatherer: Any,
    view: Chunks,
    groups: dict[str, list[int]],
    *,
    inline_docs: bool,
    tick: Callable[[], None],
) -> tuple[dict[str, bytes], _RecordRows, _SectionRows]:
    """`_gather` with the C analyser (`_analyzefast.Gatherer`): the same rows, and the
    vocabulary already sorted (`term_blob`, `term_off`, and `rank` by term id)."""
    recs = _RecordRows()
    secs = _SectionRows()
    for idxs in groups.values():
        several = len(idxs) > 1
        title = ""
        for o in _each_section(view, idxs, secs, inline_docs=inline_docs, tick=tick):
            gatherer.section(o["content"], several)
            title = o["title"]  # facets come from the record's last chunk
        gatherer.record(title)
        recs.chunk_ptr.append(recs.chunk_ptr[-1] + len(idxs))
    got: dict[str, bytes] = gatherer.finish()
    for f in _REC_ARRAYS:
        getattr(recs, f).frombytes(got.pop("r." + f))
    for f in _SEC_ARRAYS:
        if f != "spans":
            getattr(secs, f).frombytes(got.pop("s." + f))
    return got, recs, secs


#: The share of the records' text a split gathering keeps in this process (measured on
#: rfcs with 2 cores: the parent's numpy import and the join take ~10% of the pass).
PARENT_SHARE = 0.45

#: The arrays of `_RecordRows` and `_SectionRows` that hold term ids (remapped when
#: the halves of a split gathering are joined) and the ones of positions (shifted).
_REC_ARRAYS = (
    *("tid", "tf_title", "tf_body", "tf_lead", "n"),
    *("title_tid", "title_n", "title_len", "body_len", "lead_len"),
)
_SEC_ARRAYS = ("tid", "tf", "n", "length", "spans")


def _gather_split(
    view: Chunks,
    groups: dict[str, list[int]],
    *,
    inline_docs: bool,
    tick: Callable[[], None],
) -> tuple[_Ids, _RecordRows, _SectionRows]:
    """`_gather` on two cores: a forked child gathers the records after a cut while
    this process gathers the ones before it; the halves are joined into what one pass
    gives (term ids differ, but only the sorted vocabulary and each row's term reach
    the file, so the bytes are the same)."""
    items = list(groups.items())
    # Cut by text size (what analysis costs), this process taking the smaller share:
    # after its half it still imports numpy and joins the child's.
    sizes = [sum(b - a for a, b in map(view.span, g)) for _, g in items]
    goal = PARENT_SHARE * sum(sizes)
    cut, seen, acc = len(items), 0, 0
    for k, (_, g) in enumerate(items):
        if acc >= goal:
            cut = k
            break
        acc += sizes[k]
        seen += len(g)
    total = seen + sum(len(g) for _, g in items[cut:])
    second = dict(items[cut:])
    first = dict(items[:cut])
    del items, sizes

    def gather_second() -> dict[str, bytes]:
        ids, recs, secs = _gather(view, second, inline_docs=inline_docs, tick=_no_tick)
        out = {"terms": "\n".join(ids).encode("ascii"), "docs": bytes(secs.docs)}
        out.update({"r." + f: getattr(recs, f).tobytes() for f in (*_REC_ARRAYS, "chunk_ptr")})
        out.update({"s." + f: getattr(secs, f).tobytes() for f in (*_SEC_ARRAYS, "doc_off")})
        return out

    wait = _start_child(gather_second)
    ids, recs, secs = _gather(view, first, inline_docs=inline_docs, tick=tick)
    got = wait()
    _join(ids, recs, secs, got)
    for _ in range(total - seen):
        tick()
    return ids, recs, secs


def _join(ids: _Ids, recs: _RecordRows, secs: _SectionRows, got: dict[str, bytes]) -> None:
    """Append the child's half (`got`, as `_gather_split` sends it) to the first half."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    terms = got["terms"].decode("ascii").split("\n") if got["terms"] else []
    ids.add(terms)
    remap = np.array(list(map(ids.__getitem__, terms)), dtype=np.int32)
    for f in ("tid", "title_tid"):
        got["r." + f] = remap[np.frombuffer(got["r." + f], dtype=np.int32)].tobytes()
    got["s.tid"] = remap[np.frombuffer(got["s.tid"], dtype=np.int32)].tobytes()
    for f in _REC_ARRAYS:
        getattr(recs, f).frombytes(got["r." + f])
    for f in _SEC_ARRAYS:
        getattr(secs, f).frombytes(got["s." + f])
    ptr = np.frombuffer(got["r.chunk_ptr"], dtype=np.int64)[1:] + recs.chunk_ptr[-1]
    recs.chunk_ptr.frombytes(ptr.tobytes())
    off = np.frombuffer(got["s.doc_off"], dtype=np.int64)[1:] + len(secs.docs)
    secs.doc_off.frombytes(off.tobytes())
    secs.docs += got["docs"]


def _add_record(
    recs: _RecordRows,
    ids: _Ids,
    body: dict[str, int] | None,
    body_len: int,
    lead: list[str],
    title: str,
    n_sections: int,
) -> None:
    """Append one record's rows to `recs`: body terms in first-seen order, then the
    title terms the body lacks."""
    get = ids.__getitem__
    recs.chunk_ptr.append(recs.chunk_ptr[-1] + n_sections)
    t_terms = analyze(title)
    tt = Counter(t_terms)
    lt = Counter(lead)
    b = body if body is not None else {}
    keys = list(b)
    keys += [t for t in tt if t not in b]
    # One C-level lookup per row (`dict.get` with a default of 0), no Python loop.
    zeros = repeat(0, len(keys))
    row_t = list(map(tt.get, keys, zeros)) if tt else [0] * len(keys)
    row_l = list(map(lt.get, keys, repeat(0, len(keys)))) if lt else [0] * len(keys)
    ids.add(keys)
    recs.tid.fromlist(list(map(get, keys)))
    recs.tf_title.fromlist(row_t)
    recs.tf_body.fromlist([*b.values(), *([0] * (len(keys) - len(b)))])
    recs.tf_lead.fromlist(row_l)
    recs.n.append(len(keys))
    t_set = set(t_terms)
    recs.title_tid.fromlist(list(map(get, t_set)))
    recs.title_n.append(len(t_set))
    recs.title_len.append(len(t_terms))
    recs.body_len.append(body_len)
    recs.lead_len.append(len(lead))


def _term_table(terms: list[str]) -> dict[str, bytes]:
    """The sorted vocabulary: `term_blob` (the terms concatenated) and `term_off` (where
    each starts, then the blob's end)."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    term_off = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in terms], out=term_off[1:])
    return {"term_blob": "".join(terms).encode("ascii"), "term_off": narrow(term_off)}


def _terms_of(blob: bytes, off: bytes) -> list[str]:
    """The sorted vocabulary the C gatherer returns, as strings (its terms are ASCII)."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    text = blob.decode("ascii")
    bounds = np.frombuffer(off, dtype=np.int64).tolist()
    return [text[a:b] for a, b in pairwise(bounds)]


def _to_rows(recs: _RecordRows, secs: _SectionRows, rank: np.ndarray, terms: list[str]) -> Rows:
    """The gathered arrays as `Rows`, term ids ranked in the sorted vocabulary."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    def i32(a: array[int]) -> np.ndarray:
        return np.frombuffer(a, dtype=np.int32)

    def i64(a: array[int]) -> np.ndarray:
        return np.frombuffer(a, dtype=np.int64)

    def ranked(a: array[int]) -> np.ndarray:
        # In place, a slice at a time: no second array of the rows' size.
        t = i32(a)
        for s in range(0, len(t), SCAN_ROWS):
            t[s : s + SCAN_ROWS] = rank[t[s : s + SCAN_ROWS]]
        return t

    return Rows(
        terms=terms,
        record_ids=[],
        digests=b"",
        rec_n=i64(recs.n),
        title_n=i64(recs.title_n),
        title_len=i64(recs.title_len),
        body_len=i64(recs.body_len),
        lead_len=i64(recs.lead_len),
        chunk_n=np.diff(i64(recs.chunk_ptr)),
        rec_tid=ranked(recs.tid),
        tf_title=i32(recs.tf_title),
        tf_body=i32(recs.tf_body),
        tf_lead=i32(recs.tf_lead),
        title_tid=ranked(recs.title_tid),
        sec_n=i64(secs.n),
        sec_len=i64(secs.length),
        sec_tid=ranked(secs.tid),
        sec_tf=i32(secs.tf),
    )


def _document_sections(rows: Rows, secs: _SectionRows, *, inline_docs: bool) -> dict[str, bytes]:
    """`rec_chunk_ptr` (each record's sections), then the documents: inline (`docs`,
    `doc_off`) or as byte spans of the store file (`doc_span`)."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    ptr = np.zeros(rows.records + 1, dtype=np.int64)
    np.cumsum(rows.chunk_n, out=ptr[1:])
    out = {"rec_chunk_ptr": narrow(ptr)}
    if inline_docs:
        out["docs"] = bytes(secs.docs)
        out["doc_off"] = narrow(np.frombuffer(secs.doc_off, dtype=np.int64))
    else:
        out["doc_span"] = narrow(np.frombuffer(secs.spans, dtype=np.int64))
    return out


def _gathered(
    view: Chunks,
    groups: dict[str, list[int]],
    *,
    inline_docs: bool,
    tick: Callable[[], None],
    split: bool,
) -> tuple[Rows, _SectionRows]:
    """One analysis pass over the records of `groups`: their rows (without ids and
    digests), and the documents or spans gathered with them."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    gatherer = native_gatherer()
    if gatherer is not None:
        got, recs, secs = _gather_native(gatherer, view, groups, inline_docs=inline_docs, tick=tick)
        del gatherer
        rank = np.frombuffer(got["rank"], dtype=np.int32)
        terms = _terms_of(got["term_blob"], got["term_off"])
        del got
    else:
        if split:
            ids, recs, secs = _gather_split(view, groups, inline_docs=inline_docs, tick=tick)
        else:
            ids, recs, secs = _gather(view, groups, inline_docs=inline_docs, tick=tick)
        terms, rank = _sorted_terms(ids)
        del ids
    return _to_rows(recs, secs, rank, terms), secs


#: Chunks analysed in one batch of a kept build (about 200 MB of arrays in flight).
BATCH_CHUNKS = 1 << 15


def _batches(groups: dict[str, list[int]], rids: list[str]) -> Iterator[list[str]]:
    """`rids` in order, cut into batches of about `BATCH_CHUNKS` chunks."""
    batch: list[str] = []
    size = 0
    for rid in rids:
        batch.append(rid)
        size += len(groups[rid])
        if size >= BATCH_CHUNKS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _kept_rows(
    view: Chunks,
    groups: dict[str, list[int]],
    digests: bytes,
    previous: Rows | None,
    keeper: RowsKeeper,
    *,
    tick: Callable[[int], None],
    split: bool,
) -> Rows:
    """This build's rows, written to `keeper.path` and mapped back: the records whose
    chunks are unchanged since `previous` are copied from it, the others analysed a
    batch at a time (each batch written and mapped before the next begins)."""
    record_ids = list(groups)
    sizes = [len(g) for g in groups.values()]
    plan = reuse_plan(previous, record_ids, digests, sizes) if previous is not None else None
    if plan is None:
        plan = [-1] * len(record_ids)
    tick(sum(n for n, k in zip(sizes, plan, strict=True) if k >= 0))
    todo = [(r, rid) for r, (rid, k) in enumerate(zip(record_ids, plan, strict=True)) if k < 0]
    sources = [previous] if previous is not None else []
    # Terms are numbered as each source comes, so a batch's term list can go at once.
    vocab = Vocabulary()
    first_ids = [vocab.add(previous.terms)] if previous is not None else []
    # Fresh record r (in analysis order) is record r - first[b] of source batch_src[b].
    batch_src: list[int] = []
    first: list[int] = []
    sizes_of: list[int] = []
    paths: list[Path] = []
    one = lambda: tick(1)  # noqa: E731
    try:
        done = 0
        by_rid = {rid: r for r, rid in todo}
        order = [rid for _, rid in todo]
        del todo
        for k, batch in enumerate(_batches(groups, order)):
            rows, _ = _gathered(
                view, {rid: groups[rid] for rid in batch}, inline_docs=False, tick=one, split=split
            )
            rows.record_ids = batch
            rows.digests = b"".join(
                digests[by_rid[rid] * DIGEST : (by_rid[rid] + 1) * DIGEST] for rid in batch
            )
            path, mapped = keeper.batch(k, rows)
            del rows
            paths.append(path)
            first_ids.append(vocab.add(mapped.terms))
            mapped.terms, mapped.record_ids = [], []
            release_freed_memory()
            batch_src.append(len(sources))
            first.append(done)
            sizes_of.append(len(batch))
            sources.append(mapped)
            done += len(batch)
        runs: list[tuple[int, int, int]] = []
        for from_previous, lo, hi in _plan_runs(plan):
            if from_previous:
                runs.append((0, lo, hi))
                continue
            while lo < hi:  # fresh records lo..hi, cut at batch boundaries
                b = bisect.bisect_right(first, lo) - 1
                end = min(hi, first[b] + sizes_of[b])
                runs.append((batch_src[b], lo - first[b], end - first[b]))
                lo = end
        return keeper.keep(sources, runs, record_ids, digests, vocab, first_ids)
    finally:
        keeper.drop(paths)


def _spans(view: Chunks, groups: dict[str, list[int]]) -> _SectionRows:
    """The byte spans of every live chunk in document order (no analysis)."""
    secs = _SectionRows()
    out = secs.spans
    for idxs in groups.values():
        for i in idxs:
            out.extend(view.span(i))
    return secs


def default_sections(
    view: Chunks,
    groups: dict[str, list[int]],
    *,
    inline_docs: bool,
    tick: Callable[[int], None] = lambda n: None,
    split: bool = False,
    previous: Rows | None = None,
    on_rows: Callable[[Rows], Rows | None] | None = None,
    spool: SectionSpool | None = None,
    keeper: RowsKeeper | None = None,
) -> tuple[dict[str, Section], dict[str, Any]]:
    """The default ranking's sections and the documents, in the layout order of
    `search_index.build_bytes`; plus header facts (records, chunks, terms, unknown_idf).
    `split`: without the C analyser, the second half of the records is gathered in a
    forked child meanwhile (the C one needs no second process).

    With `previous` (the rows of an earlier build, search_rows.py), only the records
    whose chunks changed are analysed; the bytes are the same. `on_rows` receives this
    build's rows (to keep for the next one) before they become postings, and may give
    back the same rows read from where it kept them (maps: the arrays in memory go).
    `spool` holds the sections as they are made (default: in memory).

    With `keeper` (documents in the store), the records are analysed in batches of
    about `BATCH_CHUNKS` chunks, each batch's rows written beside the kept file and
    mapped, and the kept file streamed from them (and from `previous`): the build's
    memory then follows a batch, not the corpus."""
    record_ids = list(groups)
    digests = b""
    if previous is not None or on_rows is not None or keeper is not None:
        digests = b"".join(map(view.record_digest, groups.values()))
        view.release()
    one = lambda: tick(1)  # noqa: E731
    if keeper is not None and not inline_docs:
        rows = _kept_rows(view, groups, digests, previous, keeper, tick=tick, split=split)
        secs = _spans(view, groups)
    elif previous is not None and not inline_docs:
        plan = reuse_plan(previous, record_ids, digests, [len(g) for g in groups.values()])
        todo = {rid: groups[rid] for rid, k in zip(record_ids, plan, strict=True) if k < 0}
        tick(sum(len(groups[rid]) for rid, k in zip(record_ids, plan, strict=True) if k >= 0))
        fresh, _ = _gathered(view, todo, inline_docs=False, tick=one, split=False)
        rows = splice(previous, plan, fresh, record_ids, digests)
        del fresh
        secs = _spans(view, groups)
    else:
        rows, secs = _gathered(view, groups, inline_docs=inline_docs, tick=one, split=split)
        rows.record_ids = record_ids
        rows.digests = digests
    if on_rows is not None:
        kept = on_rows(rows)
        if kept is not None:
            rows = kept
    secs.drop_rows()
    n_terms = len(rows.terms)
    out = spool if spool is not None else SectionSpool()
    try:
        # The order of the sections is the file's layout: keep it.
        for name, data in _term_table(rows.terms).items():
            out.add(name, data)
        record_postings(rows, n_terms, out)
        section_postings(rows, n_terms, out)
        for name, data in _document_sections(rows, secs, inline_docs=inline_docs).items():
            out.add(name, data)
        sections = out.sections()
    finally:
        out.close()
    facts = {
        "records": len(groups),
        "chunks": len(rows.sec_len),
        "terms": n_terms,
        "unknown_idf": idf(len(groups), 0),
    }
    return sections, facts


@dataclasses.dataclass(slots=True)
class _ReferenceRows:
    """What the reference pass keeps per live chunk (store order; chunk j = live[j])."""

    # Column per chunk (the layout written); int32 holds any count of one chunk.
    counts: np.ndarray
    norms: array[float] = dataclasses.field(default_factory=lambda: array("d"))
    # Every stored embedding equals counts / norm (so the counts can stand for it).
    exact: bool = True
    # Byte tokens by first-seen id.
    ids: _Ids = dataclasses.field(default_factory=_Ids)
    # Content term rows (term, chunk, tf) and the chunk's token count.
    tf_tid: array[int] = _column("i")
    tf_doc: array[int] = _column("i")
    tf_f: array[int] = _column("i")
    dls: array[int] = _column("i")
    total: int = 0
    # Title and label tokens the content lacks (term, chunk).
    sh_tid: array[int] = _column("i")
    sh_doc: array[int] = _column("i")
    # Record ids ASCII-lowercased, newline-separated, and where each chunk's starts.
    rid_blob: bytearray = dataclasses.field(default_factory=lambda: bytearray(b"\n"))
    rid_off: array[int] = _column("q")
    # Each chunk's record as a number (first-seen order).
    rec_code: array[int] = _column("i")
    codes: dict[str, int] = dataclasses.field(default_factory=dict)
    pen: bytearray = dataclasses.field(default_factory=bytearray)
    pr: bytearray = dataclasses.field(default_factory=bytearray)
    updated: list[str] = dataclasses.field(default_factory=list)


def _reference_pass(view: Chunks, live: list[int], tick: Callable[[], None]) -> _ReferenceRows:
    """The one pass over the live chunks in store order for the reference sections."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    rows = _ReferenceRows(counts=np.zeros((DIM, len(live)), dtype=np.int32))
    for j, i in enumerate(live):
        o, emb_text = view.head(i)
        _add_reference_chunk(rows, j, o, emb_text)
        tick()
        if j % _RELEASE_EVERY == _RELEASE_EVERY - 1:
            view.release()
    return rows


def _add_reference_chunk(
    rows: _ReferenceRows, j: int, o: dict[str, Any], emb_text: bytes | None
) -> None:
    """Add chunk j (its members `o`, its stored embedding's text) to `rows`."""
    get = rows.ids.__getitem__
    # Byte tokens equal the reference tokenizer's (ASCII word runs, ASCII-lowercased),
    # and sort the same way, so the vocabulary and every count are the same.
    ts = tokenize_bytes(o["content"].encode("utf-8"))
    comps = sparse_counts(ts)
    sq = sum([x * x for x in comps.values()])
    norm = math.sqrt(float(sq)) if sq else 1.0
    if comps:
        rows.counts[list(comps), j] = list(comps.values())
    rows.norms.append(norm)
    if rows.exact:
        rows.exact = _embedding_exact(o, emb_text, comps, norm, embedding_json_sparse)
    tf = Counter(ts)
    rows.tf_tid.extend(map(get, tf))
    rows.tf_doc.extend([j] * len(tf))
    rows.tf_f.extend(tf.values())
    rows.dls.append(len(ts))
    rows.total += len(ts)
    # Title and label tokens the content lacks: a chunk "shares" a query token when
    # its content (tf postings) or these have it.
    label_text = o["title"] + "".join(" " + lab for lab in o["labels"])
    sx = set(tokenize_bytes(label_text.encode("utf-8"))).difference(tf)
    rows.sh_tid.extend(map(get, sx))
    rows.sh_doc.extend([j] * len(sx))
    rid = o["record_id"]
    rows.rid_off.append(len(rows.rid_blob))
    rows.rid_blob += ascii_lower(rid).encode("utf-8") + b"\n"
    rows.rec_code.append(rows.codes.setdefault(rid, len(rows.codes)))
    rows.pen.append(1 if path_penalised(rid) else 0)
    rows.pr.append(1 if has_pr_link(o["links"]) else 0)
    rows.updated.append(o["updated_at"] or "")


def _embedding_sections(
    rows: _ReferenceRows, view: Chunks, live: list[int]
) -> tuple[dict[str, bytes], str | None]:
    """The chunks' embeddings: as int8 counts (`ref_cnt`, exceptions in `ref_cnt_x*`)
    and norms (`ref_norm`) when they are exact, else dense (`ref_emb`); and the
    `cnt` code of `ref_meta` ("b", or None when dense)."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    out: dict[str, bytes] = {}
    if not rows.exact:
        out["ref_emb"] = _dense_embeddings(view, live).tobytes()
        return out, None
    # int8 per (dim, chunk); the rare count beyond ±127 goes to an exception list
    # (its cell holds 0), so the matrix costs one byte per cell.
    cols = rows.counts
    big = (cols > 127) | (cols < -127)
    xd, xc = np.nonzero(big)  # row-major: sorted by dim, then chunk
    xptr = np.zeros(DIM + 1, dtype=np.int64)
    np.cumsum(np.bincount(xd, minlength=DIM), out=xptr[1:])
    xval = cols[xd, xc].astype(np.int32)
    cols[big] = 0
    out["ref_cnt"] = cols.astype(np.int8).tobytes()
    out["ref_norm"] = rows.norms.tobytes()
    if len(xd):
        out["ref_cnt_xptr"] = xptr.tobytes()
        out["ref_cnt_xids"] = xc.astype(np.int32).tobytes()
        out["ref_cnt_xval"] = xval.tobytes()
    return out, "b"


def _token_table(terms: list[bytes]) -> tuple[bytes, bytes]:
    """The sorted vocabulary as `ref_vocab` (newline before and after each token) and
    `ref_vocab_off` (where each token starts)."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    blob = bytearray(b"\n")
    off = array("q")
    for t in terms:
        off.append(len(blob))
        blob += t + b"\n"
    return bytes(blob), narrow(np.frombuffer(off, dtype=np.int64))


def _by_term(
    tids: array[int], docs: array[int], rank: np.ndarray, n_terms: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(term, chunk) rows as postings: per-term pointers, the chunks, and the order
    applied (to carry other per-row values along)."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    # Rows were appended in ascending doc order: a stable sort by term keeps it.
    t = rank[np.frombuffer(tids, dtype=np.int32)]
    o = np.argsort(t, kind="stable")
    ptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(t, minlength=n_terms), out=ptr[1:])
    return ptr, np.frombuffer(docs, dtype=np.int32)[o], o


def _narrowest_tf(tfs: np.ndarray) -> tuple[np.ndarray, str]:
    """Term frequencies in the narrowest type that holds them, and its type code."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    peak_tf = int(tfs.max()) if len(tfs) else 0
    code = "B" if peak_tf < 256 else "H" if peak_tf < 65536 else "i"
    return tfs.astype({"B": np.uint8, "H": np.uint16, "i": np.int32}[code]), code


def _chunk_ranks(cids: list[str], updated: list[str]) -> tuple[bytes, bytes]:
    """Each chunk's rank by chunk id (`ref_cid_rank`) and by newest `updated_at`, ties
    by chunk id (`ref_tie_rank`)."""
    n = len(cids)
    by_cid = sorted(range(n), key=cids.__getitem__)
    cid_rank = array("i", [0] * n)
    for r, i in enumerate(by_cid):
        cid_rank[i] = r
    tie = by_cid[:]
    tie.sort(key=updated.__getitem__, reverse=True)
    tie_rank = array("i", [0] * n)
    for r, i in enumerate(tie):
        tie_rank[i] = r
    return cid_rank.tobytes(), tie_rank.tobytes()


def reference_sections(
    view: Chunks, live: list[int], live_to_doc: list[int], tick: Callable[[], None]
) -> dict[str, bytes]:
    """`reference_indexed.reference_sections` from the store file (same bytes)."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    n = len(live)
    all_cids = view.chunk_ids
    cids = [all_cids[i] for i in live]
    if n == 0 or len(set(cids)) != n:
        return {}
    rows = _reference_pass(view, live, tick)
    # The order of the sections is the file's layout: keep it.
    sections, cnt = _embedding_sections(rows, view, live)
    rows.counts = np.zeros((0, 0), dtype=np.int32)  # the largest array: freed now
    terms, rank = _sorted_terms(rows.ids)
    vocab, vocab_off = _token_table(terms)
    tptr, tids, o = _by_term(rows.tf_tid, rows.tf_doc, rank, len(terms))
    tfs, tf_code = _narrowest_tf(np.frombuffer(rows.tf_f, dtype=np.int32)[o])
    sptr, sids, _ = _by_term(rows.sh_tid, rows.sh_doc, rank, len(terms))
    meta = {"n": n, "cnt": cnt, "tf": tf_code, "avgdl": rows.total / n, "vocab": len(terms)}
    per_rec = Counter(rows.rec_code)
    cid_rank, tie_rank = _chunk_ranks(cids, rows.updated)
    sections.update(
        {
            "ref_meta": json.dumps(meta, sort_keys=True).encode(),
            "ref_vocab": vocab,
            "ref_vocab_off": vocab_off,
            "ref_tf_ptr": narrow(tptr),
            "ref_tf_ids": tids.astype(np.int32).tobytes(),
            "ref_tf": tfs.tobytes(),
            "ref_sx_ptr": narrow(sptr),
            "ref_sx_ids": sids.astype(np.int32).tobytes(),
            "ref_dl": rows.dls.tobytes(),
            "ref_rid": bytes(rows.rid_blob),
            "ref_rid_off": narrow(np.frombuffer(rows.rid_off, dtype=np.int64)),
            "ref_rec": rows.rec_code.tobytes(),
            "ref_multi": bytes(1 if per_rec[r] > PER_RECORD_CAP else 0 for r in rows.rec_code),
            "ref_pen": bytes(rows.pen),
            "ref_pr": bytes(rows.pr),
            "ref_cid_rank": cid_rank,
            "ref_tie_rank": tie_rank,
            "ref_doc": array("i", live_to_doc).tobytes(),
        }
    )
    return sections


def _embedding_exact(
    o: dict[str, Any],
    emb_text: bytes | None,
    comps: dict[int, int],
    norm: float,
    render: Callable[[dict[int, int]], str],
) -> bool:
    """Does the stored embedding equal counts / norm, float for float? (An empty one
    does not count.) The stored text is compared first: the store writer renders the
    very same floats, and shortest round-trip text identifies a float."""
    if emb_text is not None:
        if emb_text.strip() == b"[]":
            return True
        if emb_text == render(comps).encode():
            return True
        emb: list[Any] = json.loads(emb_text)
    else:
        emb = o.get("embedding") or []
        if not emb:
            return True
    if len(emb) != DIM:
        return False
    return all(comps.get(d, 0) / norm == float(e) for d, e in enumerate(emb))


def _dense_embeddings(view: Chunks, live: list[int]) -> Any:
    """DIM x n float64, column per chunk: its stored embedding (prefix up to DIM, zero
    padded), or the hash embedding of its content when it has none."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    out = np.zeros((len(live), DIM), dtype=np.float64)
    for j, i in enumerate(live):
        o = view.raw_chunk(i)
        e = [float(x) for x in o.get("embedding") or []] or hash_embed(o["content"])
        e = e[:DIM]
        out[j, : len(e)] = e
    return np.ascontiguousarray(out.T)


def _wait_child(
    fn: Callable[[], dict[str, bytes]], parallel: bool
) -> Callable[[], dict[str, bytes]]:
    if not parallel:
        return fn
    return _start_child(fn)


def build_sections(
    view: Chunks,
    *,
    inline_docs: bool = False,
    with_reference: bool = True,
    workers: int | None = None,
    eager: bool = False,
    previous: Rows | None = None,
    on_rows: Callable[[Rows], Rows | None] | None = None,
    spool: SectionSpool | None = None,
    keeper: RowsKeeper | None = None,
) -> tuple[dict[str, Section], dict[str, Any]]:
    """All sections of the index file for the store under `view`, and header facts.
    `previous`, `on_rows`, `spool` and `keeper`: see `default_sections`."""
    live, groups = live_groups(view)
    # Only the reference sections need each live chunk's document number.
    live_to_doc = doc_numbers(live, groups) if with_reference else []
    parallel = _parallel_ok(len(live), workers, eager=eager)
    # Progress counts chunks, the word `index` prints for them: one bar per pass over
    # them, so a bar never shows more chunks than the store holds.
    ref: Callable[[], dict[str, bytes]] | None = None
    desc = "search index"
    if with_reference and parallel:
        # Forked: the child's pass has no bar; the default pass's bar shows the build.
        ref = _wait_child(lambda: reference_sections(view, live, live_to_doc, _no_tick), True)
    elif with_reference:
        # In-process: run it first so its arrays are freed before the default's.
        with progress.task(f"{desc} (1/2)", total=len(live), unit="chunks") as bar:
            got = reference_sections(view, live, live_to_doc, bar.advance)
        ref = lambda: got  # noqa: E731
        desc += " (2/2)"
    # With no reference child, the second core gathers half of the default sections.
    split = parallel and not with_reference
    with progress.task(desc, total=len(live), unit="chunks") as bar:
        sections, facts = default_sections(
            view,
            groups,
            inline_docs=inline_docs,
            tick=bar.advance,
            split=split,
            previous=previous,
            on_rows=on_rows,
            spool=spool,
            keeper=keeper,
        )
        if ref is not None:
            sections.update(ref())
    return sections, facts


def _no_tick() -> None:
    pass


def iter_chunks_heads(view: Chunks) -> Iterator[dict[str, Any]]:
    """Every chunk object's members but the embedding, in store order (tests, tools)."""
    for i in range(view.chunk_count):
        yield view.head(i)[0]
