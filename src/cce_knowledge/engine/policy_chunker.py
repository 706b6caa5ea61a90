"""The policy chunker: per-document-type chunking (`cce.chunk-policy/v1`, issue 24).

A record a chunk policy selects is cut by these steps instead of the reference's
heading chunker (engine/markdown.py), applied to the redacted rendered document:

1. CRLF (any run of CRs before a LF) becomes LF; line numbers count the normalised
   lines.
2. YAML frontmatter (at the top of the document, or at the top of the body right
   after the `# title` line and its blank line) is dropped.
3. The whole-file gate: fewer than `keep_whole_below` lines give one chunk.
4. Headings come from the same tree-sitter-markdown grammar as the reference (ATX and
   setext; code fences, HTML and indented code hide `#`); only headings that start a
   line count, so chunks are whole lines and never share one.
5. The document splits at headings of level <= `primary_level`; the H1 and the intro
   before the first split heading form the first chunk.
6. Special sections by heading text: `own-chunk` (its own chunk, never size-split),
   `skip` (dropped), `merge-up` (extends the chunk right before it; promoted to its own
   chunk when there is none, e.g. after a skipped section). A deeper heading naming
   `own-chunk` or `skip` is carved out of its section, unless that section is itself
   special (the parent wins).
7. A normal chunk over `max_lines` lines splits once at its headings below
   `primary_level` down to `fallback_level`, never recursively.
8. `skip_empty_sections` drops chunks holding nothing but headings.

Every chunk is a verbatim slice of the normalised document: lines `start_line` to
`end_line` joined by LF, trailing whitespace trimmed as the reference trims (§4.3), is
its content. `kind`, `name`, `token_count` and `chunk_id` follow the reference's
definitions (docs/spec/core.md §4.3, §4.5): `kind` is the text of the innermost heading
whose section holds the chunk's first line, `name` that heading's breadcrumb.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from cce_knowledge.contract.chunk_policy import Policy
from cce_knowledge.core.rustcompat import RUST_WS_CHARS, rs_is_blank
from cce_knowledge.engine.markdown import (
    _SEP_BYTES,
    CRUMB_SEP,
    PREAMBLE,
    MdChunk,
    _get_parser,
    _heading_nodes,
    _too_deep,
    heading_of,
)
from cce_knowledge.engine.record_cost import CostMeter, RecordBudget

#: Why a line is in no chunk.
SKIP_FRONTMATTER = "frontmatter"
SKIP_SECTION = "skip"
SKIP_EMPTY = "empty"
SKIP_BLANK = "blank"

_NORMAL, _OWN, _SKIP, _MERGE = "normal", "own-chunk", "skip", "merge-up"
_FRONT, _GATE, _EMPTY = "frontmatter", "gate", "empty"

_H1_LINE = re.compile(r" {0,3}#(?:[ \t]|$)")
_FM_LINE = re.compile(r"""(?:[ \t]|-[ \t]|-$|#|[A-Za-z0-9_"'][^:]*:(?:[ \t]|$))""")


@dataclass(slots=True)
class PHeading:
    line: int
    #: last line of the heading itself (a setext underline, a multi-line setext text)
    end_line: int
    level: int
    text: str
    #: last line of its section (before the next heading of the same or higher level)
    extent: int = 0
    name: str = ""
    #: this heading's breadcrumb segment (`## Text`)
    segment: str = ""
    #: the heading whose section holds this one
    parent: PHeading | None = None


@dataclass(slots=True)
class PolicyResult:
    chunks: list[MdChunk]
    #: (first line, last line, why) of every line no chunk holds, in order
    skipped: list[tuple[int, int, str]]


@dataclass(slots=True)
class _Unit:
    start: int
    end: int
    role: str


# ---------------------------------------------------------------- steps 1, 2


_CR_LF = re.compile("\r+\n")


def normalise(doc: str) -> str:
    """Step 1: CRLF -> LF. Any run of CRs before a LF goes (a file converted twice
    ends its lines in CR CR LF), so normalising twice changes nothing."""
    return _CR_LF.sub("\n", doc) if "\r" in doc else doc


def split_lines(text: str) -> list[str]:
    """LF-separated lines; the empty piece after a final LF is not a line."""
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def _is_fence(line: str) -> bool:
    return line.rstrip(" \t") == "---"


def _frontmatter_at(lines: list[str], i: int) -> tuple[int, int] | None:
    """0-based (first, last) of a frontmatter block whose `---` is lines[i]."""
    if i >= len(lines) or not _is_fence(lines[i]):
        return None
    for j in range(i + 1, len(lines)):
        s = lines[j].rstrip(" \t")
        if s in ("---", "..."):
            return (i, j) if j > i + 1 else None
        if s and not _FM_LINE.match(lines[j]):
            return None  # not YAML: a thematic break, not frontmatter
    return None


def find_frontmatter(lines: list[str]) -> tuple[int, int] | None:
    """Step 2: 1-based (first, last) lines of the YAML frontmatter, if any: at line 1,
    or at line 3 of a rendered record (`# title`, a blank line, then the body)."""
    fm = _frontmatter_at(lines, 0)
    if fm is None and len(lines) > 2 and _H1_LINE.match(lines[0]) and lines[1] == "":
        fm = _frontmatter_at(lines, 2)
    return None if fm is None else (fm[0] + 1, fm[1] + 1)


# ---------------------------------------------------------------- step 4


def policy_headings(
    lines: list[str], frontmatter: tuple[int, int] | None, meter: CostMeter | None = None
) -> list[PHeading]:
    """Headings that start a line, with their section extents and breadcrumb names
    (each name counted by `meter` before it is built)."""
    if frontmatter is not None:
        # Blank the frontmatter (line numbers kept): its closing `---` would read as a
        # setext underline.
        a, b = frontmatter
        lines = lines[: a - 1] + [""] * (b - a + 1) + lines[b:]
    text = "\n".join(lines)
    if _too_deep(text):
        return []
    raw = text.encode("utf-8")
    tree = _get_parser().parse(raw)
    heads: list[PHeading] = []
    for node in _heading_nodes(tree.root_node):
        if node.start_point[1] != 0:
            continue  # inside a list item or a block quote: not a line of its own
        got = heading_of(node, raw)
        if got is None:
            continue
        level, htext = got
        row, col = node.end_point
        line = node.start_point[0] + 1
        heads.append(PHeading(line, max(line, row if col == 0 else row + 1), level, htext))
    heads.sort(key=lambda h: h.line)
    n = len(lines)
    stack: list[PHeading] = []
    for h in heads:
        while stack and stack[-1].level >= h.level:
            stack.pop().extent = h.line - 1
        h.segment = "#" * h.level + " " + h.text
        if meter is not None:
            meter.name(
                sum(len(x.segment.encode("utf-8")) + _SEP_BYTES for x in (*stack, h)) - _SEP_BYTES
            )
        h.name = CRUMB_SEP.join([*(s.segment for s in stack), h.segment])
        h.parent = stack[-1] if stack else None
        stack.append(h)
    for h in stack:
        h.extent = n
    return heads


# ---------------------------------------------------------------- the chunker


def chunk_with_policy(
    path: str, doc: str, policy: Policy, limits: RecordBudget | None = None
) -> PolicyResult:
    """Cut one rendered (already redacted) document by `policy` (within `limits`: see
    `chunk_markdown`)."""
    meter = limits.meter() if limits is not None else None
    text = normalise(doc)
    lines = split_lines(text)
    n = len(lines)
    if n == 0:
        return PolicyResult([], [])
    fm = find_frontmatter(lines)
    heads = policy_headings(lines, fm, meter)

    units: list[_Unit]
    if n - (fm[1] - fm[0] + 1 if fm else 0) < policy.keep_whole_below:
        units = [_Unit(1, n, _GATE)]  # the gate: one chunk (frontmatter still dropped)
    else:
        units = _sections(heads, n, policy)
        units = _size_fallback(units, heads, policy)
    units = _merge_up(units)
    if policy.skip_empty_sections:
        units = _drop_empty(units, lines, heads, fm)
    if fm is not None:
        units = _carve(units, fm[0], fm[1], _FRONT)
    return _emit(path, lines, heads, units, meter)


def _sections(heads: list[PHeading], n: int, policy: Policy) -> list[_Unit]:
    """Steps 5 and 6: sections at the primary level, special sections, carve-outs."""
    split = [h for h in heads if h.level <= policy.primary_level]
    bounds: list[tuple[int, int, PHeading | None]] = []
    first = split[0].line if split else n + 1
    if first > 1:
        lead = heads[0] if heads and heads[0].line < first else None
        bounds.append((1, first - 1, lead))
    for k, sh in enumerate(split):
        end = split[k + 1].line - 1 if k + 1 < len(split) else n
        bounds.append((sh.line, end, sh))
    units: list[_Unit] = []
    for k, (start, end, h) in enumerate(bounds):
        # A title above the split level (the record's `# title`) heads the first
        # chunk whatever it says; every split heading is matched.
        special = (
            policy.action_for(h.text)
            if h is not None
            and h.line == start
            and h.level <= policy.primary_level
            and not (k == 0 and h.level < policy.primary_level)
            else None
        )
        if special is not None:
            units.append(_Unit(start, end, special))
            continue
        units.extend(_carve_specials(start, end, heads, policy))
    return units


def _inside(heads: list[PHeading], start: int, end: int) -> list[PHeading]:
    """The headings on lines start+1 .. end (heads are sorted by line): a bisection,
    so the whole cut stays linear in the document however many sections it has."""
    lo = bisect_right(heads, start, key=_line)
    hi = bisect_right(heads, end, key=_line)
    return heads[lo:hi]


def _line(h: PHeading) -> int:
    return h.line


def _carve_specials(start: int, end: int, heads: list[PHeading], policy: Policy) -> list[_Unit]:
    """A normal section with its sub-level `own-chunk` / `skip` sections carved out."""
    out: list[_Unit] = []
    at = start
    for h in _inside(heads, start, end):
        if h.line < at or h.level <= policy.primary_level:
            continue  # inside a carved region (the parent wins), or a split heading
        action = policy.action_for(h.text)
        if action not in (_OWN, _SKIP):
            continue
        stop = min(h.extent, end)
        if h.line > at:
            out.append(_Unit(at, h.line - 1, _NORMAL))
        out.append(_Unit(h.line, stop, action))
        at = stop + 1
    if at <= end:
        out.append(_Unit(at, end, _NORMAL))
    return out


def _size_fallback(units: list[_Unit], heads: list[PHeading], policy: Policy) -> list[_Unit]:
    """Step 7: a normal unit over max_lines splits once at its headings of level up to
    fallback_level (the pieces are never split again)."""
    out: list[_Unit] = []
    for u in units:
        if u.role != _NORMAL or u.end - u.start + 1 <= policy.max_lines:
            out.append(u)
            continue
        cuts = [
            h.line
            for h in _inside(heads, u.start, u.end)
            if policy.primary_level < h.level <= policy.fallback_level
        ]
        at = u.start
        for c in cuts:
            out.append(_Unit(at, c - 1, _NORMAL))
            at = c
        out.append(_Unit(at, u.end, _NORMAL))
    return out


def _carve(units: list[_Unit], a: int, b: int, role: str) -> list[_Unit]:
    """Units with lines a..b taken out into one unit of `role`."""
    out: list[_Unit] = []
    for u in units:
        if u.end < a or u.start > b:
            out.append(u)
            continue
        if u.start < a:
            out.append(_Unit(u.start, a - 1, u.role))
        if u.start <= a:
            out.append(_Unit(a, b, role))
        if u.end > b:
            out.append(_Unit(b + 1, u.end, u.role))
    return out


def _merge_up(units: list[_Unit]) -> list[_Unit]:
    """Merge-up units extend the chunk just before them (its line range grows, so
    whatever separates them stays verbatim). With no chunk right before it to extend
    (the document's first section, or one after a skipped section or the frontmatter:
    extending across those would take their lines back in) a merge-up section is
    promoted to its own chunk."""
    out: list[_Unit] = []
    for u in units:
        if u.role == _MERGE:
            prev = out[-1] if out else None
            if prev is not None and prev.role in (_NORMAL, _OWN) and prev.end + 1 == u.start:
                prev.end = u.end
            else:
                out.append(_Unit(u.start, u.end, _OWN))
        else:
            out.append(_Unit(u.start, u.end, u.role))
    return out


def _label(heads: list[PHeading], line: int) -> tuple[str, str]:
    """(kind, name) of the innermost heading whose section holds `line`."""
    i = bisect_right(heads, line, key=_line)
    best = heads[i - 1] if i else None
    while best is not None and best.extent < line:
        best = best.parent  # at most five steps: levels are 1-6
    if best is None:
        return PREAMBLE, PREAMBLE
    return best.text, best.name


def _drop_empty(
    units: list[_Unit], lines: list[str], heads: list[PHeading], fm: tuple[int, int] | None
) -> list[_Unit]:
    """Step 8: a chunk of nothing but headings and blank lines (the frontmatter counts
    as blank: it goes anyway) is dropped. The gate's one chunk is always kept."""
    head_lines: set[int] = set()
    for h in heads:
        head_lines.update(range(h.line, h.end_line + 1))
    if fm is not None:
        head_lines.update(range(fm[0], fm[1] + 1))
    for u in units:
        if u.role in (_NORMAL, _OWN) and all(
            ln in head_lines or rs_is_blank(lines[ln - 1]) for ln in range(u.start, u.end + 1)
        ):
            u.role = _EMPTY
    return units


def _emit(
    path: str,
    lines: list[str],
    heads: list[PHeading],
    units: list[_Unit],
    meter: CostMeter | None = None,
) -> PolicyResult:
    chunks: list[MdChunk] = []
    skipped: list[tuple[int, int, str]] = []
    offsets = [0]
    for ln in lines:
        offsets.append(offsets[-1] + len(ln.encode("utf-8")) + 1)

    def skip(a: int, b: int, why: str) -> None:
        if a > b:
            return
        if skipped and skipped[-1][1] + 1 == a and skipped[-1][2] == why:
            skipped[-1] = (skipped[-1][0], b, why)
        else:
            skipped.append((a, b, why))

    for u in units:
        if u.role == _FRONT:
            skip(u.start, u.end, SKIP_FRONTMATTER)
            continue
        if u.role == _SKIP:
            skip(u.start, u.end, SKIP_SECTION)
            continue
        if u.role == _EMPTY:
            skip(u.start, u.end, SKIP_EMPTY)
            continue
        s = u.start
        while s <= u.end and rs_is_blank(lines[s - 1]):
            s += 1
        content = "\n".join(lines[s - 1 : u.end]).rstrip(RUST_WS_CHARS) if s <= u.end else ""
        if not content:
            skip(u.start, u.end, SKIP_BLANK)
            continue
        end = s + content.count("\n")
        skip(u.start, s - 1, SKIP_BLANK)
        c = MdChunk.of(path, (s, end), _label(heads, s), content.encode("utf-8"), offsets[s - 1])
        if meter is not None:
            meter.chunk(len(c.raw), len(c.name.encode("utf-8")))
        chunks.append(c)
        skip(end + 1, u.end, SKIP_BLANK)
    return PolicyResult(chunks, skipped)


def chunk_markdown_policy(
    path: str, doc: str, policy: Policy, limits: RecordBudget | None = None
) -> list[MdChunk]:
    """The chunks alone (what the index step stores)."""
    return chunk_with_policy(path, doc, policy, limits).chunks
