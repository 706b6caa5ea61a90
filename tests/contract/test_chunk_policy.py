"""The `cce.chunk-policy/v1` contract: the checker and the published schema agree on
valid and invalid policies, the shipped examples are valid, and every problem names
its JSON path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from cce_knowledge.contract.chunk_policy import (
    ChunkPolicy,
    load_chunk_policy,
    policy_problems,
)
from cce_knowledge.contract.schemas import load_schema
from cce_knowledge.core.errors import UsageError
from tests.helpers.paths import REPO

EXAMPLES = REPO / "examples" / "chunk-policies"
SCHEMA = Draft202012Validator(load_schema("cce.chunk-policy/v1"))


def doc(policy: object = None, match: object = None, **top: object) -> dict[str, object]:
    rule = {"match": {} if match is None else match, "policy": {} if policy is None else policy}
    return {"schema": "cce.chunk-policy/v1", "rules": [rule], **top}


VALID = [
    doc(),
    {"schema": "cce.chunk-policy/v1", "rules": []},
    doc({"keep_whole_below": 0, "primary_level": 1, "fallback_level": 6, "max_lines": 1}),
    doc({"special_sections": {"Discussion Map": "own-chunk", "Log": "skip", "A": "merge-up"}}),
    doc(match={"source": "s", "group": "g", "label": "l", "id": "docs/*.md"}),
    doc(description="x"),
]
INVALID = [
    ({"rules": []}, "$.schema"),
    ({"schema": "cce.chunk-policy/v2", "rules": []}, "$.schema"),
    ({"schema": "cce.chunk-policy/v1"}, "$.rules"),
    ({"schema": "cce.chunk-policy/v1", "rules": {}}, "$.rules"),
    ({"schema": "cce.chunk-policy/v1", "rules": [], "extra": 1}, "$.extra"),
    ({"schema": "cce.chunk-policy/v1", "rules": [{"match": {}}]}, "$.rules[0].policy"),
    ({"schema": "cce.chunk-policy/v1", "rules": [{"policy": {}}]}, "$.rules[0].match"),
    ({"schema": "cce.chunk-policy/v1", "rules": [[]]}, "$.rules[0]"),
    (doc(match={"labels": "x"}), "$.rules[0].match.labels"),
    (doc(match={"source": ""}), "$.rules[0].match.source"),
    (doc(match={"id": 3}), "$.rules[0].match.id"),
    (doc(match=[]), "$.rules[0].match"),
    (doc({"primary_level": 0}), "$.rules[0].policy.primary_level"),
    (doc({"primary_level": 7}), "$.rules[0].policy.primary_level"),
    (doc({"fallback_level": 4.5}), "$.rules[0].policy.fallback_level"),
    (doc({"primary_level": True}), "$.rules[0].policy.primary_level"),
    (doc({"primary_level": 3}), "$.rules[0].policy.fallback_level"),
    (doc({"primary_level": 4, "fallback_level": 2}), "$.rules[0].policy.fallback_level"),
    (doc({"max_lines": 0}), "$.rules[0].policy.max_lines"),
    (doc({"keep_whole_below": -1}), "$.rules[0].policy.keep_whole_below"),
    (doc({"skip_empty_sections": "yes"}), "$.rules[0].policy.skip_empty_sections"),
    (doc({"special_sections": []}), "$.rules[0].policy.special_sections"),
    (doc({"special_sections": {"X": "drop"}}), '$.rules[0].policy.special_sections["X"]'),
    (doc({"special_sections": {" ": "skip"}}), '$.rules[0].policy.special_sections[" "]'),
    (doc({"max_section": 3}), "$.rules[0].policy.max_section"),
    ([], "$"),
]
# What the schema cannot say (see its description): the checker alone refuses these.
SCHEMA_BLIND = [
    doc({"primary_level": 3}),
    doc({"fallback_level": 4.0}),
    doc({"primary_level": 4, "fallback_level": 2}),
    doc({"special_sections": {"Summary": "skip", "summary ": "own-chunk"}}),
]


@pytest.mark.parametrize("d", VALID)
def test_valid_policies(d: dict[str, object]) -> None:
    problems, _, policy = policy_problems(json.dumps(d))
    assert problems == [] and isinstance(policy, ChunkPolicy)
    SCHEMA.validate(d)


@pytest.mark.parametrize(("d", "path"), INVALID)
def test_invalid_policies_name_the_json_path(d: object, path: str) -> None:
    problems, _, policy = policy_problems(json.dumps(d))
    assert policy is None
    assert path in [p for p, _ in problems], problems
    if d not in SCHEMA_BLIND:
        assert not SCHEMA.is_valid(d)


@pytest.mark.parametrize("d", SCHEMA_BLIND)
def test_schema_blind_cases(d: dict[str, object]) -> None:
    assert SCHEMA.is_valid(d)
    assert policy_problems(json.dumps(d))[0]


def test_syntax_errors_duplicates_and_nan() -> None:
    problems, line, _ = policy_problems('{"schema": "cce.chunk-policy/v1",\n\n "rules": [}')
    assert line == 3 and problems[0][1].startswith("not valid JSON")
    problems, _, _ = policy_problems('{"schema": "cce.chunk-policy/v1", "rules": [], "rules": []}')
    assert problems == [("$", 'duplicate key "rules"')]
    problems, _, _ = policy_problems(
        '{"schema": "cce.chunk-policy/v1", "rules": [{"match": {}, "policy": {"max_lines": NaN}}]}'
    )
    assert problems and "NaN" in problems[0][1]


def test_examples_are_valid_and_load() -> None:
    names = sorted(p.name for p in EXAMPLES.glob("*.json"))
    assert {"research.json", "discussion.json", "investigation.json", "specification.json"} <= set(
        names
    )
    for name in names:
        data = json.loads((EXAMPLES / name).read_text())
        SCHEMA.validate(data)
        policy = load_chunk_policy(EXAMPLES / name)
        assert policy.rules and policy.origin == str(EXAMPLES / name)
        for rule in policy.rules:
            # The design's shared defaults.
            p = rule.policy
            assert (p.keep_whole_below, p.primary_level, p.fallback_level, p.max_lines) == (
                20,
                2,
                3,
                80,
            )


def test_load_refuses_with_a_usage_error(tmp_path: Path) -> None:
    f = tmp_path / "p.json"
    f.write_bytes(b"\xff")
    with pytest.raises(UsageError, match="not valid UTF-8"):
        load_chunk_policy(f)
    f.write_text(json.dumps(doc({"primary_level": 9, "max_lines": 0})))
    with pytest.raises(UsageError) as e:
        load_chunk_policy(f)
    assert e.value.exit_code == 2
    assert e.value.message == (
        f"invalid chunk policy {f}: $.rules[0].policy.max_lines: must be an integer >= 1 "
        "(and 1 more problem(s))"
    )
    f.write_text(" " * (1 << 20) + "{}")
    with pytest.raises(UsageError, match="larger than"):
        load_chunk_policy(f)
    with pytest.raises(UsageError, match="not a file"):
        load_chunk_policy(tmp_path)


_JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 9)
    | st.sampled_from(["", "skip", "x", "own-chunk"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "schema",
                    "rules",
                    "match",
                    "policy",
                    "source",
                    "id",
                    "primary_level",
                    "fallback_level",
                    "max_lines",
                    "special_sections",
                    "Summary",
                    "keep_whole_below",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_JSONISH)
def test_checker_never_accepts_what_the_schema_refuses(d: object) -> None:
    if isinstance(d, dict):
        d = {**d, "schema": "cce.chunk-policy/v1"}
    problems, _, _ = policy_problems(json.dumps(d))
    if not problems:
        SCHEMA.validate(d)
