"""Issue references in a pull request's body, found locally (no timeline request).

GitHub links a pull request to an issue of the same repository when the PR's text
mentions it: `#N`, `OWNER/NAME#N` or the issue's URL, with or without a closing
keyword (close/closes/closed, fix/fixes/fixed, resolve/resolves/resolved). The keyword
only decides whether merging closes the issue; any mention cross-references it, which
is what the timeline's `cross-referenced` event reports. Text GitHub does not render
as a reference is skipped: fenced and indented code blocks, code spans and HTML
comments (PR templates often carry `<!-- Fixes #… -->`), and `#N` glued to a word
(`#123abc`, `abc#123`, `&#123;`).
"""

from __future__ import annotations

import re
from collections import deque

# Fences: ``` or ~~~ (3+), up to 3 spaces of indent; closed by a fence of the same
# character at least as long, or by the end of the text (CommonMark).
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_INDENTED = re.compile(r"^(?: {4}|\t)")
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_TICKS = re.compile(r"`+")
_SHORT = re.compile(r"(?<![\w/&#.-])#(\d+)(?!\w)")
_QUALIFIED = re.compile(r"(?<![\w/.-])([A-Za-z0-9][A-Za-z0-9-]*)/([A-Za-z0-9._-]+)#(\d+)(?!\w)")
_URL = re.compile(r"https?://([^\s/]+)/([^\s/]+)/([^\s/]+)/(?:issues|pull)/(\d+)(?![\w/])")


def _without_code_blocks(text: str) -> str:
    out: list[str] = []
    fence: str | None = None
    prev_blank = True
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                if not line.strip().lstrip(fence[0]):
                    fence = None
            out.append("")
            continue
        if m and not (m.group(1)[0] == "`" and "`" in line[m.end() :]):
            fence = m.group(1)
            out.append("")
            continue
        if prev_blank and _INDENTED.match(line) and line.strip():
            out.append("")  # an indented code block starts after a blank line
            continue  # (prev_blank stays: its continuation lines are code too)
        out.append(line)
        prev_blank = not line.strip()
    return "\n".join(out)


def _without_code_spans(text: str) -> str:
    """A run of n backticks opens a span that the next run of exactly n closes
    (CommonMark); a run with no partner is literal. Linear in the text: each run is
    looked at once per length (a regex with a backreference is quadratic or worse on
    hostile bodies)."""
    runs = [(m.start(), m.end()) for m in _TICKS.finditer(text)]
    by_len: dict[int, deque[int]] = {}
    for i, (a, b) in enumerate(runs):
        by_len.setdefault(b - a, deque()).append(i)
    out, last, i = [], 0, 0
    while i < len(runs):
        a, b = runs[i]
        later = by_len[b - a]
        while later and later[0] <= i:
            later.popleft()
        if not later:
            i += 1
            continue
        j = later.popleft()
        out += [text[last:a], " "]
        last, i = runs[j][1], j + 1
    out.append(text[last:])
    return "".join(out)


def _prose(text: str) -> str:
    """The text with code blocks, code spans and HTML comments blanked out."""
    text = _COMMENT.sub(" ", text.replace("\r\n", "\n").replace("\r", "\n"))
    return _without_code_spans(_without_code_blocks(text))


def referenced_numbers(text: str, repo: str, web_base: str | None) -> set[int]:
    """Numbers of this repository's issues/PRs that `text` mentions.

    `repo` is OWNER/NAME; `web_base` is the repository's web URL
    (`https://github.com/OWNER/NAME`, or the Enterprise host's), compared without case
    as GitHub compares names. References to other repositories are not ours.
    """
    prose = _prose(text)
    want = repo.lower()
    found = {int(n) for n in _SHORT.findall(prose)}
    for owner, name, n in _QUALIFIED.findall(prose):
        if f"{owner}/{name}".lower() == want:
            found.add(int(n))
    if web_base:
        base = web_base.rstrip("/").lower()
        for host, owner, name, n in _URL.findall(prose):
            scheme = "https" if base.startswith("https://") else "http"
            if f"{scheme}://{host}/{owner}/{name}".lower() == base:
                found.add(int(n))
    found.discard(0)
    return found


def web_base_of(html_url: str | None) -> str | None:
    """`https://HOST/OWNER/NAME` from an issue's or PR's `html_url`."""
    if not html_url:
        return None
    m = re.match(r"^(https?://[^/]+/[^/]+/[^/]+)/(?:issues|pull)/\d+$", html_url)
    return m.group(1) if m else None
