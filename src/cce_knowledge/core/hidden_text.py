"""Hidden text: what a reader of rendered Markdown never sees but a model reads.

A corpus carries text written by strangers into coding agents. Four kinds of it are
invisible where people read it (GitHub, a docs site) and still reach a model:

- HTML comments (`<!-- … -->`) outside code: Markdown renderers drop them;
- Unicode tag characters U+E0000–E007F ("ASCII smuggling": each one mirrors an ASCII
  character and renders as nothing);
- bidi embedding, override and isolate controls (U+202A–202E, U+2066–2069), which
  reorder what is shown ("Trojan Source");
- zero-width spaces and word joiners (U+200B, U+2060, U+FEFF), and a zero-width
  joiner or non-joiner (U+200D, U+200C) that joins nothing.

`sanitize` removes them and counts what it removed. What stays:

- an HTML comment inside a fenced code block or a code span is shown as text: kept;
- ZWJ and ZWNJ between two non-ASCII letters, marks or symbols (emoji sequences such
  as 👨‍👩‍👧, Persian می‌خواهم, Devanagari conjuncts) are how those scripts are
  written: kept.

Invisible characters are removed inside code too: a bidi override in a code block is
the Trojan Source attack itself, and tag characters render as nothing anywhere.

Conservative where Markdown is ambiguous: an unclosed `<!--` outside code hides the
rest of the document in a CommonMark HTML block, so it is removed to the end; a
comment's end is searched past blank lines and fences (text in between is lost rather
than possibly hidden). Indented code is not recognised (a list item's continuation
looks the same): a comment there is removed.

Linear time: plain `str.find` scans and one character-class regex, no backtracking.
A text without hidden content is returned unchanged (the same object).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

#: Every character the character pass looks at (ZWJ/ZWNJ may stay, see `_keep_joiner`).
_CHARS = re.compile(
    "[\u200b\u200c\u200d\u202a-\u202e\u2060\u2066-\u2069\ufeff\U000e0000-\U000e007f]"
)
_ZWNJ, _ZWJ = "\u200c", "\u200d"
_JOINABLE = ("L", "M")
_OPEN, _CLOSE = "<!--", "-->"
#: Comment passes before the fallback (each pass is linear; see `sanitize`).
_MAX_PASSES = 3
#: What an HTML comment opener that survived `_MAX_PASSES` becomes: visible text.
_NEUTRAL_OPEN = "&lt;!--"


def kind_of(cp: int) -> str:
    """The family of a removed code point, as counts name it."""
    if 0xE0000 <= cp <= 0xE007F:
        return "tag"
    if 0x202A <= cp <= 0x202E or 0x2066 <= cp <= 0x2069:
        return "bidi"
    return "zero-width"


@dataclass(slots=True)
class Removed:
    """What `sanitize` removed from one text (or one record: `add` sums)."""

    comments: int = 0
    chars: dict[int, int] = field(default_factory=dict)  # code point → count

    def __bool__(self) -> bool:
        return bool(self.comments or self.chars)

    def add(self, other: Removed) -> None:
        self.comments += other.comments
        for cp, n in other.chars.items():
            self.chars[cp] = self.chars.get(cp, 0) + n

    def by_kind(self) -> dict[str, int]:
        out = {"comments": self.comments, "tag": 0, "bidi": 0, "zero-width": 0}
        for cp, n in self.chars.items():
            out[kind_of(cp)] += n
        return {k: v for k, v in out.items() if v}

    def describe(self) -> str:
        """`2 HTML comments, 14 tag characters, 1 bidi control, 3 zero-width characters`."""
        words = {
            "comments": ("HTML comment", "HTML comments"),
            "tag": ("tag character", "tag characters"),
            "bidi": ("bidi control", "bidi controls"),
            "zero-width": ("zero-width character", "zero-width characters"),
        }
        return ", ".join(
            f"{n} {words[k][0] if n == 1 else words[k][1]}" for k, n in self.by_kind().items()
        )

    def code_points(self) -> str:
        """`U+200B, U+E0041` — the removed code points, sorted."""
        return ", ".join(f"U+{cp:04X}" for cp in sorted(self.chars))


def _joinable(ch: str) -> bool:
    if ch < "\x80":
        return False
    cat = unicodedata.category(ch)
    return cat[0] in _JOINABLE or cat in ("So", "Sk")


def _keep_joiner(s: str, i: int) -> bool:
    """A ZWJ/ZWNJ at `s[i]` joins two non-ASCII letters, marks or symbols."""
    return 0 < i < len(s) - 1 and _joinable(s[i - 1]) and _joinable(s[i + 1])


def strip_chars(s: str, removed: Removed | None = None) -> str:
    """`s` without hidden characters (HTML comments are `sanitize`'s)."""
    if _CHARS.search(s) is None:
        return s
    counts: dict[int, int] = {}

    def repl(m: re.Match[str]) -> str:
        ch = m.group()
        if ch in (_ZWJ, _ZWNJ) and _keep_joiner(m.string, m.start()):
            return ch
        counts[ord(ch)] = counts.get(ord(ch), 0) + 1
        return ""

    out = _CHARS.sub(repl, s)
    if not counts:
        return s  # only joiners that join: the very same text
    if removed is not None:
        for cp, n in counts.items():
            removed.chars[cp] = removed.chars.get(cp, 0) + n
    return out


# -- HTML comments ------------------------------------------------------------------------


def _fence_open(line: str) -> tuple[str, int] | None:
    """(char, length) when `line` opens a fenced code block (up to 3 spaces of indent)."""
    k = 0
    while k < 3 and k < len(line) and line[k] == " ":
        k += 1
    if k >= len(line) or line[k] not in "`~":
        return None
    ch = line[k]
    e = k
    while e < len(line) and line[e] == ch:
        e += 1
    if e - k < 3 or (ch == "`" and "`" in line[e:]):
        return None
    return ch, e - k


def _fence_close(line: str, fence: tuple[str, int]) -> bool:
    ch, size = fence
    body = line.rstrip("\n\r \t")
    k = len(body) - len(body.lstrip(" "))
    if k > 3:
        return False
    run = body[k:]
    return len(run) >= size and run == ch * len(run)


def _blank(line: str) -> bool:
    return not line.strip(" \t\r\n")


def _paragraph_end(s: str, i: int) -> int:
    """The end of the paragraph starting at `i`: a blank line, a fence opener or the end."""
    n = len(s)
    while i < n:
        eol = s.find("\n", i)
        le = n if eol < 0 else eol + 1
        line = s[i:le]
        if _blank(line) or _fence_open(line) is not None:
            return i
        i = le
    return n


class _Pass:
    """One left-to-right pass removing HTML comments outside fences and code spans."""

    def __init__(self, s: str) -> None:
        self.s = s
        self.out: list[str] = []
        self.comments = 0
        # Backtick runs of the current paragraph: length → sorted starts, and a cursor
        # per length, so matching spans costs linear time overall.
        self._runs: dict[int, list[int]] = {}
        self._cursor: dict[int, int] = {}
        #: A paragraph to go on with after a comment that ran past the last one.
        self._pending: tuple[int, int] | None = None

    def run(self) -> str:
        s, n, out = self.s, len(self.s), self.out
        i = 0
        fence: tuple[str, int] | None = None
        while i < n:
            if self._pending is not None:
                a, b = self._pending
                self._pending = None
                i = self._paragraph(a, b)
                continue
            eol = s.find("\n", i)
            le = n if eol < 0 else eol + 1
            line = s[i:le]
            if fence is not None:
                out.append(line)
                if _fence_close(line, fence):
                    fence = None
                i = le
                continue
            fence = _fence_open(line)
            if fence is not None or _blank(line):
                out.append(line)
                i = le
                continue
            i = self._paragraph(i, _paragraph_end(s, i))
        return "".join(out)

    def _index_runs(self, a: int, b: int) -> None:
        s = self.s
        self._runs, self._cursor = {}, {}
        p = s.find("`", a, b)
        while p >= 0:
            e = p
            while e < b and s[e] == "`":
                e += 1
            self._runs.setdefault(e - p, []).append(p)
            p = s.find("`", e, b)

    def _closing_run(self, size: int, after: int) -> int | None:
        starts = self._runs.get(size, [])
        k = self._cursor.get(size, 0)
        while k < len(starts) and starts[k] < after:
            k += 1
        self._cursor[size] = k
        return starts[k] if k < len(starts) else None

    def _paragraph(self, a: int, b: int) -> int:
        """Copy the paragraph `s[a:b]` without its comments; returns where to go on
        (past `b` when a comment ran beyond the paragraph)."""
        s, out = self.s, self.out
        self._index_runs(a, b)
        i = a
        c = -2  # the next opener at or after i (-1: none); found again only once passed
        while i < b:
            if c != -1 and c < i:
                c = s.find(_OPEN, i, b)
            t = s.find("`", i, c if c >= 0 else b)
            if t >= 0:  # a code span opens first
                e = t
                while e < b and s[e] == "`":
                    e += 1
                close = self._closing_run(e - t, e)
                end = e if close is None else close + (e - t)
                out.append(s[i:end])
                i = end
                continue
            if c < 0:
                out.append(s[i:b])
                return b
            out.append(s[i:c])
            self.comments += 1
            q = s.find(_CLOSE, c + 2)
            if q < 0:
                return len(s)  # unclosed: a CommonMark HTML block hides the rest
            i = q + len(_CLOSE)
            if i > b:
                # The comment ran past the paragraph: finish its last line as text.
                eol = s.find("\n", i)
                le = len(s) if eol < 0 else eol + 1
                self._pending = (i, max(le, _paragraph_end(s, le)))
                return i
        return i


def strip_comments(s: str) -> tuple[str, int]:
    """`s` without HTML comments outside code, and how many were removed.

    Removing a comment can join text into a new opener (`<!-<!-- -->-`) or move a
    fence marker to the start of a line; each pass is checked by the next, and an
    opener still outside code after `_MAX_PASSES` is neutralised into visible text
    (`&lt;!--`), so the result is always a fixed point."""
    if _OPEN not in s:
        return s, 0
    total = 0
    for _ in range(_MAX_PASSES):
        p = _Pass(s)
        out = p.run()
        if p.comments == 0:
            return s, total
        total += p.comments
        s = out
        if _OPEN not in s:
            return s, total
    last = _Pass(s)
    last.run()
    if last.comments == 0:
        return s, total
    return s.replace(_OPEN, _NEUTRAL_OPEN), total


def sanitize(s: str, removed: Removed | None = None) -> str:
    """`s` without hidden characters and HTML comments outside code (see the module).

    Idempotent; `s` itself when there is nothing to remove. `removed` accumulates
    what went."""
    s2 = strip_chars(s, removed)
    s3, n = strip_comments(s2)
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
