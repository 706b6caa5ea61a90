"""The snippet's sliding window against a brute-force search of every window."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from cce_knowledge.retrieval.snippet import SNIPPET_LINES, Query, best_lines, clip, is_heading
from tests.helpers.redos import growth

WORDS = ["lock", "locked", "file", "token", "retry", "the", "a", "getUserName", "user", ""]
lines_st = st.lists(
    st.lists(st.sampled_from(WORDS), max_size=5).map(" ".join), min_size=0, max_size=25
)


def _cover(q: Query, texts: list[str]) -> int:
    terms: set[str] = set()
    for t in texts:
        terms |= q.line_terms(t)
    return sum(2 if " " in t else 1 for t in terms)


@given(lines_st, st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join))
def test_the_window_covers_as_much_of_the_query_as_any_window(lines: list[str], query: str) -> None:
    q = Query(query)
    content = "\n".join(lines)
    got = best_lines(content, 7, q)
    numbered = [(7 + i, t) for i, t in enumerate(content.split("\n")) if t.strip()]
    # Non-blank lines, consecutive among the non-blank ones, numbered from line 7.
    assert [(g.number, g.text) for g in got] in [
        numbered[j : j + SNIPPET_LINES] for j in range(max(1, len(numbered) - SNIPPET_LINES + 1))
    ]
    best = max(
        (_cover(q, [t for _, t in numbered[j : j + SNIPPET_LINES]]) for j in range(len(numbered))),
        default=0,
    )
    assert _cover(q, [g.text for g in got]) == best


mixed_st = st.lists(
    st.one_of(st.sampled_from([" lock ", " tokens ", " ", "x" * 40]), st.text(max_size=8)),
    max_size=60,
).map("".join)


@given(mixed_st, st.integers(min_value=1, max_value=300))
def test_clip_keeps_the_first_match_and_the_width(text: str, width: int) -> None:
    q = Query("lock token")
    spans = q.spans(text)
    cut, start, end = clip(text, spans, width)
    assert cut == text[start:end] and len(cut) == min(width, len(text))
    assume(spans)
    a, b = spans[0]
    if b - a <= width * 2 // 3:
        assert start <= a and b <= end


def test_identifier_sub_words_are_highlighted_whole() -> None:
    q = Query("user name")
    text = "call getUserName() then the user"
    assert [text[a:b] for a, b in q.spans(text)] == ["getUserName", "user"]


# Issue 35 §5: the window weighs the query's words by their corpus idf and skips
# headings. Lines mix headings, rules, blanks and words.
LINE_KINDS = st.one_of(
    st.lists(st.sampled_from(WORDS), max_size=5).map(" ".join),
    st.sampled_from(["# lock", "## token retry", "===", "---", "   ", "#lock file", "* * *"]),
)
IDF = st.dictionaries(st.sampled_from(["lock", "file", "token", "retri", "user"]), st.floats(0, 9))


def _weighted(q: Query, texts: list[str]) -> int:
    terms: set[str] = set()
    for t in texts:
        terms |= q.line_terms(t)
    return sum(q.weights[t] for t in terms)


@given(
    st.lists(LINE_KINDS, max_size=30),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
    IDF,
)
def test_the_window_is_section_lines_never_headings_and_weighs_most(
    lines: list[str], query: str, idf: dict[str, float]
) -> None:
    q = Query(query, idf)
    content = "\n".join(lines)
    got = [(g.number, g.text) for g in best_lines(content, 3, q)]
    numbered = [(3 + i, t) for i, t in enumerate(content.split("\n")) if t.strip()]
    body = [(n, t) for n, t in numbered if not is_heading(t)]
    pool = body or numbered
    # Consecutive among the section's content lines, with their own numbers and text.
    assert got in [
        pool[j : j + SNIPPET_LINES] for j in range(max(1, len(pool) - SNIPPET_LINES + 1))
    ]
    if body:
        assert all(t.strip() and not is_heading(t) for _, t in got)
    windows = [[t for _, t in pool[j : j + SNIPPET_LINES]] for j in range(len(pool))]
    best = max((_weighted(q, w) for w in windows), default=0)
    assert _weighted(q, [t for _, t in got]) == best
    # Deterministic: the same answer again, and from the same idf built in another order.
    again = Query(query, dict(reversed(list(idf.items()))))
    assert [(g.number, g.text) for g in best_lines(content, 3, again)] == got


def test_a_rare_word_beats_more_common_ones() -> None:
    text = "negative elapsed time after an NTP change"
    content = "# Elapsed time\n\nnegative elapsed time change\nfiller\nthe ntp jump"
    common = Query(text)
    idf = dict.fromkeys(common.terms, 0.1) | {"ntp": 3.0}
    assert [ln.text for ln in best_lines(content, 1, Query(text, idf), size=1)] == ["the ntp jump"]
    # Without corpus idf every word weighs the same: the line with most of them wins.
    assert [ln.text for ln in best_lines(content, 1, common, size=1)] == [
        "negative elapsed time change"
    ]


def test_choosing_the_lines_is_linear_in_the_section() -> None:
    def build(n: int) -> str:
        # Every line matches several query words: the most work per line.
        return "\n".join(
            ("## lock token" if i % 7 == 0 else "lock token retry file user")
            for i in range(n // 25)
        )

    q = Query("lock token retry file user", {"lock": 1.0, "token": 2.0})
    ratio, times = growth(
        lambda text: best_lines(text, 1, q), build, sizes=(50_000, 200_000, 800_000)
    )  # type: ignore[arg-type]
    assert ratio < 8, times  # 4x the input: ~4x the time when linear, ~16x when quadratic
