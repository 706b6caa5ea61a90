"""A search hit and how it is shown (docs/spec/core.md §7.3); the final ordering
every ranking shares."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cce_knowledge.core.fields import attrs_of, field_names
from cce_knowledge.core.rustcompat import format6, score_key
from cce_knowledge.engine.redaction.modes import redact_for_display

if TYPE_CHECKING:
    from cce_knowledge.store.snapshots import KnowledgeChunk


@dataclass(frozen=True, slots=True)
class Hit:
    rank: int
    chunk_id: str
    record_id: str
    title: str
    kind: str
    name: str
    state: str | None
    updated_at: str | None
    url: str | None
    score: float
    content: str
    start_line: int
    end_line: int

    @classmethod
    def from_chunk(cls, c: KnowledgeChunk, rank: int, score: float) -> Hit:
        """The hit that cites chunk `c` at `rank` with `score`."""
        return cls(rank=rank, score=score, **attrs_of(c, _FROM_CHUNK))

    def citation(self) -> str:
        """`record_id:start-end` — where the answer is, for humans and agents."""
        return f"{self.display_id()}:{self.start_line}-{self.end_line}"

    def display_id(self) -> str:
        """The record id fit to show: redacted (ids stay raw at rest: they are addresses)."""

        return redact_for_display(self.record_id)


#: A hit's fields that are its chunk's, by the same names (all but rank and score).
_FROM_CHUNK = field_names(Hit, frozenset({"rank", "score"}))

_CC_TRANS = {c: " " for c in [*range(0x00, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]}


def _sanitise(s: str) -> str:
    # Control characters and line/paragraph separators become one space each so a
    # title can never inject a new line into a result header.
    return s.translate(_CC_TRANS)


def provenance_line(title: str, state: str | None, updated_at: str | None, url: str | None) -> str:
    """`[knowledge] Title — state · updated_at · url` (docs/spec/core.md §7.3)."""
    facets = [_sanitise(f) for f in (state, updated_at, url) if f is not None and f != ""]
    line = "[knowledge] " + _sanitise(title)
    if facets:
        line += " — " + " · ".join(facets)
    return line


def hit_header(hit: Hit) -> str:
    prov = provenance_line(hit.title, hit.state, hit.updated_at, hit.url)
    return f"{hit.rank:>2}. [{format6(hit.score)}] {prov} #{hit.chunk_id}"


#: Closed as not planned / won't fix: no ranking returns these chunks (§7.1).
DROPPED_REASONS = ("not_planned", "wontfix")


def live_chunks(chunks: Sequence[KnowledgeChunk]) -> list[KnowledgeChunk]:
    """The chunks a ranking may return: those of records not dropped."""
    return [c for c in chunks if c.state_reason not in DROPPED_REASONS]


def finish_hits(ranked: Sequence[tuple[KnowledgeChunk, float]], top_k: int) -> list[Hit]:
    """Stable sort (score_key ↓, updated_at ↓ with missing = "", chunk_id ↑), cut, number."""
    order = sorted(ranked, key=lambda p: p[0].chunk_id)
    order.sort(key=lambda p: p[0].updated_at or "", reverse=True)
    order.sort(key=lambda p: score_key(p[1]), reverse=True)
    return [Hit.from_chunk(c, r, s) for r, (c, s) in enumerate(order[:top_k], start=1)]
