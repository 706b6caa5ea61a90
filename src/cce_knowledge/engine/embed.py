"""Deterministic 256-d hash embedder (FNV-1a-64 buckets, conformance-core.md §6.2)."""

from __future__ import annotations

import math
from collections import Counter

from cce_knowledge.engine.tokenizer import tokenize

DIM = 256
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = (1 << 64) - 1

# token -> (bucket, sign). Tokens repeat heavily, so FNV runs once per distinct token.
_BUCKETS: dict[str, tuple[int, int]] = {}


def fnv1a64(data: bytes) -> int:
    h = _FNV_OFFSET
    for b in data:
        h = ((h ^ b) * _FNV_PRIME) & _MASK
    return h


def _bucket(tok: str) -> tuple[int, int]:
    r = _BUCKETS.get(tok)
    if r is None:
        h = fnv1a64(tok.encode("ascii"))
        r = (h % DIM, -1 if h >> 63 else 1)
        if len(_BUCKETS) < 2_000_000:
            _BUCKETS[tok] = r
    return r


def embed_tokens(tokens: list[str]) -> list[float]:
    v = [0] * DIM
    for tok, n in Counter(tokens).items():
        b, s = _bucket(tok)
        v[b] += s * n
    # Components are integers, so the squared norm is exact whatever the order.
    sq = 0
    for x in v:
        sq += x * x
    if sq == 0:
        return [0.0] * DIM
    norm = math.sqrt(float(sq))
    return [x / norm for x in v]


def hash_embed(text: str) -> list[float]:
    return embed_tokens(tokenize(text))


def cosine(a: list[float], b: list[float]) -> float:
    """Sequential dot product over the common prefix (no normalisation: inputs are unit)."""
    s = 0.0
    for x, y in zip(a, b, strict=False):
        s += x * y
    return s
