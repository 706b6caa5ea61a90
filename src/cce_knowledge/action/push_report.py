"""What `cce knowledge push --json` (with or without --dry-run) reported, typed.

The driver decides the shrink guard, the outputs and the summary from this object
alone, so it reads the program-facing JSON, never the human report text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: The guard's verdicts, as `push --json` names them in `guard`.
GUARD_KINDS = ("first-publish", "unchanged", "divergent", "diff", "skipped")


class ReportError(ValueError):
    """`push --json` printed something that is not the report we expect."""


def _str(doc: dict[str, Any], key: str, *, optional: bool = False) -> str:
    v = doc.get(key)
    if v is None and optional:
        return ""
    if not isinstance(v, str):
        raise ReportError(f"`{key}` is not a string")
    return v


def _ids(doc: dict[str, Any], key: str) -> list[str]:
    v = doc.get(key)
    if not isinstance(v, list) or not all(isinstance(i, str) for i in v):
        raise ReportError(f"`{key}` is not a list of record ids")
    return list(v)


def _bool(doc: dict[str, Any], key: str, default: bool = False) -> bool:
    v = doc.get(key, default)
    if not isinstance(v, bool):
        raise ReportError(f"`{key}` is not a boolean")
    return v


@dataclass
class PushReport:
    guard: str  # one of GUARD_KINDS
    corpus: str
    snapshot: str
    remote_snapshot: str = ""
    added_ids: list[str] = field(default_factory=list)
    removed_ids: list[str] = field(default_factory=list)
    changed_ids: list[str] = field(default_factory=list)
    published: bool = False
    unchanged_skipped: bool = False
    key: str = ""
    checksum: str = ""
    data_as_of: str = ""
    pushed_at: str = ""
    retention: str = ""
    pruned: list[str] = field(default_factory=list)
    retention_warning: str = ""
    #: ours: removed ids the extractor left out by author, and its `--authors` mode
    left_out_ids: list[str] = field(default_factory=list)
    left_out_authors: str = ""

    @property
    def added(self) -> int:
        return len(self.added_ids)

    @property
    def removed(self) -> int:
        return len(self.removed_ids)

    @property
    def changed(self) -> int:
        return len(self.changed_ids)

    @classmethod
    def from_json(cls, text: str) -> PushReport:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise ReportError(f"not JSON ({e.msg} at line {e.lineno})") from None
        if not isinstance(doc, dict):
            raise ReportError("not a JSON object")
        guard = _str(doc, "guard")
        if guard not in GUARD_KINDS:
            raise ReportError(f"unknown guard verdict {guard!r}")
        return cls(
            guard=guard,
            corpus=_str(doc, "corpus_id"),
            snapshot=_str(doc, "snapshot"),
            remote_snapshot=_str(doc, "remote_snapshot", optional=True),
            added_ids=_ids(doc, "added"),
            removed_ids=_ids(doc, "removed"),
            changed_ids=_ids(doc, "changed"),
            published=_bool(doc, "published"),
            unchanged_skipped=_bool(doc, "unchanged_skipped"),
            key=_str(doc, "key"),
            checksum=_str(doc, "checksum"),
            data_as_of=_str(doc, "data_as_of", optional=True),
            pushed_at=_str(doc, "pushed_at", optional=True),
            retention=_str(doc, "retention", optional=True),
            pruned=_ids(doc, "pruned"),
            retention_warning=_str(doc, "retention_warning", optional=True),
            **_left_out(doc),
        )


def _left_out(doc: dict[str, Any]) -> dict[str, Any]:
    """`left_out_by_author` (absent or null from an older cce: nothing left out)."""
    lo = doc.get("left_out_by_author")
    if lo is None:
        return {}
    if not isinstance(lo, dict):
        raise ReportError("`left_out_by_author` is not an object")
    return {"left_out_ids": _ids(lo, "records"), "left_out_authors": _str(lo, "authors")}
