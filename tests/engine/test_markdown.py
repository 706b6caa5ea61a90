"""Markdown heading chunker (docs/spec/core.md §4): goldens, unit pins, properties."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cce_knowledge.core.rustcompat import RUST_WS_CHARS
from cce_knowledge.engine.markdown import (
    CRUMB_SEP,
    MdChunk,
    canonical_lines,
    chunk_id,
    chunk_markdown,
    nesting_estimate,
)
from tests.helpers.paths import TESTS

VECTORS = TESTS / "vectors" / "markdown"


@pytest.mark.parametrize(
    ("name", "budget", "count", "sha"),
    [
        (
            "code_fence.md",
            400,
            1,
            "14a94ff03573a0567a582c0d875acbe30bcfc0a3e3fa840f72324cd37660371a",
        ),
        ("preamble.md", 400, 2, "5a31d985af312ffc7a3b68be79f78fb44af69e4c4e4c387d915c00328c1ae164"),
        ("nested.md", 400, 1, "ecff4f0927d76ff770578c9399fb8fc631d018a69efd572bbc898645b8069598"),
        ("oversized.md", 30, 3, "fa864f7e1af325c13174f876ee7a1f5197a8663464fa7d8dcf8895a5677ccdb5"),
    ],
)
def test_golden_checksums(name: str, budget: int, count: int, sha: str) -> None:
    text = (VECTORS / name).read_text(encoding="utf-8")
    chunks = chunk_markdown(name, text, budget)
    assert len(chunks) == count
    assert hashlib.sha256(canonical_lines(chunks).encode()).hexdigest() == sha


def test_oversized_breadcrumbs() -> None:
    text = (VECTORS / "oversized.md").read_text(encoding="utf-8")
    names = [c.name for c in chunk_markdown("oversized.md", text, 30)]
    assert names[1:] == [f"# Guide{CRUMB_SEP}## Alpha", f"# Guide{CRUMB_SEP}## Beta"]
    assert CRUMB_SEP.encode() == b" \xe2\x80\xba "


def kinds(text: str, budget: int = 400) -> list[str]:
    return [c.kind for c in chunk_markdown("p", text, budget)]


def spans(text: str, budget: int = 400) -> list[tuple[int, int]]:
    return [(c.start_line, c.end_line) for c in chunk_markdown("p", text, budget)]


def test_heading_interrupts_paragraph() -> None:
    cs = chunk_markdown("p", "para\n# Tail", 400)
    assert [(c.kind, c.start_line, c.end_line) for c in cs] == [
        ("(preamble)", 1, 1),
        ("Tail", 2, 2),
    ]


def test_trailing_blank_lines_do_not_count() -> None:
    cs = chunk_markdown("p", "# A\n\nline\n\n\n# B\nmore", 1)
    assert (cs[0].kind, cs[0].start_line, cs[0].end_line) == ("A", 1, 3)
    assert cs[0].content == "# A\n\nline"


def test_setext_kinds_and_levels() -> None:
    cs = chunk_markdown("p", "Title\n=====\n\nintro\n\nSub\n---\n\nbody\n", 1)
    assert [c.kind for c in cs] == ["Title", "Sub"]
    assert cs[1].name == f"# Title{CRUMB_SEP}## Sub"


def test_multiline_setext_keeps_newline() -> None:
    assert kinds("Foo\nbar\n===\n") == ["Foo\nbar"]


def test_atx_closing_sequence_stays_in_kind() -> None:
    assert kinds("# Title #\n") == ["Title #"]


def test_empty_atx_heading() -> None:
    cs = chunk_markdown("p", "# \n\nbody", 400)
    assert (cs[0].kind, cs[0].name) == ("", "# ")


def test_not_headings() -> None:
    assert kinds("#hashtag\n") == ["(preamble)"]
    assert kinds("```\n# not\n```\n") == ["(preamble)"]
    assert kinds("~~~\n# not\n~~~\n") == ["(preamble)"]
    assert kinds("    # indented code\n") == ["(preamble)"]
    assert kinds("<!--\n# hidden\n-->\n") == ["(preamble)"]


def test_atx_start_includes_indent() -> None:
    cs = chunk_markdown("p", "   ## Two\nx", 400)
    assert cs[0].content.startswith("   ## Two")


def test_skipped_level_keeps_real_marker_and_mixed_siblings() -> None:
    body = "x " * 40
    text = f"# T\n\n{body}\n\n### a\n\n{body}\n\n## b\n\n{body}\n"
    cs = chunk_markdown("p", text, 20)
    assert [c.name for c in cs] == ["# T", f"# T{CRUMB_SEP}### a", f"# T{CRUMB_SEP}## b"]


def test_headings_in_containers_are_flattened() -> None:
    cs = chunk_markdown("p", "- # In list\n\n> ## quoted", 1)
    assert [(c.kind, c.content) for c in cs] == [
        ("(preamble)", "-"),
        ("In list", "# In list\n\n>"),
        ("quoted", "## quoted"),
    ]
    assert cs[2].name == f"# In list{CRUMB_SEP}## quoted"


def test_fitting_parent_swallows_children() -> None:
    cs = chunk_markdown("p", "# A\n\n## B\n\ntext\n\n## C\n", 400)
    assert len(cs) == 1 and cs[0].name == "# A"


def test_section_without_children_is_never_split() -> None:
    big = "# Big\n\n" + "word " * 2000
    cs = chunk_markdown("p", big, 10)
    assert len(cs) == 1 and cs[0].token_count > 10


def test_crlf_is_kept() -> None:
    cs = chunk_markdown("p", "# A\r\n\r\nbody\r\n", 400)
    assert cs[0].content == "# A\r\n\r\nbody"
    assert (cs[0].start_line, cs[0].end_line) == (1, 3)


def test_blank_documents_give_nothing() -> None:
    assert chunk_markdown("p", "", 400) == []
    assert chunk_markdown("p", " \n\t\n\u3000", 400) == []


def test_trim_end_is_rust_whitespace() -> None:
    # U+001C is not White_Space in Rust: it stays in the content.
    cs = chunk_markdown("p", "# A\n\nx\x1c", 400)
    assert cs[0].content.endswith("x\x1c")
    cs = chunk_markdown("p", "# A\n\nx\u3000\u2029\n", 400)
    assert cs[0].content.endswith("x")


def test_chunk_id_uses_first_100_bytes_even_mid_character() -> None:
    content = "# " + "é" * 80
    raw = content.encode()
    want = hashlib.sha256(b"p:1:1:" + raw[:100]).hexdigest()[:16]
    assert chunk_id("p", 1, 1, raw) == want
    assert chunk_markdown("p", content, 400)[0].chunk_id == want


def test_token_count_is_bytes_over_four() -> None:
    cs = chunk_markdown("p", "# 你好世界", 400)
    assert cs[0].token_count == len("# 你好世界".encode()) // 4


def test_nesting_guard() -> None:
    deep = ">" * 255 + " deep\n# H\n"
    assert nesting_estimate(deep) > 192
    cs = chunk_markdown("p", deep, 400)
    assert [(c.kind, c.name) for c in cs] == [("(preamble)", "(preamble)")]
    assert cs[0].content == deep.rstrip("\n")
    nested = "".join("> " * i + "x\n" for i in range(1, 101)) + "# After\n"
    assert nesting_estimate(nested) <= 192
    assert "After" in kinds(nested)
    assert nesting_estimate("") == 0
    assert nesting_estimate("\t\t- 1.") == 1 + (4 + 4 + 1 + 1 + 1 + 1) // 2


def test_nesting_guard_blank_fallback() -> None:
    assert chunk_markdown("p", ">" * 400, 400)[0].kind == "(preamble)"


# ---------------------------------------------------------------- properties

_LINE = st.one_of(
    st.sampled_from(
        [
            "# H1",
            "## H2",
            "### H3",
            "#### H4",
            "text",
            "",
            "```",
            "~~~",
            "- item",
            "> quote",
            "===",
            "---",
            "  ## indented",
            "#tag",
            "para with words",
            "    code",
            "<!-- c -->",
            "# Title #",
            "\u3000",
            "é\u00e9 ünïcode",
            "\r",
            "* * *",
            "1. one",
        ]
    ),
    st.text(alphabet=st.characters(codec="utf-8", blacklist_categories=("Cs",)), max_size=30),
)
_DOC = st.lists(_LINE, max_size=25).map("\n".join)


def _check_invariants(doc: str, chunks: list[MdChunk]) -> None:
    b = doc.encode()
    prev = -1
    for c in chunks:
        assert c.raw == c.content.encode()
        assert b[c.start_byte : c.start_byte + len(c.raw)] == c.raw
        assert c.start_byte >= prev
        prev = c.start_byte
        assert c.start_line == b.count(b"\n", 0, c.start_byte) + 1
        assert c.end_line - c.start_line == c.content.count("\n")
        assert c.content == c.content.rstrip(RUST_WS_CHARS) and c.content
        assert c.token_count == max(1, len(c.raw) // 4)
        assert c.chunk_id == chunk_id("p", c.start_line, c.end_line, c.raw)


@settings(max_examples=300, deadline=None)
@given(_DOC, st.sampled_from([1, 5, 30, 400]))
def test_chunks_are_verbatim_slices(doc: str, budget: int) -> None:
    chunks = chunk_markdown("p", doc, budget)
    _check_invariants(doc, chunks)
    assert chunk_markdown("p", doc, budget) == chunks  # deterministic


@settings(max_examples=200, deadline=None)
@given(_DOC)
def test_large_budget_covers_everything(doc: str) -> None:
    # With an unbounded budget no section splits: chunks tile the document, so the
    # concatenated non-whitespace content equals the document's.
    chunks = chunk_markdown("p", doc, 10**9)
    strip = lambda s: "".join(ch for ch in s if ch not in RUST_WS_CHARS)  # noqa: E731
    assert "".join(strip(c.content) for c in chunks) == strip(doc)


@settings(max_examples=300, deadline=None)
@given(_DOC)
def test_heading_walk_equals_query(doc: str) -> None:
    from cce_knowledge.engine.markdown import _get_parser, _heading_nodes, heading_nodes_by_query

    root = _get_parser().parse(doc.encode()).root_node
    walk = [(n.start_byte, n.end_byte, n.type) for n in _heading_nodes(root)]
    query = [(n.start_byte, n.end_byte, n.type) for n in heading_nodes_by_query(root)]
    assert walk == query


def test_heading_walk_equals_query_on_vectors_and_nesting() -> None:
    from cce_knowledge.engine.markdown import _get_parser, _heading_nodes, heading_nodes_by_query

    texts = [p.read_text(encoding="utf-8") for p in sorted(VECTORS.glob("*.md"))]
    texts.append(
        "- a\n  - b\n    > # deep\n    > Sub\n    > ---\n1. # num\n| a |\n|---|\n| # x |\n"
    )
    for t in texts:
        root = _get_parser().parse(t.encode()).root_node
        assert [n.start_byte for n in _heading_nodes(root)] == [
            n.start_byte for n in heading_nodes_by_query(root)
        ]
