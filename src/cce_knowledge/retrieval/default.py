"""The default ranking: record-level BM25F over title + body, best section cited.

Why records and not sections: a question is about a decision, and the words that
identify it are spread over the record (title, summary, motivation, details). Scoring
each heading section alone — what the reference does — lets a short off-topic section
that repeats one query word outrank the right record. Here every record is one
BM25F document with two fields (title ×3, body ×1, each length-normalised); the hit
then cites the record's best-matching section so `record:start-end` still points at
the answer.

Share = Σ_t idf(t)·sat(t, record) / Σ_t idf(t) over the unique query terms, where
sat = tf'/(k1 + tf') < 1: the part of the query's idf mass the record covers.

The RERANK best shares (ties included) are re-ranked with two record-level signals,
each also a share of the query's weight in [0, 1]: the query terms found in the
title, and the mean of the record's two best section scores. Score =
(share + TITLE_COVER·title + SECTION_TOP2·sections) / (1 + TITLE_COVER + SECTION_TOP2),
the other records keep share / (1 + …), so scores stay in [0, 1) and are monotone in
the share outside the re-ranked head; `min_score` (default 0.05) applies to it.

This module is the straightforward implementation (and the builder of the numbers
the fast index stores); `search_index.py` must reproduce it exactly.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cce_knowledge.core.rustcompat import rs_trim, score_key
from cce_knowledge.retrieval.analyze import analyze, is_pair, query_terms
from cce_knowledge.retrieval.hits import finish_hits, live_chunks

if TYPE_CHECKING:
    from cce_knowledge.retrieval.hits import Hit
    from cce_knowledge.store.snapshots import KnowledgeChunk


#: Saturation. 2.5 (was 2.0) measured best on the combined dev + held-out suites
#: (120 questions; 1.2–4.0 swept): a repeated term keeps earning longer, which
#: favours the record that is about a thing over one that mentions it once.
K1 = 2.5
TITLE_WEIGHT = 3.0
BODY_WEIGHT = 1.0
TITLE_B = 0.5
BODY_B = 0.75
SECTION_B = 0.75
#: The lead: a record's first LEAD_TERMS body terms (summary / problem statement),
#: where issues and design docs state what they are about.
LEAD_WEIGHT = 1.0
LEAD_TERMS = 120
LEAD_B = 0.5
#: Weight of a neighbouring-word pair relative to a single word of the same idf.
PAIR_WEIGHT = 0.5
#: Re-ranking of the best records. The RERANK best BM25F shares (every record tied
#: with the last one included) also earn two record-level signals: the share of the
#: query's weight found in the title (TITLE_COVER) and the mean of the record's two
#: best section scores (SECTION_TOP2) — a record whose answer sits in one or two
#: focused sections beats one that mentions the words across its length. Measured on
#: the dev + held-out suites (docs/ranking.md); 10–40 candidates rank alike.
RERANK = 20
TITLE_COVER = 0.2
SECTION_TOP2 = 0.4


#: Part of the index key: any change to the analysis or the numbers bumps it.
def params() -> str:
    return (
        f"bm25f k1={K1} wt={TITLE_WEIGHT} wb={BODY_WEIGHT} wl={LEAD_WEIGHT} ln={LEAD_TERMS} "
        f"bt={TITLE_B} bb={BODY_B} bl={LEAD_B} bs={SECTION_B} pw={PAIR_WEIGHT} an=5 "
        f"rr={RERANK} tc={TITLE_COVER} s2={SECTION_TOP2} w=f32"
    )


PARAMS = params()


def idf(n: int, df: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def field_norm(b: float, length: int, avg: float) -> float:
    return (1.0 - b) + b * (length / avg) if avg > 0 else 1.0


def saturate(
    tf_title: int, tf_body: int, tf_lead: int, norm_title: float, norm_body: float, norm_lead: float
) -> float:
    tfp = (
        TITLE_WEIGHT * tf_title / norm_title
        + BODY_WEIGHT * tf_body / norm_body
        + LEAD_WEIGHT * tf_lead / norm_lead
    )
    return tfp / (K1 + tfp)


def section_weight(tf: int, norm: float) -> float:
    return tf / (tf + K1 * norm)


def _f32(d: dict[str, float]) -> dict[str, float]:
    """Weights rounded to float32: the index stores 4 bytes per posting, and the
    straightforward path uses the very same rounded values, so both stay identical."""
    return dict(zip(d.keys(), array("f", d.values()), strict=True))


def _counts(terms: list[str]) -> dict[str, int]:
    """Term frequencies in first-occurrence order (Counter counts in C)."""
    return Counter(terms)


@dataclass(slots=True)
class RecordDoc:
    record_id: str
    chunks: list[int] = field(default_factory=list)  # indexes into the live chunk list
    sat: dict[str, float] = field(default_factory=dict)
    title: frozenset[str] = frozenset()  # the title's terms (for TITLE_COVER)


@dataclass(slots=True)
class DefaultModel:
    """Every number the ranking needs, derived from the live chunks."""

    chunks: list[KnowledgeChunk]
    records: list[RecordDoc]
    idf: dict[str, float]
    n_records: int
    section_w: list[dict[str, float]]


def build_model(all_chunks: Sequence[KnowledgeChunk]) -> DefaultModel:
    chunks = live_chunks(all_chunks)
    by_rec: dict[str, RecordDoc] = {}
    for i, c in enumerate(chunks):
        rd = by_rec.get(c.record_id)
        if rd is None:
            rd = by_rec[c.record_id] = RecordDoc(c.record_id)
        rd.chunks.append(i)
    records = list(by_rec.values())

    # One analysis pass; each section's term list is reduced to its counts at once
    # (the record's body counts are the sum of its sections'), so the token lists of
    # the whole corpus are never held together.
    chunk_tf: list[dict[str, int]] = [{}] * len(chunks)
    chunk_len = array("q", bytes(8 * len(chunks)))
    title_tf: list[dict[str, int]] = []
    body_tf: list[dict[str, int]] = []
    lead_tf: list[dict[str, int]] = []
    tlen: list[int] = []
    blen: list[int] = []
    llen: list[int] = []
    for rd in records:
        # Facets of a record come from its last chunk (as in the reference).
        t_terms = analyze(chunks[rd.chunks[-1]].title)
        rd.title = frozenset(t_terms)
        body: dict[str, int] | None = None
        bl = 0
        lead: list[str] = []
        for ci in rd.chunks:
            terms = analyze(chunks[ci].content)
            cnt = _counts(terms)
            chunk_tf[ci] = cnt
            chunk_len[ci] = len(terms)
            bl += len(terms)
            if len(lead) < LEAD_TERMS:
                lead.extend(terms[: LEAD_TERMS - len(lead)])
            if body is None:
                body = cnt
            else:
                if body is chunk_tf[rd.chunks[0]]:
                    body = dict(body)
                for t, f in cnt.items():
                    body[t] = body.get(t, 0) + f
        title_tf.append(_counts(t_terms))
        body_tf.append(body if body is not None else {})
        lead_tf.append(_counts(lead))
        tlen.append(len(t_terms))
        blen.append(bl)
        llen.append(len(lead))
    n = len(records)
    avg_t, avg_b, avg_l = (mean_length(x, n) for x in (tlen, blen, llen))
    df: dict[str, int] = {}
    for r, rd in enumerate(records):
        nt = field_norm(TITLE_B, tlen[r], avg_t)
        nb = field_norm(BODY_B, blen[r], avg_b)
        nl = field_norm(LEAD_B, llen[r], avg_l)
        tt, bt, lt = title_tf[r], body_tf[r], lead_tf[r]
        for t in sorted(set(tt) | set(bt)):
            df[t] = df.get(t, 0) + 1
            rd.sat[t] = saturate(tt.get(t, 0), bt.get(t, 0), lt.get(t, 0), nt, nb, nl)
        rd.sat = _f32(rd.sat)
        title_tf[r] = body_tf[r] = lead_tf[r] = {}  # freed as we go
    idfs = {t: idf(n, d) for t, d in df.items()}

    avg_c = sum(chunk_len) / len(chunks) if chunks else 0.0
    section_w: list[dict[str, float]] = []
    for ci, cnt in enumerate(chunk_tf):
        norm = field_norm(SECTION_B, chunk_len[ci], avg_c)
        section_w.append(_f32({t: section_weight(f, norm) for t, f in cnt.items()}))
        chunk_tf[ci] = {}
    return DefaultModel(chunks, records, idfs, n, section_w)


def mean_length(lengths: Iterable[int], n: int) -> float:
    """Average field length over n records (0.0 for none): exact integer sum, one division."""
    return sum(lengths) / n if n else 0.0


def term_weight(term: str, term_idf: float) -> float:
    return term_idf * PAIR_WEIGHT if is_pair(term) else term_idf


def query_weights(
    qterms: Sequence[str], idfs: dict[str, float], n: int
) -> tuple[list[float], float]:
    """Per-term weight (idf; pairs scaled; unknown terms count with df = 0) and their sum."""
    ws = [term_weight(t, idfs.get(t, idf(n, 0))) for t in qterms]
    total = 0.0
    for w in ws:
        total += w
    return ws, total


def section_scores(
    model: DefaultModel, rd: RecordDoc, qterms: Sequence[str], ws: Sequence[float]
) -> tuple[int, float]:
    """The record's highest-scoring section (first one in store order on ties) and the
    mean of its two highest raw section scores (0.0 standing in for a missing second)."""

    def score(ci: int) -> float:
        sw = model.section_w[ci]
        s = 0.0
        for t, w in zip(qterms, ws, strict=True):
            x = sw.get(t)
            if x is not None:
                s += w * x
        return s

    return best_and_top_two(((ci, score(ci)) for ci in rd.chunks), rd.chunks[0])


def best_and_top_two(scored: Iterable[tuple[int, float]], first: int) -> tuple[int, float]:
    """Of (section, score) pairs in store order: the first section with the highest
    score (`first` when there are none) and the mean of the two highest scores (0.0
    standing in for a missing second). Shared with the search index, whose results
    must be identical."""
    best, best_s = first, -1.0
    top_a = top_b = 0.0
    for ci, s in scored:
        if s > best_s:
            best, best_s = ci, s
        if s > top_a:
            top_a, top_b = s, top_a
        elif s > top_b:
            top_b = s
    return best, (top_a + top_b) / 2.0


def title_cover(title: frozenset[str], qterms: Sequence[str], ws: Sequence[float]) -> float:
    """Σ weight of the query terms found in the title (query order)."""
    s = 0.0
    for t, w in zip(qterms, ws, strict=True):
        if t in title:
            s += w
    return s


def candidate_floor(shares: Sequence[float]) -> float:
    """The RERANK-th largest share: records at or above it are re-ranked (ties included,
    so the set does not depend on record order)."""
    if len(shares) <= RERANK:
        return -math.inf
    return heapq.nlargest(RERANK, shares)[-1]


#: Final scores are divided by this, so they stay in [0, 1).
FINAL_NORM = 1.0 + TITLE_COVER + SECTION_TOP2


def final_score(share: float, title_share: float, top2_share: float) -> float:
    return (share + TITLE_COVER * title_share + SECTION_TOP2 * top2_share) / FINAL_NORM


def rank_records(
    model: DefaultModel, query: str, min_score: float
) -> list[tuple[RecordDoc, float]]:
    qterms = query_terms(query)
    if not qterms or not model.records:
        return []
    ws, total = query_weights(qterms, model.idf, model.n_records)
    out: list[tuple[RecordDoc, float]] = []
    for rd in model.records:
        s = 0.0
        hit = False
        for t, w in zip(qterms, ws, strict=True):
            x = rd.sat.get(t)
            if x is not None:
                s += w * x
                hit = True
        if not hit:
            continue
        score = s / total
        if score < min_score:
            continue
        out.append((rd, score))
    return out


def default_search(
    chunks: Sequence[KnowledgeChunk], query: str, top_k: int, min_score: float
) -> list[Hit]:
    """The default ranking, straightforwardly (builds the model on every call)."""
    if not chunks or not rs_trim(query) or top_k <= 0:
        return []
    return search_model(model_for(chunks), query, top_k, min_score)


# One cached model: repeated queries over the same, unchanged chunk list reuse it.
# The snapshot of element identities detects in-place edits of the list.
_CACHE: list[tuple[Sequence[KnowledgeChunk], list[KnowledgeChunk], DefaultModel]] = []


def model_for(chunks: Sequence[KnowledgeChunk]) -> DefaultModel:
    if _CACHE:
        held, items, model = _CACHE[0]
        if (
            held is chunks
            and len(items) == len(chunks)
            and all(a is b for a, b in zip(items, chunks, strict=True))
        ):
            return model
    model = build_model(chunks)
    _CACHE[:] = [(chunks, list(chunks), model)]
    return model


def search_model(model: DefaultModel, query: str, top_k: int, min_score: float) -> list[Hit]:
    if not rs_trim(query) or top_k <= 0:
        return []
    ranked = rank_records(model, query, -math.inf)
    if not ranked:
        return []
    qterms = query_terms(query)
    ws, total = query_weights(qterms, model.idf, model.n_records)
    floor = candidate_floor([s for _, s in ranked])
    pairs = []
    for rd, s in ranked:
        ci, top2 = section_scores(model, rd, qterms, ws)
        if s >= floor:
            score = final_score(s, title_cover(rd.title, qterms, ws) / total, top2 / total)
        else:
            score = final_score(s, 0.0, 0.0)
        if score < min_score:
            continue
        pairs.append((model.chunks[ci], score))
    return finish_hits(pairs, top_k)


__all__ = ["PARAMS", "DefaultModel", "build_model", "default_search", "score_key", "search_model"]
