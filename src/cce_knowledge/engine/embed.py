"""Deterministic 256-d hash embedder (FNV-1a-64 buckets, docs/spec/core.md §6.2)."""

from __future__ import annotations

import math
from collections import _count_elements  # type: ignore[attr-defined]

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


def sparse_counts(tokens: list[bytes]) -> dict[int, int]:
    """bucket -> signed integer component, non-zero entries only (before normalising)."""
    slots: dict[int, int] = {}
    _count_elements(slots, map(_SLOTS.__getitem__, tokens))  # C-level counting
    comps: dict[int, int] = {}
    for slot, n in slots.items():
        if slot >= DIM:
            comps[slot - DIM] = comps.get(slot - DIM, 0) - n
        else:
            comps[slot] = comps.get(slot, 0) + n
    return {b: x for b, x in comps.items() if x}


def embed_sparse(data: bytes) -> dict[int, int]:
    """`sparse_counts` of the tokens of UTF-8 bytes; `dense` turns it into the vector."""
    return sparse_counts(tokenize_bytes(data))


def dense(comps: dict[int, int]) -> list[float]:
    """The unit vector of sparse integer components (256 zeros when there are none)."""
    v = [0.0] * DIM
    if comps:
        # Components are integers, so the squared norm is exact whatever the order.
        norm = math.sqrt(float(sum([x * x for x in comps.values()])))
        for b, x in comps.items():
            v[b] = x / norm
    return v


def embed_token_bytes(tokens: list[bytes]) -> list[float]:
    """Embed ASCII-lowercased token bytes (see `tokenize_bytes`)."""
    return dense(sparse_counts(tokens))


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
