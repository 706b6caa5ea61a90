"""The v2.1 secret redactor (docs/spec/core.md §3).

Two passes: nine specific token shapes replaced by `[REDACTED:<LABEL>]`, then a
generic `key = value` pass whose value scanner understands quotes, escapes and
doubled quotes. The reference uses Rust's `regex` crate; Python's `re` differs in
case folding (`re.IGNORECASE` also folds `İ`/`ı`), `\\s` and `\\b`, so those three
are spelled out explicitly here.
"""

from __future__ import annotations

import re
import unicodedata

from cce_knowledge.core.rustcompat import RUST_WS_CHARS, ascii_lower

# ---------------------------------------------------------------- pass 1

SPECIFIC: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
            re.DOTALL,
        ),
        "[REDACTED:PRIVATE_KEY]",
    ),
    (re.compile(r"sk-ant-[A-Za-z0-9_-]{20,}"), "[REDACTED:ANTHROPIC_KEY]"),
    (re.compile(r"sk-[A-Za-z0-9]{32,}"), "[REDACTED:OPENAI_KEY]"),
    (re.compile(r"sk_live_[A-Za-z0-9]{16,}"), "[REDACTED:STRIPE_KEY]"),
    (re.compile(r"gh[pousr]_[A-Za-z0-9]{36,}"), "[REDACTED:GITHUB_TOKEN]"),
    (re.compile(r"xox[baprs]-[A-Za-z0-9-]{10,}"), "[REDACTED:SLACK_TOKEN]"),
    (re.compile(r"AKIA[0-9A-Z]{16}"), "[REDACTED:AWS_ACCESS_KEY]"),
    (re.compile(r"AIza[0-9A-Za-z_-]{35}"), "[REDACTED:GOOGLE_API_KEY]"),
    (
        re.compile(r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
        "[REDACTED:JWT]",
    ),
)

# Linear-time forms of the two SPECIFIC patterns a backtracking engine runs in
# quadratic time (issue 25): each start re-scans a run the previous start already
# failed on (`-----BEGIN … PRIVATE KEY-----` repeated with no END: the lazy body
# scans to the end of the text from every header; `eyJ` repeated: the first run
# from every `eyJ`). The `skip` arm, tried only where the pattern fails, consumes
# what every later start inside it would fail on too, and is put back unchanged:
# * no END after a header means none after any later header either;
# * a start in the first run of a failed JWT start reaches the same run end, with
#   fewer characters before it.
# tests/engine/test_redaction_linear.py checks the same output as SPECIFIC's.
_PEM_LINEAR = re.compile(
    SPECIFIC[0][0].pattern + r"|(?P<skip>-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*)", re.DOTALL
)
_JWT_LINEAR = re.compile(
    r"eyJ[A-Za-z0-9_-]{10,}+\.eyJ[A-Za-z0-9_-]{10,}+\.[A-Za-z0-9_-]{10,}+"
    r"|(?P<skip>eyJ[A-Za-z0-9_-]*+)"
)


def _sub_linear(rx: re.Pattern[str], repl: str, text: str) -> str:
    return rx.sub(lambda m: m.group() if m.start("skip") >= 0 else repl, text)


# ---------------------------------------------------------------- pass 2

_KEYS = (
    "password",
    "passwd",
    "secret[_-]?key",
    "secret",
    "api[_-]?key",
    "access[_-]?key",
    "auth[_-]?token",
    "private[_-]?key",
    "token",
)


def _letter_class(ch: str) -> str:
    # Rust simple case folding: only `s` (ſ U+017F) and `k` (K U+212A) gain a
    # non-ASCII partner among these keys.
    if ch == "s":
        return "[sS\u017f]"
    if ch == "k":
        return "[kK\u212a]"
    if ch.isalpha():
        return f"[{ch}{ch.upper()}]"
    return ch


def _key_regex(key: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(key):
        if key.startswith("[_-]?", i):
            out.append("[_-]?")
            i += 5
        else:
            out.append(_letter_class(key[i]))
            i += 1
    return "".join(out)


_WS = "[" + re.escape(RUST_WS_CHARS) + "]"
_OP = "(" + _WS + "*[:=]" + _WS + "*)"
# `\b` is checked by hand (Rust's Unicode word definition). The trailing `\b` of the
# reference regex always holds: a key ends in a letter and the operator group starts
# with whitespace or `:`/`=`, both non-word.
#: The key alternation exactly as the reference orders it (kept as the definition).
REFERENCE_PREFIX = re.compile("(" + "|".join(_key_regex(k) for k in _KEYS) + ")" + _OP)

_S, _K = "[sS\u017f]", "[kK\u212a]"
# The same alternation factored into a trie: sre scans ~3x faster, and greedy optional
# suffixes keep the reference's preference order (`secret_key` before `secret`).
# tests/engine/test_redactor.py checks match-for-match equality with REFERENCE_PREFIX.
_TRIE = (
    f"(?:[pP][aA]{_S}{_S}[wW](?:[oO][rR][dD]|[dD])"
    f"|{_S}[eE][cC][rR][eE][tT](?:[_-]?{_K}[eE][yY])?"
    f"|[aA](?:[pP][iI][_-]?{_K}[eE][yY]|[cC][cC][eE]{_S}{_S}[_-]?{_K}[eE][yY]"
    f"|[uU][tT][hH][_-]?[tT][oO]{_K}[eE][nN])"
    f"|[pP][rR][iI][vV][aA][tT][eE][_-]?{_K}[eE][yY]"
    f"|[tT][oO]{_K}[eE][nN])"
)
_PREFIX = re.compile("(?=[pPsS\u017faAtT])(" + _TRIE + ")" + _OP)

# Unicode properties that make a character a word character for Rust's `\b`
# besides letters, marks, decimal digits and connector punctuation: Join_Control
# and the So-category Other_Alphabetic letters (circled/squared Latin letters).
_EXTRA_WORD = (
    (0x200C, 0x200D),
    (0x24B6, 0x24E9),
    (0x1F130, 0x1F149),
    (0x1F150, 0x1F169),
    (0x1F170, 0x1F189),
)
_WORD_CATS = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Mn", "Mc", "Me", "Nd", "Pc"})
_WORD_CACHE: dict[str, bool] = {}


def is_word_char(ch: str) -> bool:
    """Rust regex `\\w` (Unicode): Alphabetic ∪ Mark ∪ Nd ∪ Pc ∪ Join_Control."""
    if ch < "\x80":
        return ch.isalnum() or ch == "_"
    r = _WORD_CACHE.get(ch)
    if r is None:
        cp = ord(ch)
        r = unicodedata.category(ch) in _WORD_CATS or any(a <= cp <= b for a, b in _EXTRA_WORD)
        _WORD_CACHE[ch] = r
    return r


def _prefix_matches(text: str) -> list[re.Match[str]]:
    """Every prefix-regex match, non-overlapping, left to right, with Rust's `\\b`."""
    out: list[re.Match[str]] = []
    pos = 0
    search = _PREFIX.search
    while True:
        m = search(text, pos)
        if m is None:
            return out
        s = m.start()
        if s > 0 and is_word_char(text[s - 1]):
            pos = s + 1
            continue
        out.append(m)
        pos = m.end()


def _has_prefix_match(text: str) -> bool:
    pos = 0
    while True:
        m = _PREFIX.search(text, pos)
        if m is None:
            return False
        s = m.start()
        if s == 0 or not is_word_char(text[s - 1]):
            return True
        pos = s + 1


_ASCII_WS = frozenset(" \t\n\x0c\r")  # u8::is_ascii_whitespace: no VT
_QUOTES = frozenset("\"'`")


def _is_glue(ch: str) -> bool:
    return ch >= "\x80" or (ch.isascii() and (ch.isalnum() or ch in "_-"))


def scan_value(text: str, start: int) -> tuple[int, str, bool, bool] | None:
    """Scan the value that begins at `text[start]`.

    Returns `(end, inner, quoted, closed)` where `text[start:end]` is the whole value
    (quotes included) or None when there is no value (end of text or whitespace).
    Works on characters; every rule is stated on UTF-8 bytes, but non-ASCII bytes
    never equal a quote, backslash or ASCII whitespace, so the two views agree.
    """
    n = len(text)
    if start >= n or text[start] in _ASCII_WS:
        return None
    q = text[start]
    if q not in _QUOTES:
        i = start
        while i < n and text[i] not in _ASCII_WS:
            i += 1
        return i, text[start:i], False, False
    i = start + 1
    while i < n:
        c = text[i]
        if c == "\n":
            break
        if c == "\\":
            i += 1 if i + 1 < n and text[i + 1] == "\n" else 2
            continue
        if c == q:
            if i + 1 < n and text[i + 1] == q:
                i += 2
                continue
            if i + 1 >= n or text[i + 1] in _ASCII_WS:
                return i + 1, text[start + 1 : i], True, True
            if _is_glue(text[i + 1]):
                i += 1
                continue
            j = i + 1
            close = True
            while j < n:
                cj = text[j]
                if cj in _ASCII_WS:
                    break
                if cj == q:
                    close = False
                    break
                j += 1
            if close:
                return i + 1, text[start + 1 : i], True, True
            i += 1
            continue
        i += 1
    i = min(i, n)
    return i, text[start + 1 : i], True, False


_PLACEHOLDER_PREFIXES = (
    "your",
    "my-",
    "the-",
    "example",
    "changeme",
    "placeholder",
    "dummy",
    "test",
    "sample",
    "xxx",
)
_PLACEHOLDER_WORDS = frozenset({"null", "nil", "none", "true", "false"})


def is_placeholder(v: str) -> bool:
    """Values that are obviously not secrets (templates, examples, redaction tokens)."""
    if v.startswith("[REDACTED:"):
        close = v.find("]", len("[REDACTED:"))
        if close == len(v) - 1:
            return True
    low = ascii_lower(v)
    if low.startswith(_PLACEHOLDER_PREFIXES):
        return True
    if (
        (low.startswith("<") and low.endswith(">"))
        or (low.startswith("${") and low.endswith("}"))
        or (low.startswith("{{") and low.endswith("}}"))
    ):
        return True
    if low in _PLACEHOLDER_WORDS:
        return True
    return bool(v) and v.count(v[0]) == len(v)


def _utf8_len_lt(s: str, limit: int) -> bool:
    if len(s) >= limit:
        return False
    return len(s.encode("utf-8")) < limit


KEY_STEMS = ("pass", "secret", "api", "access", "auth", "private", "token")


def may_have_key(text: str) -> bool:
    """Cheap superset test for a prefix-regex match (C-level lowercase + `in`).

    Every key contains one of the stems; with no ſ/K in the text a match is ASCII,
    and `str.lower()` maps ASCII letters to ASCII letters (it may add matches, e.g.
    from `İ`, never remove one)."""
    if "\u017f" in text or "\u212a" in text:
        return True
    low = text.lower()
    return any(k in low for k in KEY_STEMS)


def _generic_pass(text: str) -> str:
    if not may_have_key(text):
        return text
    matches = _prefix_matches(text)
    if not matches:
        return text
    out: list[str] = []
    cursor = 0
    for m in matches:
        ms, me = m.start(), m.end()
        if ms < cursor:
            continue
        scanned = scan_value(text, me)
        if scanned is None:
            continue
        end, inner, quoted, closed = scanned
        out.append(text[cursor:ms])
        skippable = (_utf8_len_lt(inner, 8) or is_placeholder(inner)) and not _has_prefix_match(
            inner
        )
        if skippable:
            out.append(text[ms:end])
        else:
            out.append(m.group(1))
            out.append(m.group(2))
            if quoted:
                q = text[me]
                out.append(q + "[REDACTED:SECRET]" + (q if closed else ""))
            else:
                out.append("[REDACTED:SECRET]")
        cursor = end
    out.append(text[cursor:])
    return "".join(out)


def redact(text: str) -> str:
    """Replace secret-shaped content with `[REDACTED:<LABEL>]` tokens."""
    # Unrolled (this runs for every document and facet): same order as SPECIFIC.
    sp = SPECIFIC
    if "-----BEGIN " in text:
        text = _sub_linear(_PEM_LINEAR, sp[0][1], text)
    if "sk" in text:
        if "sk-ant-" in text:
            text = sp[1][0].sub(sp[1][1], text)
        if "sk-" in text:
            text = sp[2][0].sub(sp[2][1], text)
        if "sk_live_" in text:
            text = sp[3][0].sub(sp[3][1], text)
    if "_" in text and "gh" in text:
        text = sp[4][0].sub(sp[4][1], text)
    if "xox" in text:
        text = sp[5][0].sub(sp[5][1], text)
    if "AKIA" in text:
        text = sp[6][0].sub(sp[6][1], text)
    if "AIza" in text:
        text = sp[7][0].sub(sp[7][1], text)
    if "eyJ" in text:
        text = _sub_linear(_JWT_LINEAR, sp[8][1], text)
    # Every generic assignment needs a `:` or `=` operator.
    if ":" not in text and "=" not in text:
        return text
    return _generic_pass(text)
