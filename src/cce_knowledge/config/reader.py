"""The YAML 1.2 typing of `.cce/config` as the reference engine reads it.

The reference deserialises each block with serde_yaml 0.9 (YAML 1.2 scalars): only
`true`/`false` spellings are booleans, a quoted number is a string, `yes`/`on` are
strings, and a type error anywhere in a block resets the WHOLE block to defaults
(docs/spec/core.md §10.1, docs/spec/sync.md §3.4). PyYAML's `safe_load` resolves
YAML 1.1 types, so we compose the node graph and type each scalar from its source
text ourselves.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cce_knowledge.core.errors import ConfigRefused

if TYPE_CHECKING:
    import yaml
else:

    class _LazyYaml:
        """PyYAML, imported on first use: most commands never read a config file,
        and the import costs ~15 ms of every cold start."""

        def __getattr__(self, name: str) -> Any:
            # Lazy: PyYAML costs ~15 ms; only a present config file needs it.
            import yaml as real

            return getattr(real, name)

    yaml = _LazyYaml()

CONFIG_REL = Path(".cce") / "config"

_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_NULL = {"~", "null", "Null", "NULL", ""}
_DEC_FLOAT = re.compile(r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")
_RUST_SPECIAL_FLOAT = re.compile(r"^[+-]?(?:inf|infinity|nan)$", re.IGNORECASE)


class WrongType(Exception):
    """A value of the wrong YAML type: the enclosing block falls back to defaults.
    `node` is the offending node when known (its line and key name the warning)."""

    def __init__(self, message: str, node: yaml.Node | None = None) -> None:
        super().__init__(message)
        self.node = node


class Unparsable(Exception):
    """The file cannot be parsed as YAML at all."""


def config_path(root: str | os.PathLike[str]) -> Path:
    return Path(root) / CONFIG_REL


#: A config nested deeper than this is refused (serde_yaml's recursion limit, too).
MAX_DEPTH = 128
#: A document whose aliases expand to more nodes than this is refused: a few hundred
#: bytes of nested aliases ("billion laughs") would otherwise expand to 10^9 nodes in
#: whatever walks the tree. A real config has tens of nodes.
MAX_EXPANDED_NODES = 100_000
#: A numeral longer than this is refused before `int()` sees it (Python refuses
#: over 4300 digits with ValueError; u64 needs 20).
MAX_NUMERAL_DIGITS = 1000
_NUMERAL = re.compile(r"[+-]?(?:0[xob])?[0-9a-fA-F_.eE+-]*")


class TooComplex(Exception):
    """A document beyond the reader's limits (depth, alias expansion, numeral length):
    refused outright, never read with defaults."""


@functools.cache
def _loader_class() -> type[Any]:
    class BoundedLoader(yaml.SafeLoader):
        """SafeLoader's composer with a depth limit, an alias-expansion budget and a
        numeral-length limit, each checked while composing (so before any recursion
        or expansion costs anything)."""

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self._depth = 0
            self._expanded = 0
            self._sizes: dict[int, int] = {}

        def compose_node(self, parent: Any, index: Any) -> Any:
            mark = self.peek_event().start_mark
            where = f"line {mark.line + 1}"
            alias = self.check_event(yaml.AliasEvent)
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise TooComplex(f"{where}: nested deeper than {MAX_DEPTH} levels")
            try:
                node: Any = super().compose_node(parent, index)
            finally:
                self._depth -= 1
            if alias:
                size = self._sizes.get(id(node))
                if size is None:
                    raise TooComplex(f"{where}: an alias to a node that contains it")
            else:
                size = 1
                if isinstance(node, yaml.SequenceNode):
                    size += sum(self._sizes[id(v)] for v in node.value)
                elif isinstance(node, yaml.MappingNode):
                    size += sum(self._sizes[id(k)] + self._sizes[id(v)] for k, v in node.value)
                elif node.style is None and len(node.value) > MAX_NUMERAL_DIGITS:
                    if _NUMERAL.fullmatch(node.value):
                        raise TooComplex(
                            f"{where}: a number of {len(node.value)} characters "
                            f"(at most {MAX_NUMERAL_DIGITS})"
                        )
                self._sizes[id(node)] = size
            # Every node once, and every alias as the whole tree it stands for.
            self._expanded += size if alias else 1
            if self._expanded > MAX_EXPANDED_NODES:
                raise TooComplex(
                    f"{where}: aliases expand the document beyond "
                    f"{MAX_EXPANDED_NODES} nodes (an alias bomb?)"
                )
            return node

    return BoundedLoader


#: PyYAML's scanner reads a whole flow collection ahead before the composer sees its
#: first node, with work quadratic in its depth: brackets nested deeper than this are
#: refused before it runs (counted on the raw text, so brackets inside quoted strings
#: count too; no real config comes near).
MAX_FLOW_NESTING = 4 * MAX_DEPTH
_BRACKET = re.compile(r"[\[\]{}]")


def _flow_nesting(text: str) -> tuple[int, int]:
    """(deepest bracket nesting, its line), on the raw text."""
    depth = deepest = at = 0
    for m in _BRACKET.finditer(text):
        if m.group() in "[{":
            depth += 1
            if depth > deepest:
                deepest, at = depth, m.start()
        elif depth:
            depth -= 1
    return deepest, text.count("\n", 0, at) + 1


def compose_text(text: str, where: str | os.PathLike[str]) -> yaml.Node | None:
    """`text` composed within the limits above. Raises Unparsable for YAML that does
    not parse, ConfigRefused (naming `where`) for a document beyond the limits."""
    deepest, line = _flow_nesting(text)
    if deepest > MAX_FLOW_NESTING:
        raise ConfigRefused(
            f"{os.fspath(where)}: refused: line {line}: brackets nested deeper than "
            f"{MAX_FLOW_NESTING} levels"
        )
    try:
        return yaml.compose(text, Loader=_loader_class())
    except yaml.YAMLError as e:
        raise Unparsable(_one_line(e)) from e
    except TooComplex as e:
        raise ConfigRefused(f"{os.fspath(where)}: refused: {e}") from None
    except RecursionError:  # belt and braces: the depth limit should come first
        raise ConfigRefused(f"{os.fspath(where)}: refused: nested too deeply") from None


def _one_line(e: Exception) -> str:
    """A YAML error on one line, `line L, column C: what` (PyYAML's own text spans
    several lines and quotes the source; a report line must stay one line)."""
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None)
    if mark is None or problem is None:
        return " ".join(str(e).split())
    context = getattr(e, "context", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}"
    return f"{where}: {problem}" + (f" ({context})" if context else "")


def load_document(path: Path) -> yaml.Node | None:
    """The composed document, or None for a missing/empty file. Raises Unparsable, or
    ConfigRefused for a document beyond the reader's limits."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise Unparsable(str(e)) from e
    return compose_text(text, path)


def mapping(node: yaml.Node | None) -> dict[str, yaml.Node] | None:
    """A mapping node's entries (None for a null node). Duplicate keys are an error."""
    if node is None or is_null(node):
        return None
    if not isinstance(node, yaml.MappingNode):
        raise WrongType("expected a mapping", node)
    out: dict[str, yaml.Node] = {}
    for k, v in node.value:
        if not isinstance(k, yaml.ScalarNode):
            raise WrongType("non-scalar key", k)
        if k.value in out:
            raise WrongType(f"duplicate entry with key {k.value!r}", k)
        out[k.value] = v
    return out


def is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.style is None and node.value in _NULL


def _plain(node: yaml.Node) -> str:
    if not isinstance(node, yaml.ScalarNode):
        raise WrongType("expected a scalar", node)
    if node.style is not None:
        raise WrongType("quoted scalar where a number/bool was expected", node)
    return str(node.value)


def as_bool(node: yaml.Node) -> bool:
    v = _plain(node)
    if v not in _BOOL:
        raise WrongType(f"invalid bool {v!r}", node)
    return _BOOL[v]


def _parse_int(v: str) -> int | None:
    s = v
    neg = False
    if s[:1] in "+-":
        neg = s[0] == "-"
        s = s[1:]
    base = 10
    for prefix, b in (("0x", 16), ("0o", 8), ("0b", 2)):
        if s.startswith(prefix):
            s, base = s[2:], b
            break
    if not s or not all(c in "0123456789abcdefABCDEF"[: base if base <= 10 else 22] for c in s):
        return None
    if len(s) > MAX_NUMERAL_DIGITS:  # (composing refuses these; int() would raise)
        return None
    n = int(s, base)
    return -n if neg else n


def as_uint(node: yaml.Node) -> int:
    n = _parse_int(_plain(node))
    if n is None or n < 0 or n >= 2**64:
        raise WrongType("invalid unsigned integer", node)
    return n


def as_float(node: yaml.Node) -> float:
    """serde_yaml's f64: ints, `.inf`/`.nan` spellings, or a finite Rust-parsable float."""
    v = _plain(node)
    n = _parse_int(v)
    if n is not None:
        return float(n)
    unpos = v[1:] if v.startswith("+") else v
    if v.startswith("+") and unpos[:1] in "+-":
        raise WrongType("invalid float", node)
    if unpos in (".inf", ".Inf", ".INF"):
        return float("inf")
    if v in ("-.inf", "-.Inf", "-.INF"):
        return float("-inf")
    if v in (".nan", ".NaN", ".NAN"):
        return float("nan")
    if _DEC_FLOAT.match(unpos) or _RUST_SPECIAL_FLOAT.match(unpos):
        f = float(unpos)
        if f == f and f not in (float("inf"), float("-inf")):
            return f
    raise WrongType(f"invalid float {v!r}", node)


def as_opt_str(node: yaml.Node | None) -> str | None:
    """A string field: any scalar's raw text; null spellings give None."""
    if node is None or is_null(node):
        return None
    if not isinstance(node, yaml.ScalarNode):
        raise WrongType("expected a string", node)
    return str(node.value)


def to_python(node: yaml.Node) -> Any:
    """A node as plain data, each plain scalar typed as serde_yaml would (for the
    strict validation of our own keys); quoted scalars stay strings."""
    if isinstance(node, yaml.MappingNode):
        return {k: to_python(v) for k, v in (mapping(node) or {}).items()}
    if isinstance(node, yaml.SequenceNode):
        return [to_python(v) for v in node.value]
    if not isinstance(node, yaml.ScalarNode) or node.style is not None:
        return str(node.value)
    if is_null(node):
        return None
    if node.value in _BOOL:
        return _BOOL[node.value]
    n = _parse_int(node.value)
    if n is not None:
        return n
    try:
        return as_float(node)
    except WrongType:
        return str(node.value)


def block(root_node: yaml.Node | None, *path: str) -> dict[str, yaml.Node] | None:
    m = mapping(root_node)
    for name in path:
        if m is None:
            return None
        m = mapping(m.get(name))
    return m


def parse_retention(value: str | None) -> int | None:
    """`keep-last-<n>` -> n; anything else (including `all` and typos) -> None (keep all)."""
    if value is None:
        return None
    v = value.strip(" \t\n\r\x0b\x0c")
    m = re.fullmatch(r"keep-last-\+?([0-9]+)", v)
    if not m:
        return None
    n = int(m.group(1))
    return n if n < 2**64 else None


#: YAML's own tags: the ones a plain or quoted scalar resolves to without being told.
_CORE_TAG = "tag:yaml.org,2002:"
_CORE_TAGS = frozenset(
    _CORE_TAG + t for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")
)


def foreign_tags(doc: yaml.Node | None) -> list[yaml.Node]:
    """Nodes carrying an explicit tag that is not one of YAML's core types
    (`!!python/object:…`, `!Ref`): no reader here gives it any meaning, so the value
    is read as plain data, and the user should know the tag did nothing."""
    out: list[yaml.Node] = []
    stack = [] if doc is None else [doc]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:  # an alias: the same node again
            continue
        seen.add(id(node))
        if node.tag not in _CORE_TAGS:
            out.append(node)
        if isinstance(node, yaml.MappingNode):
            for k, v in reversed(node.value):
                stack += [v, k]
        elif isinstance(node, yaml.SequenceNode):
            stack += reversed(node.value)
    return sorted(out, key=lambda n: (n.start_mark.line, n.start_mark.column))


def key_of(doc: yaml.Node | None, target: yaml.Node) -> str | None:
    """The dotted key whose value (or key) is `target`, found by identity."""
    stack: list[tuple[yaml.Node, str]] = [] if doc is None else [(doc, "")]
    seen: set[int] = set()
    while stack:
        node, prefix = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                name = f"{prefix}{getattr(k, 'value', '?')}"
                if v is target or k is target:
                    return name
                stack.append((v, f"{name}."))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                if v is target:
                    return f"{prefix.rstrip('.')}[{i}]"
                stack.append((v, f"{prefix.rstrip('.')}[{i}]."))
    return None
