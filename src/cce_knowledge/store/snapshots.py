"""The on-disk knowledge store: `<root>/.cce/knowledge/<snapshot>.json` + `current`.

The store file is the contract (docs/spec/core.md §5.2): serde_json pretty output
in struct declaration order with zmij float text and one trailing newline. `current`
names the active snapshot and always moves last, so a reader sees either the old
store or the new one, never a mix.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import struct
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from json.encoder import c_encode_basestring as encode_basestring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

from cce_knowledge import KNOWLEDGE_SCHEMA
from cce_knowledge.core.atomic import atomic_write, atomic_write_parts, create_if_absent, dir_lock
from cce_knowledge.core.errors import StoreError
from cce_knowledge.core.jsonout import json_str as _json_str_checked
from cce_knowledge.core.rustcompat import io_error_text, rs_trim, serde_f64

# The C string encoder `json.dumps(s, ensure_ascii=False)` ends in, minus two Python
# call layers: the store writes ~15 strings per chunk. Tests pin equality.
json_str = encode_basestring if encode_basestring is not None else _json_str_checked

KNOWLEDGE_DIR = Path(".cce") / "knowledge"
SNAPSHOT_RE = re.compile(r"[0-9a-f]{16}")


@dataclass(slots=True)
class KnowledgeChunk:
    """One section of one record, with its (redacted) facets. Field order = store key order."""

    chunk_id: str
    record_id: str
    kind: str
    name: str
    start_line: int
    end_line: int
    token_count: int
    content: str
    source: str
    url: str | None = None
    state: str | None = None
    state_reason: str | None = None
    updated_at: str | None = None
    group: str | None = None
    labels: list[str] = field(default_factory=list)
    title: str = ""
    links: list[str] = field(default_factory=list)
    embedding: list[float] = field(default_factory=list)


#: A chunk's fields but `embedding`, in store order, each with its JSON kind: `str`,
#: `int`, `nullable` (a string or null) or `strings` (an array of strings). The readers
#: of a store and of a `.cck` type a chunk by it, each with its own strictness.
CHUNK_FIELD_KINDS: tuple[tuple[str, str], ...] = (
    ("chunk_id", "str"),
    ("record_id", "str"),
    ("kind", "str"),
    ("name", "str"),
    ("start_line", "int"),
    ("end_line", "int"),
    ("token_count", "int"),
    ("content", "str"),
    ("source", "str"),
    ("url", "nullable"),
    ("state", "nullable"),
    ("state_reason", "nullable"),
    ("updated_at", "nullable"),
    ("group", "nullable"),
    ("labels", "strings"),
    ("title", "str"),
    ("links", "strings"),
)


@dataclass(slots=True)
class KnowledgeStore:
    snapshot: str
    records: int
    chunks: list[KnowledgeChunk] = field(default_factory=list)
    schema: str = KNOWLEDGE_SCHEMA

    def data_as_of(self) -> str | None:
        """The byte-wise maximum `updated_at` (None when no chunk has one)."""
        vals = [c.updated_at for c in self.chunks if c.updated_at is not None]
        return max(vals) if vals else None


def knowledge_dir(root: str | os.PathLike[str]) -> Path:
    return Path(root) / KNOWLEDGE_DIR


def no_store_message(root: str | os.PathLike[str], reason: str | None = None) -> str:
    """What a command that needs a store says when there is none: where it looked, why
    (when known), and the two commands that make one."""
    root_s = os.fspath(root)
    at = "" if root_s in ("", ".") else f" --dir {root_s}"
    why = f" ({reason})" if reason else ""
    return (
        f"no knowledge store under {display_dir(root)}{why} — build one with "
        f"`cce knowledge index FEED{at}` or install a published one with "
        f"`cce knowledge pull{at}`"
    )


def _tell_waiting(message: str) -> None:
    print(f"{message} …", file=sys.stderr, flush=True)


@contextlib.contextmanager
def writer_lock(
    root: str | os.PathLike[str],
    what: str,
    on_wait: Callable[[str], None] | None = _tell_waiting,
) -> Iterator[None]:
    """The root's writer lock: index, pull and `sync pull --all` serialise on it, so
    one writer's snapshot, marker and `current` never interleave with another's and no
    cleanup deletes the store another just installed. A waiting writer says so."""
    with dir_lock(knowledge_dir(root), what=what, on_wait=on_wait):
        yield


#: `.cce/knowledge/.gitignore`: the store is derived data (rebuilt by `index`, fetched
#: by `pull`), so it ignores itself the way pytest's and mypy's caches do, and
#: `git status` in the user's repository shows nothing for it while `.cce/config`
#: stays committable. Not part of the store: no reader, prune or push looks at it.
GITIGNORE_NAME = ".gitignore"
GITIGNORE_BYTES = (
    b"# Created by cce-knowledge: derived data (cce knowledge index / pull rebuild it).\n*\n"
)


def ensure_self_ignored(root: str | os.PathLike[str]) -> None:
    """Write the knowledge dir's `.gitignore` unless something is already there (a
    user's own file, or a symlink, is left alone). Best effort: a read-only or odd
    filesystem never fails an index or a pull over a nicety."""
    with contextlib.suppress(OSError):
        create_if_absent(knowledge_dir(root) / GITIGNORE_NAME, GITIGNORE_BYTES)


def display_dir(root: str | os.PathLike[str]) -> str:
    """The knowledge dir as the reference prints it (joined onto `--dir` as given)."""
    return f"{os.fspath(root)}/.cce/knowledge"


# ---------------------------------------------------------------- serialisation


def _opt(v: str | None) -> str:
    return "null" if v is None else json_str(v)


def _str_list(items: list[str], ind: str) -> str:
    if not items:
        return "[]"
    inner = ind + "  "
    return "[\n" + ",\n".join(inner + json_str(s) for s in items) + "\n" + ind + "]"


# Float text is the hot spot of store writing (256 per chunk) and embedding values
# repeat heavily across chunks, so their text is cached. 0.0 and -0.0 are equal dict
# keys: only +0.0 is cached and -0.0 (never produced by the embedder) is patched.
_F64_CACHE: dict[float, str] = {0.0: "0.0"}
_F64_CACHE_MAX = 250_000
_NEG_ZERO = struct.pack("=d", -0.0)


def _float_texts(values: list[float]) -> list[str]:
    cache = _F64_CACHE
    try:
        parts = list(map(cache.__getitem__, values))
    except KeyError:
        missing = set(values).difference(cache)
        if len(cache) + len(missing) <= _F64_CACHE_MAX:
            for v in missing:
                cache[v] = serde_f64(v)
            parts = list(map(cache.__getitem__, values))
        else:
            parts = [cache.get(v) or serde_f64(v) for v in values]
    packed = array("d", values).tobytes()
    at = packed.find(_NEG_ZERO)
    while at >= 0:
        if at % 8 == 0:
            parts[at // 8] = "-0.0"
        at = packed.find(_NEG_ZERO, at + 1)
    return parts


def _float_list(values: list[float], ind: str) -> str:
    if not values:
        return "[]"
    inner = ",\n" + ind + "  "
    return "[\n" + ind + "  " + inner.join(_float_texts(values)) + "\n" + ind + "]"


def embedding_json(values: list[float]) -> str:
    """The `embedding` array text exactly as `chunk_json` writes it."""
    return _float_list(values, "      ")


_EMB_SEP = ",\n        "
_ZERO_TEXTS = ["0.0"] * 256


def embedding_json_sparse(comps: dict[int, int], dim: int = 256) -> str:
    """`embedding_json(dense(comps))` without building 256 floats: most components of a
    hash embedding are zero, so only the non-zero ones are divided and formatted."""
    parts = _ZERO_TEXTS[:dim] if dim == 256 else ["0.0"] * dim
    if comps:
        norm = math.sqrt(float(sum([x * x for x in comps.values()])))
        cache = _F64_CACHE
        for b, x in comps.items():
            f = x / norm
            t = cache.get(f)
            if t is None:
                t = serde_f64(f)
                if len(cache) < _F64_CACHE_MAX:
                    cache[f] = t
            parts[b] = t
    return "[\n        " + _EMB_SEP.join(parts) + "\n      ]"


def chunk_json(c: KnowledgeChunk, embedding_text: str | None = None) -> str:
    """One chunk object as it appears inside the store's `chunks` array (indent 4).

    `embedding_text` (from `embedding_json`) replaces rendering `c.embedding`, so a
    writer can reuse the text of an identical section seen before.
    """
    i = "      "
    emb = embedding_text if embedding_text is not None else _float_list(c.embedding, i)
    return (
        "    {\n"
        f'{i}"chunk_id": {json_str(c.chunk_id)},\n'
        f'{i}"record_id": {json_str(c.record_id)},\n'
        f'{i}"kind": {json_str(c.kind)},\n'
        f'{i}"name": {json_str(c.name)},\n'
        f'{i}"start_line": {c.start_line},\n'
        f'{i}"end_line": {c.end_line},\n'
        f'{i}"token_count": {c.token_count},\n'
        f'{i}"content": {json_str(c.content)},\n'
        f'{i}"source": {json_str(c.source)},\n'
        f'{i}"url": {_opt(c.url)},\n'
        f'{i}"state": {_opt(c.state)},\n'
        f'{i}"state_reason": {_opt(c.state_reason)},\n'
        f'{i}"updated_at": {_opt(c.updated_at)},\n'
        f'{i}"group": {_opt(c.group)},\n'
        f'{i}"labels": {_str_list(c.labels, i)},\n'
        f'{i}"title": {json_str(c.title)},\n'
        f'{i}"links": {_str_list(c.links, i)},\n'
        f'{i}"embedding": {emb}\n'
        "    }"
    )


def store_bytes_from_parts(
    schema: str, snapshot: str, records: int, chunk_texts: list[str]
) -> bytes:
    """Assemble store bytes from pre-rendered chunk texts (lets ingest render in parallel)."""
    head = (
        "{\n"
        f'  "schema": {json_str(schema)},\n'
        f'  "snapshot": {json_str(snapshot)},\n'
        f'  "records": {records},\n'
    )
    if not chunk_texts:
        return (head + '  "chunks": []\n}\n').encode("utf-8")
    return (head + '  "chunks": [\n' + ",\n".join(chunk_texts) + "\n  ]\n}\n").encode("utf-8")


def dumps(store: KnowledgeStore) -> bytes:
    """The exact store file bytes (pretty JSON, declaration order, trailing LF)."""
    return store_bytes_from_parts(
        store.schema, store.snapshot, store.records, [chunk_json(c) for c in store.chunks]
    )


# ---------------------------------------------------------------- loading


def _req(d: dict[str, Any], key: str, typ: type | tuple[type, ...]) -> Any:
    if key not in d:
        raise ValueError(f"missing field `{key}`")
    v = d[key]
    if not isinstance(v, typ) or (isinstance(v, bool) and typ is not bool):
        raise ValueError(f"invalid type for `{key}`")
    return v


def _opt_str(d: dict[str, Any], key: str) -> str | None:
    v = d.get(key)
    if v is not None and not isinstance(v, str):
        raise ValueError(f"invalid type for `{key}`")
    return v


def _str_array(d: dict[str, Any], key: str) -> list[str]:
    v = d.get(key, [])
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise ValueError(f"invalid type for `{key}`")
    return v


def _str_or_empty(d: dict[str, Any], key: str) -> str:
    """A string that may be absent (then empty): a store's title."""
    return d.get(key, "") if isinstance(d.get(key, ""), str) else _req(d, key, str)


#: How a stored chunk's field of each kind is read (absent optional fields default).
_LOADERS: dict[str, Callable[[dict[str, Any], str], Any]] = {
    "str": lambda d, k: _req(d, k, str),
    "int": lambda d, k: _req(d, k, int),
    "nullable": _opt_str,
    "strings": _str_array,
    "title": _str_or_empty,
}


def _chunk_from_obj(o: Any) -> KnowledgeChunk:
    if not isinstance(o, dict):
        raise ValueError("chunk is not an object")
    emb = o.get("embedding", [])
    if not isinstance(emb, list) or not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in emb
    ):
        raise ValueError("invalid type for `embedding`")
    typed = {k: _LOADERS["title" if k == "title" else kind](o, k) for k, kind in CHUNK_FIELD_KINDS}
    return KnowledgeChunk(**typed, embedding=[float(x) for x in emb])


def loads(data: bytes | str) -> KnowledgeStore:
    """Parse store bytes. Raises ValueError on anything malformed."""
    obj = json.loads(data)
    if not isinstance(obj, dict):
        raise ValueError("store is not a JSON object")
    chunks = _req(obj, "chunks", list)
    return KnowledgeStore(
        schema=_req(obj, "schema", str),
        snapshot=_req(obj, "snapshot", str),
        records=_req(obj, "records", int),
        chunks=[_chunk_from_obj(c) for c in chunks],
    )


def read_current(root: str | os.PathLike[str]) -> str:
    """The trimmed snapshot id named by `current`. Raises OSError when absent."""
    return rs_trim((knowledge_dir(root) / "current").read_text(encoding="utf-8"))


def store_path(root: str | os.PathLike[str], snapshot: str) -> Path:
    return knowledge_dir(root) / f"{snapshot}.json"


def load_current(root: str | os.PathLike[str]) -> KnowledgeStore:
    """Load the active store. Raises StoreError with the underlying reason."""
    try:
        snap = read_current(root)
        data = store_path(root, snap).read_bytes()
    except OSError as e:
        raise StoreError(io_error_text(e)) from e
    try:
        return loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise StoreError(str(e)) from e


def store_present(root: str | os.PathLike[str]) -> bool:
    """`current` exists and the snapshot file it names exists."""
    try:
        return store_path(root, read_current(root)).is_file()
    except (OSError, UnicodeDecodeError):
        return False


# ---------------------------------------------------------------- saving


def prune_other_snapshots(root: str | os.PathLike[str], keep: str) -> None:
    """Best-effort delete of every other `<16 hex>.json` (never `synced.json`/`current`)."""
    d = knowledge_dir(root)
    try:
        names = os.listdir(d)
    except OSError:
        return
    for name in names:
        if name.endswith(".json") and SNAPSHOT_RE.fullmatch(name[:-5]) and name[:-5] != keep:
            try:
                os.unlink(d / name)
            except OSError:
                pass
    # The chunk maps of index (store/chunkmap.py): only the kept snapshot's can be used.
    with contextlib.suppress(OSError):
        for name in os.listdir(d / "reuse"):
            if name != f"{keep}.map":
                with contextlib.suppress(OSError):
                    os.unlink(d / "reuse" / name)


def save_store_bytes(
    root: str | os.PathLike[str],
    snapshot: str,
    data: bytes | Iterable[bytes],
    before_current: Callable[[], None] | None = None,
) -> Path:
    """Write `<snapshot>.json`, then `current`, then prune (the reference's save order).

    `data` may be an iterable of parts whose concatenation is the store file.
    `before_current` runs between the store and `current` (index writes its chunk map)."""
    d = knowledge_dir(root)
    d.mkdir(parents=True, exist_ok=True)
    ensure_self_ignored(root)
    path = d / f"{snapshot}.json"
    atomic_write_parts(path, (data,) if isinstance(data, bytes) else data)
    if before_current is not None:
        before_current()
    atomic_write(d / "current", f"{snapshot}\n".encode())
    prune_other_snapshots(root, snapshot)
    return path


def save(root: str | os.PathLike[str], store: KnowledgeStore) -> Path:
    return save_store_bytes(root, store.snapshot, dumps(store))


@dataclass(slots=True)
class SearchBuild:
    """What the derived search-index step after a save or an install did (the builder
    lives in retrieval/; index and pull run it under the writer lock). The search-index step of index/pull: where it went and how long it took, or why
    it could not be built (the store stands; the first search then builds it)."""

    path: str = ""
    seconds: float = 0.0
    size: int = 0
    error: str | None = None
    #: False when a fresh index was already there (`sync pull --all`, up to date)
    built: bool = True
