"""The search-index build's C analyser (`_analyzefast.c`), when it is built.

`_analyzefast.Gatherer` applies `analyze.analyze`'s rules to each section and keeps the
default ranking's rows in C (search_index_build.py); the pure Python build gives the same
index bytes (tests/retrieval/test_analyze_native.py holds the two together).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from cce_knowledge.core.native import Accelerator
from cce_knowledge.retrieval import analyze
from cce_knowledge.retrieval.default import LEAD_TERMS

#: `_analyzefast` beside its C source (see core/native.py for when it is used).
ANALYSER = Accelerator(
    "cce_knowledge.retrieval._analyzefast",
    Path(__file__).with_name("_analyzefast.c"),
    "search-index analyser",
)


def native_module() -> ModuleType | None:
    """`_analyzefast`, or None (not built, disabled with CCE_NATIVE=0, or stale)."""
    return ANALYSER.get()


def native_gatherer() -> Any | None:
    """A fresh `Gatherer` with analyze.py's stopwords, lead length and pair switch, or
    None when the C module is not in use."""
    mod = native_module()
    if mod is None:
        return None
    return mod.Gatherer(analyze.STOPWORDS, LEAD_TERMS, analyze.BIGRAMS)
