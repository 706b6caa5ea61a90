"""`cce knowledge push`: publish the local store as a `.cck` (docs/spec/sync.md §4).

Step order: load store → corpus id → export → remote + clone → shrink guard →
`*.cck` LFS attribute → one publish commit (artifact, `current`, `corpus.json`) with
read-back verification → report → retention (best effort). Nothing local is written.
"""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from cce_knowledge.config.settings import Settings
from cce_knowledge.contract.manifest import LeftOut
from cce_knowledge.core import progress
from cce_knowledge.core.errors import CceError, ConfigError, SyncError
from cce_knowledge.core.jsonout import pretty
from cce_knowledge.core.rustcompat import io_error_text
from cce_knowledge.core.untrusted import shown
from cce_knowledge.store.left_out import read_left_out
from cce_knowledge.store.snapshots import (
    read_current,
    store_path,
)
from cce_knowledge.sync import guard as G
from cce_knowledge.sync import keys as K
from cce_knowledge.sync.accelerator import chunk_digests, iter_export_slices
from cce_knowledge.sync.allowed_signers import AllowedSigners
from cce_knowledge.sync.cck import (
    PHASE_A_REFUSAL,
    CckManifest,
    export_store_spooled,
    import_keyed_chunk_digests,
)
from cce_knowledge.sync.clone import (
    CCK_ATTR_LINE,
    Blob,
    GitCache,
    lfs_available,
    open_cache,
)
from cce_knowledge.sync.outgoing import Outgoing, outgoing_from_store
from cce_knowledge.sync.parts import (
    MAX_INDEX_BYTES,
    PLAIN_CCK_MAX,
    PartIndex,
    parse_index,
    part_key,
    split,
)
from cce_knowledge.sync.parts_pull import remote_artifact
from cce_knowledge.sync.remote import Remote, resolve_remote
from cce_knowledge.sync.signing import (
    SigningKey,
    load_allowed,
    load_signing_key,
    new_statement,
    previous_counter,
    sha256_of,
    sign_statement,
)
from cce_knowledge.sync.sshsig import MAX_SIG_BYTES
from cce_knowledge.sync.statement import (
    MAX_BYTES as STATEMENT_MAX_BYTES,
)
from cce_knowledge.sync.statement import (
    is_statement_key,
    signature_key,
    snapshot_of,
    statement_key,
)
from cce_knowledge.sync.vector_share import (
    VEC_ATTR_LINE,
    outgoing_vectors,
    stale_vector_keys,
    vectors_key,
)

META_SCHEMA = "cce.knowledgemeta/v1"

#: A publish that would silently store the artifact as a plain blob (the reference's
#: behaviour) is refused instead: the cache would grow by the whole artifact each time.
NO_LFS = (
    "git-lfs is not installed, and the cache keeps .cck artifacts in git-LFS (sync.lfs is on): "
    "without it every publish would add the whole artifact to the cache's git history. "
    "Install git-lfs (https://git-lfs.com; e.g. `apt-get install git-lfs` or "
    "`brew install git-lfs`), or publish plain git blobs on purpose with "
    "`cce knowledge push --no-lfs`"
)


@dataclass
class PushResult:
    corpus_id: str
    snapshot: str
    key: str
    checksum: str
    records: int
    chunks: int
    data_as_of: str | None
    published: bool = False
    pushed_at: str | None = None
    remote: str = ""
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    #: "first-publish", "unchanged", "divergent", "diff" or "skipped" (--force)
    guard: str = "skipped"
    #: the remote `current` the guard compared against ("" on a first publish or --force)
    remote_snapshot: str = ""
    #: True when --skip-unchanged found the remote `current` already naming this snapshot
    unchanged_skipped: bool = False
    #: the retention policy applied after the publish, e.g. "keep-last-30" (None: all)
    retention: str | None = None
    pruned: list[str] = field(default_factory=list)
    retention_warning: str | None = None
    #: models whose vectors were published beside the artifact (ours; usually none)
    vectors: list[str] = field(default_factory=list)
    #: the signing key (type and fingerprint) when the publish was signed (ours)
    signed_by: str | None = None
    #: the signed statement's key and counter (ours; None when unsigned)
    statement_key: str | None = None
    counter: int | None = None
    #: why the remote's current statement did not give the counter (unverified), if so
    signing_warning: str | None = None
    #: ours: the removed records the feed's extractor left out by author (lockdown), and
    #: the `--authors` mode that did (from the manifest `index --manifest` verified)
    left_out: list[str] = field(default_factory=list)
    left_out_authors: str | None = None
    #: a parted publish (ours): the index's key, parts in all, parts and bytes new
    parts_key: str | None = None
    parts: int = 0
    parts_new: int = 0
    parts_new_bytes: int = 0
    #: whether the plain `<snapshot>.cck` was published too
    plain: bool = True
    #: parts removed by retention (no kept snapshot uses them)
    parts_pruned: int = 0
    report: str = ""


def utc_now() -> str:
    t = time.gmtime()
    return (
        f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T"
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}Z"
    )


def corpus_meta(m: CckManifest, corpus_id: str, pushed_at: str) -> bytes:
    meta = {
        "chunk_count": m.chunk_count,
        "corpus_id": corpus_id,
        "current": m.snapshot,
        "data_as_of": m.data_as_of,
        "pushed_at": pushed_at,
        "records": m.records,
        "schema": META_SCHEMA,
    }
    return (pretty(meta, sort_keys=True) + "\n").encode("utf-8")


def _guard(
    cache: GitCache,
    out: Outgoing,
    corpus_id: str,
    res: PushResult,
    dry_run: bool,
    left: LeftOut | None = None,
) -> None:
    """Raise on a refusal; fill `res.report` for a dry-run. `left`: what the feed's
    extractor left out by author, to say so when those records are the ones dropped."""
    ptr = K.pointer_key(corpus_id)
    remote_snap = cache.read_text(ptr) if cache.has(ptr) else ""
    if not remote_snap:
        res.guard = "first-publish"
        if dry_run:
            res.report = G.first_publish_dry_run(corpus_id, res.snapshot, res.records, res.chunks)
        return
    if not K.is_snapshot_id(remote_snap):
        bad = K.bad_pointer(corpus_id, remote_snap)
        raise SyncError(G.unverifiable(corpus_id, shown(remote_snap), bad, dry_run))
    res.remote_snapshot = remote_snap
    key = K.artifact_key(corpus_id, remote_snap)
    try:
        # Verified like a pull, but only record ids and content digests are kept.
        artifact = remote_artifact(cache, corpus_id, remote_snap)
        remote = chunk_digests(artifact) or import_keyed_chunk_digests(key, bytes(artifact))
        remote_manifest, remote_chunks = remote
    except CceError as e:
        raise SyncError(G.unverifiable(corpus_id, remote_snap, e.message, dry_run)) from e
    if remote_snap == res.snapshot:
        if remote_manifest.checksum == res.checksum:
            res.guard = "unchanged"
            if dry_run:
                res.report = G.unchanged_dry_run(corpus_id, res.snapshot)
            return
        res.guard = "divergent"
        remote_sum = remote_manifest.checksum
        if dry_run:
            res.report = G.divergent_dry_run(corpus_id, res.snapshot, remote_sum, res.checksum)
            return
        raise SyncError(G.divergent_error(corpus_id, res.snapshot, remote_sum, res.checksum))
    d = G.diff_digests(G.digests_from_chunks(out.chunks), G.digests_from_chunks(remote_chunks))
    res.guard = "diff"
    res.added, res.removed, res.changed = d.added, d.removed, d.changed
    report = G.diff_report(
        corpus_id, res.snapshot, remote_snap, out.manifest.records, remote_manifest.records, d
    )
    if left is not None:
        kept_out = set(left.records)
        res.left_out = [r for r in d.removed if r in kept_out]
        res.left_out_authors = left.authors if res.left_out else None
    report += G.left_out_line(res.left_out)
    why = G.left_out_advice(res.left_out, res.left_out_authors or "", len(d.removed))
    if dry_run:
        res.report = report + (why + "\n" if why else "") + G.NOTHING_PUSHED
    elif d.removed:
        refusal = G.shrink_refusal(report, corpus_id, len(d.removed))
        raise SyncError(refusal + ("\n" + why if why else ""))


def retention_prune(cache: GitCache, corpus_id: str, snapshot: str, keep: int) -> list[str]:
    """Keys pruned under keep-last-<keep> (first-added order; `current` always kept).

    A snapshot is its `.cck` and/or its `.parts` index (ours); the parts no kept index
    names go in a second commit (`prune_parts`)."""
    keys = cache.list_cck(corpus_id) + cache.list_parts_indexes(corpus_id)
    history = cache.first_added(corpus_id)
    pos = {k: i for i, k in enumerate(history)}
    inf = len(history) + 1
    first: dict[str, tuple[int, str]] = {}
    for k in keys:
        snap = snapshot_of(k)
        here = (pos.get(k, inf), K.artifact_key(corpus_id, snap))
        first[snap] = min(first.get(snap, here), here)
    ordered = sorted(first, key=lambda snap: first[snap])
    keep_from = max(0, len(ordered) - keep)
    doomed_snaps = {snap for snap in ordered[:keep_from] if snap != snapshot}
    doomed = [k for k in keys if snapshot_of(k) in doomed_snaps]
    # A statement and its signature go with their snapshot (ours; the reference prunes
    # only `.cck` keys, so one it pruned leaves them behind: they go here too).
    kept = {snapshot_of(k) for k in keys if k not in doomed}
    names = cache.ls_tree_names("--name-only", cache.origin, K.corpus_prefix(corpus_id) + "/")
    doomed += [n for n in names if is_statement_key(n) and snapshot_of(n) not in kept]
    for k in doomed:
        K.check_prune_key(k, corpus_id)
    cache.remove_many(sorted(doomed), f"cce knowledge sync: retention prune ({corpus_id})")
    # One key per pruned snapshot: its `.cck`, else its index.
    return sorted(
        K.artifact_key(corpus_id, snap)
        if K.artifact_key(corpus_id, snap) in doomed
        else K.parts_index_key(corpus_id, snap)
        for snap in doomed_snaps
    )


def prune_parts(cache: GitCache, corpus_id: str) -> int:
    """Remove the parts that no `.parts` index on the remote tip names; returns how many."""
    indexes = cache.list_parts_indexes(corpus_id)
    used: set[str] = set()
    for k in indexes:
        data = cache.read_small(k, MAX_INDEX_BYTES)
        if data is None:
            continue
        used |= parse_index(k, data).names()
    prefix = K.corpus_prefix(corpus_id)
    doomed = sorted(part_key(prefix, n) for n in cache.part_names(corpus_id) - used)
    for k in doomed:
        K.check_prune_key(k, corpus_id)
    if doomed:
        cache.fast_commit(
            lambda _present: (),
            doomed,
            f"cce knowledge sync: prune {len(doomed)} parts ({corpus_id})",
        )
    return len(doomed)


def success_report(res: PushResult, policy: int | None) -> str:
    out = (
        f"Pushed corpus {res.corpus_id}@{res.snapshot}\n"
        f"  key        : {res.key}\n"
        f"  checksum   : {res.checksum}\n"
        f"  records    : {res.records} · chunks : {res.chunks}\n"
        f"  data as-of : {res.data_as_of or '-'}\n"
        f"  pushed at  : {res.pushed_at}\n"
    )
    if res.parts_key is not None:
        out += (
            f"  parts      : {res.parts} ({res.parts_new} new, {res.parts_new_bytes} bytes) "
            f"in {res.parts_key}{'' if res.plain else ' (no plain .cck)'}\n"
        )
    if res.vectors:
        out += f"  vectors    : {', '.join(res.vectors)} (published beside the artifact)\n"
    if res.signed_by is not None:
        out += f"  signed by  : {res.signed_by} (counter {res.counter})\n"
    if res.retention_warning is not None:
        out += f"  warning: retention prune failed — {res.retention_warning}\n"
    elif res.pruned:
        s = "" if len(res.pruned) == 1 else "s"
        out += f"  retention  : pruned {len(res.pruned)} snapshot{s} (keep-last-{policy})\n"
    if res.parts_pruned:
        out += f"  retention  : removed {res.parts_pruned} parts no kept snapshot uses\n"
    return out


def unchanged_skip_report(res: PushResult) -> str:
    return (
        f"Corpus {res.corpus_id}@{res.snapshot} — the remote `current` already names this "
        "snapshot with identical content; nothing pushed (--skip-unchanged).\n"
    )


def _outgoing(root: str | os.PathLike[str], corpus_id: str) -> Outgoing:
    """The outgoing `.cck`: straight from the store file's bytes when it is in the
    writer's layout, else via `outgoing_from_store` (which owns the errors)."""
    try:
        path = store_path(root, read_current(root))
        with open(path, "rb") as f:
            # Mapped, not read: file-backed pages the kernel can drop (a store is GBs).
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, UnicodeDecodeError, ValueError):  # ValueError: an empty file
        return outgoing_from_store(root, corpus_id)
    try:
        fast = export_store_spooled(data, corpus_id, path.parent, native_iter=iter_export_slices)
    except OSError as e:
        raise SyncError(f"could not write the outgoing artifact: {io_error_text(e)}") from e
    finally:
        data.close()
    if fast is None:
        return outgoing_from_store(root, corpus_id)
    if fast is True:
        return Outgoing(CckManifest("", 0, "", "", None, 0, ""), b"", [], phase_a=True)
    manifest, blob, pairs = fast
    return Outgoing(manifest, blob, pairs)


def push_corpus(
    root: str | os.PathLike[str],
    corpus: str | None = None,
    remote: str | Remote | None = None,
    force: bool = False,
    dry_run: bool = False,
    skip_unchanged: bool = False,
    lfs: bool | None = None,
    *,
    settings: Settings,
    sign_key: str | None = None,
) -> PushResult:
    """Publish (or dry-run) the local store. Raises CceError on every refusal.

    `skip_unchanged`: when the guard finds the remote `current` already naming this
    snapshot with identical content, publish nothing (no commit) instead of the
    reference's re-publish that refreshes `pushed_at`. `force` skips the guard, so a
    forced push always publishes.

    `lfs=None` follows `sync.lfs` (default on); `False` publishes plain git blobs.
    `settings`: the root's, loaded by the caller.

    `sign_key`: an OpenSSH private key file to sign the publish with; else the key text
    in CCE_SIGNING_KEY, else `knowledge.sync.signing_key` (none: unsigned, as before).
    A key that cannot be loaded is refused before any remote work.
    """
    # Before anything else: a retention that is not a policy refuses the push (exit 2;
    # the reference keeps everything), even a dry run, which shows what push would do.
    policy = settings.knowledge.sync.keep_last
    corpus_id, out = _resolve_outgoing(root, settings, corpus)
    key = load_signing_key(root, sign_key, settings.knowledge.sync.signing_key)
    rem: Remote = resolve_remote(settings, remote)
    res = _new_result(corpus_id, out.manifest, rem)
    use_lfs = settings.sync.lfs if lfs is None else lfs
    with_parts, plain = parts_plan(settings.knowledge.sync.parts, len(out.data))
    if use_lfs and plain and not dry_run and not lfs_available():
        raise SyncError(NO_LFS)
    with open_cache(rem, for_write=not dry_run) as cache:
        if dry_run or not force:
            _guard(cache, out, corpus_id, res, dry_run, read_left_out(root, res.snapshot))
        if dry_run:
            return res
        if (
            skip_unchanged
            and res.guard == "unchanged"
            and _same_shape(cache, res, with_parts, plain)
        ):
            res.unchanged_skipped = True
            res.report = unchanged_skip_report(res)
            return res
        allowed = _publisher_allowed(root, settings) if key is not None else None
        _publish(
            cache,
            root,
            out,
            res,
            use_lfs,
            key,
            _vector_model(settings),
            (with_parts, plain),
            allowed,
        )
        _retain(cache, res, policy)
        res.report = success_report(res, policy)
    return res


def _resolve_outgoing(
    root: str | os.PathLike[str], settings: Settings, corpus: str | None
) -> tuple[str, Outgoing]:
    """The corpus id and the outgoing artifact, refusing a bad id or a Phase-A store."""
    # Error order as the reference: no store, then the corpus id, then Phase-A. So the
    # export runs (and may raise "no store") before a bad id is reported.
    try:
        corpus_id: str | None = K.check_corpus_id(K.resolve_corpus_id(settings, corpus))
        id_error: SyncError | None = None
    except SyncError as e:
        corpus_id, id_error = None, e
    with progress.phase("push: export"):
        out = _outgoing(root, corpus_id or "unresolved")
    if id_error is not None or corpus_id is None:
        raise id_error or SyncError("corpus id")
    if out.phase_a:
        raise SyncError(PHASE_A_REFUSAL)
    return corpus_id, out


def _new_result(corpus_id: str, m: CckManifest, rem: Remote) -> PushResult:
    return PushResult(
        corpus_id=corpus_id,
        snapshot=m.snapshot,
        key=K.artifact_key(corpus_id, m.snapshot),
        checksum=m.checksum,
        records=m.records,
        chunks=m.chunk_count,
        data_as_of=m.data_as_of,
        remote=rem.display,
    )


def parts_plan(mode: str, size: int) -> tuple[bool, bool]:
    """(publish parts, publish the plain `.cck`) for `knowledge.sync.parts` and the
    artifact's size (docs/spec/sync.md §13.2)."""
    if mode == "never":
        return False, True
    if mode == "always":
        return True, size <= PLAIN_CCK_MAX
    if mode != "auto":
        raise ConfigError(
            f"knowledge.sync.parts: '{shown(mode)}' is not a parts policy; allowed: "
            "`auto`, `always` or `never`"
        )
    return size > PLAIN_CCK_MAX, size <= PLAIN_CCK_MAX


def _publish_parts(cache: GitCache, out: Outgoing, res: PushResult) -> PartIndex:
    """The parts commit (before the publish commit, which adds the index): only the
    parts the remote lacks are written and uploaded."""
    index, spans = split(out.data)
    prefix = K.corpus_prefix(res.corpus_id)

    def writes(present: set[str]) -> Iterator[tuple[str, bytes]]:
        seen = set(present)
        for (a, b), ref in zip(spans, index.parts, strict=True):
            if ref.sha256 not in seen:
                seen.add(ref.sha256)
                res.parts_new_bytes += b - a
                yield part_key(prefix, ref.sha256), bytes(out.data[a:b])

    res.parts_new = cache.fast_commit(
        writes, [], f"cce sync: parts of {res.corpus_id}@{res.snapshot}", label="push"
    )
    res.parts = len(index.parts)
    return index


def _publish(
    cache: GitCache,
    root: str | os.PathLike[str],
    out: Outgoing,
    res: PushResult,
    use_lfs: bool,
    key: SigningKey | None = None,
    vector_model: str | None = None,
    plan: tuple[bool, bool] = (False, True),
    allowed: AllowedSigners | None = None,
) -> None:
    """The one publish commit: artifact (the plain `.cck` and/or the parts index, the
    parts committed just before), `current`, corpus.json, the vectors of
    `vector_model` (the configured embedding model) if there are any and, with a
    signing key, the signed statement."""
    corpus_id, m = res.corpus_id, out.manifest
    with_parts, res.plain = plan
    if use_lfs and res.plain:
        cache.ensure_attribute(CCK_ATTR_LINE, "*.cck", "cce sync: enable git-LFS for *.cck")
    entries: list[tuple[str, Blob]] = []
    if with_parts:
        index = _publish_parts(cache, out, res)
        res.parts_key = K.parts_index_key(corpus_id, m.snapshot)
        entries.append((res.parts_key, index.encode()))
        if not res.plain:
            res.key = res.parts_key
    res.pushed_at = utc_now()
    if res.plain:
        entries.append((res.key, out.data))
    entries += [
        (K.pointer_key(corpus_id), f"{m.snapshot}\n".encode()),
        (K.meta_key(corpus_id), corpus_meta(m, corpus_id, res.pushed_at)),
    ]
    vectors = _vector_entries(cache, root, res, use_lfs, vector_model)
    entries += vectors
    if key is not None:
        entries += _signed_entries(cache, out, res, vectors, key, allowed)
    for k, _ in entries:
        K.check_write_key(k, corpus_id)
    # An unchanged re-publish (guard: same key, same checksum on the remote) only
    # refreshes `current` and corpus.json; the artifact is already there, byte-equal.
    same = frozenset({res.key}) if res.guard == "unchanged" else frozenset()
    cache.put_many(entries, _publish_message(res, bool(same)), keep_if_present=same, label="push")
    res.published = True


def _publisher_allowed(root: str | os.PathLike[str], settings: Settings) -> AllowedSigners | None:
    """The publisher's configured allowed signers, to verify a statement signed by
    another (rotated) key; an unreadable file only narrows that to this key."""
    try:
        return load_allowed(root, None, settings.knowledge.sync.allowed_signers)
    except CceError:
        return None


def _vector_model(settings: Settings) -> str | None:
    """The configured embedding model, whose vectors (only) are published; None when
    semantic retrieval is off or misconfigured."""
    try:
        cfg = settings.knowledge.semantic_config()
    except CceError:
        return None
    return cfg.model if cfg is not None else None


def _vector_entries(
    cache: GitCache,
    root: str | os.PathLike[str],
    res: PushResult,
    use_lfs: bool,
    model: str | None,
) -> list[tuple[str, bytes]]:
    """Vectors (ours) travel beside the artifact, never inside it (sync/vector_share.py):
    the configured model's only."""

    vectors = outgoing_vectors(root, res.snapshot, model)
    if vectors and use_lfs:
        cache.ensure_attribute(VEC_ATTR_LINE, "*.vec", "cce sync: enable git-LFS for *.vec")
    res.vectors = [model for model, _ in vectors]
    return [(vectors_key(res.corpus_id, res.snapshot, model), data) for model, data in vectors]


def _signed_entries(
    cache: GitCache,
    out: Outgoing,
    res: PushResult,
    vectors: list[tuple[str, bytes]],
    key: SigningKey,
    allowed: AllowedSigners | None = None,
) -> list[tuple[str, bytes]]:
    """The statement and its signature, beside the artifact (docs/cache.md)."""
    corpus_id = res.corpus_id
    previous = None
    ptr = K.pointer_key(corpus_id)
    if cache.has(ptr):
        remote_snap = cache.read_text(ptr)
        if K.is_snapshot_id(remote_snap):
            where = statement_key(corpus_id, remote_snap)
            try:
                data = cache.read_small(where, STATEMENT_MAX_BYTES)
                sig = cache.read_small(signature_key(corpus_id, remote_snap), MAX_SIG_BYTES)
            except CceError:
                data = sig = None  # a hostile or broken statement only loses its counter
            # Only a verified statement's counter counts (issue 34: counter poisoning).
            previous, res.signing_warning = previous_counter(
                data, sig, key=key, allowed=allowed, corpus_id=corpus_id, where=where
            )
    st = new_statement(
        corpus_id=corpus_id,
        snapshot=res.snapshot,
        cck_sha256=sha256_of(out.data),
        cck_checksum=out.manifest.checksum,
        cck_size=len(out.data),
        published_at=res.pushed_at or utc_now(),
        previous=previous,
        vectors={k: sha256_of(d) for k, d in vectors},
    )
    st_bytes, sig_bytes = sign_statement(key, st)
    res.signed_by, res.counter = key.signer, st.counter
    res.statement_key = statement_key(corpus_id, res.snapshot)
    return [(res.statement_key, st_bytes), (signature_key(corpus_id, res.snapshot), sig_bytes)]


def _same_shape(cache: GitCache, res: PushResult, with_parts: bool, plain: bool) -> bool:
    """The remote already carries the keys this push would publish (an unchanged
    re-publish under --skip-unchanged then writes nothing)."""
    wanted = [K.artifact_key(res.corpus_id, res.snapshot)] if plain else []
    if with_parts:
        wanted.append(K.parts_index_key(res.corpus_id, res.snapshot))
    return all(cache.has(k) for k in wanted)


def _publish_message(res: PushResult, unchanged: bool) -> str:
    # The reference says "3 artifacts" either way; an unchanged re-publish says what
    # it really commits.
    message = (
        f"cce sync: re-publish {res.corpus_id}@{res.snapshot} unchanged (corpus.json refreshed)"
        if unchanged
        else "cce sync: 3 artifacts"
    )
    if res.vectors:
        message += f" + vectors ({', '.join(res.vectors)})"
    if res.signed_by is not None:
        message += " + signed statement"
    return message


def _retain(cache: GitCache, res: PushResult, policy: int | None) -> None:
    """Retention after the publish: best effort, a failure becomes a warning."""
    if policy is None:
        return
    res.retention = f"keep-last-{policy}"
    try:
        res.pruned = retention_prune(cache, res.corpus_id, res.snapshot, policy)
        if res.pruned or res.parts_key is not None:
            res.parts_pruned = prune_parts(cache, res.corpus_id)

        stale = stale_vector_keys(cache, res.corpus_id)
        for k in stale:
            K.check_prune_key(k, res.corpus_id)
        if stale:
            cache.remove_many(stale, f"cce knowledge sync: prune vectors ({res.corpus_id})")
    except CceError as e:
        res.retention_warning = e.message
