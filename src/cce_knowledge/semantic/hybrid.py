"""`--ranking hybrid`: the default ranking, with vector similarity where words fall short.

Every fixed-weight fusion of a dense model with a good lexical ranking moves exact
matches down from rank 1. So the vectors' weight depends on how sure the lexical side
is: its best score `f1` (the share of the query's idf mass the best record covers,
re-ranked; docs/ranking.md) is the confidence. With `f1 ≥ TAU` the answer is the
default ranking's, scores included. Below it, a gated reciprocal-rank fusion of the
POOL best records of each side:

    w        = WEIGHT · (1 − f1 / TAU)
    score(r) = (1/(K + rank_lex(r)) + w/(K + rank_dense(r))) · (K + 1)/(1 + w)

rank_dense orders records by their best chunk's cosine; a record missing from a side's
pool gets nothing from it. The last factor puts the best possible score at 1. Ties go
to the better lexical rank, then the better dense rank. Ranks, not scores, are fused:
the two sides' scores live on unrelated scales, and a rank fusion lets a record the
vectors put first reach the top five without the cosine's spread deciding how far.
A hit cites the default ranking's best section of its record, or the record's nearest
chunk when only the vectors found it. The constants were chosen on the development
suites only (docs/ranking.md#hybrid).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from cce_knowledge.semantic.textprep import cut_utf8, is_binary

if TYPE_CHECKING:
    import numpy as np

    from cce_knowledge.config.settings import SemanticSettings
    from cce_knowledge.retrieval.hits import Hit
    from cce_knowledge.retrieval.search_index import FastIndex
    from cce_knowledge.semantic.provider import Provider
    from cce_knowledge.semantic.vectors import VectorFile


@dataclass(frozen=True)
class Fusion:
    pool: int = 30  # records taken from each side
    k: int = 30  # the rank offset: larger flattens the difference between ranks
    weight: float = 1.0  # the dense side's weight when the lexical side is weakest
    tau: float = 0.3  # lexical confidence at which the vectors stop counting


#: Chosen on the development pool by the second-round rule in docs/ranking.md#hybrid
#: (144 variants: two vector sets, the linear grid and the rank fusion grid).
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
    """The vectors' weight for a query: 0 when the lexical side is confident."""
    f1 = max((f for _r, _c, f in lex), default=0.0)
    if fusion.tau <= 0:
        return 0.0
    return fusion.weight * max(0.0, 1.0 - f1 / fusion.tau)


def fuse(
    lex: list[tuple[int, int, float]],
    rec_cos: np.ndarray,
    rec_arg: np.ndarray,
    fusion: Fusion = FUSION,
) -> list[tuple[int, int, float]]:
    """(record, cited chunk, hybrid score) of every candidate, best first."""
    import numpy as np

    w = dense_weight(lex, fusion)
    lex_top = sorted(lex, key=lambda t: (-t[2], t[0]))[: fusion.pool]
    rank_lex = {r: i for i, (r, _c, _f) in enumerate(lex_top, 1)}
    cite = {r: c for r, c, _f in lex_top}
    rank_dense: dict[int, int] = {}
    if w > 0:
        finite = np.flatnonzero(np.isfinite(rec_cos))
        if len(finite):
            n = min(fusion.pool, len(finite))
            top = finite[np.argpartition(-rec_cos[finite], n - 1)[:n]]
            ordered = sorted(top.tolist(), key=lambda r: (-float(rec_cos[r]), r))
            rank_dense = {r: i for i, r in enumerate(ordered, 1)}
    k = fusion.k
    norm = (k + 1) / (1 + w)
    none = fusion.pool + 1
    out = []
    for r in rank_lex.keys() | rank_dense.keys():
        s = 0.0
        if r in rank_lex:
            s += 1.0 / (k + rank_lex[r])
        if r in rank_dense:
            s += w / (k + rank_dense[r])
        out.append((s * norm, rank_lex.get(r, none), rank_dense.get(r, none), r))
    out.sort(key=lambda t: (-t[0], t[1], t[2], t[3]))
    return [(r, cite[r] if r in cite else int(rec_arg[r]), s) for s, _l, _d, r in out]


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


def _load(state: HybridState, root: Any, idx: FastIndex, cfg: SemanticSettings) -> str | None:
    """Map the vectors for idx's snapshot and cfg's model; a reason when unusable."""
    import numpy as np

    from cce_knowledge.core.errors import StoreError
    from cce_knowledge.retrieval.search_index import INDEX_KEY
    from cce_knowledge.semantic.vectors import VectorFile, vectors_path

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
    keys = np.frombuffer(vf.keys, dtype=np.uint8).reshape(m.count, 32)
    present = keys.any(axis=1) if m.count else np.zeros(0, dtype=bool)
    if not present.any():
        state.missing_reason = "no chunk has a vector yet — run `cce knowledge embed`"
        return state.missing_reason
    state.vf = vf
    state.present = present
    state.rec_ptr = np.asarray(idx.rec_chunk_ptr).astype(np.int64)  # int32 or int64 on disk
    return None


def hybrid_search(
    root: Any,
    idx: FastIndex,
    cfg: SemanticSettings | None,
    state: HybridState,
    query: str,
    top_k: int,
    min_score: float,
    fusion: Fusion = FUSION,
) -> tuple[list[Hit], str | None]:
    """Hybrid hits, or the default ranking's hits and the reason it fell back."""
    import numpy as np

    from cce_knowledge.core.rustcompat import rs_trim
    from cce_knowledge.retrieval.hits import number_hits
    from cce_knowledge.semantic.provider import Provider, ProviderError

    def fallback(why: str) -> tuple[list[Hit], str]:
        return idx.search_default(query, top_k, min_score), (
            f"hybrid ranking unavailable ({why}); showing the default ranking"
        )

    if not rs_trim(query) or top_k <= 0 or idx.n_records == 0:
        return [], None
    if cfg is None:
        return fallback("no embedding provider configured (knowledge.semantic)")
    why = _load(state, root, idx, cfg)
    if why is not None:
        return fallback(why)
    assert state.vf is not None
    lex = idx.default_ranked(query, max(fusion.pool, top_k), 0.0)
    if dense_weight(lex, fusion) == 0.0:
        # The words cover the query well: the default's answer, bit for bit, and no
        # request to the provider at all.
        return idx.search_default(query, top_k, min_score), None
    if is_binary(query):
        return fallback("the query is not valid text")
    if state.provider is None or state.provider_cfg != cfg:
        state.close()
        state.provider, state.provider_cfg = Provider(cfg), cfg
    try:
        qv = state.provider.embed([cut_utf8(query)])[0]
    except ProviderError as e:
        return fallback(f"embedding the query failed: {e.message}")
    if len(qv) != state.vf.meta.dim:
        return fallback(
            f"{cfg.model} answered {len(qv)} dimensions, the vectors have {state.vf.meta.dim}"
            " — run `cce knowledge embed --rebuild`"
        )
    q = np.asarray(qv, dtype=np.float64)
    n = float(np.sqrt(q @ q))
    if not n > 0:
        return fallback("the query's vector is zero")
    # einsum, not `@`: BLAS's GEMV wakes its thread pool, and on a busy machine one
    # query in twenty then waits 10-250 ms; einsum's single loop takes ~0.5 ms per 10k rows.
    cos = np.einsum("ij,j->i", state.vf.matrix, (q / n).astype(np.float32))
    rec_cos, rec_arg = dense_records(cos, state.rec_ptr, state.present)
    if top_k > fusion.pool:
        # A long answer list takes as many candidates as hits asked for (the first 30
        # are what the constants were chosen on, and rank the same).
        fusion = replace(fusion, pool=top_k)
    fused = fuse(lex, rec_cos, rec_arg, fusion)
    kept = [(idx.chunk(c), s) for _r, c, s in fused if not s < min_score][:top_k]
    return number_hits(kept), None
