"""The reference ranking served from the derived index, vectorised and bit-exact.

The reference pipeline (docs/spec/core.md §7.1-§7.2) scores EVERY live chunk for
every query (`top_k' = max(len(live), top_k)` makes all of them candidates), so the
work is per query O(chunks). numpy does it column-wise while keeping each value's
IEEE operations and their order identical to the straightforward code:

- cosine: Σ_i q[i]·e[i] sequentially. Terms with q[i] == 0 add ±0.0, which never
  changes a sum that starts at +0.0, so summing only the query's nonzero dims in
  index order (`acc = acc + q[i] * E[:, i]`) is bit-identical. Embeddings are kept
  as integer bucket counts + norm (`e = count / norm` is exactly how the embedder
  makes them); a store whose embeddings are not of that form keeps dense floats.
- BM25: per unique query token in first-occurrence order, the term value of every
  posting, added into the score vector — the same order per document.
- keyword_distance's substring rule: a query token (only `[a-z0-9_]`) can occur in
  ascii-lowercased content only inside one word run, i.e. inside one content
  token, so "substring of the content" = "substring of some vocabulary term of
  the chunk" → union of those terms' postings.

A store with duplicate chunk ids (ties whose order depends on scan order) falls back
to the straightforward implementation, as does anything this file cannot map.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cce_knowledge.core.errors import StoreError
from cce_knowledge.core.rustcompat import rs_trim
from cce_knowledge.engine.embed import DIM, hash_embed
from cce_knowledge.engine.ranking_primitives import K1, RRF_K, B, bm25_idf, unique_in_order
from cce_knowledge.engine.tokenizer import tokenize
from cce_knowledge.retrieval.hits import finish_hits
from cce_knowledge.retrieval.reference import (
    PATH_PENALTY,
    PER_RECORD_CAP,
    PR_BOOST,
    file_hints,
    is_code_lookup,
    reference_search,
)
from cce_knowledge.retrieval.search_index_build import int_code

if TYPE_CHECKING:
    from cce_knowledge.retrieval.hits import Hit
    from cce_knowledge.retrieval.search_index import IndexFile, SearchIndex
    from cce_knowledge.store.snapshots import KnowledgeChunk, KnowledgeStore


def _score_keys(np: Any, x: Any) -> Any:
    """Vectorised `score_key`: round half away from zero of x·1e6, as int64."""
    y = x * 1_000_000.0
    t = np.trunc(y)
    t = t + np.sign(y) * (np.abs(y - t) >= 0.5)
    return t.astype(np.int64)


class ReferenceIndex:
    """numpy views over the `ref_*` sections of a SearchIndex."""

    def __init__(self, fi: SearchIndex, src: IndexFile | None = None) -> None:
        """`src` holds the `ref_*` sections (default: `fi` itself); hits are `fi`'s
        documents."""
        # Lazy: numpy costs ~0.1-0.2 s; only the reference ranking builds this.
        import numpy as np

        self.np = np
        self.fi = fi
        sec: IndexFile = src if src is not None else fi
        meta = json.loads(bytes(sec.raw("ref_meta")))
        self.n: int = meta["n"]
        self.avgdl: float = meta["avgdl"]

        def arr(name: str, dt: Any) -> Any:
            return np.frombuffer(sec.raw(name), dtype=dt)

        n = self.n
        if meta["cnt"] is not None:
            self.cnt = arr(
                "ref_cnt", {"b": np.int8, "h": np.int16, "i": np.int32}[meta["cnt"]]
            ).reshape(DIM, n)
            self.norm = arr("ref_norm", np.float64)
            self.emb = None
        else:
            self.cnt = None
            self.emb = arr("ref_emb", np.float64).reshape(DIM, n)
        self.cx_ptr: Any = None
        self.cx_ids: Any = None
        self.cx_val: Any = None
        if sec.has("ref_cnt_xptr"):
            self.cx_ptr = arr("ref_cnt_xptr", np.int64)
            self.cx_ids = arr("ref_cnt_xids", np.int32)
            self.cx_val = arr("ref_cnt_xval", np.int32)
        self.vocab = bytes(sec.raw("ref_vocab"))

        def iarr(name: str, count: int) -> Any:
            code = int_code(len(sec.raw(name)), count)
            return arr(name, np.int32 if code == "i" else np.int64).astype(np.int64)

        nv = meta["vocab"]
        self.vocab_off = iarr("ref_vocab_off", nv)
        self.tf_ptr = iarr("ref_tf_ptr", nv + 1)
        self.tf_ids = arr("ref_tf_ids", np.int32)
        self.tf = arr("ref_tf", {"B": np.uint8, "H": np.uint16, "i": np.int32}[meta["tf"]])
        self.sx_ptr = iarr("ref_sx_ptr", nv + 1)
        self.sx_ids = arr("ref_sx_ids", np.int32)
        self.dl = arr("ref_dl", np.int32).astype(np.float64)
        self.rid = bytes(sec.raw("ref_rid"))
        self.rid_off = iarr("ref_rid_off", n)
        self.rec = arr("ref_rec", np.int32)
        self.multi = arr("ref_multi", np.uint8).astype(bool)
        self.pen = arr("ref_pen", np.uint8).astype(bool)
        self.pr = arr("ref_pr", np.uint8).astype(bool)
        self.cid_rank = arr("ref_cid_rank", np.int32).astype(np.int64)
        self.tie_rank = arr("ref_tie_rank", np.int32).astype(np.int64)
        self.doc = arr("ref_doc", np.int32)
        self._vocab_list = [int(x) for x in self.vocab_off]
        self._sub_cache: dict[str, Any] = {}

    @classmethod
    def open(cls, fi: SearchIndex, loader: Callable[[], KnowledgeStore] | None) -> Any:
        if fi.has("ref_meta"):
            return cls(fi)
        if fi.n_chunks == 0:
            return _Empty()
        # Index builds leave these sections out; they are built beside it on first use.
        src = fi.reference_file()
        if src is not None and src.has("ref_meta"):
            return cls(fi, src)
        if loader is None:
            raise StoreError("the reference ranking needs the knowledge store")
        return _Fallback(loader())

    # ---------------------------------------------------------------- lookups

    def _term(self, t: str) -> int:
        key = t.encode("ascii")
        offs = self._vocab_list
        lo, hi = 0, len(offs)
        while lo < hi:
            mid = (lo + hi) // 2
            s = offs[mid]
            term = self.vocab[s : self.vocab.index(b"\n", s)]
            if term < key:
                lo = mid + 1
            elif term > key:
                hi = mid
            else:
                return mid
        return -1

    def _substring_terms(self, t: str) -> Any:
        """Ids of vocabulary terms that contain `t` (memoised per token)."""
        got = self._sub_cache.get(t)
        if got is not None:
            return got
        np = self.np
        # Terms are "\n"-separated and `t` has no "\n", so a match never spans two terms.
        pos = np.fromiter(
            (m.start() for m in re.finditer(re.escape(t.encode("ascii")), self.vocab)),
            dtype=np.int64,
        )
        got = np.unique(np.searchsorted(self.vocab_off, pos, side="right") - 1)
        if len(self._sub_cache) > 4096:
            self._sub_cache.clear()
        self._sub_cache[t] = got
        return got

    def _mask_from(self, ptr: Any, ids: Any, tids: Any) -> Any:
        np = self.np
        mask = np.zeros(self.n, dtype=bool)
        if len(tids) == 0:
            return mask
        t = np.asarray(tids, dtype=np.int64)
        starts, ends = ptr[t], ptr[t + 1]
        lens = ends - starts
        tot = int(lens.sum())
        if tot == 0:
            return mask
        # Gather all postings of the selected terms in one go.
        rep = np.repeat(starts - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
        mask[ids[np.arange(tot) + rep]] = True
        return mask

    # ---------------------------------------------------------------- query

    def search(self, query: str, top_k: int, min_score: float) -> list[Hit]:
        np = self.np
        if not rs_trim(query) or top_k <= 0 or self.n == 0:
            return []
        qt = tokenize(query)
        if not qt:
            return []
        uq = unique_in_order(qt)
        cos = self._cosines(hash_embed(query))
        final = self._final_scores(query, uq, cos)
        key = _score_keys(np, final)
        keep = ~(final < min_score)
        # A chunk shares a query token through its content or its title/labels.
        qids = [i for i in (self._term(t) for t in set(qt)) if i >= 0]
        keep &= self._mask_from(self.tf_ptr, self.tf_ids, qids) | self._mask_from(
            self.sx_ptr, self.sx_ids, qids
        )
        if self.multi.any():
            keep &= self._cap(key)
        idx = np.nonzero(keep)[0]
        if len(idx) == 0:
            return []
        boosted = np.where(self.pr[idx], final[idx] * PR_BOOST, final[idx])
        bkey = _score_keys(np, boosted)
        order = np.lexsort((self.tie_rank[idx], -bkey))[:top_k]
        fi = self.fi
        pairs: list[tuple[KnowledgeChunk, float]] = [
            (fi.chunk(int(self.doc[idx[j]])), float(boosted[j])) for j in order
        ]
        return finish_hits(pairs, top_k)

    def _cosines(self, qvec: list[float]) -> Any:
        """Cosine with every chunk: only the query's nonzero dims, in index order."""
        cos = self.np.zeros(self.n)
        for d in range(DIM):
            q = qvec[d]
            if q != 0.0:
                col = self.emb[d] if self.emb is not None else self._count_column(d) / self.norm
                cos = cos + q * col
        return cos

    def _bm25(self, uq: list[str]) -> Any:
        """BM25 over the unique query tokens in first-occurrence order."""
        np = self.np
        bm = np.zeros(self.n)
        k1p1 = K1 + 1.0
        omb = 1.0 - B
        for t in uq:
            tid = self._term(t)
            if tid < 0:
                continue
            a, b = int(self.tf_ptr[tid]), int(self.tf_ptr[tid + 1])
            if a == b:
                continue
            idf = bm25_idf(self.n, b - a)
            ids = self.tf_ids[a:b]
            f = self.tf[a:b].astype(np.float64)
            dl = self.dl[ids]
            bm[ids] += (idf * (f * k1p1)) / (f + K1 * (omb + ((B * dl) / self.avgdl)))
        return bm

    def _rrf(self, cos: Any, bm: Any, fts_weight: float) -> Any:
        """Reciprocal-rank fusion of the vector ranks and the BM25 ranks (chunks with no
        BM25 score have only the vector part)."""
        np = self.np
        vorder = np.lexsort((self.cid_rank, -_score_keys(np, cos)))
        vrank = np.empty(self.n, dtype=np.int64)
        vrank[vorder] = np.arange(self.n)
        fkey = _score_keys(np, bm)
        fc = fkey > 0
        frank = np.full(self.n, -1, dtype=np.int64)
        cidx = np.nonzero(fc)[0]
        if len(cidx):
            ford = cidx[np.lexsort((self.cid_rank[cidx], -fkey[cidx]))]
            frank[ford] = np.arange(len(ford))
        rrf = 1.0 / (RRF_K + vrank.astype(np.float64))
        fpart = fts_weight * (1.0 / (RRF_K + frank.astype(np.float64)))
        return np.where(fc, rrf + fpart, rrf)

    def _keyword_hits(self, query: str, uq: list[str]) -> Any:
        """keyword_distance 0: the content holds a unique query token as a substring, or
        the record id holds a file hint."""
        kw = self.np.zeros(self.n, dtype=bool)
        for t in uq:
            kw |= self._mask_from(self.tf_ptr, self.tf_ids, self._substring_terms(t))
        for h in file_hints(query):
            kw |= self._rid_contains(h)
        return kw

    def _final_scores(self, query: str, uq: list[str], cos: Any) -> Any:
        """The reference's final score of every chunk (§7.1), path penalty included."""
        np = self.np
        fts_weight = 1.5 if is_code_lookup(query) else 1.0
        rrf = self._rrf(cos, self._bm25(uq), fts_weight)
        max_rrf = max(0.0, float(rrf.max()))
        ks = np.where(self._keyword_hits(query, uq), 1.0 - 0 / 5.0, 1.0 - 2 / 5.0)
        vs = 1.0 - np.minimum(np.maximum((1.0 - cos) / 2.0, 0.0), 1.0)
        conf = 0.5 * vs + 0.4 * ks + 0.1 * 0.0
        ksum = _score_keys(np, np.array([max_rrf]))[0]
        norm_rrf = rrf / max_rrf if ksum != 0 else np.zeros(self.n)
        final = 0.5 * conf + (1.0 - 0.5) * norm_rrf
        return np.where(self.pen, final * PATH_PENALTY, final)

    def _count_column(self, d: int) -> Any:
        """Dimension d's bucket counts as float64 (int8 cells, exceptions patched in)."""
        col = self.cnt[d].astype(self.np.float64)
        if self.cx_ptr is not None:
            a, b = int(self.cx_ptr[d]), int(self.cx_ptr[d + 1])
            if b > a:
                col[self.cx_ids[a:b]] = self.cx_val[a:b]
        return col

    def _cap(self, key: Any) -> Any:
        """At most PER_RECORD_CAP chunks per record, in (score_key ↓, chunk_id ↑) order."""
        np = self.np
        ok = np.ones(self.n, dtype=bool)
        sel = np.nonzero(self.multi)[0]
        o = sel[np.lexsort((self.cid_rank[sel], -key[sel], self.rec[sel]))]
        r = self.rec[o]
        idx = np.arange(len(o))
        start = np.where(np.concatenate(([True], r[1:] != r[:-1])), idx, 0)
        start = np.maximum.accumulate(start)
        ok[o[(idx - start) >= PER_RECORD_CAP]] = False
        return ok

    def _rid_contains(self, hint: str) -> Any:
        np = self.np
        mask = np.zeros(self.n, dtype=bool)
        key = hint.encode("utf-8")
        offs = [int(x) for x in self.rid_off]
        pos = self.rid.find(key)
        while pos >= 0:
            i = bisect.bisect_right(offs, pos) - 1
            if i >= 0:
                mask[i] = True
            pos = self.rid.find(key, pos + 1)
        return mask


class _Empty:
    def search(self, query: str, top_k: int, min_score: float) -> list[Hit]:
        return []


class _Fallback:
    def __init__(self, store: KnowledgeStore) -> None:
        self.store = store

    def search(self, query: str, top_k: int, min_score: float) -> list[Hit]:
        return reference_search(self.store.chunks, query, top_k, min_score)
