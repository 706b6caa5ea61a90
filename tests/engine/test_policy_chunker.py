"""The policy chunker (issue 24): each step on documents shaped like real ones, and the
invariants (verbatim slices, no overlap, full coverage) under hypothesis."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cce_knowledge.contract.chunk_policy import Policy, heading_key
from cce_knowledge.core.rustcompat import RUST_WS_CHARS
from cce_knowledge.engine.markdown import MdChunk, chunk_id, chunk_markdown
from cce_knowledge.engine.policy_chunker import (
    SKIP_EMPTY,
    SKIP_FRONTMATTER,
    SKIP_SECTION,
    PolicyResult,
    chunk_with_policy,
    normalise,
    split_lines,
)

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "policy_docs"
DISCUSSION = {
    "Discussion Map": "own-chunk",
    "Summary": "own-chunk",
    "Appendix": "merge-up",
    "Changelog": "skip",
}


def policy(special: dict[str, str] | None = None, **kw: int | bool) -> Policy:
    sp = tuple((heading_key(k), v) for k, v in (special or {}).items())
    return Policy(special_sections=sp, **kw)  # type: ignore[arg-type]


def doc(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def check_invariants(text: str, r: PolicyResult, path: str = "p") -> None:
    """Every chunk is the trimmed slice of its lines; chunks and skipped ranges are
    disjoint, in order, and cover every line of the normalised document."""
    lines = split_lines(normalise(text))
    covered: list[tuple[int, int]] = []
    for c in r.chunks:
        assert 1 <= c.start_line <= c.end_line <= len(lines)
        joined = "\n".join(lines[c.start_line - 1 : c.end_line])
        assert joined.rstrip(RUST_WS_CHARS) == c.content
        assert c.content and c.content.count("\n") == c.end_line - c.start_line
        assert c.raw == c.content.encode("utf-8")
        assert c.token_count == max(1, len(c.raw) // 4)
        assert c.chunk_id == chunk_id(path, c.start_line, c.end_line, c.raw)
        covered.append((c.start_line, c.end_line))
    covered += [(a, b) for a, b, _ in r.skipped]
    covered.sort()
    at = 1
    for a, b in covered:
        assert a == at, (a, at, covered)
        assert b >= a
        at = b + 1
    assert at == len(lines) + 1
    starts = [c.start_line for c in r.chunks]
    assert starts == sorted(starts)


def spans(chunks: list[MdChunk]) -> list[tuple[int, int, str]]:
    return [(c.start_line, c.end_line, c.kind) for c in chunks]


# ---------------------------------------------------------------- real-shaped documents


def test_discussion_map_and_summary_are_their_own_chunks() -> None:
    text = doc("discussion.md")
    r = chunk_with_policy("disc/1", text, policy(DISCUSSION))
    check_invariants(text, r, "disc/1")
    title = "Discussion: session storage for the auth service"
    assert [c.kind for c in r.chunks] == [
        title,
        "Discussion Map",
        "Context",
        "Option A: Redis",
        "Option B: signed cookies",
        "Summary",
    ]
    dmap = r.chunks[1]
    assert dmap.content.startswith("## Discussion Map\n\n- Problem")
    assert dmap.name == f"# {title} \u203a ## Discussion Map"
    # The H3 under Context stays inside it (the section is far below max_lines).
    assert "### Constraints" in r.chunks[2].content
    # Appendix merges up into the Summary chunk (its line range grows), and the
    # Changelog is dropped.
    summary = r.chunks[-1]
    assert summary.content.startswith("## Summary\n")
    assert summary.content.endswith("Redis GET 0.4 ms in the same zone.")
    assert not any("2026-03-02" in c.content for c in r.chunks)
    assert [s for s in r.skipped if s[2] == SKIP_SECTION] == [(46, 49, SKIP_SECTION)]


def test_specification_dominant_h2_falls_back_to_h3_once() -> None:
    text = doc("specification.md")
    r = chunk_with_policy("spec/1", text, policy(DISCUSSION))
    check_invariants(text, r, "spec/1")
    assert [c.kind for c in r.chunks] == [
        "Spec: export API v2",
        "Scope",
        "Endpoints",
        "Create a job",
        "Poll a job",
        "Download",
        "Cancel",
        "Errors",
    ]
    endpoints = r.chunks[2]
    assert endpoints.content == (
        "## Endpoints\n\nAll endpoints live under `/v2/export` and need the `export:read` scope."
    )
    create = r.chunks[3]
    assert create.name == "# Spec: export API v2 \u203a ## Endpoints \u203a ### Create a job"
    # The reference chunker at its default budget cuts the same document differently.
    ref = chunk_markdown("spec/1", text, 400)
    assert spans(ref) != spans(r.chunks)


def test_research_note_oversized_h3_stays_whole() -> None:
    text = doc("research.md")
    r = chunk_with_policy("res/1", text, policy(DISCUSSION))
    check_invariants(text, r, "res/1")
    raw = next(c for c in r.chunks if c.kind == "Raw measurements")
    # 102 lines, over max_lines (80), but the fallback never splits again.
    assert raw.end_line - raw.start_line + 1 == 102
    assert raw.content.count("| query") == 100
    findings = next(c for c in r.chunks if c.kind == "Findings")
    assert findings.content.endswith("hurts on paths.")


def test_short_spec_under_the_gate_is_one_chunk() -> None:
    text = doc("short-spec.md")
    r = chunk_with_policy("spec/2", text, policy(DISCUSSION))
    check_invariants(text, r, "spec/2")
    assert len(r.chunks) == 1 and r.skipped == []
    (c,) = r.chunks
    # The gate keeps the whole note, its skip section included.
    assert c.content == text.rstrip("\n")
    assert (c.kind, c.name) == ("Spec: rate limit headers", "# Spec: rate limit headers")
    # Nine lines are not fewer than 9: the steps run (the heading-only title is empty,
    # the Changelog skipped).
    r2 = chunk_with_policy("spec/2", text, policy(DISCUSSION, keep_whole_below=9))
    assert [c.kind for c in r2.chunks] == ["Summary"]


def test_fenced_hash_lines_are_not_headings() -> None:
    body = (
        "# Runbook\n\nIntro.\n\n## Deploy\n\n```sh\n## not a heading\n# nor this\n```\n\n"
        "~~~\n## Changelog\n~~~\n\n    ## indented code\n\n## Rollback\n\nUndo.\n"
    )
    r = chunk_with_policy("rb", body, policy(DISCUSSION, keep_whole_below=0))
    check_invariants(body, r, "rb")
    assert [c.kind for c in r.chunks] == ["Runbook", "Deploy", "Rollback"]
    deploy = r.chunks[1]
    assert "## not a heading" in deploy.content and "~~~\n## Changelog\n~~~" in deploy.content
    assert r.skipped == [(4, 4, "blank"), (17, 17, "blank")]


def test_crlf_chunks_like_lf() -> None:
    lf = doc("discussion.md")
    crlf = lf.replace("\n", "\r\n")
    a = chunk_with_policy("d", lf, policy(DISCUSSION))
    b = chunk_with_policy("d", crlf, policy(DISCUSSION))
    check_invariants(crlf, b, "d")
    assert [
        (c.chunk_id, c.start_line, c.end_line, c.kind, c.name, c.content) for c in a.chunks
    ] == [(c.chunk_id, c.start_line, c.end_line, c.kind, c.name, c.content) for c in b.chunks]
    assert a.skipped == b.skipped
    assert not any("\r" in c.content for c in b.chunks)


def test_merge_up_across_odd_separators_extends_the_line_range() -> None:
    text = (
        "# Notes\n\nFrom the load test.\n\n## Findings\n\nThe cache misses.   \n\n\n\n"
        "## Appendix\nraw numbers\n***\n## Appendix\n\t\nmore numbers\n\n## Next\n\nship it\n"
    )
    sp = {"Appendix": "merge-up"}
    r = chunk_with_policy("n", text, policy(sp, keep_whole_below=0))
    check_invariants(text, r, "n")
    assert [c.kind for c in r.chunks] == ["Notes", "Findings", "Next"]
    findings = r.chunks[1]
    # Trailing spaces, three blank lines, a thematic break and a tab-only line all stay:
    # the content is the slice, never a "\n\n" join.
    assert findings.content == (
        "## Findings\n\nThe cache misses.   \n\n\n\n## Appendix\nraw numbers\n***\n"
        "## Appendix\n\t\nmore numbers"
    )
    assert (findings.start_line, findings.end_line) == (5, 16)


def test_merge_up_first_section_or_after_a_skip_is_promoted() -> None:
    text = "## Appendix\n\nalone first\n\n## Body\n\ntext\n\n## Changelog\n\n- x\n\n## Appendix\n\nafter skip\n"
    sp = {"Appendix": "merge-up", "Changelog": "skip"}
    r = chunk_with_policy("m", text, policy(sp, keep_whole_below=0))
    check_invariants(text, r, "m")
    assert spans(r.chunks) == [(1, 3, "Appendix"), (5, 7, "Body"), (13, 15, "Appendix")]
    assert r.chunks[0].name == "## Appendix"


def test_sub_level_special_is_carved_out_of_its_parent() -> None:
    text = (
        "# Design\n\nIntro.\n\n## Options\n\nWe looked at three.\n\n### Discussion Map\n\n"
        "- a -> b\n\n### Changelog\n\n- old\n\n### Option C\n\nc text\n"
    )
    r = chunk_with_policy("s", text, policy(DISCUSSION, keep_whole_below=0))
    check_invariants(text, r, "s")
    assert spans(r.chunks) == [
        (1, 3, "Design"),
        (5, 7, "Options"),
        (9, 11, "Discussion Map"),
        (17, 19, "Option C"),
    ]
    assert r.chunks[2].name == "# Design \u203a ## Options \u203a ### Discussion Map"
    assert (13, 16, SKIP_SECTION) in r.skipped


def test_parent_special_wins_over_its_sub_sections() -> None:
    text = (
        "# Decision\n\nContext.\n\n## Summary\n\nWe ship.\n\n### Changelog\n\n- kept: the parent is own-chunk\n\n"
        "## Changelog\n\n- dropped\n\n### Summary\n\ndropped with its parent\n\n## Risks\n\nfew\n"
    )
    r = chunk_with_policy("p", text, policy(DISCUSSION, keep_whole_below=0))
    check_invariants(text, r, "p")
    assert [c.kind for c in r.chunks] == ["Decision", "Summary", "Risks"]
    assert "- kept: the parent is own-chunk" in r.chunks[1].content
    assert not any("dropped" in c.content for c in r.chunks)
    # own-chunk is never size-split, even over max_lines.
    r2 = chunk_with_policy("p", text, policy(DISCUSSION, keep_whole_below=0, max_lines=2))
    assert "### Changelog" in next(c for c in r2.chunks if c.kind == "Summary").content


def test_skip_empty_sections_drops_heading_only_sections() -> None:
    text = "# T\n\nintro\n\n## Empty\n\n\nSetext\n------\nunder it\n\n## Full\n\nbody\n"
    on = chunk_with_policy("e", text, policy(keep_whole_below=0))
    check_invariants(text, on, "e")
    assert [c.kind for c in on.chunks] == ["T", "Setext", "Full"]
    assert (5, 7, SKIP_EMPTY) in on.skipped
    off = chunk_with_policy("e", text, policy(keep_whole_below=0, skip_empty_sections=False))
    assert [c.kind for c in off.chunks] == ["T", "Empty", "Setext", "Full"]


def test_setext_headings_split_too() -> None:
    text = "Title\n=====\n\nintro\n\nFirst\n-----\n\none\n\nSecond\n------\n\ntwo\n"
    r = chunk_with_policy("x", text, policy(keep_whole_below=0))
    check_invariants(text, r, "x")
    assert spans(r.chunks) == [(1, 4, "Title"), (6, 9, "First"), (11, 14, "Second")]
    assert r.chunks[1].name == "# Title \u203a ## First"


def test_frontmatter_is_dropped_at_the_top_of_the_body() -> None:
    text = (
        "# ADR 7\n\n---\nstatus: accepted\ntags: [a, b]\n---\n\nWe decided.\n\n## Why\n\nBecause.\n"
    )
    r = chunk_with_policy("f", text, policy(keep_whole_below=0))
    check_invariants(text, r, "f")
    assert (3, 6, SKIP_FRONTMATTER) in r.skipped
    assert spans(r.chunks) == [(1, 1, "ADR 7"), (8, 8, "ADR 7"), (10, 12, "Why")]
    # Under the gate too, and at the top of a plain document.
    plain = "---\ntitle: x\n...\n# Doc\n\ntext\n"
    r2 = chunk_with_policy("g", plain, policy())
    check_invariants(plain, r2, "g")
    assert r2.skipped == [(1, 3, SKIP_FRONTMATTER)]
    assert spans(r2.chunks) == [(4, 6, "Doc")]


def test_a_thematic_break_is_not_frontmatter() -> None:
    text = "# T\n\n---\n\nA paragraph, not YAML.\n\n---\n\n## S\n\nx\n"
    r = chunk_with_policy("t", text, policy(keep_whole_below=0))
    check_invariants(text, r, "t")
    assert not [s for s in r.skipped if s[2] == SKIP_FRONTMATTER]
    assert r.chunks[0].content.startswith("# T\n\n---\n\nA paragraph")


def test_headings_in_containers_do_not_split() -> None:
    text = "# T\n\n- ## in a list\n\n> ## quoted\n\n## Real\n\nx\n"
    r = chunk_with_policy("c", text, policy(keep_whole_below=0))
    check_invariants(text, r, "c")
    assert [c.kind for c in r.chunks] == ["T", "Real"]


# ---------------------------------------------------------------- properties

_LINES = st.sampled_from(
    [
        "",
        "text",
        "  indented text  ",
        "# H1",
        "## Summary",
        "## Changelog",
        "### Appendix",
        "#### Discussion Map",
        "## Body",
        "### Deep",
        "###### Six",
        "##",
        "---",
        "===",
        "```",
        "~~~",
        "    ## code",
        "- ## listed",
        "> ## quoted",
        "key: value",
        "...",
        "\t",
        "\u3000",
        "tail \r",
        "caf\u00e9 \u2028 x",
    ]
)
_SPECIAL = st.dictionaries(
    st.sampled_from(["Summary", "Changelog", "Appendix", "Discussion Map", "Body", "H1", "Deep"]),
    st.sampled_from(["own-chunk", "skip", "merge-up"]),
    max_size=5,
)


@st.composite
def policies(draw: st.DrawFn) -> Policy:
    primary = draw(st.integers(1, 5))
    return policy(
        draw(_SPECIAL),
        keep_whole_below=draw(st.integers(0, 12)),
        primary_level=primary,
        fallback_level=draw(st.integers(primary + 1, 6)),
        max_lines=draw(st.integers(1, 30)),
        skip_empty_sections=draw(st.booleans()),
    )


@st.composite
def documents(draw: st.DrawFn) -> str:
    lines = draw(st.lists(_LINES, max_size=60))
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    text = eol.join(lines) + draw(st.sampled_from(["", "\n", "\n\n"]))
    if draw(st.booleans()):
        text = "# " + draw(st.sampled_from(["Title", "Summary", ""])) + "\n\n" + text
    return text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(), policies())
def test_any_markdown_any_policy_gives_verbatim_disjoint_covering_chunks(
    text: str, p: Policy
) -> None:
    r = chunk_with_policy("doc/1", text, p)
    check_invariants(text, r, "doc/1")


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300), policies())
def test_arbitrary_text_keeps_the_invariants(text: str, p: Policy) -> None:
    r = chunk_with_policy("doc/2", text, p)
    check_invariants(text, r, "doc/2")


@settings(max_examples=100, deadline=None)
@given(documents(), policies())
def test_crlf_never_changes_the_cut(text: str, p: Policy) -> None:
    lf = normalise(text)
    a = chunk_with_policy("d", lf, p)
    b = chunk_with_policy("d", lf.replace("\n", "\r\n"), p)
    assert [(c.chunk_id, c.kind, c.name) for c in a.chunks] == [
        (c.chunk_id, c.kind, c.name) for c in b.chunks
    ]
