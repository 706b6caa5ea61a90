"""`validate` accepts exactly what the parsers accept, and reports every bad line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cce_knowledge.contract.asksuite import parse_suite
from cce_knowledge.contract.ndjson import parse_feed
from cce_knowledge.contract.validate import detect_kind, validate_file
from cce_knowledge.core.errors import ContractError

OK = '{"id":"a","title":"t","body":"b","source":"s"}'
_FEED_LINES = st.sampled_from(
    [
        OK,
        "",
        "  ",
        "x",
        "{}",
        '{"id":"a","title":"t","body":"b","source":"s","labels":null}',
        '["a","t","b","s"]',
        '{"id":"a","id":"a","title":"t","body":"b","source":"s"}',
        "\x1c",
        OK + "\r",
        '{"id":"\\udc00","title":"t","body":"b","source":"s"}',
    ]
)
_SUITE_LINES = st.sampled_from(
    [
        '{"schema":"cce.knowledge.ask/v1","corpus":"c.jsonl"}',
        '{"query":"q","expect":["r"]}',
        '{"query":"q","expect":["r"],"k":0}',
        '{"expect":["r"]}',
        "",
        "nope",
        '{"schema":"x"}',
    ]
)


def _write(tmp: Path, name: str, lines: list[str]) -> Path:
    p = tmp / name
    p.write_text("\n".join(lines) + ("\n" if lines else ""), encoding="utf-8")
    return p


@settings(max_examples=150, deadline=None)
@given(st.lists(_FEED_LINES, max_size=8))
def test_feed_problems_are_exactly_the_lines_the_parser_rejects(
    tmp_path_factory: Any, lines: list[str]
) -> None:
    p = _write(tmp_path_factory.mktemp("v"), "f.jsonl", lines)
    [report] = validate_file(p, kind="feed")
    bad = {pr.line for pr in report.problems if pr.line is not None}
    assert all(pr.line is not None for pr in report.problems)
    expected_bad = set()
    for n, line in enumerate(lines, 1):
        try:
            parse_feed(line)
        except ContractError:
            expected_bad.add(n)
    assert bad == expected_bad
    if not bad:
        assert report.count == len(parse_feed(p.read_text(encoding="utf-8")))
    else:
        try:
            parse_feed(p.read_text(encoding="utf-8"))
            raise AssertionError("index would accept a feed validate rejects")
        except ContractError as e:
            assert e.message.startswith(f"line {min(bad)}: ")


@settings(max_examples=150, deadline=None)
@given(st.lists(_SUITE_LINES, max_size=6))
def test_suite_is_clean_exactly_when_parse_suite_accepts(
    tmp_path_factory: Any, lines: list[str]
) -> None:
    p = _write(tmp_path_factory.mktemp("v"), "s.ask.jsonl", lines)
    [report] = validate_file(p, kind="suite")
    try:
        suite = parse_suite(p.read_text(encoding="utf-8"))
    except ContractError as e:
        assert report.problems
        first = report.problems[0]
        assert e.message.startswith(f"line {first.line}: ") or first.line is None
    else:
        assert report.ok and report.count == len(suite.cases)


def test_detect_kind(tmp_path: Path) -> None:
    assert detect_kind("x.manifest.json", "") == "manifest"
    assert (
        detect_kind("m.json", json.dumps({"schema": "cce.feed-manifest/v1", "records": 1}))
        == "manifest"
    )
    assert (
        detect_kind("m.json", '{\n "schema": "cce.feed-manifest/v1",\n "records": 1}\n')
        == "manifest"
    )
    assert detect_kind("s.jsonl", '\n{"schema":"cce.knowledge.ask/v1"}\n{"query":"q"}') == "suite"
    assert detect_kind("f.jsonl", OK) == "feed"
    assert detect_kind("f.jsonl", "garbage") == "feed"
