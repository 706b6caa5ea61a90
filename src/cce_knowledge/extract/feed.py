"""Deterministic feed writer: same records → same bytes → same snapshot.

One compact JSON object per line, keys in contract order, absent optionals omitted
(None and empty lists are never written), LF endings and a trailing LF. Adapters sort
their records by a stable key before calling `feed_bytes`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from cce_knowledge.contract.record import KnowledgeRecord
from cce_knowledge.core.hidden_text import Removed, sanitize, sanitize_plain
from cce_knowledge.core.untrusted import shown

_OPTIONAL_STR = ("url", "state", "state_reason", "updated_at")
_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(s: str) -> str:
    """Replace lone surrogates (legal in JSON escapes, not in UTF-8) with U+FFFD."""
    return _SURROGATE.sub("\ufffd", s) if _SURROGATE.search(s) else s


def normalise_newlines(s: str) -> str:
    """CRLF and lone CR → LF, so a Windows-edited source yields the same feed."""
    if "\r" not in s:
        return s
    return s.replace("\r\n", "\n").replace("\r", "\n")


def record_dict(rec: KnowledgeRecord) -> dict[str, Any]:
    """The record as an ordered dict in contract key order, optionals omitted."""
    d: dict[str, Any] = {
        "id": clean_text(rec.id),
        "title": clean_text(rec.title),
        "body": clean_text(rec.body),
        "source": clean_text(rec.source),
    }
    for key in _OPTIONAL_STR:
        v = getattr(rec, key)
        if v is not None:
            d[key] = clean_text(v)
    if rec.labels:
        d["labels"] = [clean_text(x) for x in rec.labels]
    if rec.group is not None:
        d["group"] = clean_text(rec.group)
    if rec.links:
        d["links"] = [clean_text(x) for x in rec.links]
    return d


def record_line(rec: KnowledgeRecord) -> str:
    """One feed line (without the newline)."""
    return json.dumps(record_dict(rec), ensure_ascii=False, separators=(",", ":"))


def feed_bytes(records: Iterable[KnowledgeRecord]) -> bytes:
    """The feed file's bytes for records already in their final order."""
    return "".join(record_line(r) + "\n" for r in records).encode("utf-8")


def sanitize_record(rec: KnowledgeRecord) -> tuple[KnowledgeRecord, Removed]:
    """The record without hidden text (core/hidden_text.py) and what was removed.

    Title and body are Markdown (comments outside code go too); the other facets are
    plain values (characters only). The id is an address and stays as it is."""
    removed = Removed()
    title = sanitize(rec.title, removed)
    body = sanitize(rec.body, removed)

    def plain(v: str | None) -> str | None:
        return None if v is None else sanitize_plain(v, removed)

    if not removed and not _plain_hidden(rec):
        return rec, removed
    return (
        KnowledgeRecord(
            id=rec.id,
            title=title,
            body=body,
            source=sanitize_plain(rec.source, removed),
            url=plain(rec.url),
            state=plain(rec.state),
            state_reason=plain(rec.state_reason),
            updated_at=plain(rec.updated_at),
            labels=list(dict.fromkeys(sanitize_plain(x, removed) for x in rec.labels)),
            group=plain(rec.group),
            links=list(dict.fromkeys(sanitize_plain(x, removed) for x in rec.links)),
            extra=rec.extra,
        ),
        removed,
    )


def _plain_hidden(rec: KnowledgeRecord) -> bool:
    values = [rec.source, rec.url, rec.state, rec.state_reason, rec.updated_at, rec.group]
    return any(v is not None and sanitize_plain(v) is not v for v in values) or any(
        sanitize_plain(x) is not x for x in (*rec.labels, *rec.links)
    )


def hidden_lines(hidden: dict[str, Removed]) -> list[str]:
    """stderr lines for what hidden-text removal took out, one per record, then a total."""
    lines = [f"hidden text removed from {shown(rid)}: {r.describe()}" for rid, r in hidden.items()]
    if hidden:
        total = Removed()
        for r in hidden.values():
            total.add(r)
        lines.append(f"hidden text removed from {len(hidden)} record(s): {total.describe()}")
    return lines
