"""Hidden text: what a reader of rendered Markdown never sees but a model reads.

A corpus carries text written by strangers into coding agents. These are invisible
where people read it (GitHub, a docs site) and still reach a model:

- HTML comments (`<!-- … -->`) outside code, in inline text or in an HTML block;
- link reference definitions to nowhere (`[//]: # (…)`, `[comment]: <> (…)`), the
  Markdown comment idiom: no definition is ever shown;
- Default_Ignorable_Code_Point characters: Unicode tag characters ("ASCII
  smuggling"), bidi controls and marks ("Trojan Source"), zero-width spaces and
  joiners, variation selectors in runs (bytes smuggled one per selector), fillers
  (U+00AD, U+115F, U+3164, …) and invisible operators (U+2061–2064).

`sanitize` removes them and counts what it removed. Code spans, fenced and indented
code, HTML blocks and link reference definitions are recognised by tree-sitter-markdown's
block and inline grammars, as CommonMark reads them: a backslash-escaped backtick opens
no code span, a backtick inside a tag's attribute is the tag's, a comment in an HTML
block is hidden whatever else the block holds. What stays:

- an HTML comment inside code is shown as text: kept; so is an unclosed `<!--` inside a
  paragraph (CommonMark shows it), while one that starts a line opens an HTML block that
  hides the rest of the document: removed to the end;
- ZWJ and ZWNJ between two non-ASCII letters, marks or symbols (emoji sequences such
  as 👨‍👩‍👧, Persian می‌خواهم, Devanagari conjuncts), and one variation selector right after
  the character it varies (❤️, 1️⃣, an ideographic variation sequence) are how those
  scripts are written: kept.

Invisible characters are removed inside code too: a bidi override in a code block is
the Trojan Source attack itself, and tag characters render as nothing anywhere.

Linear time: tree-sitter's parsers, `str.find` scans and one character-class regex. An
inline run with backticks inside many tags (where the inline grammar goes quadratic) is
read conservatively instead: every comment in it removed. A text without hidden content
is returned unchanged (the same object).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

import tree_sitter_markdown
from tree_sitter import Language, Node, Parser

#: Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt, Unicode 15.1):
#: characters a renderer shows as nothing. The character pass looks at every one; the
#: joiners and variation selectors that do their job stay (`_kept`).
_CHARS = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
_ZWNJ, _ZWJ = "\u200c", "\u200d"
_JOINABLE = ("L", "M")
#: Emoji presentation selectors may follow a keycap's ASCII base (`1\ufe0f\u20e3`).
_KEYCAP = frozenset("0123456789#*")
_OPEN, _CLOSE = "<!--", "-->"
#: Comment passes before the fallback (each pass is linear; see `sanitize`).
_MAX_PASSES = 3
#: What an HTML comment opener that survived `_MAX_PASSES` becomes: visible text.
_NEUTRAL_OPEN = "&lt;!--"


def _is_selector(cp: int) -> bool:
    return (
        0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF or cp in (0x180B, 0x180C, 0x180D, 0x180F)
    )


def kind_of(cp: int) -> str:
    """The family of a removed code point, as counts name it."""
    if 0xE0000 <= cp <= 0xE007F:
        return "tag"
    if 0x202A <= cp <= 0x202E or 0x2066 <= cp <= 0x2069 or cp in (0x200E, 0x200F, 0x061C):
        return "bidi"
    if _is_selector(cp):
        return "selector"
    if cp in (0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF):
        return "zero-width"
    return "invisible"


@dataclass(slots=True)
class Removed:
    """What `sanitize` removed from one text (or one record: `add` sums)."""

    comments: int = 0
    chars: dict[int, int] = field(default_factory=dict)  # code point → count
    #: link reference definitions to nowhere (`[//]: # (…)`), Markdown's comment idiom
    refs: int = 0

    def __bool__(self) -> bool:
        return bool(self.comments or self.chars or self.refs)

    def add(self, other: Removed) -> None:
        self.comments += other.comments
        self.refs += other.refs
        for cp, n in other.chars.items():
            self.chars[cp] = self.chars.get(cp, 0) + n

    def by_kind(self) -> dict[str, int]:
        out = {"comments": self.comments, "refs": self.refs, "tag": 0, "bidi": 0}
        out.update({"zero-width": 0, "selector": 0, "invisible": 0})
        for cp, n in self.chars.items():
            out[kind_of(cp)] += n
        return {k: v for k, v in out.items() if v}

    def describe(self) -> str:
        """`2 HTML comments, 14 tag characters, 1 bidi control, 3 zero-width characters`."""
        words = {
            "comments": ("HTML comment", "HTML comments"),
            "refs": ("link-reference comment", "link-reference comments"),
            "tag": ("tag character", "tag characters"),
            "bidi": ("bidi control", "bidi controls"),
            "zero-width": ("zero-width character", "zero-width characters"),
            "selector": ("variation selector", "variation selectors"),
            "invisible": ("other invisible character", "other invisible characters"),
        }
        return ", ".join(
            f"{n} {words[k][0] if n == 1 else words[k][1]}" for k, n in self.by_kind().items()
        )

    def code_points(self) -> str:
        """`U+200B, U+E0041` — the removed code points, sorted."""
        return ", ".join(f"U+{cp:04X}" for cp in sorted(self.chars))


def _joinable(ch: str) -> bool:
    """A non-ASCII letter, mark or symbol that is not itself ignorable."""
    if ch < "\x80" or _CHARS.match(ch):
        return False
    cat = unicodedata.category(ch)
    return cat[0] in _JOINABLE or cat in ("So", "Sk")


def _keep_selector(s: str, i: int) -> bool:
    """A variation selector at `s[i]` right after the character it varies (a non-ASCII
    letter or symbol, or a keycap's base for U+FE0E/FE0F); a second one, or one after
    anything else, selects nothing (a run of them is how bytes are smuggled)."""
    if i == 0:
        return False
    prev = s[i - 1]
    return _joinable(prev) or (s[i] in "\ufe0e\ufe0f" and prev in _KEYCAP)


def _keep_joiner(s: str, i: int) -> bool:
    """A ZWJ/ZWNJ at `s[i]` joins two non-ASCII letters, marks or symbols (the one
    before may be a variation selector that stays: `❤\ufe0f\u200d🔥`)."""
    if not 0 < i < len(s) - 1 or not _joinable(s[i + 1]):
        return False
    prev = s[i - 1]
    if _is_selector(ord(prev)):
        return _keep_selector(s, i - 1)
    return _joinable(prev)


def _kept(s: str, i: int) -> bool:
    ch = s[i]
    if ch in (_ZWJ, _ZWNJ):
        return _keep_joiner(s, i)
    return _is_selector(ord(ch)) and _keep_selector(s, i)


def strip_chars(s: str, removed: Removed | None = None) -> str:
    """`s` without hidden characters (HTML comments are `sanitize`'s)."""
    if _CHARS.search(s) is None:
        return s
    counts: dict[int, int] = {}

    def repl(m: re.Match[str]) -> str:
        ch = m.group()
        if _kept(m.string, m.start()):
            return ch
        counts[ord(ch)] = counts.get(ord(ch), 0) + 1
        return ""

    out = _CHARS.sub(repl, s)
    if not counts:
        return s  # only joiners and selectors that do their job: the very same text
    if removed is not None:
        for cp, n in counts.items():
            removed.chars[cp] = removed.chars.get(cp, 0) + n
    return out


# -- comments -----------------------------------------------------------------------------

_BLOCK = Language(tree_sitter_markdown.language())
_INLINE = Language(tree_sitter_markdown.inline_language())
_parsers: list[Parser] = []
#: Block nodes whose text is shown as is (code) or is not Markdown at all.
_CODE_BLOCKS = frozenset({"fenced_code_block", "indented_code_block"})
#: The destinations of the "comment" idiom of link reference definitions.
_COMMENT_DESTINATIONS = (b"#", b"<>")
#: backticks x `<` in one inline run past which it is not handed to the inline grammar
_INLINE_WORK_MAX = 200_000
_MAYBE_REF = re.compile(r"\]:\s*(?:#|<>)(?:\s|$)")


def _parsers_pair() -> tuple[Parser, Parser]:
    if not _parsers:
        _parsers.extend((Parser(_BLOCK), Parser(_INLINE)))
    return _parsers[0], _parsers[1]


def _html_comments(b: bytes, start: int, end: int, out: list[tuple[int, int, str]]) -> None:
    """Every `<!-- … -->` of raw HTML `b[start:end]` (an HTML block); an unclosed one
    runs to the block's end, as a browser hides it."""
    i = b.find(b"<!--", start, end)
    while i >= 0:
        j = b.find(b"-->", i + 4, end)
        stop = end if j < 0 else j + 3
        out.append((i, stop, "comment"))
        i = b.find(b"<!--", stop, end)


def _inline_comments(b: bytes, start: int, end: int, out: list[tuple[int, int, str]]) -> None:
    """The HTML comments of one inline run, as CommonMark reads it: a backslash-escaped
    backtick opens no code span, an attribute's backtick is the tag's, a comment in a
    code span is text."""
    if b.find(b"<!--", start, end) < 0:
        return
    if b.count(b"`", start, end) * b.count(b"<", start, end) > _INLINE_WORK_MAX:
        # tree-sitter's inline grammar goes quadratic on backticks inside many tags
        # (`<a t="`">` repeated: 84 KB took 17 s): such a run is read conservatively,
        # every comment in it removed, code spans or not.
        _html_comments(b, start, end, out)
        return
    tree = _parsers_pair()[1].parse(b[start:end])
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        t = node.type
        if t == "code_span":
            continue
        if t == "html_tag":
            if b.startswith(b"<!--", start + node.start_byte):
                out.append((start + node.start_byte, start + node.end_byte, "comment"))
            continue
        stack.extend(node.children)


def _is_comment_ref(b: bytes, node: Node) -> bool:
    """`[//]: # (…)`, `[comment]: <> (…)`: a link reference definition to nowhere, the
    Markdown idiom for a comment (no definition is ever shown)."""
    for child in node.children:
        if child.type == "link_destination":
            return b[child.start_byte : child.end_byte] in _COMMENT_DESTINATIONS
    return False


def _hidden_ranges(b: bytes) -> list[tuple[int, int, str]]:
    """The byte ranges GitHub's renderer hides: HTML comments outside code (in inline
    text and in HTML blocks) and comment-like link reference definitions."""
    out: list[tuple[int, int, str]] = []
    tree = _parsers_pair()[0].parse(b)
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        t = node.type
        if t in _CODE_BLOCKS:
            continue
        if t == "html_block":
            _html_comments(b, node.start_byte, node.end_byte, out)
        elif t == "link_reference_definition":
            if _is_comment_ref(b, node):
                out.append((node.start_byte, node.end_byte, "ref"))
        elif t == "inline":
            _inline_comments(b, node.start_byte, node.end_byte, out)
        else:
            stack.extend(node.children)
    out.sort()
    return out


def _strip_pass(s: str) -> tuple[str, int, int]:
    """One pass: `s` without what `_hidden_ranges` finds; (text, comments, refs)."""
    b = s.encode("utf-8", "surrogatepass")
    ranges = _hidden_ranges(b)
    if not ranges:
        return s, 0, 0
    parts: list[bytes] = []
    at = comments = refs = 0
    for a, e, kind in ranges:
        if a < at:
            continue  # nested in one already removed
        parts.append(b[at:a])
        at = e
        if kind == "ref":
            refs += 1
        else:
            comments += 1
    parts.append(b[at:])
    return b"".join(parts).decode("utf-8", "surrogatepass"), comments, refs


def _might_hide(s: str) -> bool:
    return _OPEN in s or _MAYBE_REF.search(s) is not None


def strip_comments(s: str, removed: Removed | None = None) -> tuple[str, int]:
    """`s` without HTML comments outside code and comment-like link references, and how
    many HTML comments were removed (link references are counted in `removed.refs`).

    Code spans, fenced and indented code, HTML blocks and link reference definitions are
    recognised by tree-sitter-markdown's block and inline grammars, as CommonMark (and
    GitHub) reads them. Removing a comment can join text into a new opener
    (`<!-<!-- -->-`) or a new block; each pass is checked by the next, and an opener
    still hidden after `_MAX_PASSES` is neutralised into visible text (`&lt;!--`)."""
    if not _might_hide(s):
        return s, 0
    total = refs = 0
    for _ in range(_MAX_PASSES):
        out, n, r = _strip_pass(s)
        if not n and not r:
            break
        total, refs, s = total + n, refs + r, out
        if not _might_hide(s):
            break
    else:
        out, n, r = _strip_pass(s)
        if n or r:
            s = s.replace(_OPEN, _NEUTRAL_OPEN)
            out, n, r = _strip_pass(s)
            if r:  # only references left: each pass removes whole lines, so it ends
                while r:
                    s, refs = out, refs + r
                    out, n, r = _strip_pass(s)
    if removed is not None:
        removed.refs += refs
    return s, total


def sanitize(s: str, removed: Removed | None = None) -> str:
    """`s` without hidden characters and HTML comments outside code (see the module).

    Idempotent; `s` itself when there is nothing to remove. `removed` accumulates
    what went."""
    s2 = strip_chars(s, removed)
    s3, n = strip_comments(s2, removed)
    if removed is not None:
        removed.comments += n
    return s3


def sanitize_plain(s: str, removed: Removed | None = None) -> str:
    """For values that are not Markdown (labels, URLs, states): characters only."""
    return strip_chars(s, removed)


def has_hidden(s: str) -> bool:
    return sanitize(s) != s


def scan(values: Iterable[tuple[str, str, bool]]) -> dict[str, Removed]:
    """What `sanitize` would remove from each `(name, value, markdown)`; only the
    names with something hidden."""
    out: dict[str, Removed] = {}
    for name, value, markdown in values:
        r = Removed()
        (sanitize if markdown else sanitize_plain)(value, r)
        if r:
            out.setdefault(name, Removed()).add(r)
    return out
