"""The sync command pages in docs/cli/ quote the live `--help` verbatim."""

from __future__ import annotations

import argparse

import pytest

from cce_knowledge.cli.main import build_parser
from tests.helpers.paths import REPO

DOCS = REPO / "docs"


def _help(path: list[str]) -> str:
    p: argparse.ArgumentParser = build_parser()
    for name in path:
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        p = sub.choices[name]
    return p.format_help().rstrip("\n")


@pytest.mark.parametrize(
    ("page", "path"),
    [
        ("cli/push.md", ["knowledge", "push"]),
        ("cli/pull.md", ["knowledge", "pull"]),
        ("cli/sync.md", ["sync", "init"]),
        ("cli/sync.md", ["sync", "list"]),
        ("cli/sync.md", ["sync", "pull"]),
        ("cli/sync.md", ["sync", "verify"]),
    ],
)
def test_page_quotes_help(page: str, path: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    text = (DOCS / page).read_text(encoding="utf-8")
    assert f"```text\n{_help(path)}\n```" in text


def test_cache_page_covers_the_topics() -> None:
    text = (DOCS / "cache.md").read_text(encoding="utf-8")
    for heading in (
        "## Layout",
        "## Shrink guard",
        "## Retention",
        "## Trust posture",
        "## Credentials",
    ):
        assert heading in text
