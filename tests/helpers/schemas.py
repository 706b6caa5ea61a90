"""A JSON Schema validator for one of the shipped contracts (the product loads the
schemas; only tests validate documents against them)."""

from __future__ import annotations

import json

from jsonschema import Draft202012Validator

from cce_knowledge.contract.schemas import load_schema


def validator(contract: str) -> Draft202012Validator:
    return Draft202012Validator(load_schema(contract))


def assert_feed_valid(data: bytes) -> None:
    """Every line of an adapter's output validates against the cce.knowledge/v1 schema,
    and the feed ends with a newline."""
    v = validator("cce.knowledge/v1")
    lines = data.decode("utf-8").split("\n")
    assert lines[-1] == ""
    for n, line in enumerate(lines[:-1], 1):
        errors = [e.message for e in v.iter_errors(json.loads(line))]
        assert not errors, f"line {n}: {errors}"
