"""BM25 (Lucene form) and RRF exactly as the reference computes them (docs/spec/core.md §6.4-§6.5).

Pure Python, sequential f64 arithmetic in the pinned association order, so the
results are bit-identical to the reference. The fast paths in `retrieval/` are
verified against these.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

K1 = 1.2
B = 0.75
RRF_K = 60.0


def unique_in_order(tokens: Sequence[str]) -> list[str]:
    """Unique tokens in first-occurrence order (the BM25 / keyword term order)."""
    return list(dict.fromkeys(tokens))


def bm25_idf(n_docs: int, n_q: int) -> float:
    return math.log(1.0 + (n_docs - n_q + 0.5) / (n_q + 0.5))


def bm25_term(idf: float, f: float, dl: float, avgdl: float) -> float:
    """One term's contribution, in the reference's exact association order."""
    return (idf * (f * (K1 + 1.0))) / (f + K1 * ((1.0 - B) + ((B * dl) / avgdl)))


class BM25:
    """Lucene-form BM25 over tokenised documents (k1=1.2, b=0.75)."""

    __slots__ = ("avgdl", "df", "dls", "n", "tfs")

    def __init__(self, docs: Sequence[Sequence[str]]) -> None:
        self.n = len(docs)
        self.tfs: list[dict[str, int]] = []
        self.dls: list[int] = []
        self.df: dict[str, int] = {}
        total = 0
        for toks in docs:
            tf: dict[str, int] = {}
            for t in toks:
                tf[t] = tf.get(t, 0) + 1
            self.tfs.append(tf)
            self.dls.append(len(toks))
            total += len(toks)
            for t in tf:
                self.df[t] = self.df.get(t, 0) + 1
        self.avgdl = total / self.n if self.n else 0.0

    def score(self, doc: int, query_terms: Sequence[str]) -> float:
        """Σ over unique query terms in first-occurrence order, skipping n_q = 0 or f = 0."""
        s = 0.0
        tf = self.tfs[doc]
        dl = float(self.dls[doc])
        for t in query_terms:
            nq = self.df.get(t, 0)
            f = tf.get(t, 0)
            if nq == 0 or f == 0:
                continue
            s += bm25_term(bm25_idf(self.n, nq), float(f), dl, self.avgdl)
        return s


def rrf(vrank: int | None, frank: int | None, fts_weight: float) -> float:
    """Reciprocal rank fusion with 0-based ranks and k = 60."""
    v = 1.0 / (RRF_K + vrank) if vrank is not None else 0.0
    f = 1.0 / (RRF_K + frank) if frank is not None else 0.0
    return v + fts_weight * f
