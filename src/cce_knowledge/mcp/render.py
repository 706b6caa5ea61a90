"""Byte-pinned renderers for the MCP tool answers (docs/spec/core.md §7.4-§7.6).

Pure functions over plain values: no store loading, no SDK. The retrieval layer
supplies hits; this module only turns them into the exact text the reference
engine serves, so a client sees the same bytes whichever engine answers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cce_knowledge.core.rustcompat import format6, rs_is_blank, rs_lines, rs_trim_end, score_key
from cce_knowledge.core.untrusted import shown
from cce_knowledge.engine.tokenizer import estimate_tokens
from cce_knowledge.store.view import Section

if TYPE_CHECKING:
    from cce_knowledge.health.status import KnowledgeStatus

#: Shown before the body when `current` names a store that cannot be loaded.
KNOWLEDGE_LOAD_NOTICE = (
    "NOTICE: the knowledge store exists but could not be loaded (corrupt or unreadable "
    "store) — knowledge results are MISSING from this answer; anything shown below is "
    "code-only. Re-run `cce knowledge index <feed>` to rebuild it."
)

#: The answer for any code-side request on a root that has no code index.
NOT_INDEXED_MESSAGE = (
    "This project has no knowledge store yet — run `cce knowledge index FEED` or "
    "`cce knowledge pull` in the project root. No results are available until then."
)

#: How much of an unknown id the answer repeats (the id is the caller's, of any length).
_ID_SHOWN = 100


def unknown_chunk(chunk_id: str) -> str:
    """The answer for an id the loaded knowledge store does not hold: the reference's
    words for an id its index lacks (docs/spec/core.md §7.6). Its own answer here, "not
    indexed yet", would send an agent to build a store that exists."""
    cut = shown(chunk_id[:_ID_SHOWN]) + ("…" if len(chunk_id) > _ID_SHOWN else "")
    return f"no chunk with id {cut} in the current index — it may be stale; re-run context_search."


COMPACT_HINT = (
    "Bodies shown compact. expand_chunk(chunk_id, scope=body|file|neighbors) for more; "
    "related_context(chunk_id) for import-graph neighbours.\n"
)

TRUNCATED_LINE = "… (context truncated to max_tokens)\n\n"

DETAIL_LEVELS = ("signature", "compact", "full")


@dataclass(frozen=True, slots=True)
class BlendRow:
    """One knowledge hit as the blend renderer needs it."""

    score: float
    chunk_id: str
    provenance: str
    content: str


def knowledge_header(rank: int, score: float, provenance: str, chunk_id: str) -> str:
    """`{rank:>2}. [{score6}] {provenance} #{chunk_id}` (rank right-aligned to width 2)."""
    return f"{rank:>2}. [{format6(score)}] {provenance} #{chunk_id}"


def _cut_to_tokens(text: str, max_tokens: int) -> tuple[str, bool]:
    """Cut `text` to about `max_tokens` tokens (4 bytes each) on a char boundary."""
    if max_tokens <= 0:
        return "", True
    if estimate_tokens(text) <= max_tokens:
        return text, False
    raw = text.encode("utf-8")[: max_tokens * 4]
    # `errors="ignore"` drops only a trailing partial character: a UTF-8 prefix
    # never splits anywhere else, so this is "back off to a char boundary".
    return raw.decode("utf-8", errors="ignore"), True


def render_blend(
    rows: Sequence[BlendRow],
    *,
    top_k: int,
    total_chunks: int,
    detail: str = "compact",
    max_tokens: int | None = None,
) -> str:
    """The `context_search` answer for knowledge rows (no code side, so no query_id).

    Rows are re-sorted by the blend comparator — score at 6 decimals descending,
    then chunk_id ascending — and ranks are the blended positions, exactly like
    the reference, even though search already ordered them (its tie-break is
    recency, the blend's is the id).
    """
    items = sorted(rows, key=lambda r: (-score_key(r.score), r.chunk_id))[:top_k]
    if not items:
        return (
            f"No matching context found. The index has {total_chunks} chunk(s) — "
            "try broader or different terms."
        )
    out: list[str] = []
    used = 0
    truncated = False
    for i, row in enumerate(items):
        out.append(knowledge_header(i + 1, row.score, row.provenance, row.chunk_id))
        out.append("\n")
        body = row.content
        if max_tokens is not None:
            body, cut = _cut_to_tokens(body, max_tokens - used)
            truncated |= cut
        out.append(body)
        if not body.endswith("\n"):
            out.append("\n")
        out.append("\n")
        used += estimate_tokens(body)
        if max_tokens is not None and used >= max_tokens and i + 1 < len(items):
            truncated = True
            break
    if truncated:
        out.append(TRUNCATED_LINE)
    if detail != "full":
        out.append(COMPACT_HINT)
    return "".join(out)


def with_notice(notice: str | None, body: str) -> str:
    return body if notice is None else f"{notice}\n\n{body}"


def compact_body(content: str) -> str:
    """The generic compact rule: first non-blank line (trailing space trimmed) plus
    `… (+N lines)` for the lines after it; all-blank content gives ``""``."""
    lines = rs_lines(content)
    for i, line in enumerate(lines):
        if not rs_is_blank(line):
            first = rs_trim_end(line)
            elided = len(lines) - (i + 1)
            return f"{first}\n… (+{elided} lines)" if elided > 0 else first
    return ""


def section_header(s: Section, display: Callable[[str], str]) -> str:
    return f"{display(s.record_id)}:{s.start_line}-{s.end_line} ({s.kind}) #{s.chunk_id}"


def render_group(
    title: str, blocks: Sequence[tuple[Section, str]], display: Callable[[str], str]
) -> str:
    out = [title, "\n"]
    for sec, body in blocks:
        out.append("\n")
        out.append(section_header(sec, display))
        out.append("\n")
        out.append(body)
        if not body.endswith("\n"):
            out.append("\n")
    return "".join(out)


def not_indexed_status(index_path: str) -> str:
    """index_status' first line for a root without a store. The reference names its code
    indexer (`cce index`, `cce init`); we name the commands that make a knowledge store."""
    return (
        f"not indexed — no knowledge store at {index_path}. "
        "Run `cce knowledge index FEED` or `cce knowledge pull`."
    )


#: index_status' first line when a knowledge store is installed. The reference starts
#: with its code index's "not indexed" line, naming commands this tool does not have.
KNOWLEDGE_ONLY_STATUS = "no code index here: this server serves the knowledge store below."


def knowledge_status_block(st: KnowledgeStatus) -> str:
    """The `  knowledge :` block of index_status (docs/spec/sync.md §7.1) for `st`."""
    behind = "yes — run `cce knowledge pull`" if st.behind_remote else "no"
    return (
        "  knowledge :\n"
        f"    corpus         : {st.corpus if st.corpus is not None else '(local ingest)'}\n"
        f"    snapshot       : {st.snapshot}\n"
        f"    records/chunks : {st.records} / {st.chunks}\n"
        f"    data as-of     : {st.data_as_of if st.data_as_of is not None else '-'}\n"
        f"    remote current : {st.remote_current if st.remote_current is not None else '-'}\n"
        f"    behind remote  : {behind}\n"
    )


def append_block(text: str, block: str) -> str:
    """Append a block, adding the LF the reference adds when `text` lacks one."""
    return (text if text.endswith("\n") else text + "\n") + block
