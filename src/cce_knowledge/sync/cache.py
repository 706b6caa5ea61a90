"""Public entry points into the git cache for other rooms (status, MCP, the Action)."""

from __future__ import annotations

from cce_knowledge.core.errors import CceError
from cce_knowledge.core.untrusted import shown
from cce_knowledge.sync import keys as K
from cce_knowledge.sync.gitcache import GitCache, open_cache
from cce_knowledge.sync.listing import meta_field, read_corpus_meta
from cce_knowledge.sync.remote import Remote, RemoteCurrent, make_remote

__all__ = ["GitCache", "RemoteCurrent", "open_cache", "read_remote_current"]


def read_remote_current(
    remote: str | Remote, corpus_id: str, lock_timeout: float = 5.0
) -> RemoteCurrent:
    """The remote `current` of a corpus. Best effort and never raises for a remote,
    a pointer or a corpus.json that is missing, unreachable or hostile: it may clone or
    fetch (an unreachable remote with an existing clone answers from the last-fetched
    state, like the reference). If another command holds the working clone for longer
    than `lock_timeout` seconds, the answer is unknown."""
    if not K.valid_corpus_id(corpus_id):
        return RemoteCurrent(problem=f"invalid corpus id `{shown(corpus_id)}`")
    try:
        rem = remote if isinstance(remote, Remote) else make_remote(remote)
        with open_cache(rem, lock_timeout=lock_timeout) as cache:
            ptr = K.pointer_key(corpus_id)
            if not cache.has(ptr):
                return RemoteCurrent(problem="no `current` pointer on the remote")
            pointer = cache.read_text(ptr)
            if not pointer:
                return RemoteCurrent(problem="empty `current` pointer on the remote")
            if not K.is_snapshot_id(pointer):
                return RemoteCurrent(problem="`current` on the remote is not a snapshot id")
            return RemoteCurrent(current=pointer, pushed_at=_pushed_at(cache, corpus_id))
    except (CceError, OSError) as e:
        return RemoteCurrent(problem=f"unreachable ({type(e).__name__})")


def _pushed_at(cache: GitCache, corpus_id: str) -> str | None:
    """corpus.json's `pushed_at`: best-effort metadata (docs/spec/sync.md §2.3)."""
    try:
        meta = read_corpus_meta(cache, corpus_id)
    except CceError:  # unreadable
        return None
    return meta_field(meta, "pushed_at")
