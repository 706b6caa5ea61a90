"""A JSON Schema validator for one of the shipped contracts (the product loads the
schemas; only tests validate documents against them)."""

from __future__ import annotations

from jsonschema import Draft202012Validator

from cce_knowledge.contract.schemas import load_schema


def validator(contract: str) -> Draft202012Validator:
    return Draft202012Validator(load_schema(contract))
