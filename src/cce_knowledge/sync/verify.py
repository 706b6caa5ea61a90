"""`cce sync verify --checksum-only`: the pulled store still has its install bytes (docs/spec/sync.md §6.4).

Checksum-only detects corruption or local edits, not a malicious build: a knowledge
corpus cannot be rebuilt by the puller (it lacks the source feed), so trust stays
with the pusher and the git host's access control.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cce_knowledge.core.errors import SyncError
from cce_knowledge.store.snapshots import store_path
from cce_knowledge.sync.marker import (
    SyncMarker,
    active_snapshot,
    file_sha256,
    read_marker_lenient,
    stale_marker,
)

NO_RECORD = (
    "no install checksum recorded (pulled by an older cce) — re-pull with `cce knowledge pull` "
    "to enable checksum verification"
)
NOTHING = (
    "nothing to verify for this store: no `.cce/knowledge/synced.json` marker (not a pulled store)"
)


@dataclass(frozen=True)
class KnowledgeVerify:
    """status: "ok" or "no-record" (a mismatch or unreadable store raises SyncError)."""

    status: str
    marker: SyncMarker
    actual_sha256: str | None = None

    @property
    def row(self) -> str:
        if self.status == "ok":
            return f"  {'knowledge':<16} {self.marker.corpus_id}@{self.marker.snapshot}  ({(self.actual_sha256 or '')[:12]})\n"
        return f"  {'knowledge':<16} {NO_RECORD}\n"

    @property
    def report(self) -> str:
        m = self.marker
        if self.status == "ok":
            return (
                f"verify OK (checksum-only): knowledge corpus {m.corpus_id}@{m.snapshot}\n"
                f"  checksum : {self.actual_sha256}\n"
            )
        return f"verify (checksum-only): knowledge corpus {m.corpus_id}@{m.snapshot}: {NO_RECORD}\n"


def verify_knowledge(root: str | os.PathLike[str]) -> KnowledgeVerify | None:
    """None when the root has no (readable) knowledge marker."""
    m = read_marker_lenient(root)
    if m is None:
        return None
    head = f"verify FAILED (checksum-only) for knowledge corpus `{m.corpus_id}` (@{m.snapshot})\n"
    # Judge the store readers use: `current`'s, whatever the marker says.
    current = active_snapshot(root)
    if current != m.snapshot:
        raise SyncError(f"{head}  {stale_marker(m, current)}")
    if m.installed_sha256 is None:
        return KnowledgeVerify("no-record", m)
    try:
        actual = file_sha256(store_path(root, m.snapshot), progress_label="verify")
    except OSError as e:
        raise SyncError(
            f"{head}  the pulled knowledge store could not be read: {e}\n"
            f"  Re-pull it with `cce knowledge pull --corpus {m.corpus_id}`."
        ) from e
    if actual != m.installed_sha256:
        raise SyncError(
            f"{head}  expected : {m.installed_sha256}\n  actual   : {actual}\n"
            "  The pulled knowledge store does not match the bytes recorded at pull time — "
            f"corruption or local modification. Re-pull with `cce knowledge pull --corpus {m.corpus_id}`.\n"
            "  (Checksum-only detects corruption, not a malicious build — and a knowledge corpus "
            "has NO rebuild-verify escalation path at all: the puller lacks the source feed. "
            "Trust stays with the pusher and the git host's access control.)"
        )
    return KnowledgeVerify("ok", m, actual)


def verify_root(root: str | os.PathLike[str]) -> str:
    """The report for a root; raises SyncError on a failure or when there is nothing to verify."""
    kv = verify_knowledge(root)
    if kv is None:
        raise SyncError(NOTHING)
    return kv.report
