"""GitHub Actions glue: workflow commands, step outputs, the job summary, masking.

Pure helpers with no dependency on the rest of the package, so the Action's driver
(and `cce knowledge validate`) can emit annotations without pulling in the engine.
The escaping rules follow GitHub's runner (`@actions/core`'s command.ts):

* message data: `%` → `%25`, CR → `%0D`, LF → `%0A`;
* property values (`file=`, `line=`, `title=` …) additionally `:` → `%3A`, `,` → `%2C`.

Outputs always use the heredoc form (`name<<DELIM`), with a delimiter that is checked
not to occur in the value, so a multi-line or hostile value can never smuggle in a
second output.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

__all__ = [
    "ActionsError",
    "add_mask",
    "annotation",
    "append_summary",
    "escape_data",
    "escape_property",
    "is_github_actions",
    "md_code",
    "md_table",
    "parse_bool_input",
    "set_output",
    "stop_commands",
    "workflow_command",
]


class ActionsError(Exception):
    """Bad input to a glue function (e.g. an unusable output name or boolean)."""


def is_github_actions(env: Mapping[str, str] | None = None) -> bool:
    """True when running inside a GitHub Actions (or act) job."""
    e = os.environ if env is None else env
    return e.get("GITHUB_ACTIONS", "") == "true"


def escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(s: str) -> str:
    return escape_data(s).replace(":", "%3A").replace(",", "%2C")


def workflow_command(command: str, message: str = "", **props: str | int | None) -> str:
    """Render `::command k=v,k=v::message` (one line, escaped). None-valued props are dropped."""
    parts = [
        f"{k}={escape_property(str(v))}" for k, v in props.items() if v is not None and v != ""
    ]
    head = f"::{command}"
    if parts:
        head += " " + ",".join(parts)
    return f"{head}::{escape_data(message)}"


def annotation(
    level: str,
    message: str,
    *,
    file: str | None = None,
    line: int | None = None,
    col: int | None = None,
    title: str | None = None,
) -> str:
    """An `::error` / `::warning` / `::notice` annotation line (without the newline)."""
    if level not in ("error", "warning", "notice"):
        raise ActionsError(f"unknown annotation level {level!r} (error, warning or notice)")
    return workflow_command(level, message, file=file, line=line, col=col, title=title)


def add_mask(value: str, out: TextIO | None = None) -> None:
    """Ask the runner to mask `value` (every line of it) in all later log output."""
    stream = sys.stdout if out is None else out
    # The runner masks per command; a multi-line secret is masked line by line.
    for piece in value.replace("\r\n", "\n").split("\n"):
        if piece.strip():
            stream.write(f"::add-mask::{escape_data(piece)}\n")
    stream.flush()


@contextmanager
def stop_commands(out: TextIO | None = None) -> Iterator[None]:
    """Pause workflow-command processing while untrusted text is logged.

    Child processes print feed content (titles, ids, error excerpts); a line that
    happened to read `::add-mask::…` or `::error::…` would otherwise be obeyed.
    """
    stream = sys.stdout if out is None else out
    token = "cce-" + secrets.token_hex(16)
    stream.write(f"::stop-commands::{token}\n")
    stream.flush()
    try:
        yield
    finally:
        stream.write(f"::{token}::\n")
        stream.flush()


_OUTPUT_NAME_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


def set_output(name: str, value: str, path: str | os.PathLike[str] | None = None) -> None:
    """Append one step output to `$GITHUB_OUTPUT` (or `path`) in heredoc form."""
    if not name or not set(name) <= _OUTPUT_NAME_OK:
        raise ActionsError(f"invalid output name {name!r}: use letters, digits, '-' and '_'")
    target = path if path is not None else os.environ.get("GITHUB_OUTPUT")
    if not target:
        raise ActionsError("GITHUB_OUTPUT is not set: not running inside a GitHub Actions step")
    delim = "ghadelimiter_" + secrets.token_hex(16)
    while delim in value:  # pragma: no cover - 128 random bits; loop only for rigour
        delim = "ghadelimiter_" + secrets.token_hex(16)
    with open(target, "a", encoding="utf-8", newline="\n") as f:
        f.write(f"{name}<<{delim}\n{value}\n{delim}\n")


def append_summary(markdown: str, path: str | os.PathLike[str] | None = None) -> bool:
    """Append markdown to `$GITHUB_STEP_SUMMARY`. Returns False when there is none."""
    target = path if path is not None else os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return False
    with Path(target).open("a", encoding="utf-8", newline="\n") as f:
        f.write(markdown if markdown.endswith("\n") else markdown + "\n")
    return True


# YAML 1.2 core-schema booleans, exactly what `core.getBooleanInput` accepts.
_TRUE = ("true", "True", "TRUE")
_FALSE = ("false", "False", "FALSE")


def parse_bool_input(name: str, value: str | None, default: bool = False) -> bool:
    """Parse a boolean action input; an empty value means the default."""
    v = (value or "").strip()
    if v == "":
        return default
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ActionsError(
        f"input `{name}`: expected true or false, got {v!r} "
        "(YAML 1.2 core schema: true | True | TRUE | false | False | FALSE)"
    )


def md_code(s: str) -> str:
    """Inline code span safe for any text: fence longer than any backtick run inside.

    Pipes are escaped too so the span can sit in a table cell; newlines become spaces.
    """
    text = s.replace("\r", " ").replace("\n", " ").replace("|", "\\|")
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured markdown table; cells must already be markdown-safe."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"
