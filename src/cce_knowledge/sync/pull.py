"""`cce knowledge pull`: fetch, verify and install a published corpus (docs/spec/sync.md §5).

Install order is the failure-safety argument: the snapshot file first, then its
read-back hash, then the marker, and `current` last. Until `current` moves, readers
keep seeing the previously active store; a failure anywhere before that leaves it
(and its marker) usable.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cce_knowledge.config.settings import Settings
from cce_knowledge.core import progress
from cce_knowledge.core.atomic import atomic_write, atomic_write_parts
from cce_knowledge.core.errors import CceError, SyncError
from cce_knowledge.core.rustcompat import rs_trim
from cce_knowledge.core.untrusted import open_regular
from cce_knowledge.store.snapshots import (
    display_dir,
    knowledge_dir,
    prune_other_snapshots,
    writer_lock,
)
from cce_knowledge.sync import keys as K
from cce_knowledge.sync.accelerator import NotCanonical, stream_store_parts
from cce_knowledge.sync.artifact_check import StoreScan, check_manifest
from cce_knowledge.sync.cck import (
    CckError,
    CckManifest,
    strict_stream_store_parts,
)
from cce_knowledge.sync.local_read import open_local
from cce_knowledge.sync.marker import (
    SyncMarker,
    read_marker_strict,
    write_marker,
    write_pulled_from,
)
from cce_knowledge.sync.remote import Remote, resolve_remote

if TYPE_CHECKING:
    from cce_knowledge.store.snapshots import SearchBuild


@dataclass
class PullResult:
    corpus_id: str
    snapshot: str
    checksum: str
    records: int
    chunks: int
    store_path: Path
    installed_sha256: str | None
    remote: str = ""
    store_display: str = ""
    #: non-fatal problems after the install (printed on stderr by the CLI)
    warnings: list[str] = field(default_factory=list)
    #: the derived search index built with the store
    search: SearchBuild | None = None

    @property
    def report(self) -> str:
        return (
            f"Pulled corpus {self.corpus_id}@{self.snapshot}\n"
            f"  records  : {self.records} · chunks : {self.chunks}\n"
            f"  checksum : {self.checksum}\n"
            f"  store    : {self.store_display}\n"
        )


def no_pointer(corpus_id: str) -> str:
    return (
        f"no `current` pointer for corpus {corpus_id} on the remote — has anything been pushed? "
        f"(`cce knowledge push --corpus {corpus_id}`)"
    )


def check_marker_guard(root: str | os.PathLike[str], corpus_id: str) -> None:
    marker = read_marker_strict(root)
    if marker is not None and marker.corpus_id != corpus_id:
        raise SyncError(
            f"the local knowledge store came from corpus `{marker.corpus_id}` but you are pulling "
            f"`{corpus_id}`. Pass --force to replace it (one active corpus per root)."
        )


def install(
    root: str | os.PathLike[str],
    manifest: CckManifest,
    store_bytes: bytes | Iterable[bytes],
    corpus_id: str,
    requested: str,
    key: str = "",
) -> tuple[Path, str | None]:
    """Check → write snapshot → marker → `current` → prune. Returns (path, sha256).

    The manifest and the streamed store bytes are checked (artifact_check) before the
    snapshot file is renamed into place: a refusal leaves the installed store as it was.

    `installed_sha256` hashes the bytes as they are written (the same bytes a
    read-back would see, without a second pass over a large store). An exception
    from a streamed `store_bytes` (e.g. NotCanonical) leaves nothing installed."""
    d = knowledge_dir(root)
    snap = manifest.snapshot
    path = d / f"{snap}.json"
    h = hashlib.sha256()

    def hashed(parts: Iterable[bytes]) -> Iterator[bytes]:
        # Hash on a helper thread while the writer writes the same part (both drop
        # the GIL for large buffers): the hash costs no wall time of its own.
        todo: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

        def work() -> None:
            while (part := todo.get()) is not None:
                h.update(part)

        hasher = threading.Thread(target=work, name="store-sha256", daemon=True)
        hasher.start()
        try:
            for part in parts:
                todo.put(part)
                yield part
        finally:
            todo.put(None)
            hasher.join()

    def counted(parts: Iterable[bytes], bar: progress.Task) -> Iterator[bytes]:
        for part in parts:
            yield part
            bar.advance(len(part))

    check_manifest(key, manifest, corpus_id, requested)
    scan = StoreScan(key, manifest)
    try:
        d.mkdir(parents=True, exist_ok=True)
        parts = (store_bytes,) if isinstance(store_bytes, bytes) else store_bytes
        # The artifact is verified as it is rendered: both happen while these bytes flow.
        with progress.task("pull: verify + render", unit="B") as bar:
            atomic_write_parts(path, hashed(counted(scan.checked(parts), bar)), flush_early=True)
    except OSError as e:
        raise SyncError(f"could not write the knowledge store under {os.fspath(root)}: {e}") from e
    installed = h.hexdigest()
    try:
        write_marker(root, SyncMarker(corpus_id, requested, manifest.checksum, installed))
    except OSError as e:
        raise SyncError(f"could not write the knowledge sync marker: {e}") from e
    try:
        atomic_write(d / "current", f"{snap}\n".encode())
    except OSError as e:
        raise SyncError(
            f"could not advance the knowledge `current` pointer under {os.fspath(root)}: {e}"
        ) from e
    prune_other_snapshots(root, snap)
    return path, installed


@contextlib.contextmanager
def _mapped(source: bytes | Path) -> Iterator[Any]:
    """The artifact as a buffer: bytes as given, a file memory-mapped read-only."""
    if isinstance(source, bytes):
        yield source
        return
    try:
        f = open_regular(source)
    except OSError as e:
        raise SyncError(f"cannot read the fetched artifact {source}: {e}") from e
    with f:
        if os.fstat(f.fileno()).st_size == 0:
            yield b""
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            yield mm


def _import_and_install(
    root: str | os.PathLike[str], key: str, data: Any, corpus_id: str, requested: str
) -> tuple[CckManifest, Path, str | None]:
    """Verify + render + install, streamed: the native accelerator's canonical path, and
    whatever it cannot decide (or everything, without it) goes to the strict verifier
    one line at a time (a damaged artifact costs no more memory than a good one)."""
    streamed = stream_store_parts(data)
    if streamed is not None and K.is_snapshot_id(streamed[0].snapshot):
        manifest, parts = streamed
        try:
            path, installed = install(root, manifest, parts, corpus_id, requested, key)
            return manifest, path, installed
        except NotCanonical:
            pass  # nothing was installed; the strict path decides
    try:
        manifest, strict_parts = strict_stream_store_parts(data)
    except CckError as e:
        raise CckError(f"{key}: {e.message}") from e
    # install's check_manifest refuses a manifest snapshot that is not the requested
    # 16-hex id before anything is written (never a path outside the knowledge dir).
    path, installed = install(root, manifest, _keyed(key, strict_parts), corpus_id, requested, key)
    return manifest, path, installed


def _keyed(key: str, parts: Iterator[bytes]) -> Iterator[bytes]:
    """`parts`, with a CckError's message naming the artifact's key."""
    try:
        yield from parts
    except CckError as e:
        raise CckError(f"{key}: {e.message}") from e


def _locate_in_place(
    root: str | os.PathLike[str], rem: Remote, corpus_id: str, snapshot: str | None, force: bool
) -> tuple[str, str, bytes | Path] | None:
    """(snapshot, key, artifact source) read straight from a remote on this machine, or
    None to take the working-clone path (which then decides every error)."""
    direct = open_local(rem.url)
    if direct is None:
        return None
    if snapshot is None:
        blob = direct.blob(K.pointer_key(corpus_id))
        snapshot = rs_trim(blob.decode("utf-8", "replace")) if blob is not None else ""
        if not snapshot:
            return None
        K.check_remote_pointer(corpus_id, snapshot)
    if not force:
        check_marker_guard(root, corpus_id)
    key = K.artifact_key(corpus_id, snapshot)
    source = direct.artifact_in_place(key)
    return None if source is None else (snapshot, key, source)


def _fetch(
    root: str | os.PathLike[str], rem: Remote, corpus_id: str, snapshot: str | None, force: bool
) -> tuple[str, str, bytes | Path]:
    """(snapshot, artifact key, artifact source): read in place from a remote on this
    machine, else fetched into the working clone."""
    found = _locate_in_place(root, rem, corpus_id, snapshot, force)
    if found is not None:
        return found

    # GitPython is imported only here: the in-place read above does without it.
    from cce_knowledge.sync.clone import open_cache

    with open_cache(rem) as cache:
        if snapshot is None:
            ptr = K.pointer_key(corpus_id)
            try:
                snapshot = cache.read_text(ptr)
            except CceError as e:
                raise SyncError(no_pointer(corpus_id)) from e
            if snapshot:
                K.check_remote_pointer(corpus_id, snapshot)
        if not force:
            check_marker_guard(root, corpus_id)
        key = K.artifact_key(corpus_id, snapshot)
        source = cache.artifact_source(key)
    return snapshot, key, source


def pull_corpus(
    root: str | os.PathLike[str],
    corpus: str | None = None,
    snapshot: str | None = None,
    force: bool = False,
    remote: str | Remote | None = None,
    *,
    settings: Settings,
    after_install: Callable[[str], SearchBuild] | None = None,
) -> PullResult:
    """Install a corpus snapshot (default: the remote `current`) into `root`.

    `after_install(snapshot)` runs under the writer lock once the store is active (the
    CLI builds the search index). `settings`: the root's, loaded by the caller."""
    corpus_id = K.check_corpus_id(K.resolve_corpus_id(settings, corpus))
    if snapshot is not None:
        K.check_snapshot_arg(snapshot)
    rem: Remote = resolve_remote(settings, remote)
    with progress.phase("pull: fetch"):
        snapshot, key, source = _fetch(root, rem, corpus_id, snapshot, force)
    # One writer per root: a concurrent pull's cleanup must not delete what this one
    # installs, nor the other way round (index and `sync pull --all` take it too).
    with writer_lock(root, "knowledge pull"):
        if not force:
            check_marker_guard(root, corpus_id)  # again: another writer may have run
        with _mapped(source) as data:
            manifest, path, installed = _import_and_install(root, key, data, corpus_id, snapshot)
        warnings: list[str] = []
        try:
            write_pulled_from(root, corpus_id, rem.display)
        except OSError as e:  # the store is installed; only `status`'s remote line lacks it
            warnings.append(f"could not record where the corpus came from: {e}")
        # Under the same lock: the first search after a pull needs no build.
        search = after_install(manifest.snapshot) if after_install is not None else None
    return PullResult(
        corpus_id=corpus_id,
        snapshot=snapshot,
        checksum=manifest.checksum,
        records=manifest.records,
        chunks=manifest.chunk_count,
        store_path=path,
        installed_sha256=installed,
        remote=rem.display,
        store_display=f"{display_dir(root)}/{manifest.snapshot}.json",
        warnings=warnings,
        search=search,
    )
