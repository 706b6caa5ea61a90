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

This module stays light at import: heavy pieces (the fast index) load lazily.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cce_knowledge.core.errors import UsageError
from cce_knowledge.core.rustcompat import format6

if TYPE_CHECKING:
    from cce_knowledge.config.settings import Settings
    from cce_knowledge.store.store_file import KnowledgeStore

RANKINGS = ("default", "reference", "hybrid")

#: The reference ranking's floor (`knowledge.min_score` default, docs/spec/core.md §10.1).
REFERENCE_MIN_SCORE = 0.30
#: The default ranking's floor. Its scores are the share of the query's idf mass a
#: record matches (0..1), so a much lower floor only drops near-noise matches.
DEFAULT_MIN_SCORE = 0.05


@dataclass(frozen=True, slots=True)
class Hit:
    rank: int
    chunk_id: str
    record_id: str
    title: str
    kind: str
    name: str
    state: str | None
    updated_at: str | None
    url: str | None
    score: float
    content: str
    start_line: int
    end_line: int

    def citation(self) -> str:
        """`record_id:start-end` — where the answer is, for humans and agents."""
        return f"{self.record_id}:{self.start_line}-{self.end_line}"


def configured_min_score(settings: Settings | None, ranking: str) -> float:
    """The floor when none is given: `knowledge.min_score` for reference, else our default."""
    if ranking == "reference" and settings is not None:
        return settings.knowledge.min_score
    return default_min_score(ranking)


def check_ranking(ranking: str) -> str:
    if ranking not in RANKINGS:
        raise UsageError(f"unknown ranking {ranking!r} (expected one of: {', '.join(RANKINGS)})")
    return ranking


def default_min_score(ranking: str) -> float:
    return REFERENCE_MIN_SCORE if ranking == "reference" else DEFAULT_MIN_SCORE


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
        from cce_knowledge.retrieval.reference import reference_search

        return reference_search(store.chunks, query, top_k, min_score)
    from cce_knowledge.retrieval.default import default_search

    return default_search(store.chunks, query, top_k, min_score)


_CC_TRANS = {c: " " for c in [*range(0x00, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]}


def _sanitise(s: str) -> str:
    # Control characters and line/paragraph separators become one space each so a
    # title can never inject a new line into a result header.
    return s.translate(_CC_TRANS)


def provenance_line(title: str, state: str | None, updated_at: str | None, url: str | None) -> str:
    """`[knowledge] Title — state · updated_at · url` (docs/spec/core.md §7.3)."""
    facets = [_sanitise(f) for f in (state, updated_at, url) if f is not None and f != ""]
    line = "[knowledge] " + _sanitise(title)
    if facets:
        line += " — " + " · ".join(facets)
    return line


def hit_header(hit: Hit) -> str:
    prov = provenance_line(hit.title, hit.state, hit.updated_at, hit.url)
    return f"{hit.rank:>2}. [{format6(hit.score)}] {prov} #{hit.chunk_id}"


def resolve_ranking(settings: Settings | None, cli_value: str | None) -> str:
    """`--ranking` wins; else `knowledge.ranking` from `.cce/config`; else default."""
    if cli_value is not None:
        return check_ranking(cli_value)
    if settings is not None and settings.knowledge.ranking is not None:
        return settings.knowledge.ranking
    return "default"


def search_index_status(root: str | os.PathLike[str]) -> str:
    """ "fresh" | "stale" | "missing" | "absent-store" — for `cce doctor`."""
    from cce_knowledge.retrieval.searcher import index_status

    return index_status(root)


def __getattr__(name: str) -> object:
    # `Searcher` lives in its own module; importing it lazily keeps this package light.
    if name == "Searcher":
        from cce_knowledge.retrieval.searcher import Searcher

        return Searcher
    raise AttributeError(name)


__all__ = [
    "DEFAULT_MIN_SCORE",
    "RANKINGS",
    "REFERENCE_MIN_SCORE",
    "Hit",
    "Searcher",
    "default_min_score",
    "hit_header",
    "provenance_line",
    "resolve_ranking",
    "search_index_status",
    "search_knowledge",
]
