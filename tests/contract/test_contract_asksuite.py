"""cce.knowledge.ask/v1 suite parsing (docs/spec/core.md §8.1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cce_knowledge.contract.asksuite import (
    DEFAULT_ASK_K,
    AskCase,
    AskSuite,
    parse_suite,
    read_suite,
)
from cce_knowledge.core.errors import ContractError
from tests.helpers.paths import TESTS

VEC = TESTS / "vectors" / "ask"


def _err(text: str) -> str:
    with pytest.raises(ContractError) as e:
        parse_suite(text)
    return e.value.message


def test_header_and_cases() -> None:
    text = (
        '{"schema":"cce.knowledge.ask/v1","corpus":"c.jsonl"}\n'
        '{"id":"a","query":"q one","expect":["r1"],"k":3}\n'
        '{"query":"q two","expect":["r2","r3"]}\n'
    )
    assert parse_suite(text) == AskSuite(
        "c.jsonl",
        [AskCase("a", "q one", ["r1"], 3), AskCase("q3", "q two", ["r2", "r3"], DEFAULT_ASK_K)],
    )


def test_reference_suite_vector() -> None:
    suite = parse_suite(read_suite(VEC / "ask.jsonl"))
    assert suite.corpus == "corpus.knowledge.jsonl"
    assert len(suite.cases) == 7
    assert all(c.k == 5 and len(c.expect) == 1 for c in suite.cases)
    assert suite.cases[4].id == "ask-session-store"


def test_header_rules() -> None:
    assert _err('{"schema":"cce.knowledge.ask/v9"}\n') == (
        'line 1: unknown schema "cce.knowledge.ask/v9" (expected "cce.knowledge.ask/v1")'
    )
    assert _err('{"schema":null}\n{"query":"q","expect":["r"]}') == (
        'line 1: unknown schema "" (expected "cce.knowledge.ask/v1")'
    )
    text = '\n{"query":"q","expect":["r"]}\n{"schema":"cce.knowledge.ask/v1"}\n'
    assert _err(text) == "line 3: header must be the first line"
    two = '{"schema":"cce.knowledge.ask/v1"}\n{"schema":"cce.knowledge.ask/v1"}\n'
    assert _err(two) == "line 2: header must be the first line"
    # A line with `schema` AND `query` is a case; empty/non-string corpus is None.
    s = parse_suite(
        '{"schema":"cce.knowledge.ask/v1","corpus":""}\n{"schema":"x","query":"q","expect":["r"]}'
    )
    assert s.corpus is None and s.cases[0].query == "q"


def test_case_rules() -> None:
    assert _err('{"expect":["r"]}') == "line 1: case missing string `query`"
    assert _err("[1,2]") == "line 1: case missing string `query`"
    assert _err('{"query":"q","expect":[1]}') == "line 1: case needs a non-empty `expect` array"
    assert _err('{"query":"q","expect":["r"],"k":0}') == "line 1: `k` must be >= 1"
    for k in ("3.0", "-1", "null", '"3"', "-0", "18446744073709551616"):
        assert _err('{"query":"q","expect":["r"],"k":%s}' % k) == (  # noqa: UP031
            "line 1: `k` must be a positive integer"
        ), k
    s = parse_suite('{"query":" q ","expect":[null,"r",2],"id":7,"k":18446744073709551615}')
    assert s.cases == [AskCase("q1", " q ", ["r"], 2**64 - 1)]


def test_duplicate_keys_keep_the_last_value() -> None:
    assert parse_suite('{"query":"a","query":"b","expect":["r"]}').cases[0].query == "b"


def test_invalid_json_and_empty_suite() -> None:
    assert _err("\n{nope") == "line 2: invalid JSON: key must be a string at line 1 column 2"
    assert _err('{"query":"\\udc00","expect":["r"]}').startswith(
        "line 1: invalid JSON: lone leading surrogate in hex escape"
    )
    assert _err("\n  \n") == "suite has no cases"
    assert _err('{"schema":"cce.knowledge.ask/v1"}') == "suite has no cases"


def test_read_suite_errors(tmp_path: Path) -> None:
    with pytest.raises(ContractError) as e:
        read_suite(tmp_path / "s.jsonl")
    assert e.value.message.startswith(f"could not read suite {tmp_path / 's.jsonl'}: No such file")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\xff")
    with pytest.raises(ContractError) as e:
        read_suite(bad)
    assert e.value.message.endswith("stream did not contain valid UTF-8")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=150))
def test_parse_raises_only_contract_errors(text: str) -> None:
    try:
        s = parse_suite(text)
    except ContractError:
        return
    assert s.cases and all(c.k >= 1 and c.expect for c in s.cases)
