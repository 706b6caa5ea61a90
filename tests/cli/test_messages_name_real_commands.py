"""Every command a message names exists: each backticked `cce …` in the package's string
literals (error texts, hints, notices) is run with `--help`, which must succeed."""

from __future__ import annotations

import ast
import re

import pytest

from cce_knowledge.cli.main import main
from tests.helpers.paths import REPO

SRC = REPO / "src" / "cce_knowledge"
# `cce knowledge index FEED --dir ROOT`: the command words are the lowercase words
# after `cce`, up to the first argument, option or placeholder.
BACKTICKED = re.compile(r"`(cce(?: [^`]*)?)`")


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _strings(tree: ast.AST) -> list[str]:
    """The string literals a user can see (docstrings are for readers of the code)."""
    out = []
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
        elif isinstance(node, ast.JoinedStr):  # f-strings: join the literal parts
            out.append(
                "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)
            )
    return out


def _named_commands() -> dict[tuple[str, ...], str]:
    found: dict[tuple[str, ...], str] = {}
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        text = "\n".join(_strings(tree))
        # adjacent literals are separate constants; join them as Python does
        for src in (text, text.replace("\n", "")):
            for m in BACKTICKED.finditer(src):
                words = []
                for w in m.group(1).split()[1:]:
                    if not re.fullmatch(r"[a-z][a-z-]*", w):
                        break
                    words.append(w)
                found.setdefault(tuple(words), f"{path.relative_to(REPO)}: `{m.group(1)}`")
    return found


COMMANDS = _named_commands()


def test_messages_name_commands() -> None:
    # the scan finds the hints the issue named (doctor, search, ask, MCP)
    assert ("knowledge", "index") in COMMANDS and ("knowledge", "pull") in COMMANDS


@pytest.mark.parametrize("words", sorted(COMMANDS), ids=lambda w: " ".join(("cce", *w)))
def test_named_command_exists(words: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main([*words, "--help"])
    assert e.value.code == 0, f"{COMMANDS[words]} names a command that does not exist"
    assert capsys.readouterr().out.startswith("usage: cce")
