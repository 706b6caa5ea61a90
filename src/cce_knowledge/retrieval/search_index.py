"""The derived search index: a compact, memory-mapped form of the store for fast search.

Re-reading a pretty-JSON store (tens of MB, 256 floats per chunk) per query is too
slow, so the first search (or `build_search_index` at index/pull time) derives one
binary file from it:

    <root>/.cce/knowledge/search/<snapshot>-<key>.idx

`key` covers the file format and the default ranking's parameters, so a change in
either makes the old file stale. The file is never pushed (only the store is), is
safe to delete at any time, and is written atomically; readers that find it missing,
stale or damaged rebuild it from the store. The store's prune only deletes
`<16hex>.json` in the knowledge dir itself, so this sub-directory is ours to manage.

Layout: an 8-byte magic, an 8-byte little-endian header length, a JSON header
(counts, section offsets), then 8-byte aligned sections read zero-copy through
`memoryview.cast`. Queries touch only the postings of their terms and the documents
of their hits — no JSON parse of the store, no numpy, so a cold `cce knowledge search`
costs little more than interpreter start-up.

The default ranking is answered here entirely and must equal `default.search_model`
bit for bit (tests check this on randomised corpora). The reference ranking needs
every chunk's embedding and BM25 over all chunks; it is served by `reference_indexed.py` from
the `ref` sections of the same file.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import json
import mmap
import os
import sys
import threading
from array import array
from collections.abc import Callable
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cce_knowledge.core.atomic import atomic_write, dir_lock
from cce_knowledge.core.errors import StoreError
from cce_knowledge.core.rustcompat import rs_trim, score_key
from cce_knowledge.retrieval.analyze import query_terms
from cce_knowledge.retrieval.default import (
    FINAL_NORM,
    PARAMS,
    RERANK,
    best_and_top_two,
    build_model,
    candidate_floor,
    final_score,
    idf,
    live_chunks,
    term_weight,
)
from cce_knowledge.retrieval.hits import finish_hits
from cce_knowledge.store.store_file import KnowledgeChunk

if TYPE_CHECKING:
    from cce_knowledge.retrieval.hits import Hit
    from cce_knowledge.store.store_file import KnowledgeChunk, KnowledgeStore

MAGIC = b"CCESIX01"
FORMAT = 3  # 3: title postings for the re-ranking
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

#: (ids, weights or None, start, end) of one term's postings.
_Postings = tuple[Any, Any, int, int]


def _title_cover(r: int, tits: list[_Postings | None], ws: list[float]) -> float:
    """Σ weight of the query terms in record r's title (query order)."""
    s = 0.0
    for p, w in zip(tits, ws, strict=True):
        if p is None:
            continue
        ids, _, a, b = p
        j = bisect.bisect_left(ids, r, a, b)
        if j < b and ids[j] == r:
            s += w
    return s


def search_dir(root: str | os.PathLike[str]) -> Path:
    return Path(root) / ".cce" / "knowledge" / SEARCH_DIR


def index_path(root: str | os.PathLike[str], snapshot: str) -> Path:
    return search_dir(root) / f"{snapshot}-{INDEX_KEY}.idx"


# ---------------------------------------------------------------- building


def _doc_bytes(c: KnowledgeChunk) -> bytes:
    return json.dumps(
        [
            c.chunk_id,
            c.record_id,
            c.title,
            c.kind,
            c.name,
            c.state,
            c.updated_at,
            c.url,
            c.start_line,
            c.end_line,
            c.content,
        ],
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode("utf-8")


#: Below this many live sections the reference sections are built in-process: a
#: fork + result transfer costs more than it saves on a small store.
PARALLEL_MIN_CHUNKS = 20_000


def _parallel_ok(n_chunks: int, workers: int | None) -> bool:
    """Build the reference sections in a forked child? Only on an idle second core,
    in a single-threaded process (fork with live threads is unsafe), on a big store."""
    if workers is not None:
        return workers > 1 and hasattr(os, "fork")
    if n_chunks < PARALLEL_MIN_CHUNKS or not hasattr(os, "fork") or threading.active_count() > 1:
        return False
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    try:
        idle = cpus - os.getloadavg()[0] + 1  # +1: the load includes ourselves
    except OSError:  # pragma: no cover - no load average
        idle = cpus
    return cpus > 1 and idle >= 1.5


def _start_child(fn: Callable[[], dict[str, bytes]]) -> Callable[[], dict[str, bytes]]:
    """Run fn in a forked child now; the returned callable waits for its result."""
    # Lazy: multiprocessing costs ~15-45 ms; only an index build forks.
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


def build_bytes(
    store: KnowledgeStore, *, with_reference: bool = True, workers: int | None = None
) -> bytes:
    """The index file for `store` (deterministic: same store → same bytes).

    On a big store with an idle second core the reference ranking's sections are
    built in a forked child while this process builds the default ranking's ones
    (`workers`: None = decide, 1 = never fork, 2 = always); the bytes are the same.
    """
    # Chunks are renumbered so each record's sections are contiguous (store order
    # kept) — the same grouping build_model makes, known before the model exists.
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(live_chunks(store.chunks)):
        groups.setdefault(c.record_id, []).append(i)
    order: list[int] = [i for g in groups.values() for i in g]
    new_of = {old: new for new, old in enumerate(order)}
    live_to_doc = [new_of[i] for i in range(len(order))]
    ref_wait: Callable[[], dict[str, bytes]] | None = None
    if with_reference and _parallel_ok(len(order), workers):
        # Lazy: ~5-30 ms of import that a default-ranking search never needs.
        from cce_knowledge.retrieval.reference_indexed import reference_sections

        ref_wait = _start_child(lambda: reference_sections(store, live_to_doc))

    model = build_model(store.chunks)
    rec_chunk_ptr = array("q", [0])
    for rd in model.records:
        rec_chunk_ptr.append(rec_chunk_ptr[-1] + len(rd.chunks))
    del groups

    # Lazy: numpy costs ~0.1-0.2 s; a cold search maps the index without it.
    import numpy as np

    terms = sorted(model.idf)
    tid = {t: i for i, t in enumerate(terms)}
    sections: dict[str, bytes] = {}
    term_blob = "".join(terms).encode("ascii")
    term_off = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in terms], out=term_off[1:])
    sections["term_blob"] = term_blob
    sections["term_off"] = term_off.tobytes()
    sections["term_idf"] = np.array([model.idf[t] for t in terms], dtype=np.float64).tobytes()

    def csr(name: str, owners: list[int], maps: list[dict[str, float]]) -> None:
        # Flat (term, owner, weight) triples, sorted by term then owner.
        lens = [len(m) for m in maps]
        t_ids = np.fromiter((tid[t] for m in maps for t in m), dtype=np.int32, count=sum(lens))
        ws = np.fromiter((x for m in maps for x in m.values()), dtype=np.float32, count=len(t_ids))
        own = np.repeat(np.asarray(owners, dtype=np.int32), lens)
        o = np.lexsort((own, t_ids))
        ptr = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(np.bincount(t_ids, minlength=len(terms)), out=ptr[1:])
        sections[name + "_ptr"] = ptr.tobytes()
        sections[name + "_ids"] = own[o].astype(np.int32).tobytes()
        sections[name + "_w"] = ws[o].tobytes()

    csr("rec", list(range(len(model.records))), [rd.sat for rd in model.records])
    # Which records have a term in their title (the weights are unused).
    csr(
        "tit",
        list(range(len(model.records))),
        [dict.fromkeys(sorted(rd.title), 0.0) for rd in model.records],
    )
    del sections["tit_w"]
    for rd in model.records:
        rd.sat = {}  # the model is private to this build: free each part once written
    csr("sec", live_to_doc, model.section_w)
    model.section_w.clear()
    tid.clear()
    sections["rec_chunk_ptr"] = rec_chunk_ptr.tobytes()

    docs = bytearray()
    doc_off = array("q", [0])
    for old in order:
        docs += _doc_bytes(model.chunks[old])
        doc_off.append(len(docs))
    sections["docs"] = bytes(docs)
    sections["doc_off"] = doc_off.tobytes()

    if ref_wait is not None:
        sections.update(ref_wait())
    elif with_reference:
        # Lazy: ~5-30 ms of import that a default-ranking search never needs.
        from cce_knowledge.retrieval.reference_indexed import reference_sections

        sections.update(reference_sections(store, live_to_doc))

    header: dict[str, Any] = {
        "format": FORMAT,
        "key": INDEX_KEY,
        "params": PARAMS,
        "snapshot": store.snapshot,
        "byteorder": sys.byteorder,
        "records": len(model.records),
        "chunks": len(order),
        "terms": len(terms),
        "unknown_idf": idf(model.n_records, 0),
        "sections": {},
    }
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
    out = bytearray(MAGIC)
    out += len(hb).to_bytes(8, "little")
    out += hb
    out += b"\0" * (body_start - len(out))
    for data in sections.values():
        out += data
        out += b"\0" * (-len(data) % 8)
    return bytes(out)


def build_search_index(root: str | os.PathLike[str], store: KnowledgeStore) -> Path:
    """Write the derived index for `store` under `root` (call after index/pull; optional)."""
    path = index_path(root, store.snapshot)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, build_bytes(store))
    _prune(path.parent, keep=path.name)
    return path


def _prune(d: Path, keep: str) -> None:
    try:
        names = os.listdir(d)
    except OSError:
        return
    for name in names:
        if name.endswith(".idx") and name != keep:
            try:
                os.unlink(d / name)
            except OSError:
                pass


# ---------------------------------------------------------------- reading


class FastIndex:
    """A memory-mapped index file; answers both rankings."""

    def __init__(
        self,
        path: Path,
        data: mmap.mmap | bytes,
        store_loader: Callable[[], KnowledgeStore] | None = None,
    ) -> None:
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
        self.n_records: int = self.header["records"]
        self.n_chunks: int = self.header["chunks"]
        self.unknown_idf: float = self.header["unknown_idf"]
        self.term_blob = self.raw("term_blob")
        self.term_off = self.arr("term_off", "q")
        self.term_idf = self.arr("term_idf", "d")
        self.rec_ptr = self.arr("rec_ptr", "q")
        self.rec_ids = self.arr("rec_ids", "i")
        self.rec_w = self.arr("rec_w", "f")
        self.sec_ptr = self.arr("sec_ptr", "q")
        self.sec_ids = self.arr("sec_ids", "i")
        self.sec_w = self.arr("sec_w", "f")
        self.rec_chunk_ptr = self.arr("rec_chunk_ptr", "q")
        self.tit_ptr = self.arr("tit_ptr", "q")
        self.tit_ids = self.arr("tit_ids", "i")
        self.docs = self.raw("docs")
        self.doc_off = self.arr("doc_off", "q")
        self.n_terms = len(self.term_idf)
        self._store_loader = store_loader
        self._ref: Any = None
        self._tid_cache: dict[str, int] = {}

    def has(self, name: str) -> bool:
        return name in self._secs

    def raw(self, name: str) -> memoryview:
        off, n = self._secs[name]
        return self._mv[off : off + n]

    def arr(self, name: str, fmt: str) -> memoryview[Any]:
        return self.raw(name).cast(fmt)  # type: ignore[call-overload]

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

    def doc(self, c: int) -> list[Any]:
        d: list[Any] = json.loads(bytes(self.docs[self.doc_off[c] : self.doc_off[c + 1]]))
        return d

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
        qterms = query_terms(query)
        if not qterms:
            return []
        tids = [self.term_id(t) for t in qterms]
        ws = [
            term_weight(t, self.term_idf[i] if i >= 0 else self.unknown_idf)
            for t, i in zip(qterms, tids, strict=True)
        ]
        total = 0.0
        for w in ws:
            total += w
        rec_ptr, rec_ids, rec_w = self.rec_ptr, self.rec_ids, self.rec_w
        postings = sum(rec_ptr[i + 1] - rec_ptr[i] for i in tids if i >= 0)
        if postings > NUMPY_POSTINGS:
            scored = self._accumulate_np(tids, ws, total, max(top_k, RERANK))
        else:
            acc: dict[int, float] = {}
            for i, w in zip(tids, ws, strict=True):
                if i < 0:
                    continue
                a, b = rec_ptr[i], rec_ptr[i + 1]
                get = acc.get
                for r, x in zip(rec_ids[a:b], rec_w[a:b], strict=True):
                    acc[r] = get(r, 0.0) + w * x
            scored = [(r, s / total) for r, s in acc.items()]
        if not scored:
            return []
        # The best shares are re-ranked (default.search_model); the rest keep their share.
        floor = candidate_floor(list(map(itemgetter(1), scored)))
        secs = self._postings(self.sec_ptr, self.sec_ids, self.sec_w, tids)
        tits = self._postings(self.tit_ptr, self.tit_ids, None, tids)
        best_of: dict[int, int] = {}
        finals: list[tuple[int, float]] = []
        for r, s in scored:
            if s >= floor:
                c, top2 = self._sections(r, secs, ws, True)
                best_of[r] = c
                f = final_score(s, _title_cover(r, tits, ws) / total, top2 / total)
                if not f < min_score:
                    finals.append((r, f))
        # Outside the head final_score(s, 0.0, 0.0) is exactly s / FINAL_NORM (s ≥ 0),
        # never above a head record's final. With k head finals, only shares that can
        # come within the 2e-6 prefilter of the k-th are needed (the bound has slack;
        # the exact filters follow).
        cut = min_score
        if len(finals) >= top_k:
            cut = max(cut, heapq.nlargest(top_k, map(itemgetter(1), finals))[-1] - 2e-6)
        s_min = cut * FINAL_NORM - 1e-9
        rest = [(r, s / FINAL_NORM) for r, s in scored if s_min <= s < floor]
        finals += [(r, f) for r, f in rest if not f < min_score]
        if len(finals) > top_k:
            # Only records whose 6-decimal key can reach the k-th best can make the cut;
            # equal keys lie within 1e-6 of each other, so prefilter on the raw score.
            kth_raw = heapq.nlargest(top_k, [sc for _, sc in finals])[-1]
            kth = score_key(kth_raw)
            finals = [(r, sc) for r, sc in finals if sc >= kth_raw - 2e-6 and score_key(sc) >= kth]
        out = []
        for r, f in finals:
            got = best_of.get(r)
            c = self._sections(r, secs, ws, False)[0] if got is None else got
            out.append((r, c, f))
        return out

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
        self, r: int, secs: list[_Postings | None], ws: list[float], top2: bool
    ) -> tuple[int, float]:
        """First section of record r with the highest Σ w·weight (terms in query order)
        and, when asked, the mean of its two highest section scores (as in
        default.section_scores)."""
        c0, c1 = self.rec_chunk_ptr[r], self.rec_chunk_ptr[r + 1]
        if c1 - c0 == 1 and not top2:
            return c0, 0.0
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

    # -------------------------------------------------- reference ranking

    def search_reference(self, query: str, top_k: int, min_score: float) -> list[Hit]:
        if self._ref is None:
            # Lazy: ~5-30 ms of import that a default-ranking search never needs.
            from cce_knowledge.retrieval.reference_indexed import ReferenceIndex

            self._ref = ReferenceIndex.open(self, self._store_loader)
        hits: list[Hit] = self._ref.search(query, top_k, min_score)
        return hits


def _open(path: Path) -> mmap.mmap:
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def try_open(
    path: Path, snapshot: str, store_loader: Callable[[], KnowledgeStore] | None = None
) -> FastIndex | None:
    try:
        data = _open(path)
    except (OSError, ValueError):
        return None
    try:
        idx = FastIndex(path, data, store_loader)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
    if idx.snapshot != snapshot:
        return None
    return idx


def open_or_build(
    root: str | os.PathLike[str], snapshot: str, load_store: Callable[[], KnowledgeStore]
) -> FastIndex:
    """Open the fresh index for `snapshot`, building it from the store when needed."""
    path = index_path(root, snapshot)
    idx = try_open(path, snapshot, load_store)
    if idx is not None:
        return idx
    store = load_store()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with dir_lock(path.parent, what="search index", wait=True):
            idx = try_open(path, snapshot, load_store)
            if idx is not None:
                return idx
            build_search_index(root, store)
    except (OSError, StoreError):
        # A read-only checkout still searches: serve from an in-memory build.
        return FastIndex(path, build_bytes(store), lambda: store)
    idx = try_open(path, snapshot, load_store)
    if idx is None:
        return FastIndex(path, build_bytes(store), lambda: store)
    return idx


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
