"""The job summary (markdown) of an Action step, built from named sections.

Every value that came from a feed, a cache or a child process goes through `md_code`
(a code span that nothing inside can close) or a fenced block that nothing can close.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from cce_knowledge.action.push_report import PushReport
from cce_knowledge.action.state import RunState
from cce_knowledge.action.workflow_commands import md_code, md_table

MAX_LISTED_PROBLEMS = 50

_STEP_TITLES = {
    "run": "cce-knowledge",
    "validate": "cce-knowledge validate",
    "index": "cce-knowledge index",
    "guard": "cce-knowledge guard",
    "push": "cce-knowledge push",
    "pull": "cce-knowledge pull",
}


def status_text(st: RunState) -> str:
    if st.failure:
        return "❌ failed"
    if st.published:
        return "✅ published"
    if st.unchanged:
        return f"➖ unchanged (snapshot {md_code(st.snapshot)}, nothing published)"
    if st.dry_run:
        return "🔍 dry-run (nothing published)"
    if st.step == "validate":
        return "✅ valid"
    if st.step == "index":
        return "✅ indexed"
    if st.step == "guard":
        return "✅ checked (nothing published)"
    if st.step == "pull":
        return "✅ installed"
    return "not published"


def header(st: RunState) -> str:
    name = md_code(st.corpus) if st.corpus else ""
    if st.step in ("run", "guard", "push", "pull"):
        name = name or "(corpus unresolved)"
    title = _STEP_TITLES.get(st.step, "cce-knowledge")
    return f"## {title}{': ' + name if name else ''} — {status_text(st)}\n"


def failure_block(st: RunState) -> str:
    if not st.failure:
        return ""
    return "```text\n" + st.failure.replace("```", "`\u200b``") + "\n```\n"


def facts_table(st: RunState) -> str:
    if st.step in ("validate", "guard"):
        return ""
    rows = [
        ["snapshot", md_code(st.snapshot) if st.snapshot else "—"],
        ["records", str(st.records) if st.records is not None else "—"],
        ["chunks", str(st.chunks) if st.chunks is not None else "—"],
        ["data as of", md_code(st.data_as_of) if st.data_as_of else "—"],
    ]
    if st.step in ("run", "push"):
        rows.append(["published", "true" if st.published else "false"])
    pushed = st.pushed
    if pushed is not None and st.published:
        rows.append(["artifact key", md_code(pushed.key)])
        if pushed.pushed_at:
            rows.append(["pushed at", md_code(pushed.pushed_at)])
        if pushed.retention:
            pruned = f"{pushed.retention}, pruned {len(pushed.pruned)}"
            rows.append(["retention", md_code(pruned)])
    return md_table(["", ""], rows)


def _ids_cell(ids: list[str]) -> str:
    if not ids:
        return "—"
    shown = ", ".join(md_code(i) for i in ids[:20])
    more = len(ids) - 20
    return shown + (f" … and {more} more" if more > 0 else "")


def diff_section(st: RunState) -> str:
    """The guard's verdict against the remote (also the guard's `diff-markdown` output)."""
    rep: PushReport | None = st.report
    if rep is None or rep.guard == "skipped":
        return ""
    head = "### Diff against the remote\n\n"
    if rep.guard == "first-publish":
        return head + f"First publish of this corpus: {st.distinct_ids} record(s) would be added.\n"
    if rep.guard == "unchanged":
        return head + (
            f"The remote `current` already names this snapshot ({md_code(rep.snapshot)}) "
            "with identical content.\n"
        )
    if rep.guard == "divergent":
        return head + (
            "The remote already has this snapshot id with **different** content "
            "(a different `max_section_tokens` or redactor version).\n"
        )
    rows = [
        ["added", str(rep.added), _ids_cell(rep.added_ids)],
        ["removed", str(rep.removed), _ids_cell(rep.removed_ids)],
        ["changed", str(rep.changed), _ids_cell(rep.changed_ids)],
    ]
    return (
        head
        + f"Outgoing {md_code(rep.snapshot)} vs remote current {md_code(rep.remote_snapshot)}\n\n"
        + md_table(["", "count", "records"], rows)
    )


def problems_section(st: RunState) -> str:
    if not st.feed_errors:
        return ""
    rows = [
        [
            md_code(str(e.get("file", ""))),
            str(e.get("line", "")),
            md_code(str(e.get("path", ""))),
            md_code(str(e.get("message", ""))),
        ]
        for e in st.feed_errors[:MAX_LISTED_PROBLEMS]
    ]
    more = len(st.feed_errors) - MAX_LISTED_PROBLEMS
    tail = f"\n… and {more} more (see the log)\n" if more > 0 else ""
    return (
        f"### Feed problems ({len(st.feed_errors)})\n\n"
        + md_table(["file", "line", "field", "problem"], rows)
        + tail
    )


def files_section(st: RunState) -> str:
    if st.step != "validate":
        return ""
    if not st.files:
        return "No file matched `files`.\n"
    return f"{len(st.files)} file(s) checked.\n"


def _num(v: Any) -> str:
    """A figure from the ask report as plain text; anything else as a code span."""
    if isinstance(v, bool):
        return md_code(str(v))
    if isinstance(v, int | float) or (isinstance(v, str) and re.fullmatch(r"[0-9]+(\.[0-9]+)?", v)):
        return str(v)
    return md_code(str(v))


def ask_section(st: RunState) -> str:
    a = st.ask
    if a is None:
        return (
            "### Ask suite\n\nThe suite could not be run (see the log).\n" if st.ask_failed else ""
        )
    verdict = "❌ regression" if st.ask_failed else "✅ all proven"
    rows = []
    for c in a.get("cases") or []:
        if not isinstance(c, dict):
            continue
        rank = c.get("first_hit_rank")
        rows.append(
            [
                md_code(str(c.get("id", ""))),
                _num(c.get("precision_at_k", "")),
                _num(c.get("recall", "")),
                _num(c.get("mrr", "")),
                "-" if rank is None else _num(rank),
                "yes" if c.get("proven") is True else "**NO**",
            ]
        )
    means = [_num(a.get(k, "")) for k in ("precision_at_k", "recall", "mrr")]
    rows.append(["mean", *means, "", ""])
    proven = f"{_num(a.get('proven'))}/{_num(a.get('queries'))}"
    return f"### Ask suite — {proven} proven ({verdict})\n\n" + md_table(
        ["query", "P@k", "recall", "MRR", "rank", "proven"], rows
    )


def trust_section(st: RunState) -> str:
    """What extract left out of the corpus: other authors' text and hidden text."""
    if not st.trust:
        return ""
    return "### Trust boundary\n\n" + "".join(f"- {md_code(line)}\n" for line in st.trust)


def notes_section(st: RunState) -> str:
    if not st.notes:
        return ""
    return "\n".join(f"- {md_code(n) if n.startswith('warning') else n}" for n in st.notes) + "\n"


SECTIONS: tuple[Callable[[RunState], str], ...] = (
    header,
    failure_block,
    files_section,
    facts_table,
    diff_section,
    problems_section,
    trust_section,
    ask_section,
    notes_section,
)


def render_summary(st: RunState) -> str:
    """The job summary: status, counts, diff, feed problems, ask report, notes."""
    parts = [s for s in (section(st) for section in SECTIONS) if s]
    return "\n".join(p.rstrip("\n") + "\n" for p in parts)
