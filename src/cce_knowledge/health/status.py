"""What knowledge is installed under a root, where it came from and how fresh it is.

Shared by `cce knowledge status` and the MCP `index_status` knowledge block
(docs/spec/sync.md §7.1). Everything local is exact; the remote part (the
corpus' published `current` and `pushed_at`) is best-effort and offline-safe:
it runs with a bounded timeout and any failure reads as "unknown", never as an
error and never as a hang.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from cce_knowledge.config.settings import Settings
from cce_knowledge.core.errors import CceError, StoreError
from cce_knowledge.core.fields import attrs_of, field_names
from cce_knowledge.core.rustcompat import io_error_text
from cce_knowledge.core.urls import display_url
from cce_knowledge.engine.redaction.modes import redact_for_display
from cce_knowledge.semantic.status import semantic_status
from cce_knowledge.store.snapshots import read_current, store_path
from cce_knowledge.store.view import open_view
from cce_knowledge.sync.marker import (
    SyncMarker,
    active_snapshot,
    file_sha256,
    read_marker_lenient,
    read_pulled_from,
    stale_marker,
)
from cce_knowledge.sync.remote import RemoteCurrent
from cce_knowledge.sync.signing import SignatureInfo, installed_signature, load_allowed

#: Default bound on one remote lookup (a clone/fetch of the cache repo).
DEFAULT_REMOTE_TIMEOUT = 8.0
#: A long-lived process (the MCP server) reuses a lookup for this long.
REMOTE_CACHE_SECONDS = 60.0

KNOWLEDGE_NO_RECORD_NOTICE = (
    "no install checksum recorded (pulled by an older cce) — re-pull with "
    "`cce knowledge pull` to enable checksum verification"
)


# ------------------------------------------------------------------ remote lookup


if TYPE_CHECKING:
    from cce_knowledge.semantic.status import SemanticStatus


def strip_credentials(url: str) -> str:
    """A remote URL fit to print (`urls.display_url`), with any secret-shaped rest
    (a token in the path) redacted too."""

    return redact_for_display(display_url(url))


def _read_remote(remote: str, corpus_id: str) -> RemoteCurrent:
    # Lazy: GitPython costs ~60 ms of every `status`, and --offline never needs it.
    from cce_knowledge.sync.listing import read_remote_current

    return read_remote_current(remote, corpus_id)


_cache_lock = threading.Lock()
_cache: dict[tuple[str, str], tuple[float, RemoteCurrent]] = {}
_inflight: dict[tuple[str, str], threading.Thread] = {}
_results: dict[tuple[str, str], RemoteCurrent] = {}


def lookup_remote(
    remote: str, corpus_id: str, *, timeout: float = DEFAULT_REMOTE_TIMEOUT, cache_for: float = 0.0
) -> RemoteCurrent:
    """Best-effort remote lookup bounded by `timeout` seconds.

    The work runs on a daemon thread: a remote that never answers costs the
    caller `timeout` once, and a still-running lookup is joined, not restarted,
    by the next call (so a dead host cannot pile up threads in a server).
    """
    key = (remote, corpus_id)
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and now - hit[0] < cache_for:
            return hit[1]
        worker = _inflight.get(key)
        if worker is None or not worker.is_alive():

            def run() -> None:
                info = _read_remote(remote, corpus_id)  # never raises: unknown instead
                with _cache_lock:
                    _results[key] = info
                    _cache[key] = (time.monotonic(), info)

            _results.pop(key, None)
            worker = threading.Thread(target=run, name="cce-remote-lookup", daemon=True)
            _inflight[key] = worker
            worker.start()
    worker.join(timeout)
    with _cache_lock:
        info = _results.get(key)
    if info is None:
        return RemoteCurrent(problem=f"timeout after {timeout:g}s")
    return info


# ------------------------------------------------------------------ local facts


@dataclass(frozen=True, slots=True)
class ChecksumState:
    """The pulled-bytes check: ok | mismatch | unreadable | no-record | local |
    stale-marker (the marker names another snapshot than `current`)."""

    state: str
    expected: str | None = None
    actual: str | None = None
    error: str | None = None


def check_installed_bytes(root: str | os.PathLike[str], marker: SyncMarker | None) -> ChecksumState:
    if marker is None:
        return ChecksumState("local")
    current = active_snapshot(root)
    if current != marker.snapshot:
        # The marker describes a store readers do not use: judge `current`'s, not it.
        return ChecksumState("stale-marker", error=stale_marker(marker, current))
    if marker.installed_sha256 is None:
        return ChecksumState("no-record")
    try:
        actual = file_sha256(store_path(root, marker.snapshot))
    except OSError as e:
        return ChecksumState("unreadable", expected=marker.installed_sha256, error=io_error_text(e))
    if actual != marker.installed_sha256:
        return ChecksumState("mismatch", expected=marker.installed_sha256, actual=actual)
    return ChecksumState("ok", expected=marker.installed_sha256, actual=actual)


@dataclass(frozen=True, slots=True)
class StoreFacts:
    """What status needs from a store (no chunk bodies, no embeddings)."""

    schema: str
    snapshot: str
    records: int
    chunks: int
    data_as_of: str | None


def store_facts(root: str | os.PathLike[str]) -> StoreFacts:
    """Facts of the active store, read by mapping the file instead of parsing all of it
    (a 100k-record store is most of a gigabyte). Raises StoreError like `load_current`."""
    try:
        view = open_view(store_path(root, read_current(root)))
        return StoreFacts(
            view.schema, view.snapshot, view.records, view.chunk_count, view.data_as_of()
        )
    except OSError as e:
        raise StoreError(io_error_text(e)) from e
    except (ValueError, UnicodeDecodeError) as e:
        raise StoreError(str(e)) from e


@dataclass(slots=True)
class KnowledgeStatus:
    root: str
    store_file: str
    schema: str
    snapshot: str
    records: int
    chunks: int
    data_as_of: str | None
    #: The marker's corpus when it describes the active snapshot, else None (local ingest).
    corpus: str | None
    marker_corpus: str | None
    marker_snapshot: str | None
    checksum: ChecksumState
    remote: str | None = None
    remote_corpus: str | None = None
    remote_checked: bool = False
    remote_current: str | None = None
    pushed_at: str | None = None
    remote_problem: str | None = None
    #: Ours: semantic retrieval (None when neither configured nor vectors present).
    semantic: SemanticStatus | None = None
    #: Ours: the pulled snapshot's signature (None: unsigned with no allowed signers,
    #: or a local ingest).
    signature: SignatureInfo | None = None

    @property
    def behind_remote(self) -> bool:
        """True iff the remote `current` is known and differs (even if ours is newer)."""
        return self.remote_current is not None and self.remote_current != self.snapshot

    def to_json_obj(self) -> dict[str, Any]:
        d = asdict(self)
        d["checksum"] = {k: v for k, v in asdict(self.checksum).items() if v is not None}
        d["behind_remote"] = self.behind_remote if self.remote_current is not None else None
        if self.semantic is None:
            d.pop("semantic")  # absent, so the reference's keys stay exactly as they were
        if self.signature is None:
            d.pop("signature")
        else:
            d["signature"] = self.signature.to_json()
        d["contract"] = d.pop("schema")
        d["schema"] = "cce.knowledge.status/v1"
        return d


def signature_info(
    root: str | os.PathLike[str], marker: SyncMarker | None, settings: Settings
) -> SignatureInfo | None:
    """The installed snapshot's signature for status and doctor: None for a local ingest,
    or an unsigned snapshot when no allowed signers are configured (nothing to say)."""
    if marker is None or active_snapshot(root) != marker.snapshot:
        return None
    configured = settings.knowledge.sync.allowed_signers
    try:
        allowed = load_allowed(root, None, configured)
    except CceError as e:
        return SignatureInfo("refused", problem=e.message)
    info = installed_signature(root, marker.corpus_id, marker.snapshot, marker.checksum, allowed)
    if info.state == "unsigned":
        if allowed is None:
            return None
        return SignatureInfo(
            "refused",
            problem="the installed snapshot is unsigned, and allowed signers are configured",
        )
    return info


def resolve_status_remote(
    root: str | os.PathLike[str],
    settings: Settings,
    marker: SyncMarker | None,
    remote_override: str | None = None,
) -> tuple[str | None, str | None]:
    """(remote, corpus_id) for the freshness lookup, §7.1 rules; either may be None."""
    ks = settings.knowledge.sync
    remote = remote_override or ks.remote or settings.sync.remote
    corpus = marker.corpus_id if marker is not None else ks.corpus_id
    if not remote and marker is not None:
        # Pulled with `--remote URL` and nothing configured: the remote it came from.
        remote = read_pulled_from(root, marker.corpus_id)
    return remote or None, corpus or None


def knowledge_status(
    root: str | os.PathLike[str],
    *,
    facts: StoreFacts | None = None,
    offline: bool = False,
    remote_override: str | None = None,
    timeout: float = DEFAULT_REMOTE_TIMEOUT,
    cache_for: float = 0.0,
    settings: Settings,
) -> KnowledgeStatus:
    """Describe the active store (`settings`: the root's, loaded by the caller). Raises
    StoreError when none can be loaded."""
    if facts is None:
        facts = store_facts(root)
    marker = read_marker_lenient(root)
    corpus = marker.corpus_id if marker is not None and marker.snapshot == facts.snapshot else None
    st = KnowledgeStatus(
        root=os.fspath(root),
        store_file=os.fspath(store_path(root, facts.snapshot)),
        **attrs_of(facts, field_names(StoreFacts)),
        corpus=corpus,
        marker_corpus=marker.corpus_id if marker else None,
        marker_snapshot=marker.snapshot if marker else None,
        checksum=check_installed_bytes(root, marker),
    )

    st.semantic = semantic_status(root, facts.snapshot, settings)
    st.signature = signature_info(root, marker, settings)
    remote, remote_corpus = resolve_status_remote(root, settings, marker, remote_override)
    st.remote = strip_credentials(remote) if remote else None
    st.remote_corpus = remote_corpus
    if remote is None:
        st.remote_problem = "no remote configured"
    elif remote_corpus is None:
        st.remote_problem = "no corpus id (no sync marker and no knowledge.sync.corpus_id)"
    elif offline:
        st.remote_problem = "skipped (--offline)"
    else:
        info = lookup_remote(remote, remote_corpus, timeout=timeout, cache_for=cache_for)
        st.remote_checked = True
        st.remote_current = info.current
        st.pushed_at = info.pushed_at
        st.remote_problem = info.problem
    return st


def try_knowledge_status(root: str | os.PathLike[str], **kw: Any) -> KnowledgeStatus | None:
    """`knowledge_status`, or None when no store loads (index_status appends nothing)."""
    try:
        return knowledge_status(root, **kw)
    except StoreError:
        return None


# ------------------------------------------------------------------ human report


def _checksum_line(st: KnowledgeStatus) -> str:
    c = st.checksum
    if c.state == "local":
        return "n/a (local ingest — nothing was pulled)"
    if c.state == "ok":
        return f"ok — installed bytes match the pull record ({(c.actual or '')[:12]})"
    if c.state == "no-record":
        return KNOWLEDGE_NO_RECORD_NOTICE
    if c.state == "unreadable":
        return f"FAILED — the pulled store could not be read: {c.error}"
    if c.state == "stale-marker":
        return f"n/a — {c.error}"
    return (
        f"MISMATCH — expected {c.expected}, found {c.actual}; re-pull with "
        f"`cce knowledge pull --corpus {st.marker_corpus}`"
    )


def render_status(st: KnowledgeStatus) -> str:
    """The human `cce knowledge status` report (stable labels, one fact per line)."""
    if st.corpus is not None:
        corpus = f"{st.corpus} (pulled)"
    elif st.marker_corpus is not None:
        corpus = f"(local ingest) — replaces pulled {st.marker_corpus}@{st.marker_snapshot}"
    else:
        corpus = "(local ingest)"
    lines = [
        "Knowledge store",
        f"  store          : {st.store_file}",
        f"  corpus         : {corpus}",
        f"  schema         : {st.schema}",
        f"  snapshot       : {st.snapshot}",
        f"  records/chunks : {st.records} / {st.chunks}",
        f"  data as-of     : {st.data_as_of or '-'}",
        f"  checksum       : {_checksum_line(st)}",
        f"  remote         : {st.remote or '-'}",
    ]
    if st.remote_current is not None:
        lines.append(f"  remote current : {st.remote_current}")
        lines.append(f"  pushed at      : {st.pushed_at or 'unknown'}")
        lines.append(
            "  behind remote  : " + ("yes — run `cce knowledge pull`" if st.behind_remote else "no")
        )
    else:
        lines.append(f"  remote current : - ({st.remote_problem or 'unknown'})")
        lines.append("  behind remote  : unknown")
    if st.signature is not None:
        lines.append(f"  signature      : {st.signature.line()}")
    if st.semantic is not None:
        lines += st.semantic.lines()
    return "\n".join(lines) + "\n"
