"""The snippet's sliding window against a brute-force search of every window."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from cce_knowledge.retrieval.snippet import SNIPPET_LINES, Query, best_lines, clip

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
