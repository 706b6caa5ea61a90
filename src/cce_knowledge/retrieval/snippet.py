"""The few lines of a hit's section that best answer the query, and where its words are.

A search hit is one stored section; printing all of it buries the answer, printing
none of it makes the user open the store. The snippet is the run of `SNIPPET_LINES`
non-blank, non-heading lines that covers the most of the query's weight, found with
the default ranking's own analyzer (`analyze`: words, identifier sub-words, stems,
word pairs), so "locking" finds the line that says "locked". Each query term weighs
its corpus idf (from the search index, when the caller has it), so the line holding
the query's rare word ("NTP", "-990 ms") beats an intro that repeats its common ones
("time", "elapsed"). One sliding window over the section's lines: linear in the
section's length.

The text returned is the stored text, untouched: escaping it for a terminal is the
printer's job (stored text is untrusted).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cce_knowledge.retrieval.analyze import analyze, is_pair, query_terms

#: How many non-blank lines a snippet shows.
SNIPPET_LINES = 3
#: A word pair of the query found on a line counts this many single words.
_PAIR_WEIGHT = 2
#: idf is scaled to an integer weight, so window sums tie exactly (no float drift).
_SCALE = 1000
_WORD = re.compile(r"[A-Za-z0-9_]+")
#: A Markdown ATX heading, or a line of only `=`/`-`/`*`/`_` (setext underline, rule):
#: it names the section, it does not answer. Anchored, no nested repeats: linear.
_HEADING = re.compile(r"[ ]{0,3}#{1,6}(?:[ \t]|$)|[ \t]*[=*_-]+[ \t]*$")


@dataclass(frozen=True, slots=True)
class SnippetLine:
    """One line of a section: its line number in the record and its stored text."""

    number: int
    text: str


class Query:
    """A query analysed once, for the snippets and highlights of all its hits."""

    def __init__(self, text: str, idf: Mapping[str, float] | None = None) -> None:
        """`idf`: each term's idf in the corpus (e.g. `Searcher.idfs`); a term it
        lacks, or every term without it, weighs the same as any other word."""
        terms = query_terms(text)
        self.terms = frozenset(terms)
        self.words = frozenset(t for t in terms if not is_pair(t))
        self.weights: dict[str, int] = {}
        for t in self.terms:
            w = max(1, round(_SCALE * idf[t])) if idf is not None and t in idf else _SCALE
            self.weights[t] = w * _PAIR_WEIGHT if is_pair(t) else w

    def line_terms(self, line: str) -> frozenset[str]:
        """The query's terms (words and pairs) `line` contains."""
        return self.terms.intersection(analyze(line))

    def spans(self, line: str) -> list[tuple[int, int]]:
        """Character spans of the words of `line` that match a query word (the whole
        identifier when one of its sub-words matches)."""
        out = []
        for m in _WORD.finditer(line):
            if self.words.intersection(analyze(m.group())):
                out.append(m.span())
        return out


def is_heading(text: str) -> bool:
    """Whether a line only names the section (a heading, an underline or a rule)."""
    return _HEADING.match(text) is not None


def section_lines(content: str, first_line: int) -> list[SnippetLine]:
    """Every line of a section, numbered from its `start_line`."""
    return [SnippetLine(first_line + i, t) for i, t in enumerate(content.split("\n"))]


def best_lines(
    content: str, first_line: int, query: Query, size: int = SNIPPET_LINES
) -> list[SnippetLine]:
    """The `size` consecutive content lines of `content` (non-blank, and not headings
    when the section has other lines) whose query terms weigh the most; the first
    such lines when nothing matches.

    Windows that tie come in runs (the windows sliding over one matching line all
    cover it): the middle window of the first best run is taken, so the matching line
    shows with its context on both sides, as grep's `-C` does."""
    lines = [ln for ln in section_lines(content, first_line) if ln.text.strip()]
    body = [ln for ln in lines if not is_heading(ln.text)]
    if body:
        lines = body
    if len(lines) <= size:
        return lines
    found: list[frozenset[str]] = [query.line_terms(ln.text) for ln in lines]
    counts: dict[str, int] = {}
    score = 0
    scores: list[int] = []  # scores[j]: the window starting at non-blank line j
    for i, terms in enumerate(found):
        for t in terms:  # the line enters the window
            counts[t] = counts.get(t, 0) + 1
            if counts[t] == 1:
                score += query.weights[t]
        if i >= size:  # the line `size` back leaves it
            for t in found[i - size]:
                counts[t] -= 1
                if counts[t] == 0:
                    score -= query.weights[t]
        if i >= size - 1:
            scores.append(score)
    best = max(scores)
    start = scores.index(best)
    end = start
    while end + 1 < len(scores) and scores[end + 1] == best:
        end += 1
    at = 0 if best == 0 else (start + end) // 2
    return lines[at : at + size]


def clip(text: str, spans: Sequence[tuple[int, int]], width: int) -> tuple[str, int, int]:
    """(`text` cut to at most `width` characters around its first span, start, end) —
    a docs paragraph can be one line of thousands of characters."""
    if len(text) <= width:
        return text, 0, len(text)
    at = spans[0][0] if spans else 0
    start = max(0, min(at - width // 3, len(text) - width))
    return text[start : start + width], start, start + width
