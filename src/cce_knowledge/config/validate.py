"""Strict validation of our own `.cce/config` blocks, with errors that name the key."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, get_args, get_origin, get_type_hints

from cce_knowledge.core.errors import ConfigError


def validate_value(value: Any, form: Any, where: str) -> Any:
    """`value` (plain data, scalars typed as serde_yaml types them) as an instance of
    `form`: a dataclass (each field checked in turn; unknown keys refused) or any type
    pydantic validates (a Literal, `str | None`, ...) in strict mode, so a quoted
    number is not a number. Raises ConfigError `"<where>.<key>: why"`."""
    if dataclasses.is_dataclass(form) and isinstance(form, type):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping of {_names(form)}")
        hints = get_type_hints(form)
        names = {f.name for f in dataclasses.fields(form)}
        unknown = sorted(str(k) for k in value if k not in names)
        if unknown:
            raise ConfigError(f"{where}.{unknown[0]}: unknown key (expected {_names(form)})")
        return form(**{k: validate_value(v, hints[k], f"{where}.{k}") for k, v in value.items()})
    choices = get_args(form) if get_origin(form) is Literal else ()
    if choices and all(isinstance(c, str) for c in choices):
        # By hand (pydantic's message, word for word): `knowledge.redaction` is read by
        # every command, and a one-word setting must not cost each one pydantic's import.
        if isinstance(value, str) and value in choices:
            return value
        shown = [repr(c) for c in choices]
        expected = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
        raise ConfigError(f"{where}: Input should be {expected}")
    if form is str:
        # By hand too (`knowledge.chunk_policy`, a path read by every command).
        if isinstance(value, str):
            return value
        raise ConfigError(f"{where}: Input should be a valid string")
    # pydantic costs ~80 ms to import: paid only when one of our other blocks is present.
    from pydantic import ConfigDict, TypeAdapter, ValidationError

    try:
        return TypeAdapter(form, config=ConfigDict(strict=True)).validate_python(value)
    except ValidationError as e:
        first = e.errors(include_url=False, include_input=False)[0]
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise ConfigError(f"{where}{loc}: {first['msg']}") from None


def _names(form: type) -> str:
    return ", ".join(f.name for f in dataclasses.fields(form))
