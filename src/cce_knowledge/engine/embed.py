"""Deterministic 256-d hash embedder (FNV-1a-64 buckets, conformance-core.md §6.2)."""

from __future__ import annotations

import math
from itertools import repeat
from operator import mul, sub, truediv

from cce_knowledge.engine.tokenizer import tokenize_bytes

DIM = 256
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = (1 << 64) - 1


def fnv1a64(data: bytes) -> int:
    h = _FNV_OFFSET
    for b in data:
        h = ((h ^ b) * _FNV_PRIME) & _MASK
    return h


class _SlotTable(dict[bytes, int]):
    """token bytes -> slot in a 512-wide accumulator: bucket, +256 when the sign is -1.

    Tokens repeat heavily, so FNV runs once per distinct token; the table is bounded.
    """

    def __missing__(self, tok: bytes) -> int:
        h = fnv1a64(tok)
        slot = h % DIM + (DIM if h >> 63 else 0)
        if len(self) < 2_000_000:
            self[tok] = slot
        return slot


_SLOTS = _SlotTable()


def embed_token_bytes(tokens: list[bytes]) -> list[float]:
    """Embed ASCII-lowercased token bytes (see `tokenize_bytes`)."""
    # Runs once per chunk of the corpus: a plain loop over C-mapped slots beats
    # Counter (measured), and the rest is C-level map/sum.
    acc = [0] * (2 * DIM)
    for slot in map(_SLOTS.__getitem__, tokens):
        acc[slot] += 1
    v = list(map(sub, acc[:DIM], acc[DIM:]))
    # Components are integers, so the squared norm is exact whatever the order.
    sq = sum(map(mul, v, v))
    if sq == 0:
        return [0.0] * DIM
    return list(map(truediv, v, repeat(math.sqrt(float(sq)), DIM)))


def embed_tokens(tokens: list[str]) -> list[float]:
    return embed_token_bytes([t.encode("ascii") for t in tokens])


def hash_embed(text: str) -> list[float]:
    return embed_token_bytes(tokenize_bytes(text.encode("utf-8")))


def hash_embed_bytes(data: bytes) -> list[float]:
    """`hash_embed` of UTF-8 bytes (skips an encode when the caller holds bytes)."""
    return embed_token_bytes(tokenize_bytes(data))


def cosine(a: list[float], b: list[float]) -> float:
    """Sequential dot product over the common prefix (no normalisation: inputs are unit)."""
    s = 0.0
    for x, y in zip(a, b, strict=False):
        s += x * y
    return s
