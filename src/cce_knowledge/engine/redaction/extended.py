"""Extended redaction: the reference's rules, then more secret shapes.

Applied after `redactor.redact` (the reference's rules, unchanged), so text in which
the rules below find nothing comes out byte-identical to the reference's redaction.
The shapes come from two places, never from a private list grown by hand:

* the regex plugins of Yelp's `detect-secrets` (Apache-2.0), a rule set kept up by a
  project in that field, read as data from `secret_rules.json`
  (`tools/gen_secret_rules.py` writes it from the installed package);
* the shapes issue 12 found stored raw that detect-secrets does not cover: fine-grained
  GitHub tokens, Slack app tokens, Stripe test/restricted keys, an unterminated PEM
  private key, `key = value` assignments whose key only *ends* in a secret word
  (`DB_PASSWORD=…`, `aws_secret_access_key = …`) and "the password is …" prose.

A match is replaced by `[REDACTED:<LABEL>]`. For a pattern with a capture group only the
group is replaced (`://user:[REDACTED:BASIC_AUTH_CREDENTIALS]@host`); a match that stops
inside a run of token characters is widened to the run's end, so no tail of a longer
token survives a fixed-length pattern. Each rule runs only when the text contains one
of the literals every match of it must contain (derived from the pattern itself), or,
for a rule with none, when its precheck (redaction_gate.PRECHECKS) matches; a rule's
regex is compiled the first time it runs.
"""

from __future__ import annotations

import bisect
import json
import re
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from re import _constants as sre_c  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import ahocorasick

from cce_knowledge.core.rustcompat import ascii_lower
from cce_knowledge.engine.redaction import reference as redactor
from cce_knowledge.engine.redaction.gate import fold as _fold
from cce_knowledge.engine.redaction.gate import precheck
from cce_knowledge.engine.redaction.reference import (
    _ASCII_WS,
    _PLACEHOLDER_PREFIXES,
    _QUOTES,
    _is_glue,
    is_placeholder,
    redact,
)

_TOKEN = re.compile(r"\[REDACTED:[A-Z0-9_]+\]")
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
# Delimiters some detect-secrets patterns match around a group-less secret.
_EDGE = " \t\r\n\"'`=:,;"


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    label: str
    pattern: str
    flags: int
    #: Lower-cased literals one of which every match contains (its prefilter);
    #: None: the rule runs on every text.
    required: frozenset[str] | None
    #: Literals (as the pattern spells them) one of which every match holds within
    #: (lo, hi) characters of its start: only those starts are tried (`regex.match`),
    #: not every position. None: `finditer`.
    anchor: tuple[frozenset[str], int, int] | None
    icase: bool
    source: str
    #: "pattern": the match (or group 1) is the secret; "assignment" / "prose": see below.
    kind: str = "pattern"

    @property
    def regex(self) -> re.Pattern[str]:
        """The rule as its source states it (the definition the tests sample from)."""
        # Compiled on first use: most texts (and most cold processes) never need most rules.
        return _compiled(self.pattern, self.flags)

    @property
    def scanner(self) -> re.Pattern[str]:
        """What matching runs: the rule's linear-time form (LINEAR_FORMS) when it has
        one, else the rule itself."""
        return _compiled(linear_form(self.pattern) or self.pattern, self.flags)


@cache
def _compiled(pattern: str, flags: int) -> re.Pattern[str]:
    return re.compile(pattern, flags)


# An issue-12 rule (see _OWN_RULES), here: it has a linear form below.
# The BEGIN line, then the lines a PEM body is made of: headers, base64 (never a
# space) and the blank line before base64. Prose after the key survives.
_PEM_UNTERMINATED = (
    r"-----BEGIN[ A-Z0-9_-]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:(?:\r?\n|\\r?\\n)(?:[A-Za-z][A-Za-z0-9-]*: [^\n]*"
    r"|[A-Za-z0-9+/=]{4,}(?=\r?\n|\\r?\\n|$)"
    r"|(?=(?:\r?\n|\\r?\\n)[A-Za-z0-9+/=]{16,})))*"
)


# ---------------------------------------------------------------- linear-time forms

# A backtracking engine spends more than linear time on three shapes these rules
# have (issue 25): nested runs of spaces around an operator (` *`, ` +`, ` *`: cubic
# in the run), and a run that every start re-scans when the pattern fails after it
# (`eyJ` repeated with no `.`, `sk-` repeated with no `T3BlbkFJ` tail, `//` repeated
# on a line: quadratic). Each form below matches exactly what its rule matches (same
# spans, same groups; tests/engine/test_redaction_linear.py checks that against the
# rule on sampled, mutated and hostile texts) and runs in linear time:
#
# * the operator between a key and its value, `(?: *)(?:=|:|:=|=>| +|::)(?: *)`, is
#   followed by a quote or a value character (never a space or `=:>`), so only one
#   split of the spaces can succeed: possessive runs take it at once;
# * a `(?P<skip>...)` arm, tried only when the rule fails at a start, consumes the
#   run that made it fail, which every later start inside that run would re-scan and
#   fail on too (each form says why). A match of the `skip` arm is not a match.
_OP = r"(?: *)(?:=|:|:=|=>| +|::)(?: *)"
_OP_LINEAR = r"(?: *+(?:=>|:=|::|=|:) *+| ++)"


def linear_form(pattern: str) -> str | None:
    """The linear-time form matching runs for `pattern`; None: the pattern itself."""
    form = LINEAR_FORMS.get(pattern)
    if form is None and _OP in pattern:
        # CloudantDetector (2), IbmCloudIamDetector, IbmCosHmacDetector, SoftlayerDetector.
        form = pattern.replace(_OP, _OP_LINEAR)
    return form


#: Rule pattern (as secret_rules.json or this module states it) -> its linear form,
#: besides the operator rewrite every pattern holding `_OP` gets (linear_form).
LINEAR_FORMS: dict[str, str] = {
    # JwtTokenDetector. A lazy tail at the very end always matches nothing, so the
    # match ends after `\.?`. The first run stops only at a character outside it, so a
    # start that fails fails on what follows that run, as does every later `eyJ` in it.
    r"eyJ[A-Za-z0-9-_=]+\.[A-Za-z0-9-_=]+\.?[A-Za-z0-9-_.+/=]*?": (
        r"eyJ[A-Za-z0-9-_=]++\.[A-Za-z0-9-_=]++\.?|(?P<skip>eyJ[A-Za-z0-9-_=]*+)"
    ),
    # OpenAIDetector. Every match lies inside one run of `[A-Za-z0-9-_]`; a later
    # `sk-` in the run can only end on a `T3BlbkFJ` the first start already tried.
    r"sk-[A-Za-z0-9-_]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}": (
        r"sk-[A-Za-z0-9-_]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}|(?P<skip>sk-[A-Za-z0-9-_]*+)"
    ),
    # pem-private-key-unterminated (ours): the header is made of characters of its
    # own run (`[ A-Z0-9_-]`), so a later `-----BEGIN` in the run can only end on a
    # `PRIVATE KEY-----` the first one already tried; the body always matches.
    _PEM_UNTERMINATED: _PEM_UNTERMINATED + r"|(?P<skip>-----BEGIN[ A-Z0-9_-]*+)",
    # NpmDetector. `.+` stays on the line: a later `//` on the same line can only use
    # a `/:_authToken=` the first one already tried; a match runs to the line's end.
    r"\/\/.+\/:_authToken=\s*((npm_.+)|([A-Fa-f0-9-]{36})).*": (
        r"\/\/.+\/:_authToken=\s*((npm_.+)|([A-Fa-f0-9-]{36})).*|(?P<skip>\/\/.*)"
    ),
}


# ---------------------------------------------------------------- prefilter literals


def _best(seq: Any) -> frozenset[str] | None:
    """A set of literals one of which every match of `seq` contains (longest found)."""
    cands: list[frozenset[str]] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            cands.append(frozenset({"".join(run)}))
            run.clear()

    for op, av in seq:
        if op is sre_c.LITERAL:
            run.append(chr(av))
            continue
        flush()
        sub: frozenset[str] | None = None
        if op is sre_c.SUBPATTERN:
            sub = _best(av[-1])
        elif op is sre_c.BRANCH:
            alts = [_best(b) for b in av[1]]
            if alts and all(a is not None for a in alts):
                sub = frozenset(x for a in alts if a is not None for x in a)
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, sre_c.POSSESSIVE_REPEAT):
            lo, _hi, item = av
            if lo >= 1:
                sub = _best(item)
        if sub:
            cands.append(sub)
    flush()
    if not cands:
        return None
    return max(cands, key=lambda s: (min(len(x) for x in s), -len(s)))


def _has_icase(seq: Any) -> bool:
    for op, av in seq:
        if op is sre_c.SUBPATTERN:
            if av[1] & re.IGNORECASE or _has_icase(av[-1]):
                return True
        elif op is sre_c.BRANCH:
            if any(_has_icase(b) for b in av[1]):
                return True
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, sre_c.POSSESSIVE_REPEAT):
            if _has_icase(av[2]):
                return True
    return False


_MAX_ANCHOR = 32
_MAX_SET = 8
_Item = tuple[Any, Any]


_ZERO_WIDTH = (sre_c.AT, sre_c.ASSERT, sre_c.ASSERT_NOT)


def _prefix_item(item: _Item) -> tuple[frozenset[str], bool]:
    """Strings one of which starts every match of `item`; True when they are exactly
    the strings it matches (so what follows can be appended)."""
    op, av = item
    if op is sre_c.LITERAL:
        return frozenset({chr(av)}), True
    if op in _ZERO_WIDTH:
        return frozenset({""}), True
    if op is sre_c.SUBPATTERN:
        return _prefix_seq(list(av[-1]))
    if op is sre_c.BRANCH:
        alts = [_prefix_seq(list(b)) for b in av[1]]
        out = frozenset().union(*(a for a, _ in alts))
        if len(out) > _MAX_SET:
            return frozenset({""}), False
        return out, all(c for _, c in alts)
    if op is sre_c.IN and len(av) <= 8 and all(o is sre_c.LITERAL for o, _ in av):
        return frozenset(chr(c) for _, c in av), True
    return frozenset({""}), False


def _prefix_seq(items: list[_Item]) -> tuple[frozenset[str], bool]:
    out = frozenset({""})
    for it in items:
        f, complete = _prefix_item(it)
        grown = frozenset(a + b for a in out for b in f)
        if len(grown) > _MAX_SET:
            return out, False
        out = grown
        if not complete:
            return out, False
    return out, True


def _anchor(parsed: sre_parse.SubPattern) -> tuple[frozenset[str], int, int] | None:
    """Literals one of which every match holds near its start: the best set of prefixes
    of the pattern's tail from some item on, with the (min, max) width before it."""
    items: list[_Item] = list(parsed)
    best: tuple[frozenset[str], int, int] | None = None
    lo = hi = 0
    for i in range(len(items)):
        if hi > _MAX_ANCHOR:
            break
        got = _prefix_seq(items[i:])[0]
        key = (min(len(x) for x in got), -len(got))
        if best is None or key > (min(len(x) for x in best[0]), -len(best[0])):
            best = (got, lo, hi)
        w = sre_parse.SubPattern(parsed.state, [items[i]]).getwidth()
        lo, hi = lo + w[0], hi + w[1]
    return best


def _minimal(x: frozenset[str]) -> frozenset[str]:
    # A literal that contains another literal of the set adds nothing to the test.
    return frozenset(n for n in x if not any(o != n and o in n for o in x))


def _analyse(
    pattern: str, flags: int
) -> tuple[frozenset[str] | None, tuple[frozenset[str], int, int] | None, bool]:
    """(required literals as the pattern spells them, anchor, case-insensitive)."""
    parsed = sre_parse.parse(pattern, flags)
    icase = bool(parsed.state.flags & re.IGNORECASE) or _has_icase(parsed)
    anchored = _anchor(parsed)
    anchor = None
    # A case-sensitive pattern that starts with two literal characters is already
    # searched at C speed by `re` (a literal-prefix scan): no anchor needed.
    items = list(parsed)
    literal_start = (
        not icase
        and len(items) >= 2
        and items[0][0] is sre_c.LITERAL
        and items[1][0] is sre_c.LITERAL
    )
    if anchored is not None and not literal_start and min(len(x) for x in anchored[0]) >= 2:
        lits = anchored[0]
        # Not minimised: a literal's offset in the match is what the anchor states.
        anchor = (frozenset(x.lower() for x in lits) if icase else lits, *anchored[1:])
    best = _best(parsed)
    cands = [c for c in (best, anchored[0] if anchored else None) if c]
    if not cands:
        return None, anchor, icase
    req = max(cands, key=lambda c: (min(len(x) for x in c), -len(c)))
    if min(len(x) for x in req) < 2:
        return None, anchor, icase
    return req, anchor, icase


def prefilter_of(
    pattern: str, flags: int = 0
) -> tuple[frozenset[str] | None, tuple[frozenset[str], int, int] | None, bool]:
    """(required literals, lower-cased, anchor, case-insensitive) for a pattern."""
    req, anchor, icase = _analyse(pattern, flags)
    if req is None:
        return None, anchor, icase
    return _minimal(frozenset(x.lower() for x in req)), anchor, icase


def _rule(
    name: str, label: str, pattern: str, flags: int, source: str, kind: str = "pattern"
) -> Rule:
    required, anchor, icase = prefilter_of(pattern, flags)
    return Rule(name, label, pattern, flags, required, anchor, icase, source, kind)


# ---------------------------------------------------------------- the rules

_DS = "detect-secrets"
_OWN = "issue 12"

# The shapes detect-secrets misses (see the module docstring).
_OWN_RULES: tuple[tuple[str, str, str, int], ...] = (
    ("github-fine-grained-pat", "GITHUB_TOKEN", r"github_pat_[A-Za-z0-9_]{22,}", 0),
    ("slack-app-token", "SLACK_TOKEN", r"xapp-\d+-[A-Za-z0-9-]{10,}", 0),
    ("stripe-key", "STRIPE_KEY", r"[rs]k_(?:live|test)_[A-Za-z0-9]{10,}", 0),
    ("pem-private-key-unterminated", "PRIVATE_KEY", _PEM_UNTERMINATED, 0),
)

#: Keys the reference's generic pass knows; here they may end a longer word
#: (`DB_PASSWORD=…`). The value is scanned as the reference scans it.
_ASSIGNMENT = (
    r"(?<=[A-Za-z0-9][_.-])"
    r"(password|passwd|secret[_-]?key|secret|api[_-]?key|access[_-]?key|auth[_-]?token"
    r"|private[_-]?key|token)([ \t]*[:=][ \t]*)"
)
#: "the password is …" prose; only values that look made up are taken (see _prose_span).
_PROSE = (
    r"\b(?:password|passphrase|passwd)\s+(?:is|was|will be|=|:)\s+[\"'`]?"
    r"([^\s\"'`]{6,}?)[\"'`]?(?=[.,;:!?)]*(?:\s|$))"
)


@cache
def rules() -> tuple[Rule, ...]:
    """The pattern rules in the order they are tried: detect-secrets', then ours."""
    data = json.loads(
        resources.files("cce_knowledge.engine.redaction")
        .joinpath("secret_rules.json")
        .read_text("utf-8")
    )
    out = [
        _rule(r["plugin"], r["label"], r["pattern"], int(r["flags"]), _DS) for r in data["rules"]
    ]
    out.extend(_rule(n, lab, p, f, _OWN) for n, lab, p, f in _OWN_RULES)
    out.append(_rule("assignment", "SECRET", _ASSIGNMENT, re.IGNORECASE, _OWN, "assignment"))
    out.append(_rule("password-prose", "SECRET", _PROSE, re.IGNORECASE, _OWN, "prose"))
    return tuple(out)


def gate_needles() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """What redaction_gate states, derived from every rule (the reference's and ours):
    (literals a case-sensitive rule's match holds as spelled, folded literals of the
    case-insensitive rules and the reference's key stems, patterns with no literal)."""
    exact: set[str] = set()
    folded: set[str] = set(redactor.KEY_STEMS)
    bare: list[str] = []
    patterns = [(r.pattern, r.flags) for r in rules()]
    patterns += [(p.pattern, p.flags) for p, _ in redactor.SPECIFIC]
    for pattern, flags in patterns:
        req, _anchor, icase = _analyse(pattern, flags)
        if req is None:
            bare.append(pattern)
        elif icase:
            folded.update(x.lower() for x in req)
        else:
            exact.update(req)
    return (
        tuple(sorted(_minimal(frozenset(exact)))),
        tuple(sorted(_minimal(frozenset(folded)))),
        tuple(sorted(set(bare))),
    )


def shape_counts() -> dict[str, int]:
    """How many secret shapes each source contributes (for docs and the report)."""
    counts: dict[str, int] = {}
    for r in rules():
        counts[r.source] = counts.get(r.source, 0) + 1
    return counts


# ---------------------------------------------------------------- matching


def _is_skip(m: re.Match[str]) -> bool:
    """A match of a linear form's `skip` arm: no match of the rule."""
    return "skip" in m.re.groupindex and m.start("skip") >= 0


def _secret_span(m: re.Match[str]) -> tuple[int, int]:
    groups = m.re.groups - ("skip" in m.re.groupindex)
    if groups and m.start(1) >= 0:
        s, e = m.start(1), m.end(1)
    else:
        s, e = m.start(), m.end()
        text = m.string
        while s < e and text[s] in _EDGE:
            s += 1
        while e > s and text[e - 1] in _EDGE:
            e -= 1
    return s, e


_TOKEN_RUN = re.compile(r"[A-Za-z0-9_-]*")


class _Widener:
    """`widen(e)`: `e` moved to the end of the run of token characters it stops in.
    Remembers the last run it walked: the matches of one rule come in order, so each
    run is walked once per rule, not once per match inside it (quadratic)."""

    __slots__ = ("hi", "lo", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.lo = self.hi = -1

    def widen(self, e: int) -> int:
        text = self.text
        if not (0 < e < len(text) and text[e - 1] in _TOKEN_CHARS):
            return e
        if self.lo <= e <= self.hi:
            return self.hi
        m = _TOKEN_RUN.match(text, e)
        assert m is not None  # (a `*` always matches)
        self.lo, self.hi = e, m.end()
        return self.hi


def _widen(text: str, e: int) -> int:
    return _Widener(text).widen(e)


_NOT_WS = re.compile(r"[^ \t\n\x0c\r]*")  # reference._ASCII_WS: no VT
_TO_BRACKET = re.compile(r"[^\]]*")
_SAME = re.compile(r"(.)\1*", re.DOTALL)
#: A value this short is checked as the reference checks it, on a copy.
_SHORT_VALUE = 64


class _Values:
    """`reference.scan_value` and `is_placeholder` for the assignment rule, over one
    text, in amortised linear time: many keys inside one long value (`x_token=`
    repeated on a line) would each re-scan the rest of it (quadratic). Unquoted: the
    next whitespace, remembered for the run. Quoted: the walk from a position on is
    the same whatever quote opened it (for one quote character), so each position
    records the walk that passed it, and a later walk stops where it meets one."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.ws = (-1, -1)  # (from, next whitespace): none in between
        self.bracket = (-1, -1)  # (from, next `]`)
        self.walked: dict[str, array[int]] = {}
        self.results: list[tuple[int, bool]] = []

    def _next(self, cache: tuple[int, int], rx: re.Pattern[str], a: int) -> tuple[int, int]:
        lo, hi = cache
        if lo <= a <= hi:
            return cache
        m = rx.match(self.text, a)
        assert m is not None  # (a `*` always matches)
        return a, m.end()

    def scan(self, start: int) -> tuple[int, bool, bool] | None:
        """(end, quoted, closed) as scan_value gives them, without the inner text."""
        text = self.text
        n = len(text)
        if start >= n or text[start] in _ASCII_WS:
            return None
        q = text[start]
        if q not in _QUOTES:
            self.ws = self._next(self.ws, _NOT_WS, start)
            return self.ws[1], False, False
        walked = self.walked.get(q)
        if walked is None:
            walked = self.walked[q] = array("i", [-1]) * (n + 1)
        # This walk's positions get its result's index now (a walk only moves on, so
        # it never meets its own marks); the result is appended when it ends.
        ref = len(self.results)
        got: tuple[int, bool] | None = None
        i = start + 1
        while i < n:
            seen = walked[i]
            if seen >= 0:
                got = self.results[seen]
                break
            walked[i] = ref
            c = text[i]
            if c == "\n":
                got = (i, False)
                break
            if c == "\\":
                i += 1 if i + 1 < n and text[i + 1] == "\n" else 2
                continue
            if c == q:
                i, got = self._at_quote(i, q)
                if got is not None:
                    break
                continue
            i += 1
        if got is None:
            got = (min(i, n), False)
        self.results.append(got)
        return got[0], True, got[1]

    def _at_quote(self, i: int, q: str) -> tuple[int, tuple[int, bool] | None]:
        """At quote `q` inside a value quoted by it: where to read on, or the value's
        (end, closed) when this quote closes it."""
        text = self.text
        n = len(text)
        if i + 1 < n and text[i + 1] == q:
            return i + 2, None  # a doubled quote
        if i + 1 >= n or text[i + 1] in _ASCII_WS:
            return i, (i + 1, True)
        if _is_glue(text[i + 1]):
            return i + 1, None
        j = i + 1
        while j < n and text[j] not in _ASCII_WS:
            if text[j] == q:
                return i + 1, None  # another quote before the run ends: not closed here
            j += 1
        return i, (i + 1, True)

    def placeholder(self, a: int, b: int) -> bool:
        """is_placeholder(text[a:b]) without copying a long value."""
        text = self.text
        if b - a <= _SHORT_VALUE:
            return is_placeholder(text[a:b])
        if text.startswith("[REDACTED:", a):
            self.bracket = self._next(self.bracket, _TO_BRACKET, a + len("[REDACTED:"))
            if self.bracket[1] == b - 1:
                return True
        # The prefixes, the bracketing pairs and the one-character run need only the
        # value's two ends and its first run; the null words are all short.
        head, tail = ascii_lower(text[a : a + 16]), ascii_lower(text[b - 2 : b])
        if head.startswith(_PLACEHOLDER_PREFIXES):
            return True
        if (
            (head.startswith("<") and tail.endswith(">"))
            or (head.startswith("${") and tail.endswith("}"))
            or (head.startswith("{{") and tail.endswith("}}"))
        ):
            return True
        m = _SAME.match(text, a, b)
        return m is not None and m.end() == b


def _assignment_span(
    text: str, m: re.Match[str], values: _Values | None = None
) -> tuple[int, int] | None:
    values = _Values(text) if values is None else values
    start = m.end()
    scanned = values.scan(start)
    if scanned is None:
        return None
    end, quoted, closed = scanned
    a, b = start + (1 if quoted else 0), end - (1 if quoted and closed else 0)
    # len(inner.encode()) < 8: a value of 8 characters or more has 8 bytes or more.
    short = b - a < 8 and len(text[a:b].encode("utf-8")) < 8
    if short or values.placeholder(a, b):
        return None
    return a, b


def _prose_span(m: re.Match[str]) -> tuple[int, int] | None:
    v = m.group(1)
    # Prose: only values that look made up (a letter beside a digit or a symbol).
    if is_placeholder(v) or not any(c.isalpha() for c in v):
        return None
    if not any(c.isdigit() or not c.isalnum() for c in v):
        return None
    return m.start(1), m.end(1)


#: Required literals this short are common (`ap`, `cl`, `key`): `in` finds their
#: first occurrence at once, while the automaton would report every occurrence.
_SHORT = 3


@cache
def _automaton() -> ahocorasick.Automaton:
    """The longer required literals, lower-cased, in one Aho-Corasick automaton: one
    pass over the folded text tells which rules can match (testing ~50 rules' literals
    one by one would scan the text a hundred times)."""
    auto = ahocorasick.Automaton()
    for r in rules():
        for n in r.required or ():
            if len(n) > _SHORT:
                auto.add_word(n, n)
    auto.make_automaton()
    return auto


def _present(required: frozenset[str], found: set[str], low: str) -> bool:
    return any(n in found if len(n) > _SHORT else n in low for n in required)


_Index = tuple[
    tuple[str, ...],
    dict[str, tuple[int, ...]],
    tuple[int, ...],
    tuple[tuple[int, re.Pattern[str]], ...],
]


@cache
def _index() -> _Index:
    """(the short required literals, literal -> rules needing it, rules that always run,
    (rule, precheck) for the rules with no literal but a precheck)."""
    by_needle: dict[str, list[int]] = {}
    always: list[int] = []
    checked: list[tuple[int, re.Pattern[str]]] = []
    for i, r in enumerate(rules()):
        if r.required is None:
            pc = precheck(r.pattern)
            if pc is None:
                always.append(i)
            else:
                checked.append((i, pc))
            continue
        for n in r.required:
            by_needle.setdefault(n, []).append(i)
    short = tuple(sorted(n for n in by_needle if len(n) <= _SHORT))
    return short, {n: tuple(v) for n, v in by_needle.items()}, tuple(always), tuple(checked)


def _candidates(text: str, low: str) -> list[Rule]:
    """The rules whose required literals `low` contains, whose precheck matches `text`,
    or that have neither, in order."""
    short, by_needle, always, checked = _index()
    found = {n for _, n in _automaton().iter(low)}
    found.update(n for n in short if n in low)
    picked = set(always)
    picked.update(i for i, pc in checked if pc.search(text))
    for n in found:
        picked.update(by_needle.get(n, ()))
    table = rules()
    return [table[i] for i in sorted(picked)]


def _anchor_starts(r: Rule, text: str, low: str) -> Iterator[int] | None:
    """The starts an anchored rule can match at, in order; None: scan every position.

    Generated from the literals' positions, each window once: a set of every start
    would cost up to `hi - lo + 1` integers per occurrence (tens of MB on a hostile
    MB of text)."""
    if r.anchor is None:
        return None
    lits, lo, hi = r.anchor
    hay = low if r.icase else text
    if len(hay) != len(text):  # lower-casing changed offsets (İ): scan everything
        return None
    found: list[int] = []
    find = hay.find
    for n in lits:
        p = find(n)
        while p >= 0:
            found.append(p)
            p = find(n, p + 1)
    found.sort()
    return _windows(found, lo, hi)


def _windows(found: list[int], lo: int, hi: int) -> Iterator[int]:
    done = 0  # every start below this was given
    for p in found:
        first = max(done, p - hi, 0)
        last = p - lo
        if first <= last:
            yield from range(first, last + 1)
            done = last + 1


def _matches(r: Rule, text: str, low: str) -> list[re.Match[str]]:
    """`finditer`'s matches, trying only the starts an anchor allows."""
    starts = _anchor_starts(r, text, low)
    rx = r.scanner
    if starts is None:
        return [m for m in rx.finditer(text) if not _is_skip(m)]
    out: list[re.Match[str]] = []
    floor = 0
    match = rx.match
    for s in starts:
        if s < floor:
            continue
        m = match(text, s)
        if m is not None:
            if not _is_skip(m):
                out.append(m)
            floor = m.end() if m.end() > s else s + 1
    return out


def rule_spans(r: Rule, text: str, low: str) -> list[tuple[int, int, str]]:
    """Every (start, end, label) rule `r` flags in `text` (`low`: `_fold(text)`)."""
    widen = _Widener(text).widen
    values = _Values(text) if r.kind == "assignment" else None
    spans: list[tuple[int, int, str]] = []
    for m in _matches(r, text, low):
        if r.kind == "assignment":
            span = _assignment_span(text, m, values)
        elif r.kind == "prose":
            span = _prose_span(m)
        else:
            span = _secret_span(m)
        if span is not None and span[0] < span[1]:
            spans.append((span[0], widen(span[1]), r.label))
    return spans


def find_spans(text: str) -> list[tuple[int, int, str]]:
    """Every (start, end, label) the extended rules flag in `text`, unsorted."""
    low = _fold(text)
    spans: list[tuple[int, int, str]] = []
    for r in _candidates(text, low):
        spans.extend(rule_spans(r, text, low))
    return spans


def _apply(text: str, spans: list[tuple[int, int, str]]) -> str:
    tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(text)]
    # Tokens never overlap, so they are sorted by start and by end alike: the ones a
    # span touches are found by bisection, not by a scan of all of them per span.
    ends = [te for _, te in tokens]
    merged: list[tuple[int, int, str]] = []
    for s, e, label in sorted(spans):
        i = bisect.bisect_right(ends, s)  # the first token ending after s
        # Inside an existing redaction token: already redacted.
        if i < len(tokens) and tokens[i][0] <= s and e <= tokens[i][1]:
            continue
        while i < len(tokens) and tokens[i][0] < e:  # overlapping: take the token whole
            ts, te = tokens[i]
            s, e = min(s, ts), max(e, te)
            i += 1
        if merged and s < merged[-1][1]:
            ps, pe, plabel = merged[-1]
            merged[-1] = (ps, max(pe, e), plabel)
            continue
        merged.append((s, e, label))
    if not merged:
        return text
    out: list[str] = []
    cursor = 0
    for s, e, label in merged:
        out.append(text[cursor:s])
        out.append(f"[REDACTED:{label}]")
        cursor = e
    out.append(text[cursor:])
    return "".join(out)


def redact_extended(text: str) -> str:
    """The reference's redaction, then every extended rule on its result."""
    text = redact(text)
    spans = find_spans(text)
    return _apply(text, spans) if spans else text
