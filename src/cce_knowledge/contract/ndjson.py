"""The `cce.knowledge/v1` NDJSON feed parser (docs/spec/core.md §1).

Two paths, one behaviour:

* the fast path hands each line to the C `json` module (with hooks that expose
  duplicate keys and refuse NaN/Infinity) and then checks the serde_json rules the
  C module does not apply — but only on the 12 known fields, as serde_json does;
* anything it cannot vouch for — a bad line, an array-form record, a value too deep
  for Python's recursion — goes to the exact scanner (`jsonparse`), which is the
  authority and produces serde_json's error text.

Tests prove both paths agree on generated input.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cce_knowledge.contract.jsonparse import (
    FieldReader,
    ScanError,
    Scanner,
    format_path,
    scan_struct,
)
from cce_knowledge.contract.record import RECORD_FIELD_KINDS, KnowledgeRecord
from cce_knowledge.core.errors import ContractError
from cce_knowledge.core.rustcompat import RUST_WS_CHARS, io_error_text

KNOWLEDGE_SCHEMA_ID = "cce.knowledge/v1"

_READERS: dict[str, FieldReader] = {
    "str": Scanner.str_field,
    "nullable": Scanner.opt_str_field,
    "strings": Scanner.str_seq_field,
    "value": Scanner.opt_value_field,
}
#: (field, reader, required) in the record's declaration order — which is also the
#: position order of the array form.
RECORD_FIELDS: tuple[tuple[str, FieldReader, bool], ...] = tuple(
    (k, _READERS[kind], kind == "str") for k, kind in RECORD_FIELD_KINDS
)
KNOWN_FIELDS = frozenset(f[0] for f in RECORD_FIELDS)
_REQUIRED = tuple(k for k, _, required in RECORD_FIELDS if required)
_OPT_STR = tuple(k for k, kind in RECORD_FIELD_KINDS if kind == "nullable")
_SURROGATE = re.compile("[\ud800-\udfff]")
#: serde_json accepts 127 nested containers; the record object is the first.
_MAX_DEPTH = 127


@dataclass(frozen=True, slots=True)
class FeedLineError:
    """One bad feed line: where (1-based line, byte column, JSON path) and why."""

    line: int
    column: int
    path: str
    message: str
    #: Ours, after the reference's text: what the bytes the error stops at are, when
    #: the parser's words alone would mislead (a BOM is "expected value").
    hint: str | None = None

    @property
    def shown_message(self) -> str:
        """`message`, with the hint when there is one (what `validate` prints)."""
        return self.message if self.hint is None else f"{self.message} — {self.hint}"

    @property
    def serde_text(self) -> str:
        return f"{self.message} at line 1 column {self.column}"

    def contract_message(self) -> str:
        """The reference engine's exact error text for this line."""
        return f"line {self.line}: invalid {KNOWLEDGE_SCHEMA_ID} record: {self.serde_text}"

    def located_message(self, file: str) -> str:
        """`FILE:LINE: $.path: …`, the way `validate` names a bad line, followed by the
        reference's exact text (the serde_json part the contract pins)."""
        text = f"{file}:{self.line}: {self.path}: invalid {KNOWLEDGE_SCHEMA_ID} record: {self.serde_text}"
        return text if self.hint is None else f"{text} — {self.hint}"


# -- reading ------------------------------------------------------------------


def check_is_file(path: str | os.PathLike[str]) -> None:
    """`cce knowledge index` refuses anything but a regular file (symlinks followed)."""
    if not os.path.isfile(path):
        raise ContractError(f"not a file: {os.fspath(path)}")


def read_text_file(path: str | os.PathLike[str], what: str = "") -> tuple[bytes, str]:
    """A file's raw bytes and UTF-8 text, unchanged, as Rust's `read_to_string` reads
    it; the errors say `could not read {what}{path}: …` as the reference words them."""
    shown = f"{what}{os.fspath(path)}"
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise ContractError(f"could not read {shown}: {io_error_text(e)}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ContractError(f"could not read {shown}: stream did not contain valid UTF-8") from None
    return raw, text


def read_feed(path: str | os.PathLike[str]) -> tuple[bytes, str]:
    """Read a feed as raw bytes and UTF-8 text, unchanged (a BOM and CRLF stay)."""
    return read_text_file(path)


# -- lines --------------------------------------------------------------------


def _feed_lines(text: str) -> Iterator[tuple[int, str]]:
    """Non-blank lines with their 1-based numbers (`str::lines`; blank = RUST_WS trim)."""
    if not text:
        return
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
    for n, line in enumerate(parts, 1):
        if line.endswith("\r"):
            line = line[:-1]
        if not line.strip(RUST_WS_CHARS):
            continue
        yield n, line


# -- the exact path -------------------------------------------------------------


def _record_from_fields(f: dict[str, Any]) -> KnowledgeRecord:
    # The scanner returns only known fields, present ones only: the dataclass's
    # defaults are the reference's for the absent ones.
    return KnowledgeRecord(**f)


def parse_line_exact(line: str, line_no: int = 1) -> KnowledgeRecord | FeedLineError:
    """Parse one line with the exact scanner (the authority on errors)."""
    try:
        fields = scan_struct(
            line.encode("utf-8", "surrogatepass"), "KnowledgeRecord", RECORD_FIELDS
        )
    except ScanError as e:
        hint = BOM_HINT if line.startswith("\ufeff") and e.column == 1 else None
        return FeedLineError(line_no, e.column, format_path(e.path), e.message, hint)
    return _record_from_fields(fields)


#: A feed is UTF-8 without a byte order mark: the reference reads U+FEFF as the first
#: character of line 1 and refuses the line, and so do we (docs/spec/core.md §1.1), but
#: we say what the invisible character is.
BOM_HINT = (
    "the line starts with a UTF-8 byte order mark (BOM, bytes EF BB BF), which a feed may "
    "not have: save it as UTF-8 without a BOM"
)


# -- the fast path ----------------------------------------------------------------


class _Undecided(Exception):
    pass


def _refuse_constant(_: str) -> Any:
    raise _Undecided


#: Objects as tuples of (key, value) pairs, so duplicates stay visible. (`tuple` is a
#: C type: far cheaper to call from the scanner than a Python subclass.) Arrays stay
#: lists, so the two cannot be confused, not even when empty.
_PAIRS = json.JSONDecoder(object_pairs_hook=tuple, parse_constant=_refuse_constant)


def _clean_str(v: Any, check_surrogates: bool) -> bool:
    return type(v) is str and not (check_surrogates and _SURROGATE.search(v))


def _value_ok(v: Any, depth: int, check_surrogates: bool) -> bool:
    """serde_json `Value` rules for a known field's value: depth, range, surrogates."""
    t = type(v)
    if t is str:
        return not (check_surrogates and _SURROGATE.search(v))
    if t is tuple or t is dict or t is list:
        if depth > _MAX_DEPTH:
            return False
        if t is list:
            return all(_value_ok(x, depth + 1, check_surrogates) for x in v)
        pairs = v.items() if t is dict else v
        return all(
            _clean_str(k, check_surrogates) and _value_ok(x, depth + 1, check_surrogates)
            for k, x in pairs
        )
    if t is float:
        return not math.isinf(v)
    if t is int:
        try:
            float(v)
        except OverflowError:
            return False
        return True
    return v is None or t is bool


def _plain(v: Any) -> Any:
    """Pair tuples back into dicts (the last duplicate wins, as in serde_json's Map)."""
    t = type(v)
    if t is tuple:
        return {k: _plain(x) for k, x in v}
    if t is list:
        return [_plain(x) for x in v]
    if t is dict:
        return {k: _plain(x) for k, x in v.items()}
    return v


def _record_from_pairs(pairs: Any, check: bool) -> KnowledgeRecord | None:
    f: dict[str, Any] = {}
    for k, v in pairs:
        if k in KNOWN_FIELDS:
            if k in f:
                return None
            f[k] = v
        elif check and _SURROGATE.search(k):
            return None
    for k in _REQUIRED:
        if not _clean_str(f.get(k), check):
            return None
    for k in _OPT_STR:
        v = f.get(k)
        if v is not None and not _clean_str(v, check):
            return None
    for k in ("labels", "links"):
        if k in f:
            v = f[k]
            if type(v) is not list or not all(_clean_str(x, check) for x in v):
                return None
    if "extra" in f:
        extra = f["extra"]
        if not _value_ok(extra, 2, check):
            return None
        f["extra"] = _plain(extra)
    return _record_from_fields(f)


def _str_list_ok(v: Any) -> bool:
    return type(v) is list and all(type(x) is str for x in v)


def _from_dict(d: dict[str, Any]) -> KnowledgeRecord | None:
    """The common case, unrolled: no duplicate keys and no `\\u` escapes in the line."""
    get = d.get
    rid, title, body, source = get("id"), get("title"), get("body"), get("source")
    if type(rid) is not str or type(title) is not str or type(body) is not str:
        return None
    if type(source) is not str:
        return None
    url, state, reason, updated, group = (
        get("url"),
        get("state"),
        get("state_reason"),
        get("updated_at"),
        get("group"),
    )
    for v in (url, state, reason, updated, group):
        if v is not None and type(v) is not str:
            return None
    labels = get("labels", _NO_LIST)
    if labels is _NO_LIST:
        labels = []
    elif not _str_list_ok(labels):
        return None
    links = get("links", _NO_LIST)
    if links is _NO_LIST:
        links = []
    elif not _str_list_ok(links):
        return None
    extra = get("extra")
    if extra is not None:
        if not _value_ok(extra, 2, False):
            return None
        extra = _plain(extra)
    return KnowledgeRecord(
        rid, title, body, source, url, state, reason, updated, labels, group, links, extra
    )


_NO_LIST: Any = object()


def parse_line_fast(line: str) -> KnowledgeRecord | None:
    """The C-speed path. Returns None when it cannot vouch for the line."""
    # A lone surrogate can only come from a `\\u` escape (the text itself is UTF-8).
    escapes = "\\u" in line
    try:
        pairs = _PAIRS.decode(line)
    except Exception:  # any failure means "ask the exact scanner"
        return None
    if type(pairs) is not tuple:
        return None
    d = dict(pairs)
    if escapes or len(d) != len(pairs):
        # Some key repeats (maybe a known one), or strings need surrogate checks.
        return _record_from_pairs(pairs, escapes)
    return _from_dict(d)


# -- public API -------------------------------------------------------------------


def parse_line(line: str, line_no: int = 1) -> KnowledgeRecord | FeedLineError:
    rec = parse_line_fast(line)
    if rec is not None:
        return rec
    return parse_line_exact(line, line_no)


def iter_feed(text: str) -> Iterator[tuple[int, KnowledgeRecord | FeedLineError]]:
    """Every non-blank line's record or error, without stopping at the first error."""
    for n, line in _feed_lines(text):
        yield n, parse_line(line, n)


def parse_feed(text: str) -> list[KnowledgeRecord]:
    """Parse a whole feed; the first bad line raises
    `ContractError("line N: invalid cce.knowledge/v1 record: …")`. No partial result."""
    out: list[KnowledgeRecord] = []
    for _, r in iter_feed(text):
        if isinstance(r, FeedLineError):
            raise ContractError(r.contract_message())
        out.append(r)
    return out


def parse_feed_numbered(text: str) -> list[tuple[int, KnowledgeRecord]]:
    """`parse_feed`, each record with its 1-based line number."""
    out: list[tuple[int, KnowledgeRecord]] = []
    for n, r in iter_feed(text):
        if isinstance(r, FeedLineError):
            raise ContractError(r.contract_message())
        out.append((n, r))
    return out


def parse_feed_located(text: str, file: str) -> list[KnowledgeRecord]:
    """`parse_feed` for a named file: the first bad line raises a ContractError that
    names the file, the line and the field (`FeedLineError.located_message`)."""
    out: list[KnowledgeRecord] = []
    for _, r in iter_feed(text):
        if isinstance(r, FeedLineError):
            raise ContractError(r.located_message(file))
        out.append(r)
    return out


def locate_feed_error(raw: bytes, line_no: int, file: str) -> str | None:
    """The located message for line `line_no` of feed bytes `raw` (1-based, blank lines
    counted), or None if that line parses. Reads only up to that line."""
    start = 0
    for _ in range(line_no - 1):
        nl = raw.find(b"\n", start)
        if nl < 0:
            return None
        start = nl + 1
    end = raw.find(b"\n", start)
    line = raw[start : len(raw) if end < 0 else end].decode("utf-8", "replace")
    if line.endswith("\r"):
        line = line[:-1]
    r = parse_line(line, line_no)
    return r.located_message(file) if isinstance(r, FeedLineError) else None
