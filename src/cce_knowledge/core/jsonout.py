"""JSON writers matching serde_json's output bytes (docs/spec/core.md §0.8).

* `pretty(v)` — `to_string_pretty`: 2-space indent, one item per line (arrays of
  numbers included), zmij float text. Dict order is kept, so build dicts in the
  struct's declaration order, or pass `sort_keys=True` for `json!`/`Value` output.
* `canonical(v)` — compact, sorted keys, raw UTF-8: the `.cck` line encoding.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from cce_knowledge.core.rustcompat import serde_f64

_encode_str = json.JSONEncoder(ensure_ascii=False).encode


def json_str(s: str) -> str:
    """A JSON string literal exactly as serde_json writes it."""
    return _encode_str(s)


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, str):
        return _encode_str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return serde_f64(v)
    raise TypeError(f"cannot serialise {type(v).__name__}")


def _pretty(v: Any, indent: str, sort_keys: bool, out: list[str]) -> None:
    if isinstance(v, Mapping):
        if not v:
            out.append("{}")
            return
        inner = indent + "  "
        items = sorted(v.items()) if sort_keys else v.items()
        out.append("{\n")
        first = True
        for k, val in items:
            if not first:
                out.append(",\n")
            first = False
            out.append(inner)
            out.append(_encode_str(k))
            out.append(": ")
            _pretty(val, inner, sort_keys, out)
        out.append("\n" + indent + "}")
    elif isinstance(v, Sequence) and not isinstance(v, str):
        if not v:
            out.append("[]")
            return
        inner = indent + "  "
        out.append("[\n")
        first = True
        for item in v:
            if not first:
                out.append(",\n")
            first = False
            out.append(inner)
            _pretty(item, inner, sort_keys, out)
        out.append("\n" + indent + "]")
    else:
        out.append(_scalar(v))


def pretty(v: Any, *, sort_keys: bool = False) -> str:
    """serde_json `to_string_pretty` text (no trailing newline)."""
    out: list[str] = []
    _pretty(v, "", sort_keys, out)
    return "".join(out)


def canonical(v: Any) -> str:
    """Compact, key-sorted, raw-UTF-8 JSON (serde_json `Value::to_string`). No floats allowed."""
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def compact(v: Any) -> str:
    """Compact JSON keeping dict order (serde_json `to_string` of a struct)."""
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)
