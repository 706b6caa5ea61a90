"""`cce knowledge show`: the stored section a citation names.

A citation is what `search` prints under a hit, `record_id:start-end` (the record id
shown redacted, as every printed record id is), or a hit's chunk id (`#chunk_id` in the
hit's header, what MCP's `expand_chunk` takes). The store is read through the mapped
view: one chunk is parsed, not the whole store.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from cce_knowledge.core.errors import StoreError
from cce_knowledge.core.nearest import closest
from cce_knowledge.core.untrusted import shown
from cce_knowledge.engine.redaction.modes import redact_for_display
from cce_knowledge.store.snapshots import no_store_message, read_current, store_path
from cce_knowledge.store.view import LoadedView, StoreView, open_view

# The record id may itself hold `:` (`gh:acme/app#12`): the line range is the last part.
_CITATION = re.compile(r"(?s)(.+):([0-9]{1,9})-([0-9]{1,9})")
#: Sections of a record listed in an error (a record can have hundreds).
_LISTED = 8


@dataclass(frozen=True, slots=True)
class CitedSection:
    """One stored section and its facets; `record_id` is the id fit to show."""

    record_id: str
    chunk_id: str
    start_line: int
    end_line: int
    kind: str
    name: str
    title: str
    url: str | None
    state: str | None
    updated_at: str | None
    content: str

    def citation(self) -> str:
        return f"{self.record_id}:{self.start_line}-{self.end_line}"

    def as_json(self) -> dict[str, Any]:
        return {
            "citation": self.citation(),
            "record_id": self.record_id,
            "chunk_id": self.chunk_id,
            "lines": [self.start_line, self.end_line],
            "kind": self.kind,
            "breadcrumb": self.name,
            "title": self.title,
            "url": self.url,
            "state": self.state,
            "updated_at": self.updated_at,
            "content": self.content,
        }


def _open(root: str | os.PathLike[str]) -> StoreView:
    try:
        snapshot = read_current(root)
    except (OSError, UnicodeDecodeError):
        raise StoreError(no_store_message(root)) from None
    path = store_path(root, snapshot)
    try:
        view = open_view(path)
        view.chunk_ids  # noqa: B018 — the chunk scan: a damaged store fails here, not later
    except FileNotFoundError:
        raise StoreError(no_store_message(root, f"`current` names {snapshot}, absent")) from None
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise StoreError(f"the knowledge store {path} cannot be read: {e}") from None
    return view


def _head(view: StoreView, i: int) -> dict[str, Any]:
    """Chunk i's members without its embedding."""
    if isinstance(view, LoadedView):  # a re-formatted store, parsed whole
        c = view.store.chunks[i]
        return {k: getattr(c, k) for k in _FACETS}
    head, _ = view.head(i)
    return head


_FACETS = (
    "record_id chunk_id start_line end_line kind name title url state updated_at content".split()
)


def _section(view: StoreView, i: int) -> CitedSection:
    head = _head(view, i)
    return CitedSection(
        record_id=redact_for_display(head["record_id"]),
        chunk_id=head["chunk_id"],
        start_line=head["start_line"],
        end_line=head["end_line"],
        kind=head["kind"],
        name=head.get("name", ""),
        title=head.get("title", ""),
        url=head.get("url"),
        state=head.get("state"),
        updated_at=head.get("updated_at"),
        content=head["content"],
    )


def _listing(view: StoreView, record_id: str) -> str:
    """The record's first sections' citations, in line order."""
    secs = sorted(
        (_section(view, i) for i in view.same_record(record_id)),
        key=lambda c: (c.start_line, c.chunk_id),
    )
    listed = ", ".join(shown(c.citation()) for c in secs[:_LISTED])
    return listed + (f" and {len(secs) - _LISTED} more" if len(secs) > _LISTED else "")


def _record(view: StoreView, wanted: str) -> str | None:
    """The stored record id `wanted` names: itself, or the raw id of a redacted one."""
    if view.same_record(wanted):
        return wanted
    for rid in dict.fromkeys(view.record_ids):
        if redact_for_display(rid) == wanted:
            return rid
    return None


def find_section(root: str | os.PathLike[str], citation: str) -> CitedSection:
    """The section `citation` names in the installed store; StoreError (naming the
    closest record, or the record's sections) when it names none."""
    text = citation.strip()
    if not text:
        raise StoreError("an empty citation: give `record_id:start-end` or a chunk id")
    view = _open(root)
    i = view.index_of(text.removeprefix("#"))
    if i is not None:
        return _section(view, i)
    m = _CITATION.fullmatch(text)
    if m is None:
        near = closest(text, view.chunk_ids, cutoff=0.8)
        hint = f"; the closest chunk id is {shown(near)}" if near is not None else ""
        raise StoreError(
            f"`{shown(text)}` is neither a citation `record_id:start-end` nor a chunk id of "
            f"the installed store{hint} — `cce knowledge search` prints both"
        )
    wanted, start, end = m.group(1), int(m.group(2)), int(m.group(3))
    rid = _record(view, wanted)
    if rid is None:
        # Compared as shown: the user typed (or mistyped) what search printed.
        shown_ids = {redact_for_display(r): r for r in dict.fromkeys(view.record_ids)}
        near = closest(wanted, shown_ids)
        if near is None:
            hint = "no record id is close to it"
        else:
            hint = f"the closest record is {shown(near)} ({_listing(view, shown_ids[near])})"
        raise StoreError(
            f"no record `{shown(wanted)}` in the installed store; {hint} — "
            "`cce knowledge search` prints citations"
        )
    for j in view.same_record(rid):
        sec = _section(view, j)
        if (sec.start_line, sec.end_line) == (start, end):
            return sec
    raise StoreError(
        f"record {shown(redact_for_display(rid))} has no section at lines {start}-{end}; its sections: "
        f"{_listing(view, rid)}"
    )
