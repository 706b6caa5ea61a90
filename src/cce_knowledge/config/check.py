"""What is wrong with `.cce/config`, said out loud: unknown keys and bad values.

The reference tolerates unknown keys and turns a bad value into its default without a
word (`knowledge.sync.retention: keep-last-ten` keeps every snapshot). We keep reading
the file its way, but never silently: an unknown key is a warning naming the key, its
line and the closest known key; a bad value of a key we act on is a problem that the
command using it refuses (config/settings.py keeps it; the command raises it).

Lazy imports: PyYAML (~15 ms) only when there is a file to walk, and jsonschema only
for `cce knowledge validate .cce/config`: a cold search without a config pays for
neither.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union, get_args, get_origin, get_type_hints

from cce_knowledge.config.reader import Unparsable, WrongType, compose_text, to_python
from cce_knowledge.core.errors import ConfigRefused
from cce_knowledge.core.untrusted import shown as escape_untrusted

if TYPE_CHECKING:
    import yaml

#: Top-level blocks the reference engine reads for its code index (`retrieval.detail`,
#: `output.level`): not ours, never a typo, never looked into.
REFERENCE_ONLY_BLOCKS = frozenset({"retrieval", "output"})
#: Fields of the settings classes that are not keys (why a value is unusable).
NOT_KEYS = frozenset({"semantic_problem", "retention_problem", "ranking_problem", "problems"})
#: Blocks validated strictly elsewhere (an unknown key there is already an error).
STRICT_BLOCKS = frozenset({"knowledge.semantic"})

_RETENTION = re.compile(r"keep-last-\+?([0-9]+)")
#: The same grammar for the published schema (surrounding whitespace is trimmed).
RETENTION_PATTERN = r"^\s*(all|keep-last-\+?[0-9]+)\s*$"
RETENTION_ALLOWED = "`all` or `keep-last-<n>` (e.g. `keep-last-10`)"


def line_of(node: yaml.Node) -> int:
    """The 1-based line a node starts on."""
    return int(node.start_mark.line) + 1


def keys_of(form: Any) -> dict[str, Any] | None:
    """A settings dataclass's keys -> their types; None for a leaf (or Optional leaf)."""
    if get_origin(form) in (Union, types.UnionType):
        inner = [a for a in get_args(form) if a is not type(None)]
        form = inner[0] if len(inner) == 1 else None
    if not (dataclasses.is_dataclass(form) and isinstance(form, type)):
        return None
    hints = get_type_hints(form)
    return {f.name: hints[f.name] for f in dataclasses.fields(form) if f.name not in NOT_KEYS}


def closest(name: str, known: list[str]) -> str | None:
    found = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return found[0] if found else None


def unknown_keys(doc: yaml.Node | None, path: Path, form: Any) -> list[str]:
    """One warning per key of the file that no settings class (nor the reference's code
    index) knows, in file order: `{path}:{line}: unknown key `a.b` is ignored — did you
    mean `c`?`. Never raises: a file that does not have this shape says nothing here
    (its reading rules decide)."""
    if doc is None:
        return []  # no file: never pay for PyYAML's import (a cold search stays lean)
    import yaml

    out: list[str] = []

    def walk(node: yaml.Node, form: Any, prefix: str, top: bool) -> None:
        known = keys_of(form)
        if known is None or not isinstance(node, yaml.MappingNode):
            return
        for k, v in node.value:
            if not isinstance(k, yaml.ScalarNode):
                continue
            name = str(k.value)
            dotted = f"{prefix}{name}"
            if name in known:
                if dotted not in STRICT_BLOCKS:
                    walk(v, known[name], f"{dotted}.", False)
                continue
            if top and name in REFERENCE_ONLY_BLOCKS:
                continue
            hint = closest(name, sorted(known))
            shown = escape_untrusted(dotted)
            text = f"{path}:{line_of(k)}: unknown key `{shown}` is ignored"
            if hint is not None:
                text += f" — did you mean `{hint}`?"
            else:
                text += f" (known here: {', '.join(sorted(known))})"
            out.append(text)

    walk(doc, form, "", True)
    return out


def retention_problem(value: str) -> str | None:
    """Why `value` is not a retention policy (None when it is one). The reference reads
    anything else as `all`; we say so and refuse (docs/spec/sync.md §3.4)."""
    v = value.strip(" \t\n\r\x0b\x0c")
    if v == "all":
        return None
    m = _RETENTION.fullmatch(v)
    if m and int(m.group(1)) < 2**64:
        return None
    return (
        f"{escape_untrusted(repr(value))} is not a retention policy; allowed: {RETENTION_ALLOWED}"
    )


def _node_at(doc: yaml.Node, path: list[str | int]) -> yaml.Node:
    """The deepest node along a JSON path (its line names the problem)."""
    import yaml

    node = doc
    for part in path:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            nxt = node.value[part] if part < len(node.value) else None
        else:
            nxt = None
        if nxt is None:
            break
        node = nxt
    return node


def validate_config(
    shown: str, raw: bytes, form: Any, schema: dict[str, Any]
) -> list[tuple[int | None, str, str]]:
    """`.cce/config` bytes checked against its published JSON Schema, plus its unknown
    keys: `(line, $.path, message)` for every problem, in file order. Scalars are typed
    as the reference types them (config/reader.py), so `enabled: yes` is a string."""
    from jsonschema import Draft202012Validator

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return [(None, "$", f"not UTF-8 (byte offset {e.start})")]
    try:
        doc = compose_text(text, shown)
    except Unparsable as e:
        return [(None, "$", f"not valid YAML ({e})")]
    except ConfigRefused as e:  # an alias bomb or nesting beyond the reader's limits
        return [(None, "$", e.message)]
    if doc is None:
        return []
    try:
        data = to_python(doc)
    except WrongType as e:
        return [(None, "$", str(e))]
    out: list[tuple[int | None, str, str]] = []
    for err in Draft202012Validator(schema).iter_errors(data):
        where = list(err.absolute_path)
        dotted = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in where)
        message = err.message
        if where and where[-1] == "retention" and isinstance(err.instance, str):
            message = retention_problem(err.instance) or message  # our words, not a regex
        out.append((line_of(_node_at(doc, where)), dotted, shown_text(message)))
    for w in unknown_keys(doc, Path(shown), form):
        # `{shown}:{line}: unknown key `a.b` is ignored …` → line, $.a.b, the rest.
        head, _, rest = w[len(shown) + 1 :].partition(": ")
        key = rest.split("`")[1]
        out.append((int(head), f"$.{key}", rest))
    return sorted(out, key=lambda p: (p[0] or 0, p[1]))


def shown_text(message: str) -> str:
    return escape_untrusted(message)
