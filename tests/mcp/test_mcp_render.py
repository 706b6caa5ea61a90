"""Byte-level rules of the MCP answer renderers (docs/spec/core.md §7.3-§7.6)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cce_knowledge.engine.markdown import chunk_markdown
from cce_knowledge.health.status import ChecksumState, KnowledgeStatus
from cce_knowledge.mcp import render
from cce_knowledge.mcp.render import BlendRow, Section
from tests.helpers.paths import TESTS

PROV = "[knowledge] Login policy — closed · 2026-02-01T10:00:00Z · https://x/1"


def row(score: float, cid: str, content: str = "body\n") -> BlendRow:
    return BlendRow(score=score, chunk_id=cid, provenance=PROV, content=content)


def test_single_hit_bytes() -> None:
    out = render.render_blend(
        [row(0.9868861, "56361e517d9fc9c2", "# Login\n\ntext")], top_k=8, total_chunks=3
    )
    assert out == (
        f" 1. [0.986886] {PROV} #56361e517d9fc9c2\n"
        "# Login\n\ntext\n"
        "\n"
        "Bodies shown compact. expand_chunk(chunk_id, scope=body|file|neighbors) for more; "
        "related_context(chunk_id) for import-graph neighbours.\n"
    )
    full = render.render_blend([row(0.5, "a" * 16)], top_k=8, total_chunks=1, detail="full")
    assert full == f" 1. [0.500000] {PROV} #{'a' * 16}\nbody\n\n"


def test_ties_break_on_chunk_id_and_ranks_are_blend_positions() -> None:
    rows = [row(0.5000001, "bbbb"), row(0.7, "zzzz"), row(0.5000002, "aaaa")]
    out = render.render_blend(rows, top_k=2, total_chunks=9, detail="full")
    headers = [ln for ln in out.split("\n") if ln.startswith((" 1.", " 2.", " 3."))]
    # 0.5000001 and 0.5000002 are equal at 6 decimals: chunk id decides.
    assert headers == [f" 1. [0.700000] {PROV} #zzzz", f" 2. [0.500000] {PROV} #aaaa"]


def test_rank_is_right_aligned_to_two() -> None:
    rows = [row(1.0 - i / 100, f"{i:04d}") for i in range(12)]
    out = render.render_blend(rows, top_k=12, total_chunks=12, detail="full")
    assert f" 9. [0.920000] {PROV} #0008\n" in out
    assert f"10. [0.910000] {PROV} #0009\n" in out


def test_empty_answer() -> None:
    assert render.render_blend([], top_k=8, total_chunks=42) == (
        "No matching context found. The index has 42 chunk(s) — try broader or different terms."
    )


def test_max_tokens_truncation() -> None:
    rows = [row(0.9, "a", "x" * 40), row(0.8, "b", "y" * 40), row(0.7, "c", "z" * 40)]
    out = render.render_blend(rows, top_k=8, total_chunks=3, detail="full", max_tokens=12)
    # First body: 10 tokens fit in 12. Second: cut to (12 - 10) * 4 = 8 bytes, then stop.
    assert out == (
        f" 1. [0.900000] {PROV} #a\n{'x' * 40}\n\n"
        f" 2. [0.800000] {PROV} #b\n{'y' * 8}\n\n"
        "… (context truncated to max_tokens)\n\n"
    )


def test_max_tokens_cuts_on_a_char_boundary() -> None:
    out = render.render_blend(
        [row(0.9, "a", "é" * 10)], top_k=8, total_chunks=1, detail="full", max_tokens=1
    )
    # 4 bytes = two 2-byte characters.
    assert f"#a\n{'é' * 2}\n\n… (context truncated" in out


@given(
    scores=st.lists(st.floats(min_value=0, max_value=2), min_size=0, max_size=15),
    top_k=st.integers(min_value=1, max_value=10),
)
def test_blend_shape(scores: list[float], top_k: int) -> None:
    rows = [row(s, f"{i:016x}", f"line {i}") for i, s in enumerate(scores)]
    out = render.render_blend(rows, top_k=top_k, total_chunks=len(rows), detail="full")
    if not rows:
        assert out.startswith("No matching context found.")
        return
    blocks = out.split("\n\n")[:-1]
    assert len(blocks) == min(top_k, len(rows))
    shown = [float(b.split("[", 1)[1].split("]", 1)[0]) for b in blocks]
    assert shown == sorted(shown, reverse=True)


def test_group_rendering_and_display_redaction() -> None:
    secs = [Section("gh:AKIAIOSFODNN7EXAMPLE", 1, 3, "Title", "c1", "body one"),
            Section("gh:AKIAIOSFODNN7EXAMPLE", 4, 9, "Sub", "c2", "body two\n")]  # fmt: skip
    out = render.render_group("T:", [(s, s.content) for s in secs], lambda r: "gh:[R]")
    assert out == "T:\n\ngh:[R]:1-3 (Title) #c1\nbody one\n\ngh:[R]:4-9 (Sub) #c2\nbody two\n"


def test_status_block() -> None:
    status = KnowledgeStatus(
        root=".", store_file="f", schema="cce.knowledge/v1", snapshot="s", records=2, chunks=5,
        data_as_of=None, corpus=None, marker_corpus=None, marker_snapshot=None,
        checksum=ChecksumState("local"), remote_current="r",
    )  # fmt: skip
    block = render.knowledge_status_block(status)
    assert block == (
        "  knowledge :\n    corpus         : (local ingest)\n    snapshot       : s\n"
        "    records/chunks : 2 / 5\n    data as-of     : -\n    remote current : r\n"
        "    behind remote  : yes — run `cce knowledge pull`\n"
    )
    assert render.append_block("x", "y\n") == "x\ny\n"
    assert render.append_block("x\n", "y\n") == "x\ny\n"


def test_compact_form_of_the_nested_vector_section() -> None:
    # docs/spec/core.md §13 G9: the reference's compact form of markdown/nested.md's section.
    text = (TESTS / "vectors" / "markdown" / "nested.md").read_text(encoding="utf-8")
    (chunk,) = chunk_markdown("nested.md", text, 400)
    assert render.compact_body(chunk.content) == "# API\n… (+10 lines)"


def test_status_first_lines_name_commands_this_tool_has() -> None:
    # docs/spec/sync.md §7.1: a root here never has a code index.
    assert render.not_indexed_status("/r/.cce/knowledge/current") == (
        "not indexed — no knowledge store at /r/.cce/knowledge/current. "
        "Run `cce knowledge index FEED` or `cce knowledge pull`."
    )
    assert render.KNOWLEDGE_ONLY_STATUS == (
        "no code index here: this server serves the knowledge store below."
    )
