"""`cce knowledge show`: the stored text a citation names.

A citation is what `search` prints under a hit, `record_id:start-end` (the record id
shown redacted, as every printed record id is), or a hit's chunk id (`#chunk_id` in the
hit's header, what MCP's `expand_chunk` takes): one section. A range that is not one
section's (`record_id:12-40`) names those lines across the record's sections, and a
bare record id the whole record. The store is read through the mapped view: only the
record's chunks are parsed, not the whole store.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from cce_knowledge.core.errors import StoreError
from cce_knowledge.core.nearest import closest, shortlist
from cce_knowledge.core.untrusted import shown
from cce_knowledge.engine.redaction.modes import redact_for_display
from cce_knowledge.store.snapshots import no_store_message, read_current, store_path
from cce_knowledge.store.view import LoadedView, StoreView, open_view

# The record id may itself hold `:` (`gh:acme/app#12`): the line range is the last part.
_CITATION = re.compile(r"(?s)(.+):([0-9]{1,9})-([0-9]{1,9})")
#: What a chunk id looks like (16 hex digits, as the store writes them).
_CHUNK_ID = re.compile(r"[0-9a-f]{16}")
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


#: A shown record id that differs from its stored form holds one of these (a redaction
#: token, or the cut of an over-long id): only such a text needs every id redacted.
_SHOWN_MARKS = ("[REDACTED", "[cut: ")


def _record(view: StoreView, wanted: str) -> str | None:
    """The stored record id `wanted` names: itself, or the raw id of a redacted one."""
    if view.same_record(wanted):
        return wanted
    if not any(mark in wanted for mark in _SHOWN_MARKS):
        return None  # shown == stored for every id that could equal it: not there
    for rid in dict.fromkeys(view.record_ids):
        if redact_for_display(rid) == wanted:
            return rid
    return None


def _closest_record(view: StoreView, wanted: str) -> str | None:
    """The stored id of the record whose shown id is closest to `wanted`. Bounded:
    only a shortlist of ids is redacted and compared (core/nearest.py), unless
    `wanted` holds a redaction token and so can only be near a redacted id."""
    ids = list(dict.fromkeys(view.record_ids))
    if not any(mark in wanted for mark in _SHOWN_MARKS):
        ids = shortlist(wanted, ids)
    # Compared as shown: the user typed (or mistyped) what search printed.
    shown_ids = {redact_for_display(r): r for r in ids}
    near = closest(wanted, shown_ids)
    return None if near is None else shown_ids[near]


def _miss(view: StoreView, wanted: str) -> StoreError:
    rid = _closest_record(view, wanted)
    if rid is None:
        hint = "no record id is close to it"
    else:
        hint = f"the closest record is {shown(redact_for_display(rid))} ({_listing(view, rid)})"
    return StoreError(
        f"no record `{shown(wanted)}` in the installed store; {hint} — "
        "`cce knowledge search` prints citations"
    )


@dataclass(frozen=True, slots=True)
class CitedLines:
    """A whole record (`record_id`), or the lines `start-end` of one across its
    sections: the sections that hold them, in line order, each cut to those lines."""

    record_id: str
    start_line: int
    end_line: int
    sections: tuple[CitedSection, ...]

    def citation(self) -> str:
        return f"{self.record_id}:{self.start_line}-{self.end_line}"

    def as_json(self) -> dict[str, Any]:
        first = self.sections[0]
        return {
            "citation": self.citation(),
            "record_id": self.record_id,
            "lines": [self.start_line, self.end_line],
            "title": first.title,
            "url": first.url,
            "state": first.state,
            "updated_at": first.updated_at,
            "sections": [
                {
                    "citation": s.citation(),
                    "chunk_id": s.chunk_id,
                    "lines": [s.start_line, s.end_line],
                    "breadcrumb": s.name,
                    "shown_lines": list(_cut(s, self.start_line, self.end_line)[0]),
                    "content": _cut(s, self.start_line, self.end_line)[1],
                }
                for s in self.sections
            ],
        }


def _cut(sec: CitedSection, start: int, end: int) -> tuple[tuple[int, int], str]:
    """((first, last) line shown, text) of `sec` within lines start-end."""
    lines = sec.content.split("\n")
    a = max(start, sec.start_line)
    b = min(end, sec.start_line + len(lines) - 1)
    return (a, b), "\n".join(lines[a - sec.start_line : b - sec.start_line + 1])


def section_lines_of(cited: CitedLines) -> list[tuple[CitedSection, list[tuple[int, str]]]]:
    """Each section of `cited` with its numbered lines within the range."""
    out = []
    for s in cited.sections:
        (a, _b), text = _cut(s, cited.start_line, cited.end_line)
        out.append((s, [(a + k, t) for k, t in enumerate(text.split("\n"))]))
    return out


def _sections_of(view: StoreView, rid: str) -> list[CitedSection]:
    return sorted(
        (_section(view, i) for i in view.same_record(rid)),
        key=lambda c: (c.start_line, c.end_line, c.chunk_id),
    )


def _lines(view: StoreView, rid: str, start: int, end: int) -> CitedLines | None:
    """The sections of record `rid` holding any of lines start-end (None: none does)."""
    secs = [s for s in _sections_of(view, rid) if s.start_line <= end and s.end_line >= start]
    if not secs or start > end:
        return None
    first = max(start, secs[0].start_line)
    last = min(end, max(s.end_line for s in secs))
    return CitedLines(redact_for_display(rid), first, last, tuple(secs))


def find_cited(root: str | os.PathLike[str], citation: str) -> CitedSection | CitedLines:
    """What `citation` names in the installed store: one stored section (a chunk id, or
    `record_id:start-end` matching a section exactly), a line range across a record's
    sections (`record_id:start-end`), or a whole record (`record_id`). StoreError
    (naming the closest record, or the record's sections) when it names nothing."""
    text = citation.strip()
    if not text:
        raise StoreError("an empty citation: give `record_id:start-end`, a record id or a chunk id")
    view = _open(root)
    i = view.index_of(text.removeprefix("#"))
    if i is not None:
        return _section(view, i)
    m = _CITATION.fullmatch(text)
    if m is not None:
        wanted, start, end = m.group(1), int(m.group(2)), int(m.group(3))
        rid = _record(view, wanted)
        if rid is not None:
            for j in view.same_record(rid):
                sec = _section(view, j)
                if (sec.start_line, sec.end_line) == (start, end):
                    return sec
            lines = _lines(view, rid, start, end)
            if lines is not None:
                return lines
            raise StoreError(
                f"record {shown(redact_for_display(rid))} has no lines {start}-{end}; its "
                f"sections: {_listing(view, rid)}"
            )
    rid = _record(view, text)
    if rid is not None:
        secs = _sections_of(view, rid)
        last = max(s.end_line for s in secs)
        return CitedLines(redact_for_display(rid), secs[0].start_line, last, tuple(secs))
    if m is not None:
        raise _miss(view, m.group(1))
    if text.startswith("#") or _CHUNK_ID.fullmatch(text):
        near = closest(text.removeprefix("#"), view.chunk_ids, cutoff=0.8)
        hint = f"; the closest chunk id is {shown(near)}" if near is not None else ""
        raise StoreError(
            f"`{shown(text)}` is not a chunk id of the installed store{hint} — "
            "`cce knowledge search` prints citations and chunk ids"
        )
    raise _miss(view, text)
