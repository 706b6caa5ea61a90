"""Fetching a `.cck` published in parts (sync/parts.py): the local part store, the
rebuild into a temporary file, and the push guard's read of a parted remote snapshot.

Kept apart from parts.py (the format) and from clone.py (GitPython), so that a pull
from a local remote reads parts without importing GitPython.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from cce_knowledge.core.errors import SyncError
from cce_knowledge.core.untrusted import open_regular
from cce_knowledge.sync import keys as K
from cce_knowledge.sync.parts import MAX_INDEX_BYTES, GitParts, PartStore, parse_index, rebuild
from cce_knowledge.sync.remote import sync_home

if TYPE_CHECKING:
    from cce_knowledge.sync.clone import GitCache


def part_store() -> PartStore:
    """The local part store: `$CCE_HOME/sync/parts` (else `~/.cce/sync/parts`)."""
    return PartStore(sync_home() / "parts")


def rebuild_to_file(key: str, index_bytes: bytes, parts: GitParts) -> Path:
    """The `.cck` the index at `key` describes, rebuilt into a temporary file (the
    caller deletes it) from the local part store and, for what it lacks, `parts`."""
    index = parse_index(key, index_bytes)
    store = part_store()
    try:
        store.root.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".rebuild.", suffix=".cck", dir=store.root)
    except OSError as e:
        raise SyncError(f"cannot rebuild {key}: {e}") from e
    os.close(fd)
    path = Path(name)
    try:
        rebuild(key, index, parts.read, store, path)
    except BaseException:
        discard(path)
        raise
    return path


def discard(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def remote_artifact(cache: GitCache, corpus_id: str, snapshot: str) -> bytes | mmap.mmap:
    """A remote snapshot's `.cck` bytes for the push guard: the plain artifact when
    published, else rebuilt from its parts into a file that is mapped, not read (a
    parted artifact can be gigabytes; the mapping outlives the deleted file)."""
    key = K.artifact_key(corpus_id, snapshot)
    pkey = K.parts_index_key(corpus_id, snapshot)
    if cache.has(key) or not cache.has(pkey):
        return cache.read_artifact(key)
    index = cache.read_small(pkey, MAX_INDEX_BYTES)
    if index is None:
        return cache.read_artifact(key)
    path = rebuild_to_file(pkey, index, cache.git_parts(corpus_id))
    try:
        with open_regular(path) as f:
            if os.fstat(f.fileno()).st_size == 0:
                return b""
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise SyncError(f"cannot read the rebuilt {pkey}: {e}") from e
    finally:
        discard(path)
