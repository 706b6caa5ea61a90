"""docs/cli/extract.md quotes `--help` verbatim (COLUMNS=100, as the CLI reference)."""

from __future__ import annotations

import argparse
import re

import pytest

from cce_knowledge.cli.main import build_parser
from tests.helpers.paths import REPO

DOC = REPO / "docs" / "cli" / "extract.md"
BLOCK = re.compile(r"<!-- help: ([^>]+?) -->\n```text\n(.*?)\n```", re.S)


def help_for(cmd: str) -> str:
    p = build_parser()
    for name in cmd.split()[1:]:
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        p = sub.choices[name]
    return p.format_help().rstrip("\n")


def test_help_blocks_match(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    blocks = BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert {c for c, _ in blocks} == {
        "cce knowledge extract",
        "cce knowledge extract github",
        "cce knowledge extract docs",
        "cce knowledge extract okf",
    }
    for cmd, text in blocks:
        assert text == help_for(cmd), f"{DOC.name}: help for `{cmd}` is stale"
