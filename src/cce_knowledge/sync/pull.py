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
from cce_knowledge.core.nearest import nearest_first
from cce_knowledge.core.rustcompat import rs_trim
from cce_knowledge.core.untrusted import open_regular, shown
from cce_knowledge.store.snapshots import (
    display_dir,
    ensure_self_ignored,
    knowledge_dir,
    prune_other_snapshots,
    store_path,
    writer_lock,
)
from cce_knowledge.store.view import open_view
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
    is_installed,
    read_marker_lenient,
    read_marker_strict,
    read_pulled_from,
    record_store_stat,
    write_marker,
    write_pulled_from,
)
from cce_knowledge.sync.parts import MAX_INDEX_BYTES, GitParts
from cce_knowledge.sync.parts_pull import discard, part_store, rebuild_to_file
from cce_knowledge.sync.remote import Remote, resolve_remote
from cce_knowledge.sync.signing import (
    SignatureRefused,
    Verified,
    check_reset,
    load_allowed,
    raise_floor,
    read_floor,
    record_installed,
    sha256_of,
    verify_publish,
)
from cce_knowledge.sync.sshsig import MAX_SIG_BYTES, parse_signature
from cce_knowledge.sync.statement import MAX_BYTES as STATEMENT_MAX_BYTES
from cce_knowledge.sync.statement import signature_key, statement_key

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
    #: the verified statement under allowed signers (ours)
    verified: Verified | None = None
    #: who signed the snapshot (key type and fingerprint), verified or not; None: unsigned
    signed_by: str | None = None
    #: the installed store already was this snapshot: nothing was fetched or installed
    up_to_date: bool = False

    @property
    def report(self) -> str:
        if self.up_to_date:
            return (
                f"Up to date: corpus {self.corpus_id}@{self.snapshot} is already installed\n"
                f"  records  : {self.records} · chunks : {self.chunks}\n"
                f"  checksum : {self.checksum}\n"
                f"  store    : {self.store_display} (nothing fetched or rewritten; "
                "--force reinstalls)\n"
            )
        out = (
            f"Pulled corpus {self.corpus_id}@{self.snapshot}\n"
            f"  records  : {self.records} · chunks : {self.chunks}\n"
            f"  checksum : {self.checksum}\n"
            f"  store    : {self.store_display}\n"
        )
        if self.verified is not None:
            v = self.verified
            out += (
                f"  signed   : by {v.signer} at {v.statement.published_at} "
                f"(verified, counter {v.statement.counter})\n"
            )
        elif self.signed_by is not None:
            out += (
                f"  signed   : by {self.signed_by} (not verified: no allowed signers configured)\n"
            )
        return out


def not_in_cache(corpus_id: str, corpora: list[str]) -> str:
    """A corpus the cache does not hold, with the ones it does, nearest first."""
    near = nearest_first(corpus_id, corpora, limit=_LISTED)
    listed = ", ".join(shown(c) for c in near)
    more = f" and {len(corpora) - len(near)} more" if len(corpora) > len(near) else ""
    return (
        f"corpus `{shown(corpus_id)}` is not in the cache, which holds (nearest first): "
        f"{listed}{more} — pass one of them as --corpus (`cce sync list` shows them all)"
    )


#: How many corpus ids an error lists (a cache is untrusted: it may hold thousands).
_LISTED = 10


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
    before_current: Callable[[], None] | None = None,
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
        ensure_self_ignored(root)
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
    if before_current is not None:
        before_current()
    try:
        atomic_write(d / "current", f"{snap}\n".encode())
    except OSError as e:
        raise SyncError(
            f"could not advance the knowledge `current` pointer under {os.fspath(root)}: {e}"
        ) from e
    prune_other_snapshots(root, snap)
    record_store_stat(root, snap, installed)
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
    root: str | os.PathLike[str],
    key: str,
    data: Any,
    corpus_id: str,
    requested: str,
    before_current: Callable[[], None] | None = None,
) -> tuple[CckManifest, Path, str | None]:
    """Verify + render + install, streamed: the native accelerator's canonical path, and
    whatever it cannot decide (or everything, without it) goes to the strict verifier
    one line at a time (a damaged artifact costs no more memory than a good one)."""
    streamed = stream_store_parts(data)
    if streamed is not None and K.is_snapshot_id(streamed[0].snapshot):
        manifest, parts = streamed
        try:
            path, installed = install(
                root, manifest, parts, corpus_id, requested, key, before_current
            )
            return manifest, path, installed
        except NotCanonical:
            pass  # nothing was installed; the strict path decides
    try:
        manifest, strict_parts = strict_stream_store_parts(data)
    except CckError as e:
        raise CckError(f"{key}: {e.message}") from e
    # install's check_manifest refuses a manifest snapshot that is not the requested
    # 16-hex id before anything is written (never a path outside the knowledge dir).
    path, installed = install(
        root, manifest, _keyed(key, strict_parts), corpus_id, requested, key, before_current
    )
    return manifest, path, installed


def _keyed(key: str, parts: Iterator[bytes]) -> Iterator[bytes]:
    """`parts`, with a CckError's message naming the artifact's key."""
    try:
        yield from parts
    except CckError as e:
        raise CckError(f"{key}: {e.message}") from e


@dataclass
class _Signed:
    """The statement and signature published beside an artifact, as read (bounded)."""

    statement: bytes | None = None
    signature: bytes | None = None
    #: why they could not be read (too large): a refusal under allowed signers
    problem: str | None = None


def _read_signed(read: Callable[[str, int], bytes | None], corpus_id: str, snap: str) -> _Signed:
    try:
        return _Signed(
            read(statement_key(corpus_id, snap), STATEMENT_MAX_BYTES),
            read(signature_key(corpus_id, snap), MAX_SIG_BYTES),
        )
    except CceError as e:
        return _Signed(problem=e.message)


#: What a pull found on the remote: (snapshot, artifact key, artifact source, artifact
#: id, the signed statement beside it). No source when the installed store already is
#: that artifact (nothing fetched). The artifact id is the git object id of the key's
#: blob on the remote (for an LFS artifact, its pointer's, which changes with the
#: object's sha256): a snapshot id alone names a feed, and the same feed indexed again
#: (another redaction mode, say) is a different store under the same snapshot id.
#: The last item is a parted snapshot's index (ours; None for a plain `.cck`): the
#: source is then a rebuilt temporary file the pull deletes when it is done.
Found = tuple[str, str, bytes | Path | None, str | None, _Signed, bytes | None]


@dataclass(frozen=True, slots=True)
class _Wanted:
    """What a pull asks the remote for: `corpus_id` (at `snapshot`, else the remote's
    `current`) for `root`, unless `installed` vouches for the artifact; `force` skips
    the marker guard."""

    root: str | os.PathLike[str]
    corpus_id: str
    snapshot: str | None
    force: bool
    installed: Callable[[str, str | None], bool]


def _offer(
    want: _Wanted,
    snapshot: str,
    read: tuple[
        Callable[[str], str | None],
        Callable[[str], bytes | Path | None],
        Callable[[str, int], bytes | None],
        Callable[[], GitParts],
    ],
) -> Found | None:
    """What the remote offers for `snapshot`, through `read` — its (artifact id, artifact
    source, small blob, parts) readers, the same for a remote read in place or a working
    clone; None when the artifact cannot be read this way. A snapshot published in
    parts is rebuilt from them (preferred to a plain `.cck` beside them)."""
    entry_id, artifact_source, small, parts = read
    corpus_id = want.corpus_id
    if not want.force:
        check_marker_guard(want.root, corpus_id)
    pkey = K.parts_index_key(corpus_id, snapshot)
    index_id = entry_id(pkey)
    if index_id is not None:
        if want.installed(snapshot, index_id):
            return snapshot, pkey, None, index_id, _Signed(), None
        index = small(pkey, MAX_INDEX_BYTES)
        if index is not None:
            rebuilt = rebuild_to_file(pkey, index, parts())
            signed = _read_signed(small, corpus_id, snapshot)
            return snapshot, pkey, rebuilt, index_id, signed, index
    key = K.artifact_key(corpus_id, snapshot)
    artifact = entry_id(key)
    if artifact is not None and want.installed(snapshot, artifact):
        return snapshot, key, None, artifact, _Signed(), None
    source = artifact_source(key)
    if source is None:
        return None
    return snapshot, key, source, artifact, _read_signed(small, corpus_id, snapshot), None


def _locate_in_place(rem: Remote, want: _Wanted) -> Found | None:
    """What a remote on this machine offers, read straight from it, or None to take the
    working-clone path (which then decides every error)."""
    direct = open_local(rem.url)
    if direct is None:
        return None
    snapshot = want.snapshot
    if snapshot is None:
        blob = direct.blob(K.pointer_key(want.corpus_id))
        snapshot = rs_trim(blob.decode("utf-8", "replace")) if blob is not None else ""
        if not snapshot:
            return None
        K.check_remote_pointer(want.corpus_id, snapshot)
    parts = GitParts(direct.git_dir, f"refs/heads/{direct.branch}", K.corpus_prefix(want.corpus_id))
    return _offer(
        want,
        snapshot,
        (direct.entry_id, direct.artifact_in_place, direct.small_blob, lambda: parts),
    )


def _fetch(rem: Remote, want: _Wanted) -> Found:
    """The artifact: read in place from a remote on this machine, else fetched into the
    working clone; not fetched at all when `want.installed` vouches for it."""
    found = _locate_in_place(rem, want)
    if found is not None:
        return found

    # GitPython is imported only here: the in-place read above does without it.
    from cce_knowledge.sync.clone import open_cache

    corpus_id, snapshot = want.corpus_id, want.snapshot
    with open_cache(rem) as cache:
        if snapshot is None:
            ptr = K.pointer_key(corpus_id)
            try:
                snapshot = cache.read_text(ptr)
            except CceError as e:
                corpora = cache.list_corpora()
                if corpora and corpus_id not in corpora:
                    raise SyncError(not_in_cache(corpus_id, corpora)) from e
                raise SyncError(no_pointer(corpus_id)) from e
            if snapshot:
                K.check_remote_pointer(corpus_id, snapshot)
        found = _offer(
            want,
            snapshot,
            (
                cache.blob_id,
                cache.artifact_source,
                cache.read_small,
                lambda: cache.git_parts(corpus_id),
            ),
        )
    assert found is not None  # the working clone's artifact_source raises, never None
    return found


def _cache_corpora(rem: Remote) -> list[str]:
    """The corpus ids the cache holds (read in place from a remote on this machine)."""
    direct = open_local(rem.url)
    if direct is not None:
        names = direct.dir_names(K.PREFIX)
        if names is not None:
            return sorted(names)
    # GitPython only here, as in `_fetch`: the in-place read above does without it.
    from cce_knowledge.sync.clone import open_cache

    with open_cache(rem) as cache:
        return cache.list_corpora()


def _only_corpus(rem: Remote, unset: SyncError) -> str:
    """No `--corpus` and no `knowledge.sync.corpus_id`: the cache's only corpus, as
    `cce sync pull --all` chooses; else `unset`'s error, naming what the cache holds."""
    corpora = _cache_corpora(rem)
    valid = [c for c in corpora if K.valid_corpus_id(c)]
    if len(valid) == 1:
        return valid[0]
    if not corpora:
        raise SyncError(f"{unset.message}; the cache at {rem.display} holds no corpus yet")
    listed = ", ".join(shown(c) for c in corpora[:_LISTED])
    more = f" and {len(corpora) - _LISTED} more" if len(corpora) > _LISTED else ""
    raise SyncError(f"{unset.message}; the cache holds {listed}{more}")


def _up_to_date(
    root: str | os.PathLike[str],
    corpus_id: str,
    snapshot: str,
    rem: Remote,
    artifact: str | None,
    if_current: Callable[[str], SearchBuild] | None,
) -> PullResult:
    """The result of a pull whose snapshot is already installed and intact: nothing is
    fetched, and nothing under .cce/knowledge/ is written unless something derived is
    missing (the search index, the record of the remote)."""
    marker = read_marker_lenient(root)
    path = store_path(root, snapshot)
    view = open_view(path)
    warnings: list[str] = []
    if read_pulled_from(root, corpus_id) != rem.display:
        try:
            with writer_lock(root, "knowledge pull"):
                write_pulled_from(root, corpus_id, rem.display, artifact)
        except OSError as e:
            warnings.append(f"could not record where the corpus came from: {e}")
    return PullResult(
        corpus_id=corpus_id,
        snapshot=snapshot,
        checksum=marker.checksum if marker is not None else "",
        records=view.records,
        chunks=view.chunk_count,
        store_path=path,
        installed_sha256=marker.installed_sha256 if marker is not None else None,
        remote=rem.display,
        store_display=f"{display_dir(root)}/{snapshot}.json",
        warnings=warnings,
        # Only a missing or stale index is built (under the writer lock, by the callee).
        search=if_current(snapshot) if if_current is not None else None,
        up_to_date=True,
    )


def pull_corpus(
    root: str | os.PathLike[str],
    corpus: str | None = None,
    snapshot: str | None = None,
    force: bool = False,
    remote: str | Remote | None = None,
    *,
    settings: Settings,
    after_install: Callable[[str], SearchBuild] | None = None,
    if_current: Callable[[str], SearchBuild] | None = None,
    allowed_signers: str | None = None,
    reset_trust: bool = False,
) -> PullResult:
    """Install a corpus snapshot (default: the remote `current`) into `root`.

    `after_install(snapshot)` runs under the writer lock once the store is active (the
    CLI builds the search index). `settings`: the root's, loaded by the caller.

    When the installed store already is that snapshot of that corpus, pulled from the
    same artifact (the remote blob's object id recorded in pulled-from.json) and intact
    (marker, `current` and the store's recorded sha256 agree), nothing is fetched or
    written: the result says `up_to_date` and `if_current(snapshot)` runs (without the
    writer lock: it takes one if it writes). `force` reinstalls regardless, and replaces
    a store from another corpus. Under allowed signers the installed snapshot must also
    be the one last accepted here, else it is fetched and verified.

    Without `corpus` and `knowledge.sync.corpus_id`, the cache's only corpus is pulled.

    `allowed_signers` (else `knowledge.sync.allowed_signers`): an OpenSSH allowed_signers
    file; with one, only a snapshot whose statement an allowed key signed, which matches
    the artifact and is not older than the one accepted before is installed (signing.py);
    any refusal raises SignatureRefused and leaves the installed store untouched.
    `reset_trust`: the snapshot verified now replaces the corpus's rollback floor,
    whatever it was (the documented recovery from a poisoned floor)."""
    try:
        corpus_id = K.check_corpus_id(K.resolve_corpus_id(settings, corpus))
    except SyncError as unset:
        if corpus is not None:
            raise  # an invalid --corpus, refused before any remote work
        # No corpus named anywhere: ask the cache (with no remote either, the corpus error).
        try:
            rem: Remote = resolve_remote(settings, remote)
        except SyncError:
            raise unset from None
        corpus_id = _only_corpus(rem, unset)
    else:
        rem = resolve_remote(settings, remote)
    if snapshot is not None:
        K.check_snapshot_arg(snapshot)
    allowed = load_allowed(root, allowed_signers, settings.knowledge.sync.allowed_signers)
    check_reset(reset_trust, allowed)

    def up_to_date(snap: str, artifact: str | None) -> bool:
        if force or reset_trust or not is_installed(root, corpus_id, snap, artifact):
            return False
        # Under allowed signers only a snapshot accepted here (the newest verified
        # statement names it) counts: one installed unverified is verified now.
        floor = read_floor(root, corpus_id) if allowed is not None else None
        return allowed is None or (floor is not None and floor.snapshot == snap)

    with progress.phase("pull: fetch"):
        snapshot, key, fetched, artifact, signed, index = _fetch(
            rem, _Wanted(root, corpus_id, snapshot, force, up_to_date)
        )
    if fetched is None:
        return _up_to_date(root, corpus_id, snapshot, rem, artifact, if_current)
    try:
        result = _install_fetched(
            root, corpus_id, snapshot, rem, (key, fetched, artifact, signed), force, allowed,
            after_install, reset_trust,
        )  # fmt: skip
    finally:
        if index is not None and isinstance(fetched, Path):
            discard(fetched)
    if index is not None:
        part_store().keep(corpus_id, index)  # the parts of what is installed stay
    return result


def _install_fetched(
    root: str | os.PathLike[str],
    corpus_id: str,
    snapshot: str,
    rem: Remote,
    got: tuple[str, bytes | Path, str | None, _Signed],
    force: bool,
    allowed: Any,
    after_install: Callable[[str], SearchBuild] | None,
    reset_trust: bool = False,
) -> PullResult:
    """Verify (signature, artifact) and install what `_fetch` got, under the lock."""
    key, source, artifact, signed = got
    warnings: list[str] = []
    signed_by = _unverified_signer(signed, warnings) if allowed is None else None
    warnings += allowed.skipped if allowed is not None else ()
    # One writer per root: a concurrent pull's cleanup must not delete what this one
    # installs, nor the other way round (index and `sync pull --all` take it too).
    with writer_lock(root, "knowledge pull"):
        if not force:
            check_marker_guard(root, corpus_id)  # again: another writer may have run
        with _mapped(source) as data:
            verified: Verified | None = None
            if allowed is not None:
                if signed.problem is not None:
                    raise SignatureRefused(f"refusing the snapshot: {signed.problem}")
                verified = verify_publish(
                    allowed,
                    signed.statement,
                    signed.signature,
                    where=statement_key(corpus_id, snapshot),
                    corpus_id=corpus_id,
                    snapshot=snapshot,
                    artifact_sha256=sha256_of(data),
                    floor=None if reset_trust else read_floor(root, corpus_id),
                )

            def record() -> None:
                # Before `current` moves: a failure here leaves the old store active.
                try:
                    record_installed(root, signed.statement, signed.signature, verified)
                    if verified is not None:
                        raise_floor(root, verified.statement, reset=reset_trust)
                except OSError as e:
                    raise SyncError(f"could not record the snapshot's signed statement: {e}") from e

            manifest, path, installed = _import_and_install(
                root, key, data, corpus_id, snapshot, record
            )
        if reset_trust and verified is not None:
            warnings.append(
                f"--reset-trust: {corpus_id}@{snapshot} (counter {verified.statement.counter}) "
                "is now this root's rollback floor"
            )
        try:
            write_pulled_from(root, corpus_id, rem.display, artifact)
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
        verified=verified,
        signed_by=signed_by,
    )


def _unverified_signer(signed: _Signed, warnings: list[str]) -> str | None:
    """Who signed (key type and fingerprint) without allowed signers: shown, not trusted.
    A signature that cannot even be parsed is not recorded."""
    if signed.problem is not None:
        warnings.append(f"ignored the snapshot's signature: {signed.problem}")
        signed.statement = signed.signature = None
        return None
    if signed.statement is None or signed.signature is None:
        signed.statement = signed.signature = None
        return None
    try:
        return parse_signature(signed.signature).signer
    except CceError as e:
        warnings.append(f"ignored the snapshot's signature: {e.message}")
        signed.statement = signed.signature = None
        return None
