"""Adversarial inputs for a regex, and a growth check: does matching time grow faster
than the input?

A backtracking engine goes super-linear on a pattern's own pieces repeated (every
start re-scans the same run), on long runs of what a repetition accepts followed by
something it cannot end on, and on near-misses of a real match. `hostile_inputs`
builds those from the pattern itself: its literals, a sample match, the runs its
classes accept. `growth` times a function on each family at growing sizes and
returns the smallest ratio between consecutive sizes (4x apart: ~4 when linear,
~16 when quadratic, at every step).
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Iterator
from re import _constants as sre_c  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

_CATEGORY_SAMPLE = {
    sre_c.CATEGORY_DIGIT: "7",
    sre_c.CATEGORY_NOT_DIGIT: "a",
    sre_c.CATEGORY_SPACE: " ",
    sre_c.CATEGORY_NOT_SPACE: "a",
    sre_c.CATEGORY_WORD: "a",
    sre_c.CATEGORY_NOT_WORD: " ",
}


def _set_sample(av: Any) -> str:
    """A character an IN item accepts (a letter or digit when it can)."""
    if av and av[0][0] is sre_c.NEGATE:
        for c in "aZ7 .":
            if not re.fullmatch(_set_regex(av), c):
                continue
            return c
        return "a"
    for op, v in av:
        if op is sre_c.LITERAL:
            return chr(v)
        if op is sre_c.RANGE:
            return chr(v[0])
        if op is sre_c.CATEGORY:
            return _CATEGORY_SAMPLE.get(v, "a")
    return "a"


def _set_regex(av: Any) -> str:
    # Rebuild a tiny pattern for a negated set by matching candidates one by one.
    sub = sre_parse.SubPattern(sre_parse.State(), [(sre_c.IN, av)])
    return _unparse(sub)


def _unparse(sub: Any) -> str:
    # Enough of an unparser for a single IN item.
    ((_op, av),) = list(sub)
    parts: list[str] = []
    neg = ""
    for o, v in av:
        if o is sre_c.NEGATE:
            neg = "^"
        elif o is sre_c.LITERAL:
            parts.append(re.escape(chr(v)))
        elif o is sre_c.RANGE:
            parts.append(f"{re.escape(chr(v[0]))}-{re.escape(chr(v[1]))}")
        elif o is sre_c.CATEGORY:
            parts.append(
                {
                    sre_c.CATEGORY_DIGIT: r"\d",
                    sre_c.CATEGORY_NOT_DIGIT: r"\D",
                    sre_c.CATEGORY_SPACE: r"\s",
                    sre_c.CATEGORY_NOT_SPACE: r"\S",
                    sre_c.CATEGORY_WORD: r"\w",
                    sre_c.CATEGORY_NOT_WORD: r"\W",
                }[v]
            )
    return f"[{neg}{''.join(parts)}]"


def sample(seq: Any, extra: int = 0) -> str:
    """A string shaped like a match of `seq`: each repeat `lo + extra` times (capped),
    each branch its first arm, lookarounds skipped."""
    out: list[str] = []
    for op, av in seq:
        if op is sre_c.LITERAL:
            out.append(chr(av))
        elif op is sre_c.NOT_LITERAL:
            out.append("a" if av != ord("a") else "b")
        elif op is sre_c.ANY:
            out.append("a")
        elif op is sre_c.IN:
            out.append(_set_sample(av))
        elif op is sre_c.SUBPATTERN:
            out.append(sample(av[-1], extra))
        elif op is sre_c.BRANCH:
            out.append(sample(av[1][0], extra))
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, sre_c.POSSESSIVE_REPEAT):
            lo, hi, item = av
            n = min(max(lo + extra, 1 if lo == 0 and extra else lo), hi, lo + 70)
            out.append(sample(item, extra) * n)
        elif op is sre_c.ATOMIC_GROUP:
            out.append(sample(av, extra))
        # AT, ASSERT, ASSERT_NOT, GROUPREF: nothing
    return "".join(out)


def literals(seq: Any) -> set[str]:
    """Every run of two or more literal characters the pattern spells, and the first
    arm's characters of short branches."""
    found: set[str] = set()
    run: list[str] = []

    def flush() -> None:
        if len(run) >= 2:
            found.add("".join(run))
        run.clear()

    for op, av in seq:
        if op is sre_c.LITERAL:
            run.append(chr(av))
            continue
        flush()
        if op is sre_c.SUBPATTERN:
            found |= literals(av[-1])
        elif op is sre_c.BRANCH:
            for b in av[1]:
                found |= literals(b)
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, sre_c.POSSESSIVE_REPEAT):
            found |= literals(av[2])
        elif op is sre_c.ATOMIC_GROUP:
            found |= literals(av)
        elif op in (sre_c.ASSERT, sre_c.ASSERT_NOT):
            found |= literals(av[1])
    flush()
    return found


def _runs(seq: Any) -> set[str]:
    """A character each repetition accepts (the runs a backtracker walks)."""
    found: set[str] = set()
    for op, av in seq:
        if op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, sre_c.POSSESSIVE_REPEAT):
            found.add(sample(av[2])[:1] or "a")
            found |= _runs(av[2])
        elif op is sre_c.SUBPATTERN:
            found |= _runs(av[-1])
        elif op is sre_c.BRANCH:
            for b in av[1]:
                found |= _runs(b)
    found.discard("")
    return found


def families(pattern: str, flags: int = 0) -> dict[str, Callable[[int], str]]:
    """Named builders: size -> hostile text for `pattern`."""
    parsed = sre_parse.parse(pattern, flags)
    lits = sorted(literals(parsed), key=lambda s: (-len(s), s))[:3]
    all_lits = "".join(lits)
    good = sample(parsed, 1)
    short = sample(parsed)
    runs = sorted(_runs(parsed) | {" ", "a", "."})
    fam: dict[str, Callable[[int], str]] = {}

    def rep(unit: str, tail: str = "", head: str = "") -> Callable[[int], str]:
        unit = unit or "a"
        return lambda n: head + unit * max(1, (n - len(head) - len(tail)) // len(unit)) + tail

    for lit in lits:
        fam[f"{lit!r} repeated, every literal once"] = rep(lit, " " + all_lits)
        fam[f"{lit!r} repeated, glued"] = rep(lit, all_lits)
        fam[f"| {lit!r} then spaces"] = rep(" ", "x", "| " + lit)
        for ch in runs:
            fam[f"{lit!r} then a run of {ch!r}"] = rep(ch, "\x00" + all_lits, lit)
    for cut in {1, 2, len(good) // 2}:
        if 0 < cut < len(good):
            fam[f"near-miss -{cut} repeated"] = rep(good[:-cut])
            fam[f"near-miss -{cut} spaced"] = rep(good[:-cut] + " ")
    fam["sample repeated"] = rep(good)
    fam["short sample repeated"] = rep(short)
    fam["sample then spaces"] = rep(" ", "x", good[: len(good) // 2])
    for ch in runs:
        fam[f"run of {ch!r}, every literal"] = rep(ch, all_lits, all_lits)
    return fam


def best_time(
    fn: Callable[[str], object], text: str, repeat: int, budget: float = float("inf")
) -> float:
    """The fastest of `repeat` runs (one run when it already takes over `budget`)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - t0)
        if best > budget:
            break
    return best


def growth(
    fn: Callable[[str], object],
    build: Callable[[int], str],
    sizes: tuple[int, ...] = (1024, 4096, 16384),
    repeat: int = 3,
    floor: float = 2e-4,
    budget: float = 2.0,
) -> tuple[float, list[float]]:
    """(smallest ratio of consecutive timings, the timings). Timings under `floor`
    seconds are raised to it: below that, noise is all a ratio would measure."""
    times: list[float] = []
    for n in sizes:
        t = best_time(fn, build(n), repeat, budget)
        times.append(max(t, floor))
        if t > budget:  # already hopeless: the next sizes would only take longer
            times.extend(t * 64**k for k in range(1, len(sizes) - len(times) + 1))
            break
    ratios = [b / a for a, b in itertools.pairwise(times)]
    # Every step, not one: a step from one cache level to the next can cost a linear
    # function a one-off jump; super-linear growth shows at each step.
    return min(ratios), times


def scan(
    targets: dict[str, tuple[str, int, Callable[[str], object]]],
    limit: float,
    min_time: float = 0.02,
    **kw: Any,
) -> Iterator[tuple[str, str, float, list[float]]]:
    """(target, family, ratio, timings) for every family whose ratio exceeds `limit`
    and whose largest input took over `min_time` seconds (a function that handles it
    faster is fast, whatever the ratio of its noise). A family first over the limit
    is timed again (noise on a shared machine)."""
    for name, (pattern, flags, fn) in targets.items():
        seen: set[str] = set()
        for fname, build in families(pattern, flags).items():
            probe = build(256)
            if probe in seen:
                continue
            seen.add(probe)
            ratio, times = growth(fn, build, **kw)
            if ratio > limit and times[-1] > min_time:
                ratio, times = growth(fn, build, **{**kw, "repeat": 5})
                if ratio > limit and times[-1] > min_time:
                    yield name, fname, ratio, times
                    return  # one family says it; the others would only take long
