"""The redaction gate and the rule prefilters only skip work: shown text is byte-identical
to what the full redactor gives, for every input, and plain record ids are shown without
loading the redactor at all."""

from __future__ import annotations

import re
import subprocess
import sys
from re import _parser as sre_parse  # type: ignore[attr-defined]

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cce_knowledge.engine.redaction import extended as X
from cce_knowledge.engine.redaction.gate import (
    EXACT_NEEDLES,
    FOLDED_NEEDLES,
    PRECHECKS,
    fold,
    may_redact,
    precheck,
)
from cce_knowledge.engine.redaction.modes import DISPLAY_MAX, DISPLAY_SCAN, redact_for_display
from cce_knowledge.engine.redaction.reference import SPECIFIC, redact
from tests.engine.test_extended_redactor import ISSUE_SHAPES
from tests.engine.test_redactor import CASES


def test_the_needles_are_the_ones_the_rules_give() -> None:
    exact, folded, bare = X.gate_needles()
    assert (exact, folded) == (EXACT_NEEDLES, FOLDED_NEEDLES), (
        f"a rule changed: set redaction_gate.EXACT_NEEDLES = {exact!r} "
        f"and FOLDED_NEEDLES = {folded!r}"
    )
    # Every rule with no literal has a precheck (a rule without one would run always,
    # and the gate could not answer for it)...
    assert bare == tuple(sorted(PRECHECKS)), bare
    # ...and the shortest match stated for it is the rule's.
    for pattern, (_, shortest) in PRECHECKS.items():
        assert sre_parse.parse(pattern).getwidth()[0] == shortest


def test_the_bot_token_rules_are_the_ones_with_prechecks() -> None:
    names = {r.name for r in X.rules() if precheck(r.pattern) is not None}
    assert names == {"TelegramBotTokenDetector", "DiscordBotTokenDetector"}
    assert all(r.required is not None or precheck(r.pattern) for r in X.rules())


# ---------------------------------------------------------------- generated text

ALL_PATTERNS = [r.regex for r in X.rules()] + [p for p, _ in SPECIFIC]
NEEDLES = sorted(
    {v for n in (*EXACT_NEEDLES, *FOLDED_NEEDLES) for v in (n, n.upper(), n.lower(), n.title())}
)
FIXTURES = [*ISSUE_SHAPES.values(), *(src for src, _ in CASES)]
# Characters str.lower() and re's IGNORECASE treat specially, and token characters.
ODD = st.sampled_from(["\u0130", "\u0131", "\u017f", "\u212a", "İ", "ß", "0", "9", "_", "-"])
SEP = st.sampled_from(["", " ", "\n", "=", ": ", '"', "'", "/", ".", ":", "@", "_", "-"])


@st.composite
def pieces(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(st.text(max_size=24))
    if kind == 1:
        return draw(st.sampled_from(NEEDLES))
    if kind == 2:
        return draw(st.sampled_from(FIXTURES))
    if kind == 3:
        return draw(st.from_regex(draw(st.sampled_from(ALL_PATTERNS)), fullmatch=True))
    if kind == 4:
        return draw(st.text(ODD, max_size=12))
    return draw(st.text("0123456789", min_size=8, max_size=10))


TEXTS = st.lists(st.tuples(pieces(), SEP), max_size=6).map(
    lambda parts: "".join(p + s for p, s in parts)
)
_SETTINGS = settings(
    max_examples=600,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _all_rules_spans(text: str) -> list[tuple[int, int, str]]:
    """find_spans with no prefilter, anchor or precheck: every rule's plain finditer."""
    spans: list[tuple[int, int, str]] = []
    for r in X.rules():
        for m in r.regex.finditer(text):
            if r.kind == "assignment":
                span = X._assignment_span(text, m)
            elif r.kind == "prose":
                span = X._prose_span(m)
            else:
                span = X._secret_span(m)
            if span is not None and span[0] < span[1]:
                spans.append((span[0], X._widen(text, span[1]), r.label))
    return spans


@_SETTINGS
@given(TEXTS)
def test_display_is_the_full_redactor(text: str) -> None:
    full = redact_extended_all_rules(text)
    if len(text) <= DISPLAY_MAX:
        assert redact_for_display(text) == full
    else:
        # Six pieces can outgrow the display (three private-key fixtures do): what shows
        # is then the full redactor's output of the scanned window, up to the cut.
        shown, note = redact_for_display(text).rsplit("…[cut: ", 1)
        assert note == f"{len(text)} characters in all]"
        assert len(shown) <= DISPLAY_MAX
        assert redact_extended_all_rules(text[:DISPLAY_SCAN]).startswith(shown)
    if not may_redact(text):
        # The gate's promise: nothing for either redactor to change.
        assert full == text
        assert redact(text) == text
        assert not any(p.search(text) for p in ALL_PATTERNS)


def redact_extended_all_rules(text: str) -> str:
    ref = redact(text)
    spans = _all_rules_spans(ref)
    return X._apply(ref, spans) if spans else ref


@_SETTINGS
@given(TEXTS)
def test_prefilters_and_prechecks_find_every_span(text: str) -> None:
    assert X.find_spans(text) == _all_rules_spans(text)
    assert X.redact_extended(text) == redact_extended_all_rules(text)


BARE = [r for r in X.rules() if r.required is None]


@_SETTINGS
@given(data=st.data(), before=st.text(max_size=40), after=st.text(max_size=40))
def test_a_precheck_matches_wherever_its_rule_does(
    data: st.DataObject, before: str, after: str
) -> None:
    rule = data.draw(st.sampled_from(BARE))
    planted = data.draw(st.from_regex(rule.regex, fullmatch=True))
    pc = precheck(rule.pattern)
    assert pc is not None
    text = before + planted + after
    assert pc.search(text) is not None
    assert may_redact(text)
    assert X.find_spans(text) == _all_rules_spans(text)


# The bot tokens' shapes with every run a little shorter or longer than the rule says.
_TOK = "aZ_-9\u0660"


def _run(lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.text(_TOK, min_size=lo, max_size=hi)


NEAR = st.one_of(
    st.tuples(st.text("0123456789\u0660", min_size=6, max_size=11), st.just(":"), _run(33, 37)),
    st.tuples(
        st.sampled_from(["M", "N", "O", "a", ""]),
        _run(21, 27),
        st.sampled_from([".", ":"]),
        _run(5, 7),
        st.just("."),
        _run(25, 29),
    ),
).map(lambda t: "x " + "".join(t) + " y")


@given(NEAR)
@settings(max_examples=1000, deadline=None)
def test_a_precheck_never_misses_on_near_miss_text(text: str) -> None:
    for rule in BARE:
        pc = precheck(rule.pattern)
        assert pc is not None
        if rule.regex.search(text):
            assert pc.search(text)


def test_fold_keeps_offsets_and_lowercases_what_ignorecase_matches() -> None:
    for s in ("PR\u0130VATE", "pr\u0131vate", "\u017fecret", "\u212aEY", "ABC"):
        low = fold(s)
        assert len(low) == len(s)
        assert all(
            re.fullmatch(re.escape(a), b, re.IGNORECASE) for a, b in zip(low, s, strict=True)
        )


def test_shown_ids_keep_redaction() -> None:
    # A secret-shaped id still goes through every rule.
    tok = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwx"
    assert redact_for_display(f"tickets/{tok}") == "tickets/[REDACTED:GITHUB_TOKEN]"
    bot = "123456789:" + "AAH" + "x" * 32
    assert redact_for_display(f"chat {bot}") == "chat [REDACTED:TELEGRAM_BOT_TOKEN]"


def test_plain_ids_are_shown_without_loading_the_redactor() -> None:
    code = (
        "import sys\n"
        "from cce_knowledge.engine.redaction.modes import DISPLAY_MAX, DISPLAY_SCAN, redact_for_display\n"
        "ids = ['rfc:0114', 'rfc:3392/ja', 'tickets/2', 'ADR-0007', 'issue#1234']\n"
        "assert [redact_for_display(i) for i in ids] == ids\n"
        "print('cce_knowledge.engine.redaction.extended' in sys.modules,"
        " 'cce_knowledge.engine.redaction.reference' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
