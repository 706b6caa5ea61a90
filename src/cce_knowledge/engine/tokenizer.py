"""`cce.tokens/v1` tokenizer and token estimator (docs/spec/core.md §6.1).

A token is a maximal run of ASCII `[A-Za-z0-9_]`; every other character (all
non-ASCII included) separates tokens. ASCII-lowercased, no stopwords, no sub-words.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[A-Za-z0-9_]+")
_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def tokenize(text: str) -> list[str]:
    """Tokens in order, duplicates kept."""
    return _TOKEN.findall(text.translate(_LOWER))


_TOKEN_BYTES = re.compile(rb"[a-z0-9_]+")


def tokenize_bytes(data: bytes) -> list[bytes]:
    """Tokens of UTF-8 bytes as bytes. `bytes.lower()` is ASCII-only, as Rust's is."""
    return _TOKEN_BYTES.findall(data.lower())


def estimate_tokens(text: str) -> int:
    """`max(1, len(utf8 bytes) // 4)`."""
    return max(1, len(text.encode("utf-8")) // 4)
