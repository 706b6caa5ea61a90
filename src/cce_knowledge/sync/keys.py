"""Corpus identity and the cache key space (docs/spec/sync.md §2.1, §3.1).

A corpus id is one path segment of every key we write, so it is validated before
any remote operation, and every key we write or delete is checked to sit inside
`knowledge/v1/<corpus_id>/` (defence in depth against a traversal slipping through).
"""

from __future__ import annotations

import re

from cce_knowledge import KNOWLEDGE_SCHEMA
from cce_knowledge.config.settings import Settings
from cce_knowledge.core.errors import SyncError
from cce_knowledge.core.untrusted import shown

#: The key-space version: the segment after the last `/` of the contract id.
VERSION = KNOWLEDGE_SCHEMA.rsplit("/", 1)[-1]
PREFIX = f"knowledge/{VERSION}"

_ID_CHARS = re.compile(r"[A-Za-z0-9._-]+")
_SNAPSHOT = re.compile(r"[0-9a-f]{16}")


def valid_corpus_id(corpus_id: str) -> bool:
    # ASCII-only on purpose: str.isalnum() would admit non-ASCII letters.
    return bool(_ID_CHARS.fullmatch(corpus_id)) and corpus_id not in (".", "..")


def check_corpus_id(corpus_id: str) -> str:
    if not valid_corpus_id(corpus_id):
        raise SyncError(
            f"invalid corpus_id `{shown(corpus_id)}`: must be non-empty, charset [A-Za-z0-9._-], and a "
            "single path segment — `.` and `..` are rejected (it is a path segment on the cache, "
            "so a traversal token would escape the corpus namespace)"
        )
    return corpus_id


def corpus_prefix(corpus_id: str) -> str:
    return f"{PREFIX}/{corpus_id}"


def artifact_key(corpus_id: str, snapshot: str) -> str:
    return f"{PREFIX}/{corpus_id}/{snapshot}.cck"


def parts_index_key(corpus_id: str, snapshot: str) -> str:
    """Ours: the index of a `.cck` published in parts (sync/parts.py)."""
    return f"{PREFIX}/{corpus_id}/{snapshot}.parts"


def pointer_key(corpus_id: str) -> str:
    return f"{PREFIX}/{corpus_id}/current"


def meta_key(corpus_id: str) -> str:
    return f"{PREFIX}/{corpus_id}/corpus.json"


def is_confined(key: str, corpus_id: str) -> bool:
    """`key` lies under `knowledge/<ver>/<corpus_id>/` segment by segment, no traversal."""
    parts = key.split("/")
    return (
        len(parts) >= 4
        and parts[:3] == ["knowledge", VERSION, corpus_id]
        and all(p not in ("", ".", "..") for p in parts[3:])
        and valid_corpus_id(corpus_id)
    )


def check_write_key(key: str, corpus_id: str) -> None:
    """Refuse to write a key outside the corpus namespace."""
    if not is_confined(key, corpus_id):
        raise SyncError(
            f"refusing to write `{shown(key)}`: it is not confined to `{PREFIX}/{corpus_id}/`"
        )


def check_prune_key(key: str, corpus_id: str) -> None:
    if not is_confined(key, corpus_id):
        raise SyncError(
            f"retention refused: key `{shown(key)}` is not confined to `{PREFIX}/{corpus_id}/` — "
            "refusing to prune outside the corpus namespace (should-never-happen invariant "
            "breach; see #121)"
        )


def is_snapshot_id(s: str) -> bool:
    return bool(_SNAPSHOT.fullmatch(s))


def bad_pointer(corpus_id: str, pointer: str) -> str:
    return (
        f"the cache's `current` pointer for corpus {corpus_id} is not a snapshot id "
        f"(16 lowercase hex digits): `{shown(pointer)}` — the cache was written by something "
        "other than cce; a `cce knowledge push --force` replaces it"
    )


def check_remote_pointer(corpus_id: str, pointer: str) -> str:
    """A `current` read from the cache is untrusted: it must be a snapshot id before it
    becomes part of a key, a file name or a line of output."""
    if not is_snapshot_id(pointer):
        raise SyncError(bad_pointer(corpus_id, pointer))
    return pointer


def check_snapshot_arg(snapshot: str) -> str:
    """A `--snapshot` value becomes a path segment too; refuse anything that could escape.

    The reference leaves it unvalidated; we only reject separators and dot segments,
    so every id the reference can publish still pulls.
    """
    if "/" in snapshot or "\\" in snapshot or snapshot in (".", "..") or "\x00" in snapshot:
        raise SyncError(
            f"invalid snapshot id `{shown(snapshot)}`: it must be a single path segment"
        )
    return snapshot


def resolve_corpus_id(settings: Settings, cli: str | None) -> str:
    """`--corpus` (even empty) else `knowledge.sync.corpus_id`; never derived (§3.2)."""
    if cli is not None:
        return cli
    cid = settings.knowledge.sync.corpus_id
    if not cid:
        raise SyncError(
            "cannot determine corpus_id: pass --corpus <id> or set `knowledge.sync.corpus_id` "
            "in .cce/config (a corpus identity is never derived)"
        )
    return cid
