"""Dataclasses built from another object's fields of the same names.

Several types are views of one another — a search hit of its chunk, a status of the
store's facts, a section of its stored object — and copied field by field, each copy a
list to keep in step with the type. These helpers name the fields once: the type's own
declaration.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any


@functools.cache
def field_names(cls: type, but: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """Dataclass `cls`'s field names in declaration order, without those in `but`."""
    return tuple(f.name for f in fields(cls) if f.name not in but)


def attrs_of(source: object, names: Iterable[str]) -> dict[str, Any]:
    """`source`'s attributes `names`, as keyword arguments."""
    return {n: getattr(source, n) for n in names}


def keys_of(source: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """`source`'s values at `names`, as keyword arguments (KeyError names a missing one)."""
    return {n: source[n] for n in names}
