"""`--ranking hybrid`: the default ranking, with vector similarity where words fall short.

Every fixed-weight fusion of a dense model with a good lexical ranking moves exact
matches down from rank 1. So the weight of the vectors depends on how sure the
lexical side is: its best score `f1` (the share of the query's idf mass the best
record covers, re-ranked; docs/ranking.md) is the confidence. With `f1 ≥ TAU` the
answer is the default's, and the provider is not asked; below it the dense side gets
up to ALPHA of the weight:

    w      = ALPHA · (1 − min(1, f1 / TAU))
    lex(r) = f(r) / f1                        (0 outside the default's LEX_POOL best)
    vec(r) = clip((cos(r) − cos_K) / (cos_1 − cos_K), 0, 1)
             cos(r) = the record's best chunk cosine; cos_1, cos_K = the best and the
             DENSE_POOL-th best record cosine
    score  = (lex(r) + w · vec(r)) / (1 + w)

Candidates are the union of both pools; a hit cites the default ranking's best
section of its record, or the record's nearest chunk when only the vectors found it.
The constants were chosen on the development suites only (docs/ranking.md#hybrid).

Lazy imports: numpy and the provider client load on the first hybrid query, not
when the ranking is handed to a searcher.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cce_knowledge.core.errors import ConfigError, StoreError
from cce_knowledge.core.rustcompat import rs_trim
from cce_knowledge.retrieval.hits import Hit, finish_hits
from cce_knowledge.retrieval.rankings import hybrid_fallback_note
from cce_knowledge.retrieval.search_index import INDEX_KEY, SearchIndex
from cce_knowledge.semantic.prefixes import resolve
from cce_knowledge.semantic.textprep import cut_utf8, is_binary

if TYPE_CHECKING:
    import numpy as np

    from cce_knowledge.config.settings import SemanticSettings, Settings
    from cce_knowledge.semantic.provider import Provider
    from cce_knowledge.store.vectors import VectorFile


@dataclass(frozen=True)
class Fusion:
    lex_pool: int = 20
    dense_pool: int = 20
    alpha: float = 0.5
    tau: float = 0.3


#: Chosen on the development pool by the rule in docs/ranking.md#hybrid (91 variants
#: swept: ALPHA 0.5-3, TAU 0.3-2, pools 20/30/50; all-MiniLM-L6-v2 vectors).
FUSION = Fusion()


def dense_records(
    cos: np.ndarray, rec_ptr: np.ndarray, present: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per record: the best cosine over its chunks that have a vector (-inf: none) and
    that chunk's index."""
    import numpy as np

    c = np.where(present, cos, -np.inf).astype(np.float64)
    starts = rec_ptr[:-1]
    best = np.maximum.reduceat(c, starts)
    # The first chunk reaching the record's best (store order breaks ties).
    rec_of = np.repeat(np.arange(len(starts)), np.diff(rec_ptr))
    is_best = c == best[rec_of]
    idx = np.flatnonzero(is_best)
    first = np.full(len(starts), -1, dtype=np.int64)
    # reversed assignment leaves the smallest index per record
    first[rec_of[idx[::-1]]] = idx[::-1]
    return best, first


def dense_weight(lex: list[tuple[int, int, float]], fusion: Fusion = FUSION) -> float:
    """The vectors' weight for a query: 0 when the lexical side is confident (f1 ≥ TAU)."""
    f1 = max((f for _r, _c, f in lex), default=0.0)
    conf = min(1.0, f1 / fusion.tau) if fusion.tau > 0 else 1.0
    return fusion.alpha * (1.0 - conf)


def fuse(
    lex: list[tuple[int, int, float]],
    rec_cos: np.ndarray,
    rec_arg: np.ndarray,
    fusion: Fusion = FUSION,
) -> list[tuple[int, int, float]]:
    """(record, cited chunk, hybrid score) of every candidate (unsorted)."""
    import numpy as np

    # Ties at the pool's edge go to the lower record number, whatever the input order.
    lex = sorted(lex, key=lambda t: (-t[2], t[0]))[: fusion.lex_pool]
    f1 = lex[0][2] if lex else 0.0
    finite = np.isfinite(rec_cos)
    n_dense = int(finite.sum())
    cand: dict[int, int] = {r: c for r, c, _f in lex}
    lex_of = {r: f for r, _c, f in lex}
    vec: dict[int, float] = {}
    if n_dense:
        k = min(fusion.dense_pool, n_dense)
        vals = np.where(finite, rec_cos, -np.inf)
        top = np.argpartition(-vals, k - 1)[:k]
        cos1 = float(vals[top].max())
        cosk = float(vals[top].min())
        span = cos1 - cosk
        for r in top.tolist():
            cand.setdefault(r, int(rec_arg[r]))
        for r in cand:
            x = float(rec_cos[r])
            if not math.isfinite(x):
                continue
            v = (x - cosk) / span if span > 0 else (1.0 if x >= cos1 else 0.0)
            vec[r] = min(1.0, max(0.0, v))
    w = dense_weight(lex, fusion)
    out = []
    for r, c in cand.items():
        lx = lex_of.get(r, 0.0) / f1 if f1 > 0 else 0.0
        out.append((r, c, (lx + w * vec.get(r, 0.0)) / (1.0 + w)))
    return out


class HybridState:
    """What a long-lived searcher keeps between hybrid queries: the mapped vectors of the
    active snapshot and the provider (its connection stays open)."""

    def __init__(self) -> None:
        self.key: tuple[str, str, str, int] | None = None
        self.vf: VectorFile | None = None
        self.present: Any = None
        self.rec_ptr: Any = None
        self.provider: Provider | None = None
        self.provider_cfg: SemanticSettings | None = None
        self.missing_reason: str | None = None

    def close(self) -> None:
        if self.provider is not None:
            self.provider.close()
            self.provider = None


def _load(state: HybridState, root: Any, idx: SearchIndex, cfg: SemanticSettings) -> str | None:
    """Map the vectors for idx's snapshot and cfg's model; a reason when unusable."""
    import numpy as np

    from cce_knowledge.store.vectors import VectorFile, vectors_path

    path = vectors_path(root, idx.snapshot, cfg.model)
    try:
        st = path.stat()
    except OSError:
        return f"no vectors for model {cfg.model} — run `cce knowledge embed`"
    key = (str(path), cfg.model, idx.snapshot, st.st_mtime_ns)
    if state.key == key:
        return state.missing_reason
    state.key, state.vf, state.missing_reason = key, None, None
    try:
        vf = VectorFile.open(path)
    except StoreError as e:
        state.missing_reason = f"{e.message} — run `cce knowledge embed`"
        return state.missing_reason
    m = vf.meta
    if m.model != cfg.model or m.count != idx.n_chunks or m.layout != INDEX_KEY:
        state.missing_reason = "vectors do not match the store — run `cce knowledge embed`"
        return state.missing_reason
    present = vf.present_mask()
    if not present.any():
        state.missing_reason = "no chunk has a vector yet — run `cce knowledge embed`"
        return state.missing_reason
    state.vf = vf
    state.present = present
    state.rec_ptr = np.asarray(idx.rec_chunk_ptr).astype(np.int64)  # int32 or int64 on disk
    return None


def hybrid_search(
    root: Any,
    idx: SearchIndex,
    cfg: SemanticSettings | None,
    state: HybridState,
    query: str,
    top_k: int,
    min_score: float,
    fusion: Fusion = FUSION,
) -> tuple[list[Hit], str | None]:
    """Hybrid hits, or the default ranking's hits and the reason it fell back."""

    def fallback(why: str) -> tuple[list[Hit], str]:
        return idx.search_default(query, top_k, min_score), hybrid_fallback_note(why)

    if not rs_trim(query) or top_k <= 0 or idx.n_records == 0:
        return [], None
    if cfg is None:
        return fallback("no embedding provider configured (knowledge.semantic)")
    why = _load(state, root, idx, cfg)
    if why is not None:
        return fallback(why)
    assert state.vf is not None
    if top_k > fusion.lex_pool:
        # A long answer list takes as many lexical candidates as hits asked for (the
        # first 20 are what the constants were chosen on, and rank the same).
        fusion = replace(fusion, lex_pool=top_k)
    lex = idx.default_ranked(query, fusion.lex_pool, 0.0)
    if dense_weight(lex, fusion) == 0.0:
        # The words cover the query well, so the vectors would weigh nothing: the
        # default's answer, bit for bit, without a request to the provider.
        return idx.search_default(query, top_k, min_score), None
    if is_binary(query):
        return fallback("the query is not valid text")
    cos = _query_cosines(state, cfg, query)
    if isinstance(cos, str):
        return fallback(cos)
    rec_cos, rec_arg = dense_records(cos, state.rec_ptr, state.present)
    fused = fuse(lex, rec_cos, rec_arg, fusion)
    kept = [(c, s) for _r, c, s in fused if not s < min_score]
    if len(kept) > top_k:
        # Only scores that can tie the k-th at 6 decimals need their chunk read.
        kth = heapq.nlargest(top_k, [s for _c, s in kept])[-1]
        kept = [(c, s) for c, s in kept if s >= kth - 2e-6]
    return finish_hits([(idx.chunk(c), s) for c, s in kept], top_k), None


def _query_cosines(state: HybridState, cfg: SemanticSettings, query: str) -> np.ndarray | str:
    """The query's cosine with every chunk vector, or why it cannot be had."""
    import numpy as np

    from cce_knowledge.semantic.provider import Provider, ProviderError

    assert state.vf is not None
    if state.provider is None or state.provider_cfg != cfg:
        state.close()
        state.provider, state.provider_cfg = Provider(cfg), cfg
    try:
        # The model's query instruction in front (its card's; knowledge.semantic overrides).
        qv = state.provider.embed([cut_utf8(resolve(cfg).query + query)])[0]
    except ProviderError as e:
        # Say so when the key was held back: a 401 alone would not tell the user why.
        held = f"; {state.provider.key_note}" if state.provider.key_note else ""
        return f"embedding the query failed: {e.message}{held}"
    if len(qv) != state.vf.meta.dim:
        return (
            f"{cfg.model} answered {len(qv)} dimensions, the vectors have {state.vf.meta.dim}"
            " — run `cce knowledge embed --rebuild`"
        )
    q = np.asarray(qv, dtype=np.float64)
    n = float(np.sqrt(q @ q))
    if not n > 0:
        return "the query's vector is zero"
    # einsum, not `@`: BLAS's GEMV wakes its thread pool, and on a busy machine one
    # query in twenty then waits 10-250 ms; einsum's single loop takes ~0.5 ms per 10k rows.
    cos: np.ndarray = np.einsum("ij,j->i", state.vf.matrix, (q / n).astype(np.float32))
    return cos


class HybridRanking:
    """The hybrid ranking as the `Searcher` takes it from the edge (cli, mcp): the
    retrieval floor below cannot import this one."""

    def __init__(self) -> None:
        self.state = HybridState()

    def search(
        self,
        root: Path,
        idx: SearchIndex,
        settings: Settings,
        query: str,
        top_k: int,
        floor: float,
    ) -> tuple[list[Hit], str | None]:
        try:
            cfg = settings.knowledge.semantic_config()
        except ConfigError as e:
            return idx.search_default(query, top_k, floor), hybrid_fallback_note(e.message)
        return hybrid_search(root, idx, cfg, self.state, query, top_k, floor)

    def close(self) -> None:
        self.state.close()
