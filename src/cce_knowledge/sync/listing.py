"""`cce sync list` and a corpus's remote `current`: what the cache carries
(docs/spec/sync.md §6.1–6.2).

Read-only. The knowledge section is ours; code-repo rows (`hash/2.3/<repo_id>/…`,
written by the reference engine) are listed too, so a shared cache reads the same
in both tools.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cce_knowledge.core.errors import CceError
from cce_knowledge.core.jsonout import pretty
from cce_knowledge.core.untrusted import shown
from cce_knowledge.sync import keys as K
from cce_knowledge.sync.clone import GitCache, open_cache
from cce_knowledge.sync.parts import MAX_INDEX_BYTES, parse_index
from cce_knowledge.sync.remote import Remote, RemoteCurrent, make_remote

CODE_PREFIX = "hash/2.3"


@dataclass
class CorpusRow:
    corpus_id: str
    current: str | None
    snapshots: int
    bytes: int
    data_as_of: str | None
    pushed_at: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "bytes": self.bytes,
            "corpus_id": self.corpus_id,
            "current": self.current,
            "data_as_of": self.data_as_of,
            "pushed_at": self.pushed_at,
            "snapshots": self.snapshots,
        }


@dataclass
class RepoRow:
    repo_id: str
    latest_sha: str | None
    ref: str | None
    artifacts: int
    bytes: int

    def as_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "artifacts": self.artifacts,
            "bytes": self.bytes,
            "latest_sha": self.latest_sha,
            "repo_id": self.repo_id,
        }
        if self.ref is not None:
            d["ref"] = self.ref
        return d


@dataclass
class Listing:
    remote: str
    repos: list[RepoRow]
    corpora: list[CorpusRow]


def meta_field(meta: Any, key: str) -> str | None:
    if isinstance(meta, dict) and isinstance(meta.get(key), str):
        return str(meta[key])
    return None


def read_corpus_meta(cache: GitCache, corpus_id: str) -> Any:
    """A corpus's corpus.json parsed, or None when it is absent or not JSON: it is
    best-effort metadata (docs/spec/sync.md §2.3), read with `meta_field`."""
    mk = K.meta_key(corpus_id)
    if not cache.has(mk):
        return None
    try:
        return json.loads(cache.read_blob(mk))
    except ValueError:  # not UTF-8 (UnicodeDecodeError) or not JSON
        return None


def corpus_row(cache: GitCache, corpus_id: str) -> CorpusRow:
    ptr = K.pointer_key(corpus_id)
    current = None
    if cache.has(ptr):
        current = cache.read_text(ptr) or None
    meta = read_corpus_meta(cache, corpus_id)
    ccks = cache.list_cck(corpus_id)
    snapshots, size = len(ccks), cache.cck_bytes(corpus_id)
    # Ours: a snapshot published only in parts counts too, with its `.cck`'s size.
    plain = {k.rsplit("/", 1)[-1][: -len(".cck")] for k in ccks}
    for key in cache.list_parts_indexes(corpus_id):
        snap = key.rsplit("/", 1)[-1][: -len(".parts")]
        if snap in plain:
            continue
        snapshots += 1
        try:
            data = cache.read_small(key, MAX_INDEX_BYTES)
            size += parse_index(key, data).size if data is not None else 0
        except CceError:
            pass  # listed, without a size: a listing never fails on one bad index
    return CorpusRow(
        corpus_id=corpus_id,
        current=current,
        snapshots=snapshots,
        bytes=size,
        data_as_of=meta_field(meta, "data_as_of"),
        pushed_at=meta_field(meta, "pushed_at"),
    )


def _repo_rows(cache: GitCache) -> list[RepoRow]:
    if not cache.origin_exists():
        return []
    names = cache.ls_tree_names("-d", "--name-only", cache.origin, f"{CODE_PREFIX}/")
    rows = []
    for repo_id in sorted({n.rsplit("/", 1)[-1] for n in names}):
        prefix = f"{CODE_PREFIX}/{repo_id}"
        files = cache.ls_tree_names("-r", "--name-only", cache.origin, prefix)
        arts = [f for f in files if f.endswith(".cce")]
        size = 0
        for line in cache.ls_tree_names("-r", "-l", cache.origin, prefix):
            meta, _, path = line.partition("\t")
            f = meta.split()
            if len(f) >= 4 and f[1] == "blob" and path.endswith(".cce"):
                size += int(f[3])
        refs = sorted(f for f in files if f.startswith(f"{prefix}/refs/"))
        latest = ref = None
        for want in ("main", "master"):
            if f"{prefix}/refs/{want}" in refs:
                latest = cache.read_text(f"{prefix}/refs/{want}") or None
                break
        else:
            if len(refs) == 1:
                ref = refs[0][len(prefix) + len("/refs/") :]
                latest = cache.read_text(refs[0]) or None
        rows.append(RepoRow(repo_id, latest, ref, len(arts), size))
    return rows


def list_cache(cache: GitCache) -> Listing:
    corpora = [corpus_row(cache, c) for c in cache.list_corpora()]
    return Listing(remote=cache.remote.display, repos=_repo_rows(cache), corpora=corpora)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def render_human(lst: Listing) -> str:
    out = [f"remote        : {lst.remote}\n", "\n"]
    if lst.repos:
        # Every name and value here was read from the cache: escaped before printing.
        ids = [shown(r.repo_id) for r in lst.repos]
        id_w = max(len("repo_id"), *(len(i) for i in ids))
        latest = [
            "-"
            if r.latest_sha is None
            else shown(f"{r.latest_sha} ({r.ref})" if r.ref else r.latest_sha)
            for r in lst.repos
        ]
        lat_w = max(len("latest"), *(len(x) for x in latest))
        b_w = max(len("bytes"), *(len(str(r.bytes)) for r in lst.repos))
        out.append(
            f"{'repo_id':<{id_w}}  {'latest':<{lat_w}}  {'artifacts':>9}  {'bytes':>{b_w}}\n"
        )
        for r, rid, lat in zip(lst.repos, ids, latest, strict=True):
            out.append(f"{rid:<{id_w}}  {lat:<{lat_w}}  {r.artifacts:>9}  {r.bytes:>{b_w}}\n")
        n_art = sum(r.artifacts for r in lst.repos)
        n_bytes = sum(r.bytes for r in lst.repos)
        out.append("\n")
        out.append(
            f"total         : {_plural(len(lst.repos), 'repo')}, {_plural(n_art, 'artifact')}, "
            f"{n_bytes} bytes\n"
        )
    elif lst.corpora:
        out.append("No code repos cached — the cache carries only knowledge corpora.\n")
    else:
        out.append("The cache is empty — nothing has been pushed yet.\n")
        return "".join(out)
    if lst.corpora:
        out.append("\n")
        out.append("knowledge:\n")
        out.append(render_corpus_table(lst.corpora))
    return "".join(out)


def render_corpus_table(rows: list[CorpusRow]) -> str:
    # Every name and value here was read from the cache: escaped before printing.
    cur = [shown(r.current or "-") for r in rows]
    ids = [shown(r.corpus_id) for r in rows]
    id_w = max(len("corpus_id"), *(len(i.encode()) for i in ids))
    cur_w = max(len("current"), *(len(c) for c in cur))
    b_w = max(len("bytes"), *(len(str(r.bytes)) for r in rows))
    lines = [
        f"{'corpus_id':<{id_w}}  {'current':<{cur_w}}  {'snapshots':>9}  {'bytes':>{b_w}}  data as-of"
    ]
    for r, rid, c in zip(rows, ids, cur, strict=True):
        lines.append(
            f"{rid:<{id_w}}  {c:<{cur_w}}  {r.snapshots:>9}  {r.bytes:>{b_w}}  "
            f"{shown(r.data_as_of or '-')}"
        )
    return "\n".join(lines) + "\n"


def listing_data(lst: Listing) -> dict[str, Any]:
    """The `cce.synclist/v1` document."""
    doc: dict[str, Any] = {}
    if lst.corpora:
        doc["knowledge"] = [r.as_json() for r in lst.corpora]
    doc["remote"] = lst.remote
    doc["repos"] = [r.as_json() for r in lst.repos]
    doc["schema"] = "cce.synclist/v1"
    return doc


def render_json(lst: Listing) -> str:
    return pretty(listing_data(lst), sort_keys=True) + "\n"


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
