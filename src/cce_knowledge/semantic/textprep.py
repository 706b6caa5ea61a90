"""What text of a chunk is sent to an embedding provider, and what never is.

The text sent is one header line — the record title, then the section's breadcrumb
below it with markdown's `#` marks dropped (`Private fields › Summary`) — a blank line
and the section body without its own heading line: each says the title once (the
chunk's breadcrumb and first line repeat it, and a small model reads only its first
few hundred tokens). The model's document prefix, if any, goes in front (build.py).
Binary content (NUL bytes, text that is not valid UTF-8) is never sent; minified or
encoded blobs (long lines of ASCII with almost no spaces) are left out line by line;
the rest is cut at MAX_TEXT_BYTES on a UTF-8 character boundary. The chunk itself
is untouched, so citations keep its true line range.
"""

from __future__ import annotations

import hashlib
import re

#: Hard cap of the text sent per chunk (bytes of UTF-8). Small embedding models read
#: the first 256-512 tokens anyway; 8 KiB keeps long-context models useful.
MAX_TEXT_BYTES = 8192
#: A line at least this long, mostly ASCII and with under MIN_SPACE_SHARE whitespace,
#: is minified code or an encoded blob, not prose.
MINIFIED_LINE = 400
MIN_SPACE_SHARE = 0.06


def is_binary(text: str) -> bool:
    """NUL bytes, or code points UTF-8 cannot encode (lone surrogates from JSON escapes)."""
    if "\x00" in text:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def is_minified_line(line: str) -> bool:
    n = len(line)
    if n < MINIFIED_LINE:
        return False
    ascii_chars = sum(1 for ch in line if ch < "\x80")
    if ascii_chars < 0.9 * n:
        return False  # CJK and other scripts without spaces are prose
    spaces = sum(1 for ch in line if ch in " \t")
    return spaces < MIN_SPACE_SHARE * n


def cut_utf8(text: str, cap: int = MAX_TEXT_BYTES) -> str:
    """`text` cut to at most `cap` UTF-8 bytes, never inside a character."""
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text
    end = cap
    while end > 0 and (data[end] & 0xC0) == 0x80:
        end -= 1
    return data[:end].decode("utf-8")


#: How the markdown chunker joins a section's headings (`# A › ## B`).
CRUMB_SEP = " › "
_HEADING = re.compile(r"#{1,6}[ \t]+")


def _plain(heading: str) -> str:
    """A heading's text without its `#` marks."""
    h = heading.strip()
    m = _HEADING.match(h)
    return h[m.end() :].strip() if m else h


def header(title: str, name: str) -> tuple[str, str]:
    """The chunk's header line (title, then the breadcrumb's headings below it) and the
    heading text its body may open with (dropped there: the header says it)."""
    t = title.strip()
    crumbs = [c for c in (_plain(p) for p in name.split(CRUMB_SEP)) if c] if name else []
    if crumbs and crumbs[0] == t:
        crumbs = crumbs[1:]  # the record's own top heading repeats its title
    last = crumbs[-1] if crumbs else t
    return CRUMB_SEP.join([t, *crumbs] if t else crumbs), last


def chunk_text(title: str, name: str, content: str, prefix: str = "") -> str | None:
    """The exact text embedded for a chunk (after the model's document `prefix`), or
    None when nothing of it may be sent."""
    parts = [title, name, content]
    if any(is_binary(p) for p in parts):
        return None
    head, last = header(title, name)
    lines = content.splitlines()
    # Blank lines before the heading are skipped, not kept.
    first = next((i for i, ln in enumerate(lines) if ln.strip()), len(lines))
    if first < len(lines) and lines[first].lstrip().startswith("#") and last:
        if _plain(lines[first]) == last:
            lines = lines[first + 1 :]
    lines = [ln for ln in lines if not is_minified_line(ln)]
    body = "\n".join(lines).strip()
    if is_minified_line(head):
        head = ""
    if not body and not head.strip():
        return None
    text = f"{head}\n\n{body}" if body else head
    return cut_utf8(prefix + text)


def text_key(text: str) -> bytes:
    """The 32-byte key of a text sent (sha256 of its UTF-8 bytes)."""
    return hashlib.sha256(text.encode("utf-8")).digest()
