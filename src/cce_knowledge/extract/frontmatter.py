"""YAML frontmatter and title detection for Markdown documents.

Input text is already LF-normalised with any BOM removed. Frontmatter is a first line
`---`, YAML, and a closing `---` or `...` line; it is removed from the body.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

import yaml

from cce_knowledge.core.errors import ExtractError

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):
    """The safe loader, with scalar values it cannot build turned into YAML errors at
    their node: PyYAML's constructors raise a bare ValueError (an int over Python's 4,300
    digits, `date: 2026-02-30`), which named no file and lost the whole tree's feed."""

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as e:
            if isinstance(e, yaml.YAMLError):
                raise
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"cannot read the value {_shown_value(node)}: {str(e).split(';')[0]}",
                node.start_mark,
            ) from e


def _shown_value(node: Any) -> str:
    v = getattr(node, "value", "")
    text = v if isinstance(v, str) else ""
    return repr(text[:40] + "…") if len(text) > 40 else repr(text)


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")


class FrontmatterError(ExtractError):
    """Frontmatter present but unusable (unclosed, bad YAML, not a mapping)."""


@dataclass(slots=True)
class Document:
    meta: dict[str, Any] | None  # None: the file has no frontmatter
    body: str
    body_line: int  # 1-based line of the body's first line in the file


def _is_delim(line: str, closing: bool) -> bool:
    s = line.rstrip(" \t")
    return s == "---" or (closing and s == "...")


def split_frontmatter(text: str, *, path: str) -> Document:
    """Split `text` into frontmatter mapping and body; errors name `path` and the line."""
    if not text.startswith("---"):
        return Document(None, text, 1)
    lines = text.split("\n")
    if not _is_delim(lines[0], closing=False):
        return Document(None, text, 1)
    for i in range(1, len(lines)):
        if _is_delim(lines[i], closing=True):
            yaml_text = "\n".join(lines[1:i])
            body = "\n".join(lines[i + 1 :])
            return Document(_load_yaml(yaml_text, path), body, i + 2)
    raise FrontmatterError(f"{path}: line 1: YAML frontmatter opened with `---` is never closed")


def _load_yaml(src: str, path: str) -> dict[str, Any]:
    try:
        data = yaml.load(src, Loader=_Loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = (mark.line + 2) if mark is not None else 2  # +1 for 1-based, +1 for `---`
        problem = getattr(e, "problem", None) or str(e).split("\n")[0]
        raise FrontmatterError(f"{path}: line {line}: invalid YAML frontmatter: {problem}") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FrontmatterError(
            f"{path}: line 2: YAML frontmatter must be a mapping, got {type(data).__name__}"
        )
    return data


def first_heading(body: str) -> tuple[str, int, int, int] | None:
    """The first ATX or setext heading outside code fences.

    Returns (text, level, first line index, index past its last line), counted in
    `body.split("\\n")`.
    """
    lines = body.split("\n")
    fence: str | None = None
    para: list[int] = []  # indices of the open paragraph's lines (a setext heading's text)
    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            para = []
            continue
        a = _ATX.match(line)
        if a:
            return (a.group(2) or "").strip(), len(a.group(1)), i, i + 1
        s = _SETEXT.match(line)
        if s and para:
            text = " ".join(lines[j].strip() for j in para)
            return text, 1 if s.group(1)[0] == "=" else 2, para[0], i + 1
        if line.strip() and (para or not line.startswith("    ")):
            para.append(i)
        else:
            para = []
    return None


def meta_str(meta: dict[str, Any], *keys: str) -> str | None:
    """The first present key as a trimmed string (dates and numbers stringified)."""
    for k in keys:
        v = meta.get(k)
        if v is None:
            continue
        if isinstance(v, str):
            v = v.strip()
            if v:
                return v
            continue
        if isinstance(v, list | dict):
            continue
        return format_scalar(v)
    return None


def meta_list(meta: dict[str, Any], *keys: str) -> list[str]:
    """A tag-like field: a YAML list, or a comma-separated string."""
    out: list[str] = []
    for k in keys:
        v = meta.get(k)
        if v is None:
            continue
        items = v if isinstance(v, list) else str(v).split(",") if isinstance(v, str) else [v]
        for item in items:
            if item is None or isinstance(item, list | dict):
                continue
            s = item.strip() if isinstance(item, str) else format_scalar(item)
            if s:
                out.append(s)
    return out


def format_scalar(v: Any) -> str:
    """YAML scalars as text; timestamps become ISO-8601 UTC `…Z`."""

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        return v.strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(v, dt.date):
        return v.isoformat()
    return str(v)
