"""Reference ranking served from the derived index (placeholder: loads the store)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cce_knowledge.errors import StoreError

if TYPE_CHECKING:
    from cce_knowledge.retrieval import Hit
    from cce_knowledge.retrieval.fastindex import FastIndex
    from cce_knowledge.store import KnowledgeStore


def reference_sections(store: KnowledgeStore) -> dict[str, bytes]:
    return {}


class ReferenceIndex:
    def __init__(self, store: KnowledgeStore) -> None:
        self.store = store

    @classmethod
    def open(cls, fi: FastIndex, loader: Callable[[], KnowledgeStore] | None) -> Any:
        if loader is None:
            raise StoreError("the reference ranking needs the knowledge store")
        return cls(loader())

    def search(self, query: str, top_k: int, min_score: float) -> list[Hit]:
        from cce_knowledge.retrieval.reference import reference_search

        return reference_search(self.store.chunks, query, top_k, min_score)
