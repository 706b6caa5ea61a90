#!/usr/bin/env python3
"""Fuzz the native search-index analyser under AddressSanitizer + UBSan.

tests/retrieval/test_analyze_native.py proves `_analyzefast` gives analyze.py's terms
and the pure Python build's index bytes; this proves it never reads or writes out of
bounds, on text of every width (ASCII, Latin-1, UCS-2, UCS-4), tokens longer than its
token cache keeps, and records of one or many sections. Each analysis is also checked
against analyze.py's.

  python3 hatch_build.py --sanitize-analyzer /tmp/asan/_analyzefast.so
  LD_PRELOAD="$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0 \\
      python3 tools/fuzz_analyzefast.py /tmp/asan/_analyzefast.so --seconds 60 --seed 1

Any sanitizer report aborts with a stack trace; a clean run prints the input count.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

from fuzz_common import arguments, load  # this folder (a script's own is on sys.path)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from cce_knowledge.retrieval import analyze  # noqa: E402
from cce_knowledge.retrieval.default import LEAD_TERMS  # noqa: E402

#: Pieces text is made of: identifier shapes, suffixes the stemmer strips, stopwords,
#: separators, and characters of each width.
PIECES = (
    *("HTTPServer", "getUserName", "aws_eks_cluster", "A1b2", "ABCdef", "x_", "_", "__"),
    *("running", "stopped", "allocations", "lifetimes", "realize", "buses", "quizzed"),
    *("ational", "ations", "ness", "ingly", "edly", "sses", "ies", "the", "of", "also"),
    *(" ", "  ", "\n", "-", ".", "é", "ß", "中", "\U0001f600", "\x00", "'"),
)


def text(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.05:  # one long token: past the token cache's length limit
        return rng.choice("aAz_9") * rng.randint(200, 5000) + rng.choice(PIECES)
    if r < 0.15:
        return "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(rng.randint(0, 200)))
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 60)))


def main() -> None:
    args = arguments(__doc__, "_analyzefast")
    mod = load(args.module, "_analyzefast")
    rng = random.Random(args.seed)
    n = 0
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        g = mod.Gatherer(analyze.STOPWORDS, rng.choice([0, 1, 3, LEAD_TERMS]), rng.random() < 0.8)
        for _ in range(rng.randint(1, 8)):
            sections = rng.randint(1, 5)
            for _ in range(sections):
                g.section(text(rng), sections > 1)
            g.record(text(rng))
        t = text(rng)
        got = g.analyze(t)
        if got != analyze.analyze(t):
            raise SystemExit(f"analysis differs from analyze.py on {t!r}")
        g.finish()
        n += 1
    print(f"fuzzed {n} gatherers: no sanitizer report")


if __name__ == "__main__":
    main()
