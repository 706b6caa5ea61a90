"""The cce.knowledge/v1 feed parser: serde_json semantics, failure modes, properties."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cce_knowledge.contract.jsonparse import ScanError, scan_value
from cce_knowledge.contract.ndjson import (
    KNOWN_FIELDS,
    FeedLineError,
    check_is_file,
    iter_feed,
    parse_feed,
    parse_line_exact,
    parse_line_fast,
    read_feed,
)
from cce_knowledge.contract.record import KnowledgeRecord
from cce_knowledge.core.errors import ContractError
from tests.helpers.paths import REPO, TESTS

FM = TESTS / "contract_examples" / "failure_modes"
OK = '{"id":"a","title":"t","body":"b","source":"s"}'


def _err(text: str) -> str:
    with pytest.raises(ContractError) as e:
        parse_feed(text)
    return e.value.message


# -- the reference engine's own pins and the spec's examples ------------------------


def test_missing_required_field_names_line_2() -> None:
    msg = _err(OK + '\n{"id":"b","title":"t","body":"b"}\n')
    assert msg == (
        "line 2: invalid cce.knowledge/v1 record: missing field `source` at line 1 column 33"
    )


def test_not_json_is_expected_ident_at_column_2() -> None:
    assert (
        _err("not json")
        == "line 1: invalid cce.knowledge/v1 record: expected ident at line 1 column 2"
    )


def test_required_and_optional_fields() -> None:
    line = (
        '{"id":"gh:o/r#1","title":"T","body":"b","source":"github-issues","state":"open",'
        '"labels":["bug","p1"],"url":"https://x/1"}'
    )
    [r] = parse_feed(line)
    assert r == KnowledgeRecord(
        id="gh:o/r#1",
        title="T",
        body="b",
        source="github-issues",
        url="https://x/1",
        state="open",
        labels=["bug", "p1"],
    )
    assert r.group is None and r.links == []


def test_blank_lines_are_skipped_but_counted() -> None:
    text = "\n" + OK + "\n   \n\u3000\t\n" + '{"id":1}\n'
    assert _err(text).startswith("line 5: ")
    assert len(parse_feed("\n" + OK + "\n   \n")) == 1


def test_lone_cr_is_not_a_line_break() -> None:
    # `\r` inside a line is JSON whitespace between tokens, not a separator.
    [r] = parse_feed('{"id":"a",\r"title":"t","body":"b","source":"s"}\r\n')
    assert r.id == "a"
    assert _err(OK + "\r" + OK + "\n").startswith("line 1: ")


def test_duplicate_unknown_keys_are_ignored_known_are_errors() -> None:
    assert parse_feed('{"x":1,"x":2,"id":"a","title":"t","body":"b","source":"s"}')[0].id == "a"
    msg = _err('{"id":"a","title":"t","body":"b","source":"s","extra":1,"extra":2}')
    assert "duplicate field `extra`" in msg


def test_duplicate_is_detected_before_the_value_is_read() -> None:
    # serde checks the key before parsing the value: even a broken value after a
    # duplicate key reports the duplicate; serde runs `end_map` (which skips the
    # blank) and then positions a data error at the last byte it consumed.
    msg = _err('{"id":"a","id" :%%%')
    assert msg.endswith("duplicate field `id` at line 1 column 15")


def test_unknown_values_are_skipped_syntax_only() -> None:
    deep = "[" * 5000 + "]" * 5000
    line = '{"id":"a","title":"t","body":"b","source":"s","x":1e999,"y":"\\udc00","z":' + deep + "}"
    assert parse_feed(line)[0].id == "a"
    # ... but their syntax is still checked.
    assert "invalid escape" in _err('{"x":"\\q","id":"a","title":"t","body":"b","source":"s"}')


def test_known_field_limits() -> None:
    base = '{"id":"a","title":"t","body":"b","source":"s","extra":%s}'
    assert parse_feed(base % ("[" * 126 + "]" * 126))[0].extra is not None
    assert "recursion limit exceeded" in _err(base % ("[" * 127 + "]" * 127))
    assert "number out of range" in _err(base % "-1.5e400")
    assert "number out of range" in _err(base % ("1" * 400))
    assert parse_feed(base % "1e-400")[0].extra == 0.0
    assert parse_feed(base % "0e999999")[0].extra == 0.0
    assert "lone leading surrogate" in _err(base % '"\\udfff"')
    assert "unexpected end of hex escape" in _err(base % '"\\ud800"')
    assert parse_feed(base % '"\\ud83d\\ude00"')[0].extra == "\U0001f600"


def test_extra_null_is_none_and_labels_null_is_an_error() -> None:
    assert (
        parse_feed('{"id":"a","title":"t","body":"b","source":"s","extra":null}')[0].extra is None
    )
    assert "invalid type: null, expected a sequence" in _err(
        '{"id":"a","title":"t","body":"b","source":"s","links":null}'
    )


def test_array_form() -> None:
    [r] = parse_feed('["a","t","b","s",null,"open",null,null,["x"],"g",["l"],{"k":1}]')
    assert (r.id, r.state, r.labels, r.group, r.links, r.extra) == (
        "a",
        "open",
        ["x"],
        "g",
        ["l"],
        {"k": 1},
    )
    assert "invalid length 2, expected struct KnowledgeRecord with 12 elements" in _err('["a","t"]')
    too_many = '["a","t","b","s",null,null,null,null,[],null,[],null,"extra"]'
    assert "trailing characters" in _err(too_many)


def test_type_error_messages_describe_the_value() -> None:
    base = '{"id":%s,"title":"t","body":"b","source":"s"}'
    assert "invalid type: boolean `false`, expected a string" in _err(base % "false")
    assert "invalid type: integer `-7`, expected a string" in _err(base % "-7")
    assert "invalid type: floating point `1e+16`, expected a string" in _err(base % "1e16")
    assert "invalid type: floating point `-0.0`, expected a string" in _err(base % "-0")
    assert 'invalid type: string "a\\"b", expected struct KnowledgeRecord' in _err('"a\\"b"')
    assert "invalid type: map, expected a string" in _err(base % "{}")


def test_columns_are_bytes() -> None:
    # 'é' is 2 bytes, '😀' 4: the column counts bytes, not characters (a type error
    # lands on the scalar's last byte, the `1` at byte 20; characters would say 17).
    msg = _err('{"x":"é😀","id":1}')
    assert msg.endswith("expected a string at line 1 column 20")


def test_line_errors_report_the_json_path() -> None:
    [(_, r)] = list(iter_feed('{"id":"a","title":"t","body":"b","source":"s","labels":["x",2]}'))
    assert isinstance(r, FeedLineError)
    assert (r.line, r.path) == (1, "$.labels[1]")
    [(_, r)] = list(
        iter_feed('{"id":"a","title":"t","body":"b","source":"s","extra":{"a b":[1,NaN]}}')
    )
    assert isinstance(r, FeedLineError)
    assert r.path == '$.extra["a b"][1]'


def test_iter_feed_reports_every_bad_line() -> None:
    text = "\n".join([OK, "x", OK, "{}", "", '{"id":2}']) + "\n"
    got = [(n, isinstance(r, FeedLineError)) for n, r in iter_feed(text)]
    assert got == [(1, False), (2, True), (3, False), (4, True), (6, True)]


# -- failure-mode fixtures ----------------------------------------------------------


def test_fixture_bom() -> None:
    _, text = read_feed(FM / "bom.jsonl")
    assert text.startswith("\ufeff")  # read unchanged
    assert (
        _err(text) == "line 1: invalid cce.knowledge/v1 record: expected value at line 1 column 1"
    )


def test_fixture_crlf() -> None:
    raw, text = read_feed(FM / "crlf.jsonl")
    assert b"\r\n" in raw
    assert [r.id for r in parse_feed(text)] == ["gh:acme/app#1", "gh:acme/app#2"]


def test_fixture_invalid_utf8() -> None:
    path = FM / "invalid_utf8.jsonl"
    with pytest.raises(ContractError) as e:
        read_feed(path)
    assert e.value.message == f"could not read {path}: stream did not contain valid UTF-8"


def test_fixture_missing_file_and_not_a_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(ContractError) as e:
        read_feed(missing)
    assert e.value.message == f"could not read {missing}: No such file or directory (os error 2)"
    with pytest.raises(ContractError) as e:
        check_is_file(tmp_path)
    assert e.value.message == f"not a file: {tmp_path}"
    with pytest.raises(ContractError):
        check_is_file(missing)


def test_fixture_duplicate_keys() -> None:
    _, text = read_feed(FM / "duplicate_keys.jsonl")
    assert _err(text) == (
        "line 2: invalid cce.knowledge/v1 record: duplicate field `title` at line 1 column 29"
    )


def test_fixture_null_labels() -> None:
    _, text = read_feed(FM / "null_labels.jsonl")
    assert _err(text).startswith(
        "line 2: invalid cce.knowledge/v1 record: invalid type: null, expected a sequence"
    )


def test_fixture_nan() -> None:
    _, text = read_feed(FM / "nan.jsonl")
    assert _err(text).startswith(
        "line 1: invalid cce.knowledge/v1 record: expected value at line 1 column "
    )


def test_fixture_deep_nesting() -> None:
    _, text = read_feed(FM / "deep_nesting.jsonl")
    assert "line 2: invalid cce.knowledge/v1 record: recursion limit exceeded" in _err(text)


def test_fixture_empty_and_blank_feeds_are_valid() -> None:
    assert parse_feed(read_feed(FM / "empty.jsonl")[1]) == []
    assert parse_feed(read_feed(FM / "blank_only.jsonl")[1]) == []


def test_fixture_unit_separator_line_is_not_blank() -> None:
    _, text = read_feed(FM / "unit_separator.jsonl")
    assert _err(text).startswith("line 2: ")


def test_huge_line(tmp_path: Path) -> None:
    body = ("# Big\n\n" + "word " * 400_000) * 2  # ~4 MB in one line
    p = tmp_path / "huge.jsonl"
    p.write_text(json.dumps({"id": "h", "title": "t", "body": body, "source": "s"}) + "\n")
    [r] = parse_feed(read_feed(p)[1])
    assert r.body == body
    broken = p.read_text()[:-3] + "\n"
    assert "EOF while parsing" in _err(broken)


# -- properties ---------------------------------------------------------------------


_ODD = st.sampled_from(
    [
        "null",
        "true",
        "false",
        "0",
        "-0",
        "01",
        "1.",
        "1e999",
        "-1e999",
        "1e-999",
        "2.5",
        "18446744073709551616",
        "-9223372036854775809",
        "NaN",
        "Infinity",
        '"\\udc00"',
        '"\\ud800"',
        '"\\ud83d\\ude00"',
        '"\\u00e9"',
        '"\\q"',
        '"a\tb"',
        "[]",
        "{}",
        "[1,]",
        '{"a":1,}',
        '"x"',
        '""',
        "[" * 130 + "]" * 130,
        '{"k":' * 128 + "1" + "}" * 128,
    ]
)


def _leaf() -> st.SearchStrategy[str]:
    # Mostly well-formed leaves, so that many lines are valid; one branch in six odd.
    text = st.text(max_size=8).map(lambda s: json.dumps(s, ensure_ascii=bool(len(s) % 2)))
    return st.one_of(
        _ODD,
        st.integers().map(str),
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
        text,
        text,
        st.sampled_from(["null", "true", "false"]),
    )


_KEYS = st.sampled_from([*sorted(KNOWN_FIELDS), "x", "id", "labels", "extra", "é", "\\u0069d"])

_JSONISH = st.recursive(
    _leaf(),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: "[" + ",".join(xs) + "]"),
        st.lists(st.tuples(_KEYS, inner), max_size=4).map(
            lambda kv: "{" + ",".join(f'"{k}":{v}' for k, v in kv) + "}"
        ),
    ),
    max_leaves=12,
)


_UNKNOWN_KEYS = st.sampled_from(["x", "y", "meta", "é", "\\u0078"])
_OPT_STR_FIELDS = ("url", "state", "state_reason", "updated_at", "group")


@st.composite
def record_lines(draw: st.DrawFn) -> str:
    """Object lines that are often valid records, with oddities mixed in."""
    pairs: list[tuple[str, str]] = []
    for k in ("id", "title", "body", "source"):
        if draw(st.integers(0, 19)):
            pairs.append(
                (k, json.dumps(draw(st.text(max_size=6)), ensure_ascii=draw(st.booleans())))
            )
    for k in _OPT_STR_FIELDS:
        if draw(st.booleans()):
            pairs.append((k, draw(st.one_of(st.just("null"), st.text(max_size=4).map(json.dumps)))))
    for k in ("labels", "links"):
        if draw(st.booleans()):
            items = draw(st.lists(st.text(max_size=3), max_size=3))
            pairs.append((k, "[" + ",".join(json.dumps(x) for x in items) + "]"))
    # Unknown keys (skipped syntax-only) and, now and then, a known one again or
    # with an odd value (duplicates, nulls, wrong types, `extra` edge cases).
    for _ in range(draw(st.integers(0, 3))):
        pairs.append((draw(_UNKNOWN_KEYS), draw(_JSONISH)))
    if draw(st.integers(0, 2)) == 0:
        pairs.append((draw(_KEYS), draw(_JSONISH)))
    pairs = draw(st.permutations(pairs))
    sep = draw(st.sampled_from([",", ", ", " ,\t"]))
    line = "{" + sep.join(f'"{k}":{v}' for k, v in pairs) + "}"
    if draw(st.integers(0, 7)) == 0:  # the positional array form
        items = draw(
            st.lists(
                st.one_of(
                    st.text(max_size=3).map(json.dumps),
                    st.sampled_from(["null", "[]", '["a"]']),
                    _JSONISH,
                ),
                min_size=2,
                max_size=13,
            )
        )
        line = "[" + sep.join(items) + "]"
    if draw(st.integers(0, 9)) == 0:
        cut = draw(st.integers(0, len(line)))
        line = line[:cut]
    return line


def _same(a: KnowledgeRecord, b: KnowledgeRecord) -> bool:
    # `extra` is never stored; the fast path keeps Python's int for integers beyond
    # 64 bits where serde_json would hold a float, so compare it by float value.
    def norm(v: Any) -> Any:
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        if isinstance(v, int | float):
            return float(v)
        if isinstance(v, list):
            return [norm(x) for x in v]
        return {k: norm(x) for k, x in v.items()}

    return [getattr(a, f) for f in KnowledgeRecord.__slots__ if f != "extra"] == [
        getattr(b, f) for f in KnowledgeRecord.__slots__ if f != "extra"
    ] and norm(a.extra) == norm(b.extra)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lines())
def test_fast_path_never_accepts_what_the_exact_scanner_rejects(line: str) -> None:
    fast = parse_line_fast(line)
    exact = parse_line_exact(line)
    if fast is not None:
        assert isinstance(exact, KnowledgeRecord), (line, exact)
        assert _same(fast, exact), line


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_parser_raises_only_contract_errors_on_any_text(text: str) -> None:
    try:
        parse_feed(text)
    except ContractError as e:
        assert e.message.startswith("line ")
    for _, r in iter_feed(text):
        assert isinstance(r, KnowledgeRecord | FeedLineError)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_reading_any_bytes_raises_only_contract_errors(tmp_path_factory: Any, data: bytes) -> None:
    p = tmp_path_factory.mktemp("b") / "f.jsonl"
    p.write_bytes(data)
    try:
        raw, text = read_feed(p)
        assert raw == data
        parse_feed(text)
    except ContractError:
        pass


_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_VALUES, st.booleans())
def test_scanner_reads_what_json_writes(v: Any, ascii_only: bool) -> None:
    text = json.dumps(v, ensure_ascii=ascii_only)
    got = scan_value(text.encode("utf-8"))

    def norm(x: Any) -> Any:
        if isinstance(x, float) and x == 0.0:
            return 0.0
        if isinstance(x, float) and math.isfinite(x) and x == int(x):
            return float(x)
        if isinstance(x, list):
            return [norm(y) for y in x]
        if isinstance(x, dict):
            return {k: norm(y) for k, y in x.items()}
        return x

    assert norm(got) == norm(json.loads(text))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60))
def test_scanner_raises_only_scan_errors(data: bytes) -> None:
    try:
        scan_value(data)
    except ScanError as e:
        assert e.line >= 1 and e.column >= 0


def test_same_bytes_same_records() -> None:
    text = (FM / "crlf.jsonl").read_text(encoding="utf-8")
    assert parse_feed(text) == parse_feed(text)


def test_docs_error_table_matches_the_parser() -> None:
    import re

    doc = (REPO / "docs" / "contract.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([^`]+)` \| `+(.+?)`+ \|$", doc, flags=re.M)
    assert len(rows) >= 8
    for line, message in rows:
        line = line.replace("{…,", '{"id":"a","title":"t","body":"b","source":"s",')
        line = line.replace(",…}", ',"body":"b","source":"s"}')
        assert _err(line) == f"line 1: invalid cce.knowledge/v1 record: {message.strip()}", line
