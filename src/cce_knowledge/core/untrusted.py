"""Text that came from somewhere we do not trust (a cache repository, a remote), made
safe to print: control characters become visible escapes, so a value can never move
the cursor, recolour a terminal, or start a new line of log output."""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, the line/paragraph separators and the bidi overrides and
# isolates (they reorder what a reader sees without changing the bytes).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    cp = ord(m.group())
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}"


def shown(text: str) -> str:
    """`text` with every control character escaped (`\\x1b`, `\\n`, `\\u202e`)."""
    return _UNSAFE.sub(_escape, text)
