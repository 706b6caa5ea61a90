"""The `cce.knowledge/v1` record (docs/spec/core.md §1.2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class KnowledgeRecord:
    id: str
    title: str
    body: str
    source: str
    url: str | None = None
    state: str | None = None
    state_reason: str | None = None
    updated_at: str | None = None
    labels: list[str] = field(default_factory=list)
    group: str | None = None
    links: list[str] = field(default_factory=list)
    extra: Any = None


#: The record's fields in declaration order (also the positions of its array form),
#: each with its JSON kind: `str` (required), `nullable` (a string or null), `strings`
#: (an array of strings) or `value` (any JSON). Parsers type a record by it.
RECORD_FIELD_KINDS: tuple[tuple[str, str], ...] = (
    ("id", "str"),
    ("title", "str"),
    ("body", "str"),
    ("source", "str"),
    ("url", "nullable"),
    ("state", "nullable"),
    ("state_reason", "nullable"),
    ("updated_at", "nullable"),
    ("labels", "strings"),
    ("group", "nullable"),
    ("links", "strings"),
    ("extra", "value"),
)
