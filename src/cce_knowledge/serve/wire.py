"""The `/docs` wire rules (docs/spec/serve.md), pure functions: what the reference's
`cce corpus serve` does with a request's bytes, and the body it answers.

Everything here runs on untrusted input in one pass (linear time): the query string,
the Authorization header, and the section text fitted to the body cap.
"""

from __future__ import annotations

import hmac
import unicodedata
from collections.abc import Iterable
from typing import Protocol

from cce_knowledge.core.jsonout import canonical
from cce_knowledge.core.rustcompat import RUST_WS, rs_trim, rs_trim_end

#: A served body's cap in characters (Unicode scalars), and the `q` cap.
BODY_CHARS = 500
Q_CHARS = 500
ELLIPSIS = "\u2026"

UNAUTHORIZED = b'{"error":"unauthorized"}'
METHOD_NOT_ALLOWED = b'{"error":"method not allowed"}'
NOT_FOUND = b'{"error":"not found"}'
MISSING_SERVICE = b'{"error":"missing service"}'
EMPTY_DOCS = b'{"docs":[]}'

_HEX = {c: int(chr(c), 16) for c in b"0123456789abcdefABCDEF"}


class DocHit(Protocol):
    @property
    def chunk_id(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def content(self) -> str: ...


def percent_decode(raw: bytes) -> str:
    """One form-urlencoded component: `+` is a space, `%XX` a byte (a malformed escape
    stays literal), then bytes → text with invalid UTF-8 replaced by U+FFFD."""
    out = bytearray()
    i, n = 0, len(raw)
    while i < n:
        b = raw[i]
        if b == 0x2B:  # +
            out.append(0x20)
            i += 1
        elif b == 0x25 and i + 2 < n and raw[i + 1] in _HEX and raw[i + 2] in _HEX:
            out.append(_HEX[raw[i + 1]] * 16 + _HEX[raw[i + 2]])
            i += 3
        else:
            out.append(b)
            i += 1
    return out.decode("utf-8", "replace")


def _pairs(query: bytes) -> Iterable[tuple[bytes, bytes]]:
    for pair in query.split(b"&"):
        key, eq, value = pair.partition(b"=")
        if eq:
            yield key, value


def service_param(query: bytes) -> str | None:
    """The first `service=` whose decoded value is not blank; None when there is none.
    The key is compared undecoded, as the reference does."""
    for key, value in _pairs(query):
        if key == b"service":
            decoded = percent_decode(value)
            if rs_trim(decoded):
                return decoded
    return None


def fence_terms(raw: str) -> str | None:
    """Control characters (Unicode Cc) become spaces, the text is cut at Q_CHARS
    characters and trimmed; None when nothing is left."""
    kept = "".join(" " if unicodedata.category(c) == "Cc" else c for c in raw[:Q_CHARS])
    trimmed = rs_trim(kept)
    return trimmed or None


def q_param(query: bytes) -> str | None:
    """The first `q=`, decoded and fenced (None when absent or fenced to nothing: the
    reference does not look at a later `q`)."""
    for key, value in _pairs(query):
        if key == b"q":
            return fence_terms(percent_decode(value))
    return None


def search_query(service: str, q: str | None) -> str:
    return service if q is None else f"{service} {q}"


def fit_body(content: str) -> str:
    """The section fitted to BODY_CHARS characters: whole when it fits; else up to the
    last `.`/`!`/`?` within the cap followed by whitespace (or standing last in it);
    else up to the last whitespace within BODY_CHARS - 1 characters, then `…`."""
    if len(content) <= BODY_CHARS:
        return content
    within = content[:BODY_CHARS]
    for i in range(BODY_CHARS - 1, -1, -1):
        if within[i] in ".!?" and (i + 1 == BODY_CHARS or within[i + 1] in RUST_WS):
            return rs_trim_end(within[: i + 1])
    budget = BODY_CHARS - 1
    window = content[:budget]
    cut = budget
    for i in range(budget - 1, -1, -1):
        if window[i] in RUST_WS:
            cut = i
            break
    return rs_trim_end(window[:cut]) + ELLIPSIS


def docs_body(hits: Iterable[DocHit]) -> bytes:
    """`{"docs":[{"body","id","title"},…]}`: serde_json's compact form, keys sorted."""
    docs = [{"body": fit_body(h.content), "id": h.chunk_id, "title": h.title} for h in hits]
    return canonical({"docs": docs}).encode("utf-8")


def authorized(headers: Iterable[tuple[bytes, bytes]], token: bytes) -> bool:
    """`Authorization: Bearer <token>` (the last such header): the scheme in any case,
    the token compared in constant time (its length may show; its bytes do not)."""
    value = None
    for name, v in headers:
        if name.lower() == b"authorization":
            value = v
    if value is None:
        return False
    text = rs_trim(value.decode("utf-8", "surrogateescape"))
    scheme, sp, presented = text.partition(" ")
    if not sp or scheme.lower() != "bearer" or not scheme.isascii():
        return False
    got = rs_trim(presented).encode("utf-8", "surrogateescape")
    return hmac.compare_digest(got, token)
