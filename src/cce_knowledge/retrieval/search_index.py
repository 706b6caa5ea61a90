"""The derived search index: a compact, memory-mapped form of the store for fast search.

Re-reading a pretty-JSON store (tens of MB, 256 floats per chunk) per query is too
slow, so `cce knowledge index`, `cce knowledge pull` and `cce sync pull --all` derive
one binary file from it as part of the command (`build_search_index`):

    <root>/.cce/knowledge/search/<snapshot>-<key>.idx

`key` covers the file format and the default ranking's parameters, so a change in
either makes the old file stale. The file is never pushed (only the store is), is
safe to delete at any time, and is written atomically; a search that finds it
missing, stale or damaged rebuilds it from the store and says so on stderr. The
store's prune only deletes `<16hex>.json` in the knowledge dir itself, so this
sub-directory is ours to manage.

Layout: an 8-byte magic, an 8-byte little-endian header length, a JSON header
(counts, section offsets), then 8-byte aligned sections read zero-copy through
`memoryview.cast`. Queries touch only the postings of their terms and the documents
of their hits — no JSON parse of the store, no numpy, so a cold `cce knowledge search`
costs little more than interpreter start-up.

The index holds postings, weights and offsets only: a hit's text is read from the
store file itself (`doc_span`: the byte range of its chunk object; the header pins
the store's size). An index built from a store that is not in the pinned layout, or
in memory, carries the documents inline instead (`docs` / `doc_off`).

The default ranking is answered here entirely and must equal `default.search_model`
bit for bit (tests check this on randomised corpora). The reference ranking needs
every chunk's embedding and BM25 over all chunks; it is served by `reference_indexed.py`
from the `ref` sections. A built file leaves them out: they go to a file of the same
format beside it, `<snapshot>-<key>.ref.idx`, on the reference ranking's first use
(most searches never need them, and `index` then costs a pass less). An index with
documents inline (`build_bytes`, a store in another layout) holds them itself.
`search_index_build.py` builds the file by streaming the store; `build_bytes` builds
it from a loaded store (same numbers, same order).
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import heapq
import json
import mmap
import os
import struct
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cce_knowledge.core import progress
from cce_knowledge.core.atomic import atomic_write_parts, dir_lock
from cce_knowledge.core.errors import StoreError
from cce_knowledge.core.rustcompat import io_error_text, rs_trim, score_key
from cce_knowledge.retrieval.analyze import query_terms
from cce_knowledge.retrieval.default import (
    FINAL_NORM,
    K1,
    PARAMS,
    RERANK,
    best_and_top_two,
    candidate_floor,
    final_score,
    idf,
    term_weight,
)
from cce_knowledge.retrieval.hits import finish_hits
from cce_knowledge.retrieval.search_index_build import (
    LoadedChunks,
    build_sections,
    doc_fields,
    doc_numbers,
    int_code,
    live_groups,
    reference_sections,
)
from cce_knowledge.retrieval.search_rows import Rows, RowsKeeper, read_rows, rows_path
from cce_knowledge.retrieval.section_spool import Section, SectionSpool
from cce_knowledge.store.snapshots import (
    KnowledgeChunk,
    SearchBuild,
    display_dir,
    read_current,
    store_path,
)
from cce_knowledge.store.view import LoadedView, StoreView, open_view

if TYPE_CHECKING:
    from cce_knowledge.retrieval.hits import Hit
    from cce_knowledge.store.snapshots import KnowledgeStore

MAGIC = b"CCESIX01"
FORMAT = 4  # 3: title postings for the re-ranking; 4: documents read from the store
INDEX_KEY = hashlib.sha256(f"format={FORMAT};{PARAMS}".encode()).hexdigest()[:8]
SEARCH_DIR = "search"
#: Above this many postings per query the default ranking sums with numpy (same
#: floats, same order); below it pure Python avoids numpy's import on a cold start.
NUMPY_POSTINGS = 40_000
#: Section/title postings of a query term up to this length are copied into lists once
#: per query: the re-ranking bisects them for every candidate, and a bisect over the
#: mapped file would fault in a new page at nearly every probe.
COPY_POSTINGS = 4_096
# The numpy prefilter keeps records within 2e-6 of the cut; finals divide shares by
# FINAL_NORM, and a gap of 2e-6 / FINAL_NORM must still exceed one 6-decimal step.
assert FINAL_NORM < 2.0

_F32 = struct.Struct("f")
#: (ids, weights or None, start, end) of one term's postings.
_Postings = tuple[Any, Any, int, int]


def _at(p: _Postings, owner: int) -> int:
    """Where `owner` sits in one term's postings (sorted by owner), or -1."""
    ids, _, a, b = p
    j = bisect.bisect_left(ids, owner, a, b)
    return j if j < b and ids[j] == owner else -1


def _title_cover(r: int, tits: list[_Postings | None], ws: list[float]) -> float:
    """Σ weight of the query terms in record r's title (query order)."""
    s = 0.0
    for p, w in zip(tits, ws, strict=True):
        if p is not None and _at(p, r) >= 0:
            s += w
    return s


def search_dir(root: str | os.PathLike[str]) -> Path:
    return Path(root) / ".cce" / "knowledge" / SEARCH_DIR


def index_path(root: str | os.PathLike[str], snapshot: str) -> Path:
    return search_dir(root) / f"{snapshot}-{INDEX_KEY}.idx"


# ---------------------------------------------------------------- building


def build_bytes(
    store: KnowledgeStore, *, with_reference: bool = True, workers: int | None = None
) -> bytes:
    """The index file for a loaded store, documents inline (deterministic: same store →
    same bytes). The same builder as the streamed one, over the store's objects.

    On a big store with an idle second core the reference ranking's sections are
    built in a forked child while this process builds the default ranking's ones
    (`workers`: None = decide, 1 = never fork, 2 = always); the bytes are the same.
    """
    sections, facts = build_sections(
        LoadedChunks(store), inline_docs=True, with_reference=with_reference, workers=workers
    )
    return b"".join(layout(store.snapshot, facts, sections))


def layout(
    snapshot: str,
    facts: dict[str, Any],
    sections: Mapping[str, Section],
    *,
    store_size: int | None = None,
) -> list[Section]:
    """The index file as parts (header, then each section 8-byte aligned).

    `store_size` is given when documents are read from the store file (`doc_span`)."""
    header: dict[str, Any] = {
        "format": FORMAT,
        "key": INDEX_KEY,
        "params": PARAMS,
        "snapshot": snapshot,
        "byteorder": sys.byteorder,
        **facts,
        "docs": "inline" if store_size is None else "store",
        "sections": {},
    }
    if store_size is not None:
        header["store_size"] = store_size
    # Section offsets depend on the header's own length: iterate to the fixed point
    # (the start only grows, by whole 8-byte steps, so this ends in a few passes; a
    # fixed count of passes could stop one short and shift every section).
    body_start = 0
    while True:
        off = body_start
        secs: dict[str, list[int]] = {}
        for name, data in sections.items():
            secs[name] = [off, len(data)]
            off += len(data) + (-len(data) % 8)
        header["sections"] = secs
        hb = json.dumps(header, sort_keys=True).encode()
        start = 16 + len(hb)
        start += -start % 8
        if start == body_start:
            break
        body_start = start
    head = MAGIC + len(hb).to_bytes(8, "little") + hb
    parts: list[Section] = [head + b"\0" * (body_start - len(head))]
    for data in sections.values():
        parts.append(data)
        if len(data) % 8:
            parts.append(b"\0" * (-len(data) % 8))
    return parts


@dataclass(frozen=True, slots=True)
class Built:
    """A search index written by `build_search_index`."""

    path: Path
    snapshot: str
    seconds: float
    size: int


def build_search_index(
    root: str | os.PathLike[str],
    snapshot: str | None = None,
    *,
    workers: int | None = None,
    eager: bool = False,
    reuse: bool = True,
    on_note: Callable[[str], None] | None = None,
) -> Built:
    """Write the derived index for the store of `snapshot` (default: the active one).

    Streams the store file (`index_build`); the caller holds the lock that keeps the
    store in place (index and pull hold the knowledge directory's writer lock).
    Raises OSError or ValueError when the store cannot be read or written next to.

    With `reuse`, the rows of an earlier build (search_rows.py) spare the analysis of
    every record whose chunks are unchanged; this build's rows are kept for the next.
    `on_note` hears why an earlier build's rows file was not used (a full build)."""
    t0 = time.perf_counter()
    snap = snapshot if snapshot is not None else read_current(root)
    path = index_path(root, snap)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows_file = rows_path(path)

    # The reference ranking's sections go to their own file on its first use
    # (`SearchIndex.reference_sections`): most searches never need them.
    parts = index_parts(
        store_path(root, snap),
        workers=workers,
        eager=eager,
        with_reference=False,
        previous=previous_rows(path.parent, on_note) if reuse else None,
        keeper=RowsKeeper(rows_file, snap, INDEX_KEY),
        spool_dir=path.parent,
    )
    atomic_write_parts(path, parts, flush_early=True)  # writeback while it is written
    del parts
    _prune(path.parent, keep=path.name)
    return Built(path, snap, time.perf_counter() - t0, path.stat().st_size)


def previous_rows(d: Path, on_note: Callable[[str], None] | None = None) -> Rows | None:
    """The newest usable rows file of this index key in `d` (an earlier build's), or
    None: a missing, damaged or foreign one only makes this build a full one. The
    snapshot's own file counts too (a rebuild of the same store reuses every record):
    it is replaced by a rename, so its map stays readable while the new one is
    written."""
    found: list[tuple[float, Path]] = []
    try:
        for entry in os.scandir(d):
            name = entry.name
            # A dot name is a batch of a build that was stopped, not a build's rows.
            if name.endswith(f"-{INDEX_KEY}.rows") and name[0] != ".":
                with contextlib.suppress(OSError):
                    if entry.is_file(follow_symlinks=False):
                        found.append((entry.stat(follow_symlinks=False).st_mtime, Path(entry.path)))
    except OSError:
        return None
    for _, p in sorted(found, reverse=True):
        try:
            return read_rows(p, INDEX_KEY)
        except OSError as e:
            why = io_error_text(e)
        except ValueError as e:
            why = str(e)
        if on_note is not None:
            on_note(f"search index: not reusing {p.name} ({why}): its records are analysed again")
    return None


def build_step(
    root: str | os.PathLike[str], snapshot: str, on_note: Callable[[str], None] | None = None
) -> SearchBuild:
    """Build the index for a just-installed store (the caller holds the writer lock).
    A failure is reported, never raised: the store is already valid and active."""
    try:
        b = build_search_index(root, snapshot, eager=True, on_note=on_note)
    except OSError as e:
        return SearchBuild(error=io_error_text(e))
    except (ValueError, StoreError) as e:
        return SearchBuild(error=str(e))
    return SearchBuild(str(b.path), b.seconds, b.size)


def ensure_step(root: str | os.PathLike[str], snapshot: str) -> SearchBuild:
    """`build_step` unless the fresh index is already there (then nothing is written,
    not even a lock file). A build holds the search index's lock, as a search that
    builds it does."""
    path = index_path(root, snapshot)
    if try_open(path, snapshot) is not None:
        return SearchBuild(str(path), 0.0, path.stat().st_size, built=False)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with dir_lock(path.parent, what="search index", wait=True):
            if try_open(path, snapshot) is not None:  # another writer built it meanwhile
                return SearchBuild(str(path), 0.0, path.stat().st_size, built=False)
            return build_step(root, snapshot)
    except OSError as e:
        return SearchBuild(error=io_error_text(e))


def index_parts(
    store_file: Path,
    *,
    workers: int | None = None,
    inline_docs: bool = False,
    eager: bool = False,
    with_reference: bool = True,
    previous: Rows | None = None,
    on_rows: Callable[[Rows], Rows | None] | None = None,
    spool_dir: Path | None = None,
    keeper: RowsKeeper | None = None,
) -> list[Section]:
    """The index file for the store at `store_file`, as parts: streamed from the mapped
    store when it has the pinned layout, else built from the parsed store (inline docs,
    always with the reference sections: no reference file can serve such an index).
    `with_reference=False` leaves out the reference ranking's sections. With
    `spool_dir`, the default ranking's sections are spooled to unlinked files there
    (`SectionSpool`) instead of held in memory; with `keeper`, the rows are analysed
    in batches and kept there (`default_sections`)."""
    view = open_view(store_file)
    if isinstance(view, LoadedView):
        return [build_bytes(view.store, workers=workers)]
    sections, facts = build_sections(
        view,
        inline_docs=inline_docs,
        workers=workers,
        eager=eager,
        with_reference=with_reference,
        previous=previous,
        on_rows=None if inline_docs else on_rows,
        spool=SectionSpool(spool_dir) if spool_dir is not None else None,
        keeper=None if inline_docs else keeper,
    )
    return layout(view.snapshot, facts, sections, store_size=None if inline_docs else view.size)


def reference_path(index_file: Path) -> Path:
    """Where the reference ranking's sections of the index at `index_file` live. The
    name ends in `.idx`, so a new build of the index prunes them with the old files."""
    return index_file.with_name(index_file.name.removesuffix(".idx") + ".ref.idx")


def reference_parts(store_file: Path, *, store_size: int) -> list[Section]:
    """The reference ranking's sections of the store at `store_file` (the mapped, pinned
    layout the index reads documents from), as a file of the index's format."""
    view = open_view(store_file)
    if not isinstance(view, StoreView) or view.size != store_size:
        raise ValueError("the store file changed since the index was built")
    live, groups = live_groups(view)
    with progress.task("reference ranking", total=len(live), unit="chunks") as bar:
        sections = reference_sections(view, live, doc_numbers(live, groups), bar.advance)
    facts = {"reference": True, "chunks": len(live)}
    return layout(view.snapshot, facts, sections, store_size=view.size)


def _prune(d: Path, keep: str) -> None:
    try:
        names = os.listdir(d)
    except OSError:
        return
    rows = keep.removesuffix(".idx") + ".rows"
    for name in names:
        if (name.endswith(".idx") and name != keep) or (name.endswith(".rows") and name != rows):
            try:
                os.unlink(d / name)
            except OSError:
                pass


# ---------------------------------------------------------------- reading


@dataclass(slots=True)
class _Query:
    """One query's term ids and weights, and its section and record postings."""

    tids: list[int]
    ws: list[float]
    total: float
    secs: list[_Postings | None]
    recs: list[_Postings | None]


def _cut_at_kth_key(finals: list[tuple[int, float]], top_k: int) -> list[tuple[int, float]]:
    """Only records whose 6-decimal key can reach the k-th best can make the cut; equal
    keys lie within 1e-6 of each other, so prefilter on the raw score."""
    if len(finals) <= top_k:
        return finals
    kth_raw = heapq.nlargest(top_k, [sc for _, sc in finals])[-1]
    kth = score_key(kth_raw)
    return [(r, sc) for r, sc in finals if sc >= kth_raw - 2e-6 and score_key(sc) >= kth]


class IndexFile:
    """A file of the index format (header, then named sections), checked and read
    zero-copy: the search index, or the reference ranking's sections beside it."""

    def __init__(self, path: Path, data: mmap.mmap | bytes) -> None:
        self.path = path
        self._data = data
        mv = memoryview(data)
        if bytes(mv[:8]) != MAGIC:
            raise ValueError("bad magic")
        hlen = int.from_bytes(mv[8:16], "little")
        self.header: dict[str, Any] = json.loads(bytes(mv[16 : 16 + hlen]))
        if self.header.get("format") != FORMAT or self.header.get("key") != INDEX_KEY:
            raise ValueError("index format or parameters differ")
        if self.header.get("byteorder") != sys.byteorder:
            raise ValueError("index written on a machine of the other byte order")
        self._mv = mv
        self._secs: dict[str, list[int]] = self.header["sections"]
        self.snapshot: str = self.header["snapshot"]

    def has(self, name: str) -> bool:
        return name in self._secs

    def raw(self, name: str) -> memoryview:
        off, n = self._secs[name]
        return self._mv[off : off + n]

    def arr(self, name: str, fmt: str) -> memoryview[Any]:
        return self.raw(name).cast(fmt)  # type: ignore[call-overload]

    def iarr(self, name: str, count: int) -> memoryview[Any]:
        """An offset/pointer section of `count` entries: int32, or int64 when its
        values needed it (told apart by the section's length)."""
        return self.arr(name, int_code(len(self.raw(name)), count))


class SearchIndex(IndexFile):
    """A memory-mapped index file; answers both rankings."""

    def __init__(
        self,
        path: Path,
        data: mmap.mmap | bytes,
        store_loader: Callable[[], KnowledgeStore] | None = None,
    ) -> None:
        super().__init__(path, data)
        if self.header.get("reference"):
            raise ValueError("a reference ranking file, not a search index")
        self.n_records: int = self.header["records"]
        self.n_chunks: int = self.header["chunks"]
        self.unknown_idf: float = self.header["unknown_idf"]
        self.term_blob = self.raw("term_blob")
        nt = self.header["terms"]
        self.term_off = self.iarr("term_off", nt + 1)
        self.term_df = self.arr("term_df", "i")
        self.rec_ptr = self.iarr("rec_ptr", nt + 1)
        self.rec_ids = self.arr("rec_ids", "i")
        self.rec_w = self.arr("rec_w", "f")
        n_rec_postings = len(self.rec_ids)
        # Body term frequencies, aligned with rec_ids: uint16, or int32 when one needed it.
        width = len(self.raw("rec_tf")) // max(n_rec_postings, 1)
        self.rec_tf = self.arr("rec_tf", {1: "B", 2: "H"}.get(width, "i"))
        self.sec_norm = self.arr("sec_norm", "d")
        self.sec_ptr = self.iarr("sec_ptr", nt + 1)
        self.sec_ids = self.arr("sec_ids", "i")
        self.sec_w = self.arr("sec_w", "f")
        self.rec_chunk_ptr = self.iarr("rec_chunk_ptr", self.n_records + 1)
        self.tit_ptr = self.iarr("tit_ptr", nt + 1)
        self.tit_ids = self.arr("tit_ids", "i")
        self._store_view: StoreView | None = None
        if self.header.get("docs") == "store":
            # Hits are read from the store file: it must be the one the spans index.
            self.doc_span = self.iarr("doc_span", 2 * self.n_chunks)
            if os.stat(self.store_file).st_size != self.header["store_size"]:
                raise ValueError("the store file changed since the index was built")
        else:
            self.docs = self.raw("docs")
            self.doc_off = self.iarr("doc_off", self.n_chunks + 1)
        self.n_terms = len(self.term_df)
        self._store_loader = store_loader
        self._ref: Any = None
        self._tid_cache: dict[str, int] = {}

    # -------------------------------------------------- lookups

    def term_id(self, term: str) -> int:
        """Binary search in the sorted term table (memoised); -1 when absent."""
        got = self._tid_cache.get(term)
        if got is None:
            got = self._term_id(term)
            if len(self._tid_cache) > 100_000:
                self._tid_cache.clear()
            self._tid_cache[term] = got
        return got

    def _term_id(self, term: str) -> int:
        key = term.encode("ascii", "replace")
        lo, hi = 0, self.n_terms
        blob, off = self.term_blob, self.term_off
        while lo < hi:
            mid = (lo + hi) // 2
            t = bytes(blob[off[mid] : off[mid + 1]])
            if t < key:
                lo = mid + 1
            elif t > key:
                hi = mid
            else:
                return mid
        return -1

    @property
    def store_file(self) -> Path:
        """The store file this index was built from (`<snapshot>.json` beside `search/`)."""
        return self.path.parent.parent / f"{self.snapshot}.json"

    def doc(self, c: int) -> list[Any]:
        """Document c's fields: chunk_id, record_id, title, kind, name, state,
        updated_at, url, start_line, end_line, content."""
        if self.header.get("docs") != "store":
            d: list[Any] = json.loads(bytes(self.docs[self.doc_off[c] : self.doc_off[c + 1]]))
            return d
        try:
            if self._store_view is None:
                self._store_view = StoreView(self.store_file)
            o, _ = self._store_view.head_at(self.doc_span[2 * c], self.doc_span[2 * c + 1])
            return doc_fields(o)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise StoreError(
                f"the search index no longer matches {self.store_file} ({e}); "
                f"delete {self.path.parent} and search again to rebuild it"
            ) from e

    def chunk(self, c: int) -> KnowledgeChunk:
        cid, rid, title, kind, name, state, upd, url, sl, el, content = self.doc(c)
        return KnowledgeChunk(
            chunk_id=cid,
            record_id=rid,
            kind=kind,
            name=name,
            start_line=sl,
            end_line=el,
            token_count=0,
            content=content,
            source="",
            url=url,
            state=state,
            updated_at=upd,
            title=title,
        )

    # -------------------------------------------------- default ranking

    def search(
        self, query: str, top_k: int, min_score: float, *, ranking: str = "default"
    ) -> list[Hit]:
        if ranking == "reference":
            return self.search_reference(query, top_k, min_score)
        return self.search_default(query, top_k, min_score)

    def search_default(self, query: str, top_k: int, min_score: float) -> list[Hit]:
        pairs = [(self.chunk(c), f) for _r, c, f in self.default_ranked(query, top_k, min_score)]
        return finish_hits(pairs, top_k)

    def default_ranked(
        self, query: str, top_k: int, min_score: float
    ) -> list[tuple[int, int, float]]:
        """(record, cited chunk, final score) of the default ranking's candidates for the
        top k (unsorted; ties at the cut included). `search_default` sorts and cuts them;
        the hybrid ranking fuses them with vector similarity."""
        if not rs_trim(query) or top_k <= 0 or self.n_records == 0:
            return []
        weighed = self._query_weights(query)
        if weighed is None:
            return []
        tids, ws, total = weighed
        scored = self._shares(tids, ws, total, top_k)
        if not scored:
            return []
        # The best shares are re-ranked (default.search_model); the rest keep their share.
        floor = candidate_floor(list(map(itemgetter(1), scored)))
        q = _Query(
            tids,
            ws,
            total,
            self._postings(self.sec_ptr, self.sec_ids, self.sec_w, tids),
            self._postings(self.rec_ptr, self.rec_ids, self.rec_tf, tids),
        )
        best_of, finals = self._reranked_head(q, scored, floor, min_score)
        finals += self._tail(scored, finals, floor, top_k, min_score)
        finals = _cut_at_kth_key(finals, top_k)
        out = []
        for r, f in finals:
            got = best_of.get(r)
            c = self._sections(r, q.secs, q.recs, ws, False)[0] if got is None else got
            out.append((r, c, f))
        return out

    def idfs(self, terms: Iterable[str]) -> dict[str, float]:
        """Each term's idf over the indexed records (unknown terms: df = 0) — how rare
        a query word is in the corpus, for choosing a hit's lines."""
        out: dict[str, float] = {}
        for t in terms:
            i = self.term_id(t)
            out[t] = idf(self.n_records, self.term_df[i]) if i >= 0 else self.unknown_idf
        return out

    def _query_weights(self, query: str) -> tuple[list[int], list[float], float] | None:
        """The query's term ids, their weights and the weights' sum (added in query
        order); None when the query has no term."""
        qterms = query_terms(query)
        if not qterms:
            return None
        tids = [self.term_id(t) for t in qterms]
        ws = [
            term_weight(t, idf(self.n_records, self.term_df[i]) if i >= 0 else self.unknown_idf)
            for t, i in zip(qterms, tids, strict=True)
        ]
        total = 0.0
        for w in ws:
            total += w
        return tids, ws, total

    def _shares(
        self, tids: list[int], ws: list[float], total: float, top_k: int
    ) -> list[tuple[int, float]]:
        """(record, share of the query's weight it covers) for every matching record;
        long postings go through numpy, which keeps only the ones that can matter."""
        rec_ptr, rec_ids, rec_w = self.rec_ptr, self.rec_ids, self.rec_w
        postings = sum(rec_ptr[i + 1] - rec_ptr[i] for i in tids if i >= 0)
        if postings > NUMPY_POSTINGS:
            return self._accumulate_np(tids, ws, total, max(top_k, RERANK))
        acc: dict[int, float] = {}
        for i, w in zip(tids, ws, strict=True):
            if i < 0:
                continue
            a, b = rec_ptr[i], rec_ptr[i + 1]
            get = acc.get
            for r, x in zip(rec_ids[a:b], rec_w[a:b], strict=True):
                acc[r] = get(r, 0.0) + w * x
        return [(r, s / total) for r, s in acc.items()]

    def _reranked_head(
        self, q: _Query, scored: list[tuple[int, float]], floor: float, min_score: float
    ) -> tuple[dict[int, int], list[tuple[int, float]]]:
        """The re-ranked head (shares ≥ floor): each record's cited section, and its
        final score when it reaches `min_score`."""
        tits = self._postings(self.tit_ptr, self.tit_ids, None, q.tids)
        best_of: dict[int, int] = {}
        finals: list[tuple[int, float]] = []
        for r, s in scored:
            if s >= floor:
                c, top2 = self._sections(r, q.secs, q.recs, q.ws, True)
                best_of[r] = c
                f = final_score(s, _title_cover(r, tits, q.ws) / q.total, top2 / q.total)
                if not f < min_score:
                    finals.append((r, f))
        return best_of, finals

    @staticmethod
    def _tail(
        scored: list[tuple[int, float]],
        finals: list[tuple[int, float]],
        floor: float,
        top_k: int,
        min_score: float,
    ) -> list[tuple[int, float]]:
        """Records below the head that can still make the top k.

        Outside the head final_score(s, 0.0, 0.0) is exactly s / FINAL_NORM (s ≥ 0),
        never above a head record's final. With k head finals, only shares that can
        come within the 2e-6 prefilter of the k-th are needed (the bound has slack;
        the exact filters follow)."""
        cut = min_score
        if len(finals) >= top_k:
            cut = max(cut, heapq.nlargest(top_k, map(itemgetter(1), finals))[-1] - 2e-6)
        s_min = cut * FINAL_NORM - 1e-9
        rest = [(r, s / FINAL_NORM) for r, s in scored if s_min <= s < floor]
        return [(r, f) for r, f in rest if not f < min_score]

    def _accumulate_np(
        self, tids: list[int], ws: list[float], total: float, keep: int
    ) -> list[tuple[int, float]]:
        """The same sums with numpy (long postings): per record, terms added in query order.

        Weights are widened to float64 before the multiply so every product equals the
        Python `float * float` of the small path; unmatched records are masked out. Only
        records within 2e-6 of the `keep`-th best share are returned: any other has at
        least `keep` records with a strictly higher final 6-decimal key (finals are
        monotone in the share and divided by FINAL_NORM < 2), so it can neither be a re-ranking
        candidate nor reach the top k.
        """
        # Lazy: numpy costs ~0.1-0.2 s; only a query with long postings needs it.
        import numpy as np

        acc = np.zeros(self.n_records, dtype=np.float64)
        hit = np.zeros(self.n_records, dtype=bool)
        ids_all = np.frombuffer(self.raw("rec_ids"), dtype=np.int32)
        w_all = np.frombuffer(self.raw("rec_w"), dtype=np.float32)
        for i, w in zip(tids, ws, strict=True):
            if i < 0:
                continue
            a, b = self.rec_ptr[i], self.rec_ptr[i + 1]
            ids = ids_all[a:b]
            acc[ids] += w * w_all[a:b].astype(np.float64)
            hit[ids] = True
        sc = acc / total
        idx = np.nonzero(hit)[0]
        if len(idx) > keep:
            vals = sc[idx]
            kth_raw = float(np.partition(vals, len(vals) - keep)[len(vals) - keep])
            idx = idx[vals >= kth_raw - 2e-6]
        return [(int(r), float(sc[r])) for r in idx]

    def _postings(
        self, ptr: memoryview, ids: memoryview, ws: memoryview | None, tids: list[int]
    ) -> list[_Postings | None]:
        """Each query term's postings in one CSR section; short ones copied to lists."""
        out: list[_Postings | None] = []
        for i in tids:
            if i < 0:
                out.append(None)
                continue
            a, b = ptr[i], ptr[i + 1]
            if b - a <= COPY_POSTINGS:
                out.append((ids[a:b].tolist(), None if ws is None else ws[a:b].tolist(), 0, b - a))
            else:
                out.append((ids, ws, a, b))
        return out

    def _sections(
        self,
        r: int,
        secs: list[_Postings | None],
        recs: list[_Postings | None],
        ws: list[float],
        top2: bool,
    ) -> tuple[int, float]:
        """First section of record r with the highest Σ w·weight (terms in query order)
        and, when asked, the mean of its two highest section scores (as in
        default.section_scores)."""
        c0, c1 = self.rec_chunk_ptr[r], self.rec_chunk_ptr[r + 1]
        if c1 - c0 == 1:
            return c0, (self._only_section(r, c0, recs, ws) if top2 else 0.0)
        acc: dict[int, float] = {}
        get = acc.get
        for p, w in zip(secs, ws, strict=True):
            if p is None:
                continue
            ids, wts, a, b = p
            assert wts is not None
            lo = bisect.bisect_left(ids, c0, a, b)
            hi = bisect.bisect_left(ids, c1, lo, b)
            for j in range(lo, hi):
                c = ids[j]
                acc[c] = get(c, 0.0) + w * wts[j]
        # Only matched sections can be best (their scores are > 0; the first in store
        # order wins ties) or among the top two (unmatched ones count 0.0).
        return best_and_top_two(((c, acc[c]) for c in sorted(acc)), c0)

    def _only_section(self, r: int, c: int, recs: list[_Postings | None], ws: list[float]) -> float:
        """`_sections`' top-two mean for a record with one section, which has no section
        postings: its weights are the builder's float32 `section_weight` of the body
        term frequencies in the record postings (same operations, same rounding)."""
        s = 0.0
        norm = self.sec_norm[c]
        for p, w in zip(recs, ws, strict=True):
            j = -1 if p is None else _at(p, r)
            if j >= 0:
                tf = p[1][j]  # type: ignore[index]
                if tf:
                    s = s + w * _F32.unpack(_F32.pack(tf / (tf + K1 * norm)))[0]
        top_a, top_b = (s, 0.0) if s > 0.0 else (0.0, 0.0)
        return (top_a + top_b) / 2.0

    # -------------------------------------------------- reference ranking

    def search_reference(self, query: str, top_k: int, min_score: float) -> list[Hit]:
        hits: list[Hit] = self.reference().search(query, top_k, min_score)
        return hits

    def reference(self) -> Any:
        """The reference ranking over this index, opened (or its sections built) once."""
        if self._ref is None:
            # Lazy: ~5-30 ms of import that a default-ranking search never needs.
            from cce_knowledge.retrieval.reference_indexed import ReferenceIndex

            self._ref = ReferenceIndex.open(self, self._store_loader)
        return self._ref

    def reference_file(self) -> IndexFile | None:
        """The reference ranking's sections for an index that reads its documents from
        the store: opened from beside the index, or built there now (held in memory
        when that directory cannot be written). None when there are none to have
        (documents inline, or the store changed since the index was built)."""
        if self.header.get("docs") != "store":
            return None
        path = reference_path(self.path)
        got = self._open_reference(path)
        if got is not None:
            return got
        size = self.header["store_size"]
        parts: list[Section] | None = None
        try:
            with dir_lock(path.parent, what="search index", wait=True):
                got = self._open_reference(path)  # another process may have built it
                if got is None:  # progress shows on stderr when the build is long
                    parts = reference_parts(self.store_file, store_size=size)
                    atomic_write_parts(path, parts)
                    got = self._open_reference(path)
        except (OSError, StoreError):
            got = None  # a read-only checkout still searches: from memory, below
        except ValueError:
            return None  # the store changed: nothing built from it would match
        if got is not None:
            return got
        try:
            if parts is None:  # built once: the parts of a failed write are reused
                parts = reference_parts(self.store_file, store_size=size)
            return IndexFile(path, b"".join(parts))
        except (OSError, ValueError, StoreError):
            return None

    def _open_reference(self, path: Path) -> IndexFile | None:
        """The reference file at `path` when it belongs to this index (same snapshot,
        store and chunks), else None."""
        try:
            f = IndexFile(path, _open(path))
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None
        h = f.header
        if (
            not h.get("reference")
            or f.snapshot != self.snapshot
            or h.get("store_size") != self.header.get("store_size")
            or h.get("chunks") != self.n_chunks
        ):
            return None
        return f


def _open(path: Path) -> mmap.mmap:
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def try_open(
    path: Path, snapshot: str, store_loader: Callable[[], KnowledgeStore] | None = None
) -> SearchIndex | None:
    try:
        data = _open(path)
    except (OSError, ValueError):
        return None
    try:
        idx = SearchIndex(path, data, store_loader)
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
    if idx.snapshot != snapshot:
        return None
    return idx


def open_or_build(
    root: str | os.PathLike[str], snapshot: str, load_store: Callable[[], KnowledgeStore]
) -> SearchIndex:
    """Open the fresh index for `snapshot`; the fallback when it is missing or stale
    (index and pull build it): build it now from the store, saying so on stderr."""
    path = index_path(root, snapshot)
    idx = try_open(path, snapshot, load_store)
    if idx is not None:
        return idx
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with dir_lock(path.parent, what="search index", wait=True):
            idx = try_open(path, snapshot, load_store)
            if idx is not None:
                return idx
            _say_building(snapshot, display_dir(root))
            build_search_index(root, snapshot)
    except (OSError, ValueError, StoreError):
        # A read-only checkout still searches: serve from an in-memory build.
        return _in_memory(root, path, snapshot, load_store)
    idx = try_open(path, snapshot, load_store)
    if idx is None:
        return _in_memory(root, path, snapshot, load_store)
    return idx


def _say_building(snapshot: str, where: str) -> None:
    print(
        f"building the search index for snapshot {snapshot} under {where} "
        "(missing or stale; `cce knowledge index` and `cce knowledge pull` build it)",
        file=sys.stderr,
        flush=True,
    )


def _in_memory(
    root: str | os.PathLike[str],
    path: Path,
    snapshot: str,
    load_store: Callable[[], KnowledgeStore],
) -> SearchIndex:
    try:
        data = b"".join(index_parts(store_path(root, snapshot)))
    except (OSError, ValueError):
        store = load_store()
        return SearchIndex(path, build_bytes(store), lambda: store)
    return SearchIndex(path, data, load_store)


def status_for(root: Path, snapshot: str) -> str:
    """ "fresh" when the index for the active snapshot and parameters is readable."""
    path = index_path(root, snapshot)
    if try_open(path, snapshot) is not None:
        return "fresh"
    d = search_dir(root)
    try:
        if any(n.endswith(".idx") for n in os.listdir(d)):
            return "stale"
    except OSError:
        pass
    return "missing"
