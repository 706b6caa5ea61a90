"""`Searcher`: a long-lived searcher over a root (CLI, MCP server, benchmarks).

It answers from the derived search index (`retrieval/search_index.py`) and only loads
the full store when it must (no index could be built, or a caller asks for
`.store`). It reloads when `current` or the store file changes.

Settings and the hybrid ranking come from the edge (cli, mcp): this floor neither reads
`.cce/config` nor imports `semantic/`, which sits above it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from cce_knowledge.config.settings import Settings
from cce_knowledge.core.errors import StoreError
from cce_knowledge.retrieval.rankings import (
    check_ranking,
    configured_min_score,
    hybrid_fallback_note,
    resolve_ranking,
)
from cce_knowledge.retrieval.search_index import open_or_build, status_for
from cce_knowledge.store.snapshots import load_current, no_store_message, read_current, store_path

if TYPE_CHECKING:
    from cce_knowledge.retrieval.hits import Hit
    from cce_knowledge.retrieval.search_index import SearchIndex
    from cce_knowledge.store.snapshots import KnowledgeStore


class HybridRanker(Protocol):
    """`--ranking hybrid` (semantic/hybrid.py's `HybridRanking`): hits, or the default
    ranking's hits and why it fell back."""

    def search(
        self,
        root: Path,
        idx: SearchIndex,
        settings: Settings,
        query: str,
        top_k: int,
        floor: float,
    ) -> tuple[list[Hit], str | None]: ...

    def close(self) -> None: ...


def _store_signature(root: Path) -> tuple[str, int, int] | None:
    """(snapshot, size, mtime_ns) of the active store file; None when absent."""
    try:
        snap = read_current(root)
        st = os.stat(store_path(root, snap))
    except (OSError, UnicodeDecodeError):
        return None
    return (snap, st.st_size, st.st_mtime_ns)


class Searcher:
    """Loads the store's derived index once; reloads when the store changes."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        settings: Settings | Callable[[], Settings] | None = None,
        *,
        hybrid: Callable[[], HybridRanker] | None = None,
    ) -> None:
        """`settings`: the root's settings (loaded by the caller), or a function giving
        the current ones; None means the defaults. `hybrid` makes the hybrid ranking on
        its first use; without it `--ranking hybrid` falls back with a note."""
        self.root = Path(root)
        self._settings = settings
        self._make_hybrid = hybrid
        self._sig: tuple[str, int, int] | None = None
        self._index: SearchIndex | None = None
        self._store: KnowledgeStore | None = None
        self._hybrid: HybridRanker | None = None
        #: Why the last `hybrid` search fell back to the default ranking (None: it did not).
        self.last_note: str | None = None

    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = Settings()
        return self._settings() if callable(self._settings) else self._settings

    def _refresh(self) -> tuple[str, int, int] | None:
        sig = _store_signature(self.root)
        if sig != self._sig:
            self._sig = sig
            self._index = None
            self._store = None
        return sig

    @property
    def store(self) -> KnowledgeStore | None:
        """The active store; None when absent; raises StoreError when present but corrupt."""
        sig = self._refresh()
        if sig is None:
            return None
        if self._store is None:
            self._store = load_current(self.root)
        return self._store

    def index(self) -> SearchIndex | None:
        sig = self._refresh()
        if sig is None:
            return None
        if self._index is None:
            self._index = open_or_build(self.root, sig[0], lambda: self._require_store())
        return self._index

    def warm(self) -> bool:
        """Open (or build) the search index, and the reference ranking's sections when it
        is the configured ranking (they are built on first use): what a first query
        would otherwise wait for. False when there is no store."""
        idx = self.index()
        if idx is None:
            return False
        if resolve_ranking(self.settings(), None) == "reference":
            idx.reference()
        return True

    def _require_store(self) -> KnowledgeStore:
        st = self.store
        if st is None:
            raise StoreError(no_store_message(self.root))
        return st

    def search(
        self,
        query: str,
        top_k: int = 8,
        *,
        ranking: str | None = None,
        min_score: float | None = None,
    ) -> list[Hit]:
        settings = self.settings()
        rk = check_ranking(ranking) if ranking is not None else resolve_ranking(settings, None)
        floor = configured_min_score(settings, rk) if min_score is None else min_score
        idx = self.index()
        if idx is None:
            raise StoreError(no_store_message(self.root))
        self.last_note = None
        if rk == "hybrid":
            return self._search_hybrid(idx, query, top_k, floor)
        return idx.search(query, top_k, floor, ranking=rk)

    def idfs(self, terms: Iterable[str]) -> dict[str, float]:
        """Corpus idf of each term from the open search index ({} when none is open):
        a hit's lines are chosen by the query's rarest words."""
        return {} if self._index is None else self._index.idfs(terms)

    def _search_hybrid(self, idx: SearchIndex, query: str, top_k: int, floor: float) -> list[Hit]:
        if self._hybrid is None:
            if self._make_hybrid is None:
                self.last_note = hybrid_fallback_note("this program has no hybrid ranking")
                return idx.search_default(query, top_k, floor)
            self._hybrid = self._make_hybrid()
        hits, self.last_note = self._hybrid.search(
            self.root, idx, self.settings(), query, top_k, floor
        )
        return hits

    def close(self) -> None:
        """Release the hybrid ranking's provider connection (if any)."""
        if self._hybrid is not None:
            self._hybrid.close()


def index_status(root: str | os.PathLike[str]) -> str:
    sig = _store_signature(Path(root))
    if sig is None:
        return "absent-store"
    return status_for(Path(root), sig[0])
