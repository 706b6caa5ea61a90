"""Names closest to a mistyped one, for error messages ("did you mean …").

Candidates often come from an untrusted place (a cache's corpus ids, a store's record
ids), so the work is bounded: each name is compared on its first `_CHARS` characters
only, and difflib's cheap upper bounds discard most candidates before the real ratio.
Those bounds discard nothing when every candidate looks alike (100,000 ids sharing
150 characters took minutes): past `_EXACT` candidates, only a shortlist is compared
(`shortlist`: the neighbours of the name in sorted order, by prefix and by suffix), so
the cost is one sort plus at most `4 * _NEIGHBOURS` ratios, whatever the ids look like.
"""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Iterable

_CHARS = 160
#: Up to this many candidates, every one is compared (the exact answer).
_EXACT = 1000
#: Candidates kept on each side of the name, in each of the two sorted orders.
_NEIGHBOURS = 64


def _near(name: str, ordered: list[str]) -> list[str]:
    at = bisect.bisect_left(ordered, name)
    return ordered[max(0, at - _NEIGHBOURS) : at + _NEIGHBOURS]


def shortlist(name: str, candidates: Iterable[str]) -> list[str]:
    """The distinct candidates worth comparing with `name`: all of them when they are
    few, else those next to it in sorted order (they share its longest prefixes) and
    next to it in the order of reversed names (its longest suffixes) — a typo leaves
    one of the two ends intact. Deterministic; one sort, no per-candidate Python work."""
    names = list(dict.fromkeys(candidates))
    if len(names) <= _EXACT:
        return names
    key = name[:_CHARS]
    by_prefix = _near(key, sorted(c[:_CHARS] for c in names))
    by_suffix = _near(key[::-1], sorted(c[:_CHARS][::-1] for c in names))
    wanted = set(by_prefix) | {s[::-1] for s in by_suffix}
    return [c for c in names if c[:_CHARS] in wanted]


def nearest_first(name: str, candidates: Iterable[str], *, limit: int) -> list[str]:
    """Up to `limit` distinct candidates, the most similar to `name` first (ties by
    name, so the order is deterministic)."""
    m = difflib.SequenceMatcher(autojunk=False)
    m.set_seq2(name[:_CHARS])
    scored = []
    for c in shortlist(name, candidates):
        m.set_seq1(c[:_CHARS])
        scored.append((-m.ratio(), c))
    scored.sort()
    return [c for _, c in scored[:limit]]


def closest(name: str, candidates: Iterable[str], *, cutoff: float = 0.5) -> str | None:
    """The candidate most similar to `name` when similar enough, else None."""
    m = difflib.SequenceMatcher(autojunk=False)
    m.set_seq2(name[:_CHARS])
    best, best_ratio = None, cutoff
    for c in shortlist(name, candidates):
        m.set_seq1(c[:_CHARS])
        # real_quick_ratio and quick_ratio are upper bounds of ratio: cheap rejections.
        if m.real_quick_ratio() < best_ratio or m.quick_ratio() < best_ratio:
            continue
        r = m.ratio()
        if r >= best_ratio and (best is None or r > best_ratio or c < best):
            best, best_ratio = c, r
    return best
