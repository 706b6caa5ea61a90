"""Markdown heading chunker (docs/spec/core.md §4).

A document is cut at its headings, found with the tree-sitter-markdown BLOCK grammar.
A section that fits the token budget keeps its sub-sections; one that does not is
split into its head part plus each child, recursively, with a breadcrumb name
(`# A › ## B`). Offsets are UTF-8 byte offsets; lines count `\\n` only.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import tree_sitter_markdown
from tree_sitter import Language, Node, Parser, Query, QueryCursor

from cce_knowledge.core.rustcompat import RUST_WS, RUST_WS_CHARS
from cce_knowledge.engine.record_cost import CostMeter, RecordBudget

PREAMBLE = "(preamble)"
#: Separator between breadcrumb segments: SPACE U+203A SPACE.
CRUMB_SEP = " \u203a "
#: Documents estimated to nest deeper than this are not parsed (whole-doc fallback).
MAX_NESTING = 192

_LANGUAGE = Language(tree_sitter_markdown.language())
_HEADINGS = Query(_LANGUAGE, "[(atx_heading) (setext_heading)] @h")
_LEVELS = {
    "atx_h1_marker": 1,
    "atx_h2_marker": 2,
    "atx_h3_marker": 3,
    "atx_h4_marker": 4,
    "atx_h5_marker": 5,
    "atx_h6_marker": 6,
    "setext_h1_underline": 1,
    "setext_h2_underline": 2,
}
_parser: Parser | None = None


@dataclass(slots=True)
class MdChunk:
    chunk_id: str
    file_path: str
    start_line: int
    end_line: int
    kind: str
    name: str
    content: str
    token_count: int
    #: `content` as UTF-8 (kept so callers can hash/tokenize without re-encoding).
    raw: bytes = field(default=b"", repr=False, compare=False)
    #: Byte offset of `content` in the document.
    start_byte: int = field(default=0, compare=False)

    @classmethod
    def of(
        cls, path: str, lines: tuple[int, int], label: tuple[str, str], raw: bytes, start_byte: int
    ) -> MdChunk:
        """The chunk of `raw` (its lines `lines`, its `(kind, name)`) at `start_byte` of
        `path`'s document, with the reference's `chunk_id` and `token_count` (one token
        per four bytes, at least one) — the one definition both chunkers share."""
        start_line, end_line = lines
        return cls(
            chunk_id=chunk_id(path, start_line, end_line, raw),
            file_path=path,
            start_line=start_line,
            end_line=end_line,
            kind=label[0],
            name=label[1],
            content=raw.decode("utf-8"),
            token_count=max(1, len(raw) // 4),
            raw=raw,
            start_byte=start_byte,
        )


@dataclass(slots=True)
class _Heading:
    start: int
    line: int
    level: int
    text: str


def _get_parser() -> Parser:
    global _parser
    if _parser is None:
        _parser = Parser(_LANGUAGE)
    return _parser


# ---------------------------------------------------------------- nesting guard

_NEST_CHARS = "[>\t \\-+*.)0-9]"
# value <= 2*len(prefix) + 1, so only a prefix of >= 96 characters can exceed 192.
_LONG_PREFIX = re.compile("^" + _NEST_CHARS + "{96,}", re.MULTILINE)


def nesting_estimate(content: str) -> int:
    """Max over lines of `quotes + columns // 2 + 1` (0 for no lines)."""
    best = 0
    for m in re.finditer("^" + _NEST_CHARS + "*", content, re.MULTILINE):
        best = max(best, _line_value(m.group()))
    return best if content else 0


def _line_value(prefix: str) -> int:
    quotes = prefix.count(">")
    tabs = prefix.count("\t")
    columns = tabs * 4 + (len(prefix) - quotes - tabs)
    return quotes + columns // 2 + 1


def _too_deep(content: str) -> bool:
    return any(_line_value(m.group()) > MAX_NESTING for m in _LONG_PREFIX.finditer(content))


# ---------------------------------------------------------------- chunk building

_ASCII_WS_BYTES = frozenset(b"\t\n\x0b\x0c\r ")


def _trim_end_byte(b: bytes, start: int, end: int) -> int:
    """End offset of `b[start:end]` after `str::trim_end` (Unicode White_Space)."""
    while end > start:
        last = b[end - 1]
        if last in _ASCII_WS_BYTES:
            end -= 1
        elif last >= 0x80:
            lead = end - 1
            while lead > start and b[lead] & 0xC0 == 0x80:
                lead -= 1
            try:
                ch = b[lead:end].decode("utf-8")
            except UnicodeDecodeError:
                return end
            if ch in RUST_WS:
                end = lead
            else:
                return end
        else:
            return end
    return end


def chunk_id(path: str, start_line: int, end_line: int, content_bytes: bytes) -> str:
    """sha256(`{path}:{start}:{end}:` + first 100 content bytes), first 16 hex."""
    h = hashlib.sha256(f"{path}:{start_line}:{end_line}:".encode())
    h.update(content_bytes[:100])
    return h.hexdigest()[:16]


def _make_chunk(
    path: str, b: bytes, start: int, end: int, start_line: int, kind: str, name: str
) -> MdChunk | None:
    tend = _trim_end_byte(b, start, end)
    if tend <= start:
        return None
    raw = b[start:tend]
    try:
        return MdChunk.of(
            path, (start_line, start_line + raw.count(b"\n")), (kind, name), raw, start
        )
    except UnicodeDecodeError:
        return None  # not a char boundary (cannot happen at real headings)


# ---------------------------------------------------------------- headings


def _first_inline(node: Node) -> Node | None:
    for child in node.children:
        if child.type == "inline":
            return child
        found = _first_inline(child)
        if found is not None:
            return found
    return None


# Block nodes that can never hold a heading: the walk does not descend into them.
# Every other node is walked (containers such as section, list, list_item,
# block_quote, and ERROR nodes), so headings nested anywhere are still found.
_OPAQUE = frozenset(
    {
        "paragraph",
        "inline",
        "fenced_code_block",
        "indented_code_block",
        "html_block",
        "pipe_table",
        "link_reference_definition",
        "thematic_break",
    }
)
_HEADING_TYPES = frozenset({"atx_heading", "setext_heading"})


def _heading_nodes(root: Node) -> list[Node]:
    """Heading nodes in pre-order. ~8x faster than a tree-sitter query on real docs,
    because it skips paragraphs, code and tables (tests compare it with the query)."""
    out: list[Node] = []
    stack = list(reversed(root.children))
    while stack:
        node = stack.pop()
        t = node.type
        if t in _HEADING_TYPES:
            out.append(node)
        elif t not in _OPAQUE and node.child_count:
            stack.extend(reversed(node.children))
    return out


def heading_nodes_by_query(root: Node) -> list[Node]:
    """The same nodes found by a tree-sitter query (the reference for the walk)."""
    nodes = QueryCursor(_HEADINGS).captures(root).get("h", [])
    return sorted(nodes, key=lambda n: n.start_byte)


def heading_of(node: Node, b: bytes) -> tuple[int, str] | None:
    """A heading node's level and text (trimmed as the reference trims it); None for a
    node without a level marker."""
    level = 0
    for child in node.children:
        lv = _LEVELS.get(child.type)
        if lv is not None:
            level = lv
            break
    if level == 0:
        return None
    inline = _first_inline(node)
    if inline is None:
        return level, ""
    raw = b[inline.start_byte : inline.end_byte]
    return level, raw.decode("utf-8", "replace").strip(RUST_WS_CHARS)


def _headings(b: bytes) -> list[_Heading]:
    tree = _get_parser().parse(b)
    out: list[_Heading] = []
    for node in _heading_nodes(tree.root_node):
        got = heading_of(node, b)
        if got is not None:
            out.append(_Heading(node.start_byte, node.start_point[0] + 1, *got))
    out.sort(key=lambda h: h.start)
    return out


# ---------------------------------------------------------------- chunker


def chunk_markdown(
    path: str, content: str, budget: int, limits: RecordBudget | None = None
) -> list[MdChunk]:
    """Split `content` at its headings under a `budget` of estimated tokens per chunk.

    With `limits`, a document past one of them raises `RecordCostError` (see
    engine/record_cost.py) before its chunks or names are built past the bound."""
    b = content.encode("utf-8")
    meter = limits.meter() if limits is not None else None
    if _too_deep(content):
        c = _make_chunk(path, b, 0, len(b), 1, PREAMBLE, PREAMBLE)
        if c is not None and meter is not None:
            meter.chunk(len(c.raw), len(PREAMBLE))
        return [c] if c is not None else []
    heads = _headings(b)
    return chunk_with_headings(path, b, heads, budget, meter)


_SEP_BYTES = len(CRUMB_SEP.encode("utf-8"))


def chunk_with_headings(
    path: str, b: bytes, heads: list[_Heading], budget: int, meter: CostMeter | None = None
) -> list[MdChunk]:
    out: list[MdChunk] = []
    total = len(b)
    first = heads[0].start if heads else total
    pre = _make_chunk(path, b, 0, first, 1, PREAMBLE, PREAMBLE)
    if pre is not None:
        if meter is not None:
            meter.chunk(len(pre.raw), len(PREAMBLE))
        out.append(pre)
    n = len(heads)

    def add(c: MdChunk | None, name_bytes: int) -> None:
        if c is not None:
            if meter is not None:
                meter.chunk(len(c.raw), name_bytes)
            out.append(c)

    def emit(i: int, ancestors: list[str], ancestors_bytes: int) -> int:
        h = heads[i]
        lvl = h.level
        end_idx = i + 1
        while end_idx < n and heads[end_idx].level > lvl:
            end_idx += 1
        sec_end = heads[end_idx].start if end_idx < n else total
        segment = "#" * lvl + " " + h.text
        name_bytes = (ancestors_bytes + _SEP_BYTES if ancestors else 0) + len(
            segment.encode("utf-8")
        )
        if meter is not None:
            meter.name(name_bytes)  # before the name is built: it may be the big part
        crumb = [*ancestors, segment]
        name = CRUMB_SEP.join(crumb)
        has_child = end_idx > i + 1
        fits = max(1, (_trim_end_byte(b, h.start, sec_end) - h.start) // 4) <= budget
        if fits or not has_child:
            add(_make_chunk(path, b, h.start, sec_end, h.line, h.text, name), name_bytes)
            return end_idx
        add(_make_chunk(path, b, h.start, heads[i + 1].start, h.line, h.text, name), name_bytes)
        j = i + 1
        while j < end_idx:
            j = emit(j, crumb, name_bytes)
        return end_idx

    i = 0
    while i < n:
        i = emit(i, [], 0)
    return out


def canonical_lines(chunks: list[MdChunk]) -> str:
    """The golden-vector serialisation: one TAB-separated line per chunk, `\\n` escaped."""
    return "".join(
        f"{c.chunk_id}\t{c.kind}\t{c.name}\t{c.start_line}\t{c.end_line}\t{c.token_count}\t"
        + c.content.replace("\n", "\\n")
        + "\n"
        for c in chunks
    )
