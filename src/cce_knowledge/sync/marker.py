"""The knowledge sync marker `<root>/.cce/knowledge/synced.json` (docs/spec/sync.md §5.4).

Compact JSON in declaration order, no trailing newline. `installed_sha256` is omitted
(not null) when unknown.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from cce_knowledge.core import progress
from cce_knowledge.core.atomic import atomic_write
from cce_knowledge.core.errors import SyncError
from cce_knowledge.core.jsonout import compact
from cce_knowledge.core.untrusted import open_regular
from cce_knowledge.store.snapshots import knowledge_dir, read_current, store_path

MARKER_NAME = "synced.json"
#: Where the installed corpus was pulled from (ours; the reference records no remote, so
#: after `pull --remote URL` its status cannot say where the store came from). Kept
#: beside the marker so the marker's bytes stay the reference's.
PULLED_FROM_NAME = "pulled-from.json"
#: Both files are a few hundred bytes; one larger than this is not ours (it is read no
#: further, and counts as unreadable).
MAX_RECORD_BYTES = 64 * 1024
#: Ours: the installed store file's size, mtime and inode as written by the pull, with
#: its sha256, so the up-to-date check need not hash a multi-GB store when nothing
#: about the file changed (`sync verify` and `doctor` still hash it).
STORE_STAT_NAME = "installed-stat.json"


@dataclass(frozen=True, slots=True)
class SyncMarker:
    corpus_id: str
    snapshot: str
    checksum: str
    installed_sha256: str | None = None

    def to_bytes(self) -> bytes:
        d: dict[str, str] = {
            "corpus_id": self.corpus_id,
            "snapshot": self.snapshot,
            "checksum": self.checksum,
        }
        if self.installed_sha256 is not None:
            d["installed_sha256"] = self.installed_sha256
        return compact(d).encode("utf-8")


def marker_path(root: str | os.PathLike[str]) -> Path:
    return knowledge_dir(root) / MARKER_NAME


def _read_small(path: Path) -> str:
    """The text of a small regular file: OSError when it is not one, ValueError when it
    is larger than MAX_RECORD_BYTES (read no further) or not UTF-8."""
    with open_regular(path) as f:
        raw = f.read(MAX_RECORD_BYTES + 1)
    if len(raw) > MAX_RECORD_BYTES:
        raise ValueError(f"larger than {MAX_RECORD_BYTES} bytes")
    return raw.decode("utf-8")


def _json(text: str) -> object:
    """json.loads, with nesting too deep to decode a ValueError like any other damage
    (a few dozen kilobytes of `[` reach Python's recursion limit)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _parse(text: str) -> SyncMarker:
    obj = _json(text)
    if not isinstance(obj, dict):
        raise ValueError("invalid type: expected struct KnowledgeSyncMarker")
    vals = {}
    for k in ("corpus_id", "snapshot", "checksum"):
        if k not in obj:
            raise ValueError(f"missing field `{k}`")
        if not isinstance(obj[k], str):
            raise ValueError(f"invalid type for `{k}`: expected a string")
        vals[k] = obj[k]
    inst = obj.get("installed_sha256")
    if inst is not None and not isinstance(inst, str):
        raise ValueError("invalid type for `installed_sha256`: expected a string")
    return SyncMarker(installed_sha256=inst, **vals)


def read_marker_strict(root: str | os.PathLike[str]) -> SyncMarker | None:
    """None when absent; SyncError when unreadable or corrupt (the pull guard's load)."""
    path = marker_path(root)
    try:
        return _parse(_read_small(path))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise SyncError(f"could not read the knowledge sync marker {path}: {e}") from e
    except ValueError as e:
        raise SyncError(
            f"the knowledge sync marker {path} is unreadable/corrupt: {e}. It records which "
            "corpus is active — pass --force to overwrite it."
        ) from e


def read_marker_lenient(root: str | os.PathLike[str]) -> SyncMarker | None:
    """Any read or parse problem means "no marker" (status, verify, doctor, pull --all)."""
    try:
        return _parse(_read_small(marker_path(root)))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def write_marker(root: str | os.PathLike[str], marker: SyncMarker) -> None:
    atomic_write(marker_path(root), marker.to_bytes())


def write_pulled_from(
    root: str | os.PathLike[str], corpus_id: str, remote: str, artifact: str | None = None
) -> None:
    """Record the remote a corpus was pulled from and, when known, the git object id of
    the artifact's blob there (what a later pull compares to know it is up to date);
    `remote` is already fit to show (`Remote.display`: no userinfo, no query)."""
    doc = {"corpus_id": corpus_id, "remote": remote}
    if artifact is not None:
        doc["artifact"] = artifact
    atomic_write(knowledge_dir(root) / PULLED_FROM_NAME, compact(doc).encode("utf-8"))


def _pulled(root: str | os.PathLike[str], corpus_id: str, field: str) -> str | None:
    try:
        obj = _json(_read_small(knowledge_dir(root) / PULLED_FROM_NAME))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(obj, dict) or obj.get("corpus_id") != corpus_id:
        return None
    value = obj.get(field)
    return value if isinstance(value, str) and value else None


def read_pulled_from(root: str | os.PathLike[str], corpus_id: str) -> str | None:
    """The remote `corpus_id` was last pulled from, or None (absent, unreadable, or
    recorded for another corpus)."""
    return _pulled(root, corpus_id, "remote")


def read_pulled_artifact(root: str | os.PathLike[str], corpus_id: str) -> str | None:
    """The object id of the artifact blob `corpus_id` was last installed from, or None."""
    return _pulled(root, corpus_id, "artifact")


def active_snapshot(root: str | os.PathLike[str]) -> str | None:
    """What `current` names (None when absent or unreadable): the store readers use."""
    try:
        return read_current(root)
    except (OSError, UnicodeDecodeError):
        return None


def stale_marker(marker: SyncMarker, current: str | None) -> str:
    """The report for a marker that does not describe the active store."""
    return (
        f"the sync marker records {marker.corpus_id}@{marker.snapshot} but `current` names "
        f"{current or 'nothing'}: the active store is not the pulled snapshot (a pull was "
        "interrupted, or the root was re-indexed locally since) — "
        f"`cce knowledge pull --corpus {marker.corpus_id}` installs it again and repairs the marker"
    )


def file_sha256(path: Path, progress_label: str | None = None) -> str:
    """SHA-256 of a file, read in blocks (a store can be larger than memory allows);
    with `progress_label`, the bytes hashed are reported as progress."""
    with open(path, "rb") as f:
        if progress_label is None:
            return hashlib.file_digest(f, "sha256").hexdigest()
        h = hashlib.sha256()
        size = os.fstat(f.fileno()).st_size
        with progress.task(progress_label, total=size, unit="B") as bar:
            while block := f.read(8 * 1024 * 1024):
                h.update(block)
                bar.advance(len(block))
        return h.hexdigest()


def _stat_key(path: Path) -> list[int]:
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def record_store_stat(root: str | os.PathLike[str], snapshot: str, sha256: str) -> None:
    """Record the installed store file's stat beside its sha256 (best effort)."""
    try:
        doc = {
            "snapshot": snapshot,
            "sha256": sha256,
            "stat": _stat_key(store_path(root, snapshot)),
        }
        atomic_write(knowledge_dir(root) / STORE_STAT_NAME, compact(doc).encode("utf-8"))
    except OSError:
        pass


def _stat_vouches(root: str | os.PathLike[str], snapshot: str, sha256: str) -> bool:
    """The recorded stat names this snapshot and sha256, and the file's stat is unchanged."""
    try:
        obj = json.loads((knowledge_dir(root) / STORE_STAT_NAME).read_text(encoding="utf-8"))
        return (
            isinstance(obj, dict)
            and obj.get("snapshot") == snapshot
            and obj.get("sha256") == sha256
            and obj.get("stat") == _stat_key(store_path(root, snapshot))
        )
    except (OSError, UnicodeDecodeError, ValueError):
        return False


def installed_snapshot(
    root: str | os.PathLike[str], corpus_id: str, *, trust_stat: bool = False
) -> str | None:
    """The snapshot of `corpus_id` that is really installed: `current` names it, the
    marker records the same corpus and snapshot, and the store file still has the bytes
    recorded at pull time. None otherwise — then only a pull can vouch for the root."""
    m = read_marker_lenient(root)
    if m is None or m.corpus_id != corpus_id or active_snapshot(root) != m.snapshot:
        return None
    try:
        if m.installed_sha256 is not None:
            if trust_stat and _stat_vouches(root, m.snapshot, m.installed_sha256):
                return m.snapshot
            if file_sha256(store_path(root, m.snapshot)) != m.installed_sha256:
                return None
        elif not store_path(root, m.snapshot).is_file():
            return None
    except OSError:
        return None
    return m.snapshot


def is_installed(
    root: str | os.PathLike[str], corpus_id: str, snapshot: str, artifact: str | None
) -> bool:
    """The installed store is `snapshot` of `corpus_id`, intact (`installed_snapshot`),
    and was installed from the artifact blob `artifact`: a snapshot id names the feed
    only, so the same feed indexed again (another redaction mode) and re-published is
    another artifact under the same id. The store is hashed only when the cheap checks
    agree (a pull that has work never pays for it)."""
    m = read_marker_lenient(root)
    if m is None or m.corpus_id != corpus_id or m.snapshot != snapshot:
        return False
    if artifact is None or read_pulled_artifact(root, corpus_id) != artifact:
        return False
    return installed_snapshot(root, corpus_id, trust_stat=True) == snapshot
