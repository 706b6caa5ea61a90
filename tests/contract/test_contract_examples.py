"""One shared set of example lines, run through both the parsers and the JSON Schemas.

tests/contract_examples/<contract>/
  valid.jsonl         both accept
  invalid.jsonl       both reject (+ .expect: the parser's message, line by line)
  not_json.jsonl      not JSON: the parser rejects, a schema tool cannot even load it
  schema_blind.jsonl  the parser rejects, JSON Schema cannot express why (documented
                      in docs/schemas.md; this list pins the gap so it cannot grow silently)
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from cce_knowledge.contract.asksuite import iter_suite
from cce_knowledge.contract.manifest import ManifestParseError, digest_problem, scan_manifest
from cce_knowledge.contract.ndjson import (
    FeedLineError,
    parse_line,
    parse_line_exact,
)
from tests.helpers.paths import REPO, TESTS
from tests.helpers.schemas import validator

EX = TESTS / "contract_examples"
CONTRACT = {
    "record": "cce.knowledge/v1",
    "manifest": "cce.feed-manifest/v1",
    "ask": "cce.knowledge.ask/v1",
}


def _lines(kind: str, name: str) -> list[str]:
    p = EX / kind / name
    return p.read_text(encoding="utf-8").split("\n")[:-1]


def _cases(kind: str, name: str) -> list[tuple[str, str | None]]:
    lines = _lines(kind, f"{name}.jsonl")
    exp_path = EX / kind / f"{name}.expect"
    expects: list[str | None] = (
        list(exp_path.read_text(encoding="utf-8").split("\n")[:-1])
        if exp_path.exists()
        else [None] * len(lines)
    )
    assert len(lines) == len(expects), f"{kind}/{name}: .jsonl and .expect differ in length"
    return list(zip(lines, expects, strict=True))


def parser_verdict(kind: str, line: str) -> str | None:
    """None when the contract's parser accepts the line, else its message."""
    if kind == "record":
        fast = parse_line(line)
        exact = parse_line_exact(line)
        # The fast path and the exact scanner must agree on every example.
        assert isinstance(fast, FeedLineError) == isinstance(exact, FeedLineError)
        if isinstance(exact, FeedLineError):
            assert fast == exact
            return exact.message
        assert fast == exact
        return None
    if kind == "manifest":
        m = scan_manifest(line)
        if isinstance(m, ManifestParseError):
            return m.message
        # The digest's shape is part of a usable manifest (checked before anything else).
        return digest_problem(m)
    errors = [e for _, _, e in iter_suite(line) if e is not None]
    return errors[0].message if errors else None


def _strict_json(line: str) -> Any:
    def refuse(c: str) -> Any:
        raise ValueError(c)

    return json.loads(line, parse_constant=refuse)


def schema_accepts(kind: str, line: str) -> bool:
    return bool(validator(CONTRACT[kind]).is_valid(_strict_json(line)))


ALL = [
    (k, n)
    for k in CONTRACT
    for n in ("valid", "invalid", "not_json", "schema_blind")
    if (EX / k / f"{n}.jsonl").exists()
]


@pytest.mark.parametrize("kind", list(CONTRACT))
def test_valid_examples_pass_parser_and_schema(kind: str) -> None:
    cases = _cases(kind, "valid")
    assert len(cases) >= 5
    for line, _ in cases:
        assert parser_verdict(kind, line) is None, line
        assert schema_accepts(kind, line), line


@pytest.mark.parametrize("kind", list(CONTRACT))
def test_invalid_examples_fail_parser_and_schema(kind: str) -> None:
    cases = _cases(kind, "invalid")
    assert len(cases) >= 5
    for line, expected in cases:
        got = parser_verdict(kind, line)
        assert got is not None, line
        assert expected is not None and got.startswith(expected), (line, got, expected)
        assert not schema_accepts(kind, line), line


def test_not_json_examples_fail_parser_and_cannot_be_loaded() -> None:
    for line, expected in _cases("record", "not_json"):
        got = parser_verdict("record", line)
        assert got == expected, (line, got)
        with pytest.raises(ValueError):
            _strict_json(line)


@pytest.mark.parametrize("kind", list(CONTRACT))
def test_schema_blind_spots_are_exactly_the_documented_ones(kind: str) -> None:
    for line, expected in _cases(kind, "schema_blind"):
        got = parser_verdict(kind, line)
        assert got == expected, (line, got)
        # JSON Schema sees only the decoded value: it accepts these.
        assert schema_accepts(kind, line), line


def test_every_example_file_is_covered() -> None:
    files = {p.relative_to(EX).as_posix() for p in EX.glob("*/*.jsonl")}
    covered = {f"{k}/{n}.jsonl" for k, n in ALL}
    assert files - {p for p in files if p.startswith("failure_modes/")} == covered


def test_schema_blind_list_matches_docs() -> None:
    doc = (REPO / "docs" / "schemas.md").read_text(encoding="utf-8")
    for phrase in ("duplicate", "127", "surrogate", "out of range", "3.0"):
        assert phrase in doc, phrase
