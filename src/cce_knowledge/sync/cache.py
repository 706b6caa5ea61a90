"""Public entry points into the git cache for other rooms (status, MCP, the Action)."""

from __future__ import annotations

from cce_knowledge.core.errors import CceError
from cce_knowledge.sync import keys as K
from cce_knowledge.sync.gitcache import GitCache, open_cache
from cce_knowledge.sync.remote import Remote, make_remote

__all__ = ["GitCache", "open_cache", "read_remote_pointer"]


def read_remote_pointer(
    remote: str | Remote, corpus_id: str, lock_timeout: float = 5.0
) -> str | None:
    """The trimmed remote `current` of a corpus, or None (absent, not a snapshot id,
    invalid corpus id, offline).

    Best effort and never raises: it may clone or fetch (an unreachable remote with an
    existing clone answers from the last-fetched state, like the reference). If another
    command holds the working clone for longer than `lock_timeout` seconds, None.
    """
    try:
        if not K.valid_corpus_id(corpus_id):
            return None
        rem = remote if isinstance(remote, Remote) else make_remote(remote)
        with open_cache(rem, lock_timeout=lock_timeout) as cache:
            ptr = K.pointer_key(corpus_id)
            if not cache.has(ptr):
                return None
            pointer = cache.read_text(ptr)
            return pointer if K.is_snapshot_id(pointer) else None
    except (CceError, OSError):
        return None
