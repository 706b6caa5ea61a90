"""The reference ranking, straightforwardly (docs/spec/core.md §7.1-§7.2).

Pure Python, one pass per step, in the order the spec describes. It is the oracle
the fast path (`retrieval/reference_indexed.py`) is checked against, and it is what runs when
no derived index is available.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cce_knowledge.core.rustcompat import ascii_lower, rs_split_whitespace, rs_trim, score_key
from cce_knowledge.engine.embed import cosine, hash_embed
from cce_knowledge.engine.ranking_primitives import BM25, rrf, unique_in_order
from cce_knowledge.engine.tokenizer import tokenize
from cce_knowledge.retrieval.hits import Hit, finish_hits, live_chunks

if TYPE_CHECKING:
    from cce_knowledge.store.snapshots import KnowledgeChunk

PR_MARKERS = ("/pull/", "/pulls/", "/pr/", "/merge_requests/")
PATH_PENALTY_MARKERS = ("tests/", "test_", "docs/", "spec", "plan")
PR_BOOST = 1.10
PATH_PENALTY = 0.8
PER_RECORD_CAP = 3

_CODE_EXT = re.compile(r"\.(?:py|js|jsx|ts|go|rb|rs|java)(?![A-Za-z0-9_])")
_CODE_WORDS = frozenset(("function", "class", "method", "def"))


def is_code_lookup(query: str) -> bool:
    """The reference's CODE_LOOKUP intent test (§7.2 step 2)."""
    q = ascii_lower(query)
    if any(t in _CODE_WORDS for t in tokenize(q)):
        return True
    if _CODE_EXT.search(q):
        return True
    if "where is " in q or " defined" in q:
        return True
    i = q.find("find ")
    return i >= 0 and q.find(" function", i) >= 0


def file_hints(query: str) -> list[str]:
    return [ascii_lower(p) for p in rs_split_whitespace(query) if "." in p]


def has_pr_link(links: Sequence[str]) -> bool:
    for link in links:
        low = ascii_lower(link)
        if any(m in low for m in PR_MARKERS):
            return True
    return False


def path_penalised(record_id: str) -> bool:
    low = ascii_lower(record_id)
    return any(m in low for m in PATH_PENALTY_MARKERS)


def shares_query_token(qset: set[str], c: KnowledgeChunk) -> bool:
    text = c.title + " " + c.content + "".join(" " + lab for lab in c.labels)
    return not qset.isdisjoint(tokenize(text))


def final_score(cos: float, kd: int, rrf_v: float, max_rrf: float, penalised: bool) -> float:
    """§7.2 step 7, in the reference's evaluation order."""
    vector_score = 1.0 - min(max((1.0 - cos) / 2.0, 0.0), 1.0)
    keyword_score = max(0.0, 1.0 - kd / 5.0)
    confidence = 0.5 * vector_score + 0.4 * keyword_score + 0.1 * 0.0
    norm_rrf = rrf_v / max_rrf if score_key(max_rrf) != 0 else 0.0
    final = 0.5 * confidence + (1.0 - 0.5) * norm_rrf
    if penalised:
        final *= PATH_PENALTY
    return final


def rank_core(
    chunks: Sequence[KnowledgeChunk], embeddings: Sequence[list[float]], query: str, k: int
) -> list[tuple[int, float]]:
    """The shared hybrid pipeline: returns (index into chunks, final score), ranked and capped."""
    qt = tokenize(query)
    if not qt:
        return []
    uq = unique_in_order(qt)
    fts_weight = 1.5 if is_code_lookup(query) else 1.0
    qvec = hash_embed(query)
    n = len(chunks)

    cos = [cosine(qvec, embeddings[i]) for i in range(n)]
    vorder = sorted(range(n), key=lambda i: (-score_key(cos[i]), chunks[i].chunk_id))
    vrank = {i: r for r, i in enumerate(vorder[: max(k * 3, 1)])}
    frank = _bm25_ranks(chunks, uq, k)

    cands = list(vrank)
    cands += [i for i in frank if i not in vrank]
    rrfs = {i: rrf(vrank.get(i), frank.get(i), fts_weight) for i in cands}
    max_rrf = 0.0
    for i in cands:
        max_rrf = max(max_rrf, rrfs[i])

    hints = file_hints(query)
    scored: list[tuple[int, float]] = []
    for i in cands:
        c = chunks[i]
        low = ascii_lower(c.content)
        low_path = ascii_lower(c.record_id)
        kd = 0 if any(t in low for t in uq) or any(h in low_path for h in hints) else 2
        scored.append((i, final_score(cos[i], kd, rrfs[i], max_rrf, path_penalised(c.record_id))))
    scored.sort(key=lambda p: (-score_key(p[1]), chunks[p[0]].chunk_id))
    return _capped(chunks, scored, k)


def _bm25_ranks(chunks: Sequence[KnowledgeChunk], uq: list[str], k: int) -> dict[int, int]:
    """Rank (0-based) of the 3k best BM25 chunks with a positive score."""
    bm = BM25([tokenize(c.content) for c in chunks])
    bscores = [bm.score(i, uq) for i in range(len(chunks))]
    fcands = [i for i in range(len(chunks)) if score_key(bscores[i]) > 0]
    fcands.sort(key=lambda i: (-score_key(bscores[i]), chunks[i].chunk_id))
    return {i: r for r, i in enumerate(fcands[: k * 3])}


def _capped(
    chunks: Sequence[KnowledgeChunk], scored: list[tuple[int, float]], k: int
) -> list[tuple[int, float]]:
    """The first k of `scored`, at most PER_RECORD_CAP per record."""
    kept: list[tuple[int, float]] = []
    per_record: dict[str, int] = {}
    for i, s in scored:
        if len(kept) >= k:
            break
        rid = chunks[i].record_id
        if per_record.get(rid, 0) >= PER_RECORD_CAP:
            continue
        per_record[rid] = per_record.get(rid, 0) + 1
        kept.append((i, s))
    return kept


def reference_search(
    chunks: Sequence[KnowledgeChunk], query: str, top_k: int, min_score: float
) -> list[Hit]:
    """`search_knowledge` of the reference engine (§7.1), straightforwardly."""
    if not chunks or not rs_trim(query) or top_k <= 0:
        return []
    live = live_chunks(chunks)
    if not live:
        return []
    embeddings = [c.embedding if c.embedding else hash_embed(c.content) for c in live]
    k = max(len(live), top_k)
    ranked = rank_core(live, embeddings, query, k)
    # Facets of a duplicated chunk id come from its last occurrence in store order.
    by_id = {c.chunk_id: c for c in live}
    qset = set(tokenize(query))
    out: list[tuple[KnowledgeChunk, float]] = []
    for i, s in ranked:
        if s < min_score:
            continue
        c = by_id[live[i].chunk_id]
        if not shares_query_token(qset, live[i]):
            continue
        if has_pr_link(c.links):
            s *= PR_BOOST
        out.append((c, s))
    return finish_hits(out, top_k)
