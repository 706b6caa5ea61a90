"""Knowledge retrieval: the public API used by the CLI, `ask` and the MCP server.

Three rankings:
- ``reference`` — the reference engine's hybrid retrieval, byte-exact
  (docs/spec/core.md §6-§7);
- ``default`` — ours: record-level BM25F with field weights, identifier sub-words and
  light stemming (see docs/ranking.md for why it differs and what it scores);
- ``hybrid`` — the default fused with an embedding model's similarity where the
  lexical evidence is weak (semantic/hybrid.py); it needs a root with vectors and
  falls back to ``default`` (with a note) when they or the provider are missing.

Both apply the staleness rules: `state_reason` exactly ``not_planned``/``wontfix``
never surfaces; equal scores break ties newest ``updated_at`` first, then chunk id.

"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from cce_knowledge.retrieval.default import default_search
from cce_knowledge.retrieval.hits import Hit, hit_header, provenance_line
from cce_knowledge.retrieval.rankings import (
    DEFAULT_MIN_SCORE,
    RANKINGS,
    REFERENCE_MIN_SCORE,
    check_ranking,
    configured_min_score,
    default_min_score,
    resolve_ranking,
)
from cce_knowledge.retrieval.reference import reference_search
from cce_knowledge.retrieval.searcher import Searcher, index_status

if TYPE_CHECKING:
    from cce_knowledge.store.snapshots import KnowledgeStore


def search_knowledge(
    store: KnowledgeStore,
    query: str,
    top_k: int,
    min_score: float,
    *,
    ranking: str = "default",
) -> list[Hit]:
    """Rank the store's chunks for `query` (straightforward in-memory path)."""
    check_ranking(ranking)
    # `hybrid` needs a root's vectors and provider: a bare store ranks as `default`
    # (Searcher.search serves hybrid and says when it falls back).
    if ranking == "reference":
        return reference_search(store.chunks, query, top_k, min_score)
    return default_search(store.chunks, query, top_k, min_score)


def search_index_status(root: str | os.PathLike[str]) -> str:
    """ "fresh" | "stale" | "missing" | "absent-store" — for `cce doctor`."""
    return index_status(root)


__all__ = [
    "DEFAULT_MIN_SCORE",
    "RANKINGS",
    "REFERENCE_MIN_SCORE",
    "Hit",
    "Searcher",
    "check_ranking",
    "configured_min_score",
    "default_min_score",
    "hit_header",
    "provenance_line",
    "resolve_ranking",
    "search_index_status",
    "search_knowledge",
]
