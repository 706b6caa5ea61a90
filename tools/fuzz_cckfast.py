#!/usr/bin/env python3
"""Fuzz the native `.cck` accelerator under AddressSanitizer + UBSan (a crash check).

The tests prove `_cckfast` gives the Python fast path's answers; this proves it never
reads or writes out of bounds on damaged input (flipped, deleted, inserted bytes,
truncation) for all of `render`, `tokens`, `export` and `float_text`.

  python3 hatch_build.py --sanitize /tmp/asan/_cckfast.so
  LD_PRELOAD="$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0 \\
      python3 tools/fuzz_cckfast.py /tmp/asan/_cckfast.so --seconds 90 --seed 1

Any sanitizer report aborts with a stack trace; a clean run prints the input count.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import numpy as np
from fuzz_common import arguments, load  # this folder (a script's own is on sys.path)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository root: tests.sync

from tests.helpers.cck import many, raw_cck  # noqa: E402

from cce_knowledge.store.snapshots import dumps  # noqa: E402
from cce_knowledge.sync import cck  # noqa: E402


def exact(data: bytes) -> np.ndarray:
    """The bytes in a buffer of exactly their length (numpy mallocs nbytes), so the
    sanitizer's redzone starts at the first byte past the end -- a `bytes` object has a
    NUL there that would hide a one-byte overrun."""
    arr = np.empty(len(data), dtype=np.uint8)
    arr[:] = np.frombuffer(data, dtype=np.uint8)
    return arr


def damage(rng: random.Random, src: bytes, start: int) -> bytes:
    b = bytearray(src)
    for _ in range(rng.randint(1, 6)):
        pos = rng.randrange(start, len(b))
        op = rng.random()
        if op < 0.4:
            b[pos] = rng.randrange(256)
        elif op < 0.7:
            del b[pos : pos + rng.randint(1, 40)]
        else:
            b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    if rng.random() < 0.2:
        b = b[: rng.randrange(start, len(b) + 1)]
    return bytes(b)


def main() -> None:
    args = arguments(__doc__, "_cckfast")
    mod = load(args.module, "_cckfast")
    rng = random.Random(args.seed)
    artifact = raw_cck(many(12))
    store = dumps(many(12))
    a_lo = artifact.find(b"\n") + 1
    s_lo = store.find(cck._STORE_OPEN) + len(cck._STORE_OPEN)
    n = 0
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        data = exact(damage(rng, artifact, a_lo))
        mod.render(data, a_lo, len(data), cck._bits_text)
        mod.tokens(data, a_lo, len(data))
        data = exact(damage(rng, store, s_lo))
        mod.export(data, s_lo, len(data))
        # A range ending inside the buffer: the same checks must hold at `hi`.
        cut = max(s_lo, len(data) - len(cck._STORE_CLOSE))
        mod.export(exact(bytes(data[:cut])), s_lo, cut)
        n += 2
    for _ in range(200_000):
        mod.float_text(rng.getrandbits(64))
    print(f"fuzzed {n} damaged inputs and 200000 float bit patterns: no sanitizer report")


if __name__ == "__main__":
    main()
