"""Names closest to a mistyped one, for error messages ("did you mean …").

Candidates often come from an untrusted place (a cache's corpus ids, a store's record
ids), so the work is bounded: each name is compared on its first `_CHARS` characters
only, and difflib's cheap upper bounds discard most candidates before the real ratio.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

_CHARS = 160


def nearest_first(name: str, candidates: Iterable[str], *, limit: int) -> list[str]:
    """Up to `limit` distinct candidates, the most similar to `name` first (ties by
    name, so the order is deterministic)."""
    m = difflib.SequenceMatcher(autojunk=False)
    m.set_seq2(name[:_CHARS])
    scored = []
    for c in dict.fromkeys(candidates):
        m.set_seq1(c[:_CHARS])
        scored.append((-m.ratio(), c))
    scored.sort()
    return [c for _, c in scored[:limit]]


def closest(name: str, candidates: Iterable[str], *, cutoff: float = 0.5) -> str | None:
    """The candidate most similar to `name` when similar enough, else None."""
    m = difflib.SequenceMatcher(autojunk=False)
    m.set_seq2(name[:_CHARS])
    best, best_ratio = None, cutoff
    for c in candidates:
        m.set_seq1(c[:_CHARS])
        # real_quick_ratio and quick_ratio are upper bounds of ratio: cheap rejections.
        if m.real_quick_ratio() < best_ratio or m.quick_ratio() < best_ratio:
            continue
        r = m.ratio()
        if r >= best_ratio and (best is None or r > best_ratio or c < best):
            best, best_ratio = c, r
    return best
