"""Walking a Markdown tree and reading its files safely and deterministically."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path

from cce_knowledge.core.errors import ExtractError
from cce_knowledge.extract.feed import normalise_newlines

SKIP_DIRS = frozenset({"vendor", "node_modules"})
DEFAULT_GLOBS = ("**/*.md", "**/*.markdown")

Warn = Callable[[str], None]


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A path glob as a regex over posix relative paths: `**/` any dirs, `*`/`?` within
    one segment, `[...]` classes."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = pattern.find("]", i + 2)
            if j < 0:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1 : j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z")


def matches(rel: str, globs: Iterable[str]) -> bool:
    return any(glob_regex(g).match(rel) for g in globs)


def walk(
    root: Path, *, include: Iterable[str], exclude: Iterable[str] = (), warn: Warn | None = None
) -> list[tuple[str, Path]]:
    """(posix relpath, path) of matching files, sorted by relpath.

    Hidden entries, vendor/ and node_modules/ are skipped; symlinked directories are
    not descended into, and a symlinked file is read only if it resolves inside root.
    """
    include, exclude = tuple(include), tuple(exclude)
    real_root = root.resolve()
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not d.startswith(".")
            and d not in SKIP_DIRS
            and not os.path.islink(os.path.join(dirpath, d))
        )
        for name in filenames:
            if name.startswith("."):
                continue
            p = Path(dirpath, name)
            rel = p.relative_to(root).as_posix()
            if not matches(rel, include) or matches(rel, exclude):
                continue
            if p.is_symlink():
                target = p.resolve()
                if not target.is_relative_to(real_root) or not target.is_file():
                    if warn:
                        warn(f"skipping {rel}: symlink points outside {root}")
                    continue
            elif not p.is_file():
                continue
            found.append((rel, p))
    found.sort(key=lambda t: t[0])
    return found


def read_text(path: Path, display: str) -> str:
    """UTF-8 text with any BOM removed and line endings normalised to LF."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ExtractError(f"cannot read {display}: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise ExtractError(f"{display}: line {line}: not valid UTF-8 (byte {e.start})") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return normalise_newlines(text)
