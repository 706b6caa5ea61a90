"""OKF adapter: only an A3S knowledge base's promoted wiki/ is read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cce_knowledge.cli.main import main
from cce_knowledge.contract.ndjson import parse_feed
from cce_knowledge.core.errors import ExtractError
from cce_knowledge.extract.okf import OkfOptions, extract_okf
from tests.helpers.schemas import assert_feed_valid


def write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


CONCEPT = """---
type: concept
title: Retry budget
tags: [payments, reliability]
updated: 2025-02-03T04:05:06Z
source_url: https://wiki.example/retry-budget
---
# Retry budget

Why checkout retries are capped at three.
"""


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    base = tmp_path / "kb" / "bases" / "project"
    write(base, "wiki/concepts/retry-budget.md", CONCEPT)
    write(
        base,
        "wiki/decisions/adr-7.md",
        "---\ntype: decision\nupdated: 2025-01-09\n---\n\n# ADR 7: no card storage\n\nBecause PCI.\n",
    )
    write(base, "wiki/no-type.md", "---\ntitle: Missing type\n---\nText.\n")
    write(base, "wiki/plain.md", "# No frontmatter\n\nText.\n")
    write(base, "wiki/unclosed.md", "---\ntype: concept\n")
    write(base, "wiki/Upper.MD", "---\ntype: concept\n---\nNot lowercase .md.\n")
    write(base, "wiki/notes.txt", "---\ntype: concept\n---\n")
    write(base, "sources/raw.md", "---\ntype: concept\n---\nRaw source, never searchable.\n")
    write(
        base,
        ".a3s/compilation-output/job-1/wiki/staged.md",
        "---\ntype: concept\n---\nStaged output, never searchable.\n",
    )
    write(tmp_path, "elsewhere.md", "---\ntype: concept\n---\nLinked in.\n")
    os.symlink(tmp_path / "elsewhere.md", base / "wiki" / "linked.md")
    return base


def test_only_promoted_typed_wiki_documents(kb: Path) -> None:
    warnings: list[str] = []
    recs = extract_okf(OkfOptions(root=str(kb)), warn=warnings.append)
    assert [r.id for r in recs] == ["okf:concepts/retry-budget.md", "okf:decisions/adr-7.md"]
    c, d = recs
    assert (c.title, c.group, c.labels) == ("Retry budget", "concept", ["payments", "reliability"])
    assert c.updated_at == "2025-02-03T04:05:06Z" and c.url == "https://wiki.example/retry-budget"
    assert c.body == "Why checkout retries are capped at three.\n" and c.source == "okf"
    assert (d.title, d.group, d.updated_at, d.url) == (
        "ADR 7: no card storage",
        "decision",
        "2025-01-09",
        None,
    )
    text = "\n".join(warnings)
    for name in ("no-type.md", "plain.md", "unclosed.md", "linked.md"):
        assert name in text
    assert "OKF `type`" in text and "never closed" in text
    assert "raw.md" not in text and "staged.md" not in text


def test_cli_stdout_warnings_and_index(
    kb: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["knowledge", "extract", "okf", "--root", str(kb), "--id-prefix", "kb:"]) == 0
    cap = capsys.readouterr()
    assert_feed_valid(cap.out.encode())
    recs = parse_feed(cap.out)
    assert [r.id for r in recs] == ["kb:concepts/retry-budget.md", "kb:decisions/adr-7.md"]
    assert cap.err.count("warning: skipping") == 4
    feed = tmp_path / "okf.jsonl"
    feed.write_text(cap.out, encoding="utf-8")
    proj = tmp_path / "proj"
    proj.mkdir()
    assert main(["knowledge", "index", str(feed), "--dir", str(proj)]) == 0
    assert "records   : 2" in capsys.readouterr().out
    # Deterministic: a second run writes the same bytes.
    assert main(["knowledge", "extract", "okf", "--root", str(kb), "--id-prefix", "kb:", "-q"]) == 0
    assert capsys.readouterr().out == cap.out


def test_a_base_without_promoted_wiki_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "sources/a.md", "---\ntype: concept\n---\n")
    with pytest.raises(ExtractError, match="no promoted wiki/"):
        extract_okf(OkfOptions(root=str(tmp_path)), warn=lambda _m: None)
    with pytest.raises(ExtractError, match="not a directory"):
        extract_okf(OkfOptions(root=str(tmp_path / "missing")), warn=lambda _m: None)
