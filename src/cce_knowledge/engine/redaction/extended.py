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

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from re import _constants as sre_c  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import ahocorasick

from cce_knowledge.engine.redaction import reference as redactor
from cce_knowledge.engine.redaction.gate import fold as _fold
from cce_knowledge.engine.redaction.gate import precheck
from cce_knowledge.engine.redaction.reference import is_placeholder, redact, scan_value

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
        # Compiled on first use: most texts (and most cold processes) never need most rules.
        return _compiled(self.pattern, self.flags)


@cache
def _compiled(pattern: str, flags: int) -> re.Pattern[str]:
    return re.compile(pattern, flags)


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
    (
        "pem-private-key-unterminated",
        "PRIVATE_KEY",
        # The BEGIN line, then the lines a PEM body is made of: headers, base64 (never
        # a space) and the blank line before base64. Prose after the key survives.
        r"-----BEGIN[ A-Z0-9_-]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:(?:\r?\n|\\r?\\n)(?:[A-Za-z][A-Za-z0-9-]*: [^\n]*"
        r"|[A-Za-z0-9+/=]{4,}(?=\r?\n|\\r?\\n|$)"
        r"|(?=(?:\r?\n|\\r?\\n)[A-Za-z0-9+/=]{16,})))*",
        0,
    ),
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


def _secret_span(m: re.Match[str]) -> tuple[int, int]:
    if m.re.groups and m.start(1) >= 0:
        s, e = m.start(1), m.end(1)
    else:
        s, e = m.start(), m.end()
        text = m.string
        while s < e and text[s] in _EDGE:
            s += 1
        while e > s and text[e - 1] in _EDGE:
            e -= 1
    return s, e


def _widen(text: str, e: int) -> int:
    if 0 < e < len(text) and text[e - 1] in _TOKEN_CHARS:
        while e < len(text) and text[e] in _TOKEN_CHARS:
            e += 1
    return e


def _assignment_span(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    scanned = scan_value(text, m.end())
    if scanned is None:
        return None
    end, inner, quoted, closed = scanned
    if len(inner.encode("utf-8")) < 8 or is_placeholder(inner):
        return None
    return m.end() + (1 if quoted else 0), end - (1 if quoted and closed else 0)


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


def _anchor_starts(r: Rule, text: str, low: str) -> list[int] | None:
    """The starts an anchored rule can match at; None: scan every position."""
    if r.anchor is None:
        return None
    lits, lo, hi = r.anchor
    hay = low if r.icase else text
    if len(hay) != len(text):  # lower-casing changed offsets (İ): scan everything
        return None
    starts: set[int] = set()
    find = hay.find
    for n in lits:
        p = find(n)
        while p >= 0:
            starts.update(range(max(0, p - hi), p - lo + 1))
            p = find(n, p + 1)
    return sorted(starts)


def _matches(r: Rule, text: str, low: str) -> list[re.Match[str]]:
    """`finditer`'s matches, trying only the starts an anchor allows."""
    starts = _anchor_starts(r, text, low)
    if starts is None:
        return list(r.regex.finditer(text))
    out: list[re.Match[str]] = []
    floor = 0
    match = r.regex.match
    for s in starts:
        if s < floor:
            continue
        m = match(text, s)
        if m is not None:
            out.append(m)
            floor = m.end() if m.end() > s else s + 1
    return out


def find_spans(text: str) -> list[tuple[int, int, str]]:
    """Every (start, end, label) the extended rules flag in `text`, unsorted."""
    low = _fold(text)
    spans: list[tuple[int, int, str]] = []
    for r in _candidates(text, low):
        for m in _matches(r, text, low):
            if r.kind == "assignment":
                span = _assignment_span(text, m)
            elif r.kind == "prose":
                span = _prose_span(m)
            else:
                span = _secret_span(m)
            if span is not None and span[0] < span[1]:
                spans.append((span[0], _widen(text, span[1]), r.label))
    return spans


def _apply(text: str, spans: list[tuple[int, int, str]]) -> str:
    tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(text)]
    merged: list[tuple[int, int, str]] = []
    for s, e, label in sorted(spans):
        # Inside an existing redaction token: already redacted.
        if any(ts <= s and e <= te for ts, te in tokens):
            continue
        for ts, te in tokens:  # overlapping one: take the token in whole
            if ts < e and s < te:
                s, e = min(s, ts), max(e, te)
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
