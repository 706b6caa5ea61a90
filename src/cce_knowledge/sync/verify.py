"""`cce sync verify --checksum-only`: the pulled store still has its install bytes (docs/spec/sync.md §6.4).

Checksum-only detects corruption or local edits, not a malicious build: a knowledge
corpus cannot be rebuilt by the puller (it lacks the source feed), so trust stays
with the pusher and the git host's access control.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from cce_knowledge.core.errors import SyncError
from cce_knowledge.store.snapshots import store_path
from cce_knowledge.sync.allowed_signers import AllowedSigners
from cce_knowledge.sync.marker import (
    SyncMarker,
    active_snapshot,
    file_sha256,
    read_marker_lenient,
    stale_marker,
)
from cce_knowledge.sync.signing import (
    STATEMENT_FILE,
    SignatureRefused,
    installed_signature,
    load_allowed,
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
    #: the verified signature line under allowed signers (ours)
    signature: str | None = None

    @property
    def row(self) -> str:
        if self.status == "ok":
            return f"  {'knowledge':<16} {self.marker.corpus_id}@{self.marker.snapshot}  ({(self.actual_sha256 or '')[:12]})\n"
        return f"  {'knowledge':<16} {NO_RECORD}\n"

    @property
    def report(self) -> str:
        m = self.marker
        signed = f"  {self.signature}\n" if self.signature else ""
        if self.status == "ok":
            return (
                f"verify OK (checksum-only): knowledge corpus {m.corpus_id}@{m.snapshot}\n"
                f"  checksum : {self.actual_sha256}\n{signed}"
            )
        return (
            f"verify (checksum-only): knowledge corpus {m.corpus_id}@{m.snapshot}: {NO_RECORD}\n"
            + signed
        )


def verify_knowledge(
    root: str | os.PathLike[str], allowed: AllowedSigners | None = None
) -> KnowledgeVerify | None:
    """None when the root has no (readable) knowledge marker. With `allowed`, the
    installed snapshot's signed statement is checked too (SignatureRefused)."""
    m = read_marker_lenient(root)
    if m is None:
        return None
    kv = _verify_bytes(root, m)
    if allowed is None:
        return kv
    info = installed_signature(root, m.corpus_id, m.snapshot, m.checksum, allowed)
    if info.state != "verified":
        reason = info.problem or (
            f"the installed snapshot is unsigned (no {STATEMENT_FILE} recorded at pull time)"
        )
        raise SignatureRefused(
            f"verify FAILED for knowledge corpus `{m.corpus_id}` (@{m.snapshot})\n  {reason}"
        )
    return replace(kv, signature=info.line())


def _verify_bytes(root: str | os.PathLike[str], m: SyncMarker) -> KnowledgeVerify:
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


def verify_root(
    root: str | os.PathLike[str],
    allowed_signers: str | None = None,
    configured: str | None = None,
) -> str:
    """The report for a root; raises SyncError on a failure or when there is nothing to
    verify. `allowed_signers`: a path, else `configured` (knowledge.sync.allowed_signers)."""
    kv = verify_knowledge(root, load_allowed(root, allowed_signers, configured))
    if kv is None:
        raise SyncError(NOTHING)
    return kv.report
