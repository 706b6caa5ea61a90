"""Rust standard-library behaviours the byte-level contract depends on.

Python's built-ins differ from Rust's in whitespace sets, line splitting, case
mapping, rounding and float text (docs/spec/core.md §0). Everything that must be
byte-identical with the reference engine goes through these helpers.
"""

from __future__ import annotations

import math
import unicodedata

#: Unicode White_Space, as Rust's `char::is_whitespace` / `str::trim` / regex `\s`.
#: Unlike `str.isspace`, U+001C..U+001F are NOT whitespace.
RUST_WS_CHARS = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(
    map(chr, range(0x2000, 0x200B))
)
RUST_WS = frozenset(RUST_WS_CHARS)

_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


U64_MAX = (1 << 64) - 1


def is_u64(v: object) -> bool:
    """serde_json's `Value::as_u64`: a JSON integer in 0..=u64::MAX. Floats (even `3.0`),
    negatives, booleans and `-0` (which serde_json reads as a float) are not."""
    return type(v) is int and 0 <= v <= U64_MAX


def rs_trim(s: str) -> str:
    """`str::trim` (Unicode White_Space)."""
    return s.strip(RUST_WS_CHARS)


def rs_trim_end(s: str) -> str:
    """`str::trim_end`."""
    return s.rstrip(RUST_WS_CHARS)


def rs_trim_start(s: str) -> str:
    """`str::trim_start`."""
    return s.lstrip(RUST_WS_CHARS)


def rs_is_blank(s: str) -> bool:
    return not rs_trim(s)


def rs_lines(s: str) -> list[str]:
    """`str::lines`: split on `\\n` only, drop one trailing `\\r` per line, no final empty line."""
    if not s:
        return []
    parts = s.split("\n")
    if parts[-1] == "":
        parts.pop()
    return [p[:-1] if p.endswith("\r") else p for p in parts]


def rs_split_whitespace(s: str) -> list[str]:
    """`str::split_whitespace` with the Rust whitespace set."""
    out: list[str] = []
    cur: list[str] = []
    for ch in s:
        if ch in RUST_WS:
            if cur:
                out.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def ascii_lower(s: str) -> str:
    """`to_ascii_lowercase`: only A-Z change (Python's `.lower()` folds far more)."""
    return s.translate(_ASCII_LOWER)


def rust_round(y: float) -> int:
    """`f64::round` (half away from zero) then `as i64` (saturating, NaN -> 0)."""
    if math.isnan(y):
        return 0
    if math.isinf(y):
        return 2**63 - 1 if y > 0 else -(2**63)
    t = math.trunc(y)
    if abs(y - t) >= 0.5:
        t += 1 if y > 0 else -1
    # `as i64` saturates for finite values beyond the i64 range too.
    return max(-(2**63), min(2**63 - 1, int(t)))


def score_key(x: float) -> int:
    """Scores are compared at 6 decimals: `round(x * 1e6) as i64`."""
    return rust_round(x * 1_000_000.0)


def format6(x: float) -> str:
    """Six-decimal score text used in provenance headers and ask reports."""
    s = rust_round(abs(x) * 1e6)
    sign = "-" if x < 0 and s != 0 else ""
    return f"{sign}{s // 1_000_000}.{s % 1_000_000:06d}"


def serde_f64(x: float) -> str:
    """f64 text as serde_json 1.0.150 writes it (zmij layout, docs/spec/core.md §0.8)."""
    if x == 0.0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if not math.isfinite(x):
        return "null"
    r = repr(x)
    sign = ""
    if r[0] == "-":
        sign, r = "-", r[1:]
    mant, _, exp_s = r.partition("e")
    exp = int(exp_s) if exp_s else 0
    ip, _, fp = mant.partition(".")
    digits = (ip + fp).lstrip("0")
    k = exp - len(fp)
    d = digits.rstrip("0")
    k += len(digits) - len(d)
    n = len(d)
    e = n + k - 1
    if -5 <= e <= 15:
        if n - 1 <= e:
            out = d + "0" * (e - n + 1) + ".0"
        elif e >= 0:
            out = d[: e + 1] + "." + d[e + 1 :]
        else:
            out = "0." + "0" * (-e - 1) + d
    else:
        out = d[0] + ("." + d[1:] if n > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + out


def _rust_printable(ch: str) -> bool:
    # Approximates core::unicode::printable: control, format, unassigned, surrogate,
    # private-use and separator characters other than SPACE are escaped by Debug.
    cat = unicodedata.category(ch)
    if ch == " ":
        return True
    return not (cat[0] == "C" or cat in ("Zl", "Zp", "Zs"))


#: The characters `str`'s Debug escapes by name.
_DEBUG_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}


def rust_debug_str(s: str) -> str:
    """`format!("{:?}", s)` for a `&str`: double-quoted with Rust escapes."""
    out = ['"']
    for ch in s:
        esc = _DEBUG_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif _rust_printable(ch) and unicodedata.category(ch) != "Mn":
            out.append(ch)
        else:
            out.append(f"\\u{{{ord(ch):x}}}")
    out.append('"')
    return "".join(out)


def io_error_text(e: OSError) -> str:
    """Rust's `io::Error` display: `No such file or directory (os error 2)`."""
    if e.errno is not None and e.strerror:
        return f"{e.strerror} (os error {e.errno})"
    return str(e)
