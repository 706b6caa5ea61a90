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


@pytest.mark.parametrize("argv", [["docs"], ["docs", "./handbook"]])
def test_docs_without_a_source_names_the_missing_argument(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`extract: docs ./handbook` in a workflow: argparse says what is missing, exit 2."""
    from cce_knowledge.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(["knowledge", "extract", *argv])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert (
        "cce knowledge extract docs: error: one of the arguments --root --repo is required" in err
    )
