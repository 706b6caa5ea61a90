"""Small helpers shared by command modules."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from cce_knowledge.core import progress

if TYPE_CHECKING:
    from cce_knowledge.retrieval.searcher import HybridRanker
    from cce_knowledge.store.snapshots import SearchBuild


def hybrid_ranking() -> HybridRanker:
    """The hybrid ranking the edge gives a `Searcher` (imported only when used: numpy
    and the provider client cost a plain search nothing)."""
    from cce_knowledge.semantic.hybrid import HybridRanking

    return HybridRanking()


def add_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dir",
        default=".",
        metavar="ROOT",
        help="project root holding .cce/ (default: the current directory)",
    )


def add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress on stderr (a bar on a terminal, a line every few seconds otherwise)",
    )


def report_search_build(built: SearchBuild | None) -> None:
    """The search-index step's line on stderr (stdout keeps the reference's lines)."""

    sys.stdout.flush()
    if built is None or not built.built:
        return
    if built.error is not None:
        print(
            f"warning: the search index could not be built ({built.error}); "
            "the first search will build it",
            file=sys.stderr,
        )
        return
    progress.note(f"search index: built in {built.seconds:.1f} s ({built.size / 1e6:.1f} MB)")
