"""Strict validation of our own `.cce/config` blocks, with errors that name the key."""

from __future__ import annotations

import dataclasses
from typing import Any, get_type_hints

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
    # pydantic costs ~80 ms to import: paid only when one of our blocks is present.
    from pydantic import ConfigDict, TypeAdapter, ValidationError

    try:
        return TypeAdapter(form, config=ConfigDict(strict=True)).validate_python(value)
    except ValidationError as e:
        first = e.errors(include_url=False, include_input=False)[0]
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise ConfigError(f"{where}{loc}: {first['msg']}") from None


def _names(form: type) -> str:
    return ", ".join(f.name for f in dataclasses.fields(form))
