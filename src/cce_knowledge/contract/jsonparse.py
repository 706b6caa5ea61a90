"""A serde_json-compatible JSON scanner (docs/spec/core.md §1.2–§1.3, §8.1, §9).

Python's `json` module cannot reproduce serde_json's semantics: which values get
range/surrogate/depth checks (only those deserialized into a typed field or a
`Value`, never the syntax-only skip of unknown keys), duplicate-field errors,
array-form structs, and the message catalogue with `at line L column C` (byte
columns). This recursive-descent scanner works on the UTF-8 bytes and follows the
same order of checks, so the *first* error it reports is the one serde_json reports.

It is the authority; the feed parser runs the fast C `json` module first and only
falls back here when a line is wrong or the fast path cannot decide.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from cce_knowledge.core.rustcompat import rust_debug_str, serde_f64

_T = TypeVar("_T")

_WS = b" \t\n\r"
_DIGITS = b"0123456789"
_HEX = b"0123456789abcdefABCDEF"
#: The bytes that end a run of plain string content.
_STR_SPECIAL = re.compile(rb'["\\\x00-\x1f]')
_SIMPLE_ESC = {
    ord('"'): b'"',
    ord("\\"): b"\\",
    ord("/"): b"/",
    ord("b"): b"\x08",
    ord("f"): b"\x0c",
    ord("n"): b"\n",
    ord("r"): b"\r",
    ord("t"): b"\t",
}
_U64_MAX = (1 << 64) - 1
_I64_MIN = -(1 << 63)
#: serde_json's `remaining_depth` starts at 128 and errors when it reaches 0, so at
#: most 127 nested containers (the outermost one included) are accepted.
_INITIAL_DEPTH = 128

PathItem = str | int


def format_path(path: list[PathItem] | tuple[PathItem, ...]) -> str:
    """A JSONPath-ish location: `$`, `$.labels[2]`, `$["odd key"]`."""
    out = ["$"]
    for p in path:
        if isinstance(p, int):
            out.append(f"[{p}]")
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p):
            out.append(f".{p}")
        else:
            out.append("[" + _json_quote(p) + "]")
    return "".join(out)


def _json_quote(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


@dataclass(slots=True)
class ScanError(Exception):
    """One serde_json error: its message, 1-based line, byte column and JSON path."""

    message: str
    line: int
    column: int
    path: tuple[PathItem, ...] = field(default=())

    def serde_text(self) -> str:
        """The text serde_json's `Display` gives: `{message} at line L column C`."""
        return f"{self.message} at line {self.line} column {self.column}"

    def __str__(self) -> str:
        return self.serde_text()


def describe_unexpected(v: Any) -> str:
    """serde's `Unexpected` rendering as serde_json prints it (`integer `5``, …)."""
    if v is None:
        return "null"
    if v is True:
        return "boolean `true`"
    if v is False:
        return "boolean `false`"
    if isinstance(v, int):
        return f"integer `{v}`"
    if isinstance(v, float):
        return f"floating point `{serde_f64(v)}`"
    if isinstance(v, str):
        return "string " + rust_debug_str(v)
    if isinstance(v, list):
        return "sequence"
    return "map"


#: The three keywords by their first byte: the rest of the word and its value.
_KEYWORDS: dict[int, tuple[bytes, Any]] = {
    0x6E: (b"ull", None),
    0x74: (b"rue", True),
    0x66: (b"alse", False),
}


#: The first bytes of a string, keyword or number.
_SCALAR_START = frozenset(b'"-' + _DIGITS + bytes(_KEYWORDS))


class Scanner:
    """Cursor over one JSON document's bytes with serde_json's error positions.

    `err()` positions at the last consumed byte (serde `error`; also where data
    errors land, via `fix_position`), `peek_err()` at the next byte (serde
    `peek_error`, capped at the end). Columns are 1-based byte columns.
    """

    __slots__ = ("b", "depth", "i", "n", "path")

    def __init__(self, data: bytes) -> None:
        self.b = data
        self.n = len(data)
        self.i = 0
        self.depth = _INITIAL_DEPTH
        self.path: list[PathItem] = []

    # -- positions and errors -------------------------------------------------

    def _at(self, index: int, message: str) -> ScanError:
        start = self.b.rfind(b"\n", 0, index) + 1
        line = 1 + self.b.count(b"\n", 0, start)
        return ScanError(message, line, index - start, tuple(self.path))

    def err(self, message: str) -> ScanError:
        return self._at(self.i, message)

    def peek_err(self, message: str) -> ScanError:
        return self._at(min(self.n, self.i + 1), message)

    # -- primitives -----------------------------------------------------------

    def ws(self) -> int | None:
        b, i, n = self.b, self.i, self.n
        while i < n and b[i] in _WS:
            i += 1
        self.i = i
        return b[i] if i < n else None

    def peek(self) -> int | None:
        return self.b[self.i] if self.i < self.n else None

    def enter(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            raise self.peek_err("recursion limit exceeded")

    def leave(self) -> None:
        self.depth += 1

    def ident(self, rest: bytes) -> None:
        for expected in rest:
            if self.i >= self.n:
                raise self.err("EOF while parsing a value")
            c = self.b[self.i]
            self.i += 1
            if c != expected:
                raise self.err("expected ident")

    def _keyword(self, c: int) -> Any:
        """`null`, `true` or `false` (its first byte `c` is next): its value."""
        rest, value = _KEYWORDS[c]
        self.i += 1
        self.ident(rest)
        return value

    def _expect(self, byte: int, other: str) -> None:
        """Consume `byte` (after whitespace) inside an object, else serde's error:
        EOF, or `other`."""
        c = self.ws()
        if c == byte:
            self.i += 1
            return
        raise self.peek_err("EOF while parsing an object" if c is None else other)

    def colon(self) -> None:
        self._expect(0x3A, "expected `:`")

    def end(self) -> None:
        """After the top-level value: only whitespace may follow."""
        if self.ws() is not None:
            raise self.peek_err("trailing characters")

    # -- strings --------------------------------------------------------------

    def _hex4(self) -> int:
        if self.n - self.i < 4:
            self.i = self.n
            raise self.err("EOF while parsing a string")
        h = self.b[self.i : self.i + 4]
        self.i += 4
        if any(c not in _HEX for c in h):
            raise self.err("invalid escape")
        return int(h, 16)

    def string(self) -> str:
        """A string body after its opening quote, validated like serde's `parse_str`."""
        parts: list[bytes] = []
        self._str_body(parts)
        return b"".join(parts).decode("utf-8", "surrogatepass")

    def _str_body(self, parts: list[bytes] | None) -> None:
        """Read a string body after its opening quote, through the closing one, into
        `parts`; with None, skip it (serde `ignore_str`: `\\u` escapes are checked for
        shape only)."""
        b, n = self.b, self.n
        while True:
            m = _STR_SPECIAL.search(b, self.i)
            if m is None:
                self.i = n
                raise self.err("EOF while parsing a string")
            j = m.start()
            if parts is not None and j > self.i:
                parts.append(b[self.i : j])
            c = b[j]
            self.i = j + 1
            if c == 0x22:
                return
            if c != 0x5C:
                raise self.err("control character (\\u0000-\\u001F) found while parsing a string")
            if self.i >= n:
                raise self.err("EOF while parsing a string")
            e = b[self.i]
            self.i += 1
            simple = _SIMPLE_ESC.get(e)
            if simple is not None:
                if parts is not None:
                    parts.append(simple)
            elif e != 0x75:
                raise self.err("invalid escape")
            elif parts is None:
                self._hex4()
            else:
                parts.append(self._unicode_escape().encode("utf-8", "surrogatepass"))

    def _unicode_escape(self) -> str:
        n1 = self._hex4()
        if 0xDC00 <= n1 <= 0xDFFF:
            raise self.err("lone leading surrogate in hex escape")
        if not 0xD800 <= n1 <= 0xDBFF:
            return chr(n1)
        # A leading surrogate must be followed by `\u` + a trailing one.
        for expected in (0x5C, 0x75):
            if self.i >= self.n:
                raise self.err("EOF while parsing a string")
            c = self.b[self.i]
            self.i += 1
            if c != expected:
                raise self.err("unexpected end of hex escape")
        n2 = self._hex4()
        if not 0xDC00 <= n2 <= 0xDFFF:
            raise self.err("lone leading surrogate in hex escape")
        return chr(0x10000 + ((n1 - 0xD800) << 10) + (n2 - 0xDC00))

    def ignore_str(self) -> None:
        """Skip a string body after its opening quote (serde `ignore_str`)."""
        self._str_body(None)

    # -- numbers --------------------------------------------------------------

    def _digits(self) -> int:
        b, i, n = self.b, self.i, self.n
        start = i
        while i < n and b[i] in _DIGITS:
            i += 1
        self.i = i
        return i - start

    def _number_syntax(self, parsing: bool) -> bool:
        """Consume a number's syntax (the sign already consumed); True when it has a
        fraction or an exponent. serde_json words EOF inside a number as `EOF while
        parsing a value` when it parses the number (`parsing`) and as `invalid number`
        when it only skips it."""
        eof = "EOF while parsing a value" if parsing else "invalid number"
        if self.i >= self.n:
            raise self.err(eof)
        c = self.b[self.i]
        self.i += 1
        if c == 0x30:
            if self.peek() is not None and self.b[self.i] in _DIGITS:
                raise self.peek_err("invalid number")
        elif 0x31 <= c <= 0x39:
            self._digits()
        else:
            raise self.err("invalid number")
        is_float = False
        if self.peek() == 0x2E:
            is_float = True
            self.i += 1
            if self._digits() == 0:
                raise self.peek_err(eof if self.peek() is None else "invalid number")
        if self.peek() in (0x65, 0x45):
            is_float = True
            self.i += 1
            if self.peek() in (0x2B, 0x2D):
                self.i += 1
            if self.i >= self.n:
                raise self.err(eof)
            c = self.b[self.i]
            self.i += 1
            if c not in _DIGITS:
                raise self.err("invalid number")
            self._digits()
        return is_float

    def number(self, positive: bool) -> int | float:
        """A number (sign already consumed), classified u64 / i64 / f64 like serde_json."""
        start = self.i
        is_float = self._number_syntax(parsing=True)
        text = self.b[start : self.i]
        if not is_float and len(text) <= 20:
            v = int(text)
            if positive and v <= _U64_MAX:
                return v
            if not positive and v != 0 and -v >= _I64_MIN:
                return -v
            if not positive and v == 0:
                return -0.0
        f = float(text)
        if math.isinf(f):
            raise self.err("number out of range")
        return f if positive else -f

    def ignore_number(self) -> None:
        """Skip a number syntactically (serde `ignore_integer` and friends)."""
        self._number_syntax(parsing=False)

    # -- containers -----------------------------------------------------------

    def has_next_element(self, first: bool) -> bool:
        c = self.ws()
        if c is None:
            raise self.peek_err("EOF while parsing a list")
        if c == 0x5D:
            return False
        if first:
            return True
        if c == 0x2C:
            self.i += 1
            c = self.ws()
            if c == 0x5D:
                raise self.peek_err("trailing comma")
            if c is None:
                raise self.peek_err("EOF while parsing a value")
            return True
        raise self.peek_err("expected `,` or `]`")

    def seq(self, element: Callable[[], _T]) -> list[_T]:
        """A JSON array at `self.i` (the `[`), each element read by `element`, with
        the depth limit and the `$.field[i]` error path kept."""
        self.enter()
        self.i += 1
        out: list[_T] = []
        first = True
        while self.has_next_element(first):
            first = False
            self.path.append(len(out))
            out.append(element())
            self.path.pop()
        self.end_seq()
        self.leave()
        return out

    def end_seq(self) -> None:
        c = self.ws()
        if c == 0x5D:
            self.i += 1
            return
        if c == 0x2C:
            self.i += 1
            if self.ws() == 0x5D:
                raise self.peek_err("trailing comma")
            raise self.peek_err("trailing characters")
        if c is None:
            raise self.peek_err("EOF while parsing a list")
        raise self.peek_err("trailing characters")

    def has_next_key(self, first: bool) -> bool:
        c = self.ws()
        if c is None:
            raise self.peek_err("EOF while parsing an object")
        if c == 0x7D:
            return False
        if first:
            if c == 0x22:
                return True
            raise self.peek_err("key must be a string")
        if c == 0x2C:
            self.i += 1
            c = self.ws()
            if c == 0x22:
                return True
            if c == 0x7D:
                raise self.peek_err("trailing comma")
            if c is None:
                raise self.peek_err("EOF while parsing a value")
            raise self.peek_err("key must be a string")
        raise self.peek_err("expected `,` or `}`")

    def end_map(self) -> None:
        c = self.ws()
        if c == 0x7D:
            self.i += 1
            return
        if c == 0x2C:
            raise self.peek_err("trailing comma")
        if c is None:
            raise self.peek_err("EOF while parsing an object")
        raise self.peek_err("trailing characters")

    def key(self) -> str:
        """An object key (the opening quote is next); keys are always validated."""
        self.i += 1
        return self.string()

    # -- generic values (serde_json::Value) -----------------------------------

    def _scalar(self, c: int) -> Any:
        """The scalar that starts with `c` (one of `_SCALAR_START`), read."""
        if c == 0x22:
            self.i += 1
            return self.string()
        if c in _KEYWORDS:
            return self._keyword(c)
        if c == 0x2D:
            self.i += 1
            return self.number(False)
        return self.number(True)

    def value(self) -> Any:
        c = self.ws()
        if c is None:
            raise self.peek_err("EOF while parsing a value")
        if c in _SCALAR_START:
            return self._scalar(c)
        if c == 0x5B:
            return self.seq(self.value)
        if c == 0x7B:
            self.enter()
            self.i += 1
            obj: dict[str, Any] = {}
            first = True
            while self.has_next_key(first):
                first = False
                k = self.key()
                self.colon()
                self.path.append(k)
                obj[k] = self.value()  # serde_json::Map: the last duplicate wins
                self.path.pop()
            self.end_map()
            self.leave()
            return obj
        raise self.peek_err("expected value")

    def ignore_value(self) -> None:
        """serde_json `ignore_value`: syntax only, iterative, no depth limit."""
        stack: list[int] = []
        enclosing: int | None = None
        while True:
            c = self.ws()
            if c is None:
                raise self.peek_err("EOF while parsing a value")
            frame: int | None
            if self._ignore_scalar(c):
                if enclosing is not None:
                    frame, enclosing = enclosing, None
                elif stack:
                    frame = stack.pop()
                else:
                    return
                accept_comma = True
            else:  # `[` or `{`
                if enclosing is not None:
                    stack.append(enclosing)
                    enclosing = None
                self.i += 1
                frame, accept_comma = c, False
            frame = self._ignore_closers(frame, accept_comma, stack)
            if frame is None:
                return
            if frame == 0x7B:
                self._ignore_key()
            enclosing = frame

    def _ignore_scalar(self, c: int) -> bool:
        """Skip the scalar that starts with `c`; False for a container's opener."""
        if c in _KEYWORDS:
            self._keyword(c)
        elif c == 0x2D:
            self.i += 1
            self.ignore_number()
        elif c in _DIGITS:
            self.ignore_number()
        elif c == 0x22:
            self.i += 1
            self.ignore_str()
        elif c in (0x5B, 0x7B):
            return False
        else:
            raise self.peek_err("expected value")
        return True

    def _ignore_closers(self, frame: int, accept_comma: bool, stack: list[int]) -> int | None:
        """After a value (`accept_comma`) or an opener: close every container that ends
        here. The container the next value belongs to, or None when the outermost one
        closed."""
        while True:
            c = self.ws()
            if c == 0x2C and accept_comma:
                self.i += 1
                return frame
            if (c == 0x5D and frame == 0x5B) or (c == 0x7D and frame == 0x7B):
                pass
            elif c is None:
                raise self.peek_err(
                    "EOF while parsing a list" if frame == 0x5B else "EOF while parsing an object"
                )
            elif accept_comma:
                raise self.peek_err(
                    "expected `,` or `]`" if frame == 0x5B else "expected `,` or `}`"
                )
            else:
                return frame
            self.i += 1
            if not stack:
                return None
            frame = stack.pop()
            accept_comma = True

    def _ignore_key(self) -> None:
        """An object's key and its colon, skipped."""
        self._expect(0x22, "key must be a string")
        self._str_body(None)
        self.colon()

    # -- typed fields ---------------------------------------------------------

    def invalid_type(self, expected: str) -> ScanError:
        """serde_json `peek_invalid_type`: read the scalar, then a positioned type error."""
        c = self.peek()
        unexpected: str
        if c is not None and c in _SCALAR_START:
            unexpected = describe_unexpected(self._scalar(c))
        elif c == 0x5B:
            unexpected = "sequence"
        elif c == 0x7B:
            unexpected = "map"
        else:
            return self.peek_err("expected value")
        return self.err(f"invalid type: {unexpected}, expected {expected}")

    def str_field(self) -> str:
        c = self.ws()
        if c is None:
            raise self.peek_err("EOF while parsing a value")
        if c == 0x22:
            self.i += 1
            return self.string()
        raise self.invalid_type("a string")

    def _null(self) -> bool:
        """Consume a `null` if one is next (serde's `Option` visitor)."""
        if self.ws() != 0x6E:
            return False
        self.i += 1
        self.ident(b"ull")
        return True

    def opt_str_field(self) -> str | None:
        return None if self._null() else self.str_field()

    def str_seq_field(self) -> list[str]:
        c = self.ws()
        if c is None:
            raise self.peek_err("EOF while parsing a value")
        if c != 0x5B:
            raise self.invalid_type("a sequence")
        return self.seq(self.str_field)

    def opt_value_field(self) -> Any:
        return None if self._null() else self.value()

    def u64_field(self, expected: str = "usize") -> int:
        """serde_json `deserialize_number` into an unsigned integer."""
        c = self.ws()
        if c is None:
            raise self.peek_err("EOF while parsing a value")
        if c == 0x2D:
            self.i += 1
            v = self.number(False)
        elif c in _DIGITS:
            v = self.number(True)
        else:
            raise self.invalid_type(expected)
        if isinstance(v, float):
            raise self.err(f"invalid type: {describe_unexpected(v)}, expected {expected}")
        if v < 0:
            raise self.err(f"invalid value: {describe_unexpected(v)}, expected {expected}")
        return v

    def data_error_after_map(self, message: str) -> ScanError:
        """A visitor error inside an object: serde runs `end_map` (which may consume
        the closing brace) before `fix_position` places it at the last consumed byte."""
        if self.ws() == 0x7D:
            self.i += 1
        return self.err(message)

    def data_error_after_seq(self, message: str) -> ScanError:
        c = self.ws()
        if c == 0x5D:
            self.i += 1
        elif c == 0x2C:
            self.i += 1
            self.ws()
        return self.err(message)


FieldReader = Callable[[Scanner], Any]


def scan_struct(
    data: bytes,
    name: str,
    fields: tuple[tuple[str, FieldReader, bool], ...],
) -> dict[str, Any]:
    """Deserialize a derive(Deserialize) struct like serde_json `from_slice` does.

    `fields` is (name, reader, required) in declaration order; fields that are not
    required default when absent. Unknown keys are skipped syntax-only. A JSON array
    is accepted positionally, as serde's derived `visit_seq` does. Returns the present
    fields (absent optional fields are left out).
    """
    sc = Scanner(data)
    readers = {f[0]: f[1] for f in fields}
    c = sc.ws()
    if c is None:
        raise sc.peek_err("EOF while parsing a value")
    out: dict[str, Any] = {}
    if c == 0x7B:
        sc.enter()
        sc.i += 1
        first = True
        while sc.has_next_key(first):
            first = False
            k = sc.key()
            reader = readers.get(k)
            if reader is None:
                sc.colon()
                sc.path.append(k)
                sc.ignore_value()
                sc.path.pop()
                continue
            if k in out:
                sc.path.append(k)
                e = sc.data_error_after_map(f"duplicate field `{k}`")
                raise e
            sc.colon()
            sc.path.append(k)
            out[k] = reader(sc)
            sc.path.pop()
        for fname, _, required in fields:
            if required and fname not in out:
                raise sc.data_error_after_map(f"missing field `{fname}`")
        sc.end_map()
        sc.leave()
    elif c == 0x5B:
        sc.enter()
        sc.i += 1
        first = True
        for idx, (fname, reader, required) in enumerate(fields):
            if not sc.has_next_element(first):
                if required:
                    raise sc.data_error_after_seq(
                        f"invalid length {idx}, expected struct {name} with {len(fields)} elements"
                    )
                continue
            first = False
            sc.path.append(idx)
            out[fname] = reader(sc)
            sc.path.pop()
        sc.end_seq()
        sc.leave()
    else:
        raise sc.invalid_type(f"struct {name}")
    sc.end()
    return out


def scan_value(data: bytes) -> Any:
    """Parse one document into a generic value, as `serde_json::from_slice::<Value>`."""
    sc = Scanner(data)
    v = sc.value()
    sc.end()
    return v
