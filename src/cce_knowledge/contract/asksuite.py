"""The `cce.knowledge.ask/v1` suite contract (docs/spec/core.md §8.1).

NDJSON: an optional header `{"schema":"cce.knowledge.ask/v1","corpus":"…"}` as the
first non-blank line, then one case per line
`{"id":"…","query":"…","expect":["record-id",…],"k":N}`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cce_knowledge.contract.jsonparse import ScanError, format_path, scan_value
from cce_knowledge.core.errors import ContractError
from cce_knowledge.core.rustcompat import (
    io_error_text,
    is_u64,
    rs_is_blank,
    rs_lines,
    rust_debug_str,
)

ASK_SCHEMA_ID = "cce.knowledge.ask/v1"
ASK_REPORT_SCHEMA_ID = "cce.knowledge.ask.report/v1"
DEFAULT_ASK_K = 10


@dataclass(frozen=True, slots=True)
class AskCase:
    id: str
    query: str
    expect: list[str]
    k: int
    #: Ours, optional: a label grouping cases in the human report (e.g. `named`,
    #: `reworded`); any other type is ignored, as the reference ignores the key.
    kind: str | None = None


@dataclass(frozen=True, slots=True)
class AskSuite:
    corpus: str | None
    cases: list[AskCase]


@dataclass(frozen=True, slots=True)
class SuiteLineError:
    """One bad suite line, for `cce knowledge validate` (path is a JSON path)."""

    line: int
    path: str
    message: str
    column: int | None = None
    #: serde_json's ` at line L column C`, which the reference appends to JSON errors.
    position: str = ""

    def reference_text(self) -> str:
        """The exact error text of the reference engine (without the file)."""
        return f"line {self.line}: {self.message}{self.position}"


def _get(obj: Any, key: str) -> Any:
    """`Value::get(key)`: only objects have keys; a missing key and a non-object are
    both "absent" (returned as the sentinel `_ABSENT`)."""
    if isinstance(obj, dict):
        return obj.get(key, _ABSENT)
    return _ABSENT


_ABSENT = object()


def iter_suite(text: str) -> Iterator[tuple[int, AskCase | str | None, SuiteLineError | None]]:
    """Yield `(line, item, error)` for every non-blank line, continuing past errors.

    `item` is an `AskCase`, the header's corpus (`str`, or `None` for a header without
    a usable corpus) — header lines are reported with `item` set to the corpus and a
    `None` error — and `error` describes a bad line. The header/case ordering rule
    follows what has been *accepted* so far, as the reference does.
    """
    seen_header = False
    seen_case = False
    for n, line in enumerate(rs_lines(text), 1):
        if rs_is_blank(line):
            continue
        try:
            obj = scan_value(line.encode("utf-8", "surrogatepass"))
        except ScanError as e:
            where = f" at line {e.line} column {e.column}"
            msg = f"invalid JSON: {e.message}"
            yield n, None, SuiteLineError(n, format_path(e.path), msg, e.column, where)
            continue
        if _get(obj, "schema") is not _ABSENT and _get(obj, "query") is _ABSENT:
            if seen_header or seen_case:
                yield n, None, SuiteLineError(n, "$", "header must be the first line")
                continue
            corpus, err = _header(n, obj)
            seen_header = err is None
            yield n, corpus, err
            continue
        case, err = _case(n, obj)
        seen_case = seen_case or case is not None
        yield n, case, err


def _header(n: int, obj: dict[str, Any]) -> tuple[str | None, SuiteLineError | None]:
    """The header line's corpus (None: none usable), or why it is not a header."""
    schema = obj["schema"] if isinstance(obj["schema"], str) else ""
    if schema != ASK_SCHEMA_ID:
        unknown = (
            f"unknown schema {rust_debug_str(schema)} (expected {rust_debug_str(ASK_SCHEMA_ID)})"
        )
        return None, SuiteLineError(n, "$.schema", unknown)
    corpus = obj.get("corpus")
    return (corpus if isinstance(corpus, str) and corpus else None), None


def _case(n: int, obj: Any) -> tuple[AskCase | None, SuiteLineError | None]:
    """A case line's `AskCase`, or why it is not one."""
    query = _get(obj, "query")
    if not isinstance(query, str):
        return None, SuiteLineError(n, "$.query", "case missing string `query`")
    raw_expect = _get(obj, "expect")
    expect = [e for e in raw_expect if isinstance(e, str)] if isinstance(raw_expect, list) else []
    if not expect:
        return None, SuiteLineError(n, "$.expect", "case needs a non-empty `expect` array")
    raw_k = _get(obj, "k")
    if raw_k is _ABSENT:
        k = DEFAULT_ASK_K
    elif not is_u64(raw_k):
        return None, SuiteLineError(n, "$.k", "`k` must be a positive integer")
    elif raw_k == 0:
        return None, SuiteLineError(n, "$.k", "`k` must be >= 1")
    else:
        k = raw_k
    raw_id = _get(obj, "id")
    case_id = raw_id if isinstance(raw_id, str) else f"q{n}"
    raw_kind = _get(obj, "kind")
    kind = raw_kind if isinstance(raw_kind, str) and raw_kind else None
    return AskCase(case_id, query, expect, k, kind), None


def parse_suite(text: str) -> AskSuite:
    """Parse a whole suite, raising `ContractError("line N: …")` at the first bad line
    and `ContractError("suite has no cases")` when there are none."""
    corpus: str | None = None
    cases: list[AskCase] = []
    for _, item, err in iter_suite(text):
        if err is not None:
            raise ContractError(err.reference_text())
        if isinstance(item, AskCase):
            cases.append(item)
        else:
            corpus = item
    if not cases:
        raise ContractError("suite has no cases")
    return AskSuite(corpus, cases)


def read_suite(path: str | Path) -> str:
    """Read a suite file as UTF-8: `could not read suite {path}: {io error}`."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise ContractError(f"could not read suite {path}: {io_error_text(e)}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ContractError(
            f"could not read suite {path}: stream did not contain valid UTF-8"
        ) from None
