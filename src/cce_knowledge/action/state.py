"""What one Action step learned, and the step outputs that follow from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cce_knowledge.action.push_report import PushReport


@dataclass
class RunState:
    step: str = "run"
    corpus: str = ""
    feed: str = ""
    snapshot: str = ""
    records: int | None = None
    chunks: int | None = None
    distinct_ids: int = 0
    data_as_of: str = ""
    dry_run: bool = False
    force: bool = False
    published: bool = False
    #: the shrink guard's dry-run report (None: the guard did not run)
    report: PushReport | None = None
    #: the real push's report (None: nothing was pushed)
    pushed: PushReport | None = None
    #: pull: what was installed
    pulled: dict[str, Any] | None = None
    files: list[str] = field(default_factory=list)
    feed_errors: list[dict[str, Any]] = field(default_factory=list)
    ask: dict[str, Any] | None = None
    ask_failed: bool = False
    failure: str = ""
    notes: list[str] = field(default_factory=list)
    #: what extract left out: `--authors` lockdown and hidden-text removal totals
    trust: list[str] = field(default_factory=list)

    @property
    def unchanged(self) -> bool:
        """The push found the remote `current` already naming this snapshot and
        published nothing (--skip-unchanged)."""
        return self.pushed is not None and self.pushed.unchanged_skipped

    def diff_counts(self) -> tuple[str, str, str]:
        """(added, removed, changed) as output strings; empty when the guard did not run.

        A first publish adds every record; a same-snapshot verdict changes nothing."""
        rep = self.report
        if rep is None or rep.guard == "skipped":
            return "", "", ""
        added = self.distinct_ids if rep.guard == "first-publish" else rep.added
        return str(added), str(rep.removed), str(rep.changed)

    def outputs(self, diff_markdown: str = "") -> dict[str, str]:
        """Every output any step can write; each step keeps its own subset."""
        added, removed, changed = self.diff_counts()
        rep, pushed = self.report, self.pushed
        if pushed is not None:
            push_status = "unchanged" if pushed.unchanged_skipped else "published"
        else:
            push_status = "failed" if self.failure else "not-published"
        return {
            "snapshot": self.snapshot,
            "records": "" if self.records is None else str(self.records),
            "chunks": "" if self.chunks is None else str(self.chunks),
            "feed": self.feed,
            "added": added,
            "removed": removed,
            "changed": changed,
            "status": (rep.guard if rep else "") if self.step == "guard" else push_status,
            "remote-snapshot": rep.remote_snapshot if rep else "",
            "diff-markdown": diff_markdown,
            "published": "true" if self.published else "false",
            "artifact-key": pushed.key if pushed and self.published else "",
            "files": str(len(self.files)),
            "problems": str(len(self.feed_errors)),
        }
