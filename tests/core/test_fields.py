"""core/fields.py: a dataclass built from another object's fields of the same names."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from cce_knowledge.core.fields import attrs_of, field_names, keys_of


@dataclass(frozen=True, slots=True)
class _View:
    rank: int
    b: str
    a: int


@dataclass
class _Source:
    a: int
    b: str
    extra: float


def test_field_names_keep_declaration_order_and_leave_out_but() -> None:
    assert field_names(_View) == ("rank", "b", "a")
    assert field_names(_View, frozenset({"rank"})) == ("b", "a")


def test_a_view_is_built_from_attributes_and_from_keys() -> None:
    names = field_names(_View, frozenset({"rank"}))
    assert _View(rank=1, **attrs_of(_Source(2, "x", 0.5), names)) == _View(1, "x", 2)
    assert _View(rank=1, **keys_of({"a": 2, "b": "x", "z": None}, names)) == _View(1, "x", 2)


def test_a_missing_field_is_named() -> None:
    with pytest.raises(KeyError, match="'a'"):
        keys_of({"b": "x"}, ("b", "a"))
    with pytest.raises(AttributeError, match="rank"):
        attrs_of(_Source(2, "x", 0.5), field_names(_View))
