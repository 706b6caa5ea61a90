"""Random access to a knowledge store file without parsing all of it.

A store is one pretty-printed JSON file with 256 floats per chunk: tens of MB for
a few thousand records, most of a gigabyte at 100k. The MCP server, `status` and the
Action's summary need only a few facts (counts, data as-of) and, for expand/related,
a handful of chunks, so the view maps the file and indexes where each chunk object
starts. The layout is the
pinned store layout (docs/spec/core.md §5.2): each chunk object begins with
`    {` / `      "chunk_id": …` / `      "record_id": …` lines, and strings never
contain a raw newline, so those line patterns can only be structure.

A file that does not have that layout (truncated, hand-edited, not a store) is
refused with ValueError — the "present but failed to load" case.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cce_knowledge.core.fields import field_names, keys_of
from cce_knowledge.core.rustcompat import rs_trim
from cce_knowledge.store.snapshots import knowledge_dir, loads, store_path

if TYPE_CHECKING:
    from cce_knowledge.store.snapshots import KnowledgeStore

_HEAD = re.compile(
    rb'\{\n  "schema": ("(?:[^"\\\n]|\\.)*"),\n  "snapshot": ("(?:[^"\\\n]|\\.)*"),\n'
    rb'  "records": (\d+),\n  "chunks": (\[\]\n\}|\[\n)'
)
# Located with bytes.find (fast substring search), then matched in place: a regex
# scan would crawl through the embedding floats that make up most of the file.
_CHUNK_MARK = b'\n    {\n      "chunk_id": '
_CHUNK = re.compile(
    rb'\n    \{\n      "chunk_id": ("(?:[^"\\\n]|\\.)*"),\n      "record_id": ("(?:[^"\\\n]|\\.)*"),\n'
)
_UPDATED_MARK = b'\n      "updated_at": '
_UPDATED = re.compile(rb'\n      "updated_at": ("(?:[^"\\\n]|\\.)*"),\n')
_TAIL = b"\n    }\n  ]\n}"
_OBJ_END = b"\n    }"
# The embedding is the last member of a chunk object in the pinned layout; cutting
# it off before parsing saves building 256 floats per chunk.
_EMB_MARK = b',\n      "embedding": '
_REASON_MARK = b'\n      "state_reason": '
_REASON = re.compile(rb'\n      "state_reason": (null|"(?:[^"\\\n]|\\.)*"),\n')
_JSON_WS = b" \t\n\r"


def _jstr(quoted: bytes) -> str:
    """A JSON string literal's value (fast path: nothing escaped)."""
    if b"\\" not in quoted:
        return quoted[1:-1].decode("utf-8")
    out: str = json.loads(quoted.decode("utf-8"))
    return out


@dataclass(frozen=True, slots=True)
class Section:
    """One chunk's addressing facts and content (what expand/related render)."""

    record_id: str
    start_line: int
    end_line: int
    kind: str
    chunk_id: str
    content: str


@dataclass(frozen=True, slots=True)
class Signature:
    snapshot: str
    size: int
    mtime_ns: int


class StoreView:
    """The active store file, mapped: header facts now, chunk ids and chunks on demand.

    Construction checks only the head and the tail of the file (cheap, so it can
    run whenever `current` moves); the chunk scan runs on first need.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            self._data: mmap.mmap | bytes = (
                mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
            )
        data = self._data
        m = _HEAD.match(data)
        if m is None:
            raise ValueError(f"{path}: not a knowledge store (unexpected layout)")
        self.schema: str = _jstr(m.group(1))
        self.snapshot: str = _jstr(m.group(2))
        self.records = int(m.group(3))
        self._empty = m.group(4) != b"[\n"
        self._body = m.end()
        if self._empty and bytes(data[m.end() :]).strip(_JSON_WS):
            raise ValueError(f"{path}: unexpected bytes after an empty knowledge store")
        end = len(data)
        while end > self._body and data[end - 1] in _JSON_WS:  # trailing JSON whitespace is fine
            end -= 1
        self._end = end
        if not self._empty and data[end - len(_TAIL) : end] != _TAIL:
            raise ValueError(f"{path}: truncated knowledge store")
        self._scanned = False
        # Compact: at 1M records these are millions of entries (an int array, and one
        # string per record rather than per chunk; chunk ids are read on demand).
        self._starts: array[int] = array("q")
        self._chunk_ids: list[str] | None = None
        self._record_ids: list[str] = []
        self._by_id: dict[str, int] | None = None
        self._by_record: dict[str, list[int]] | None = None
        self._as_of: str | bool | None = False  # False = not computed yet

    def _scan(self) -> None:
        if self._scanned:
            return
        data = self._data
        if not self._empty:
            pos = data.find(_CHUNK_MARK, self._body - 1)
            while pos >= 0:
                cm = _CHUNK.match(data, pos)
                if cm is None:
                    raise ValueError(f"{self.path}: malformed chunk at byte {pos + 1}")
                self._starts.append(pos + 1)
                rid = _jstr(cm.group(2))
                # A record's chunks are neighbours: share its id string among them.
                rids = self._record_ids
                rids.append(rids[-1] if rids and rids[-1] == rid else rid)
                pos = data.find(_CHUNK_MARK, cm.end())
            if not self._starts or self._starts[0] != self._body:
                raise ValueError(f"{self.path}: chunk objects not where the store layout puts them")
        self._scanned = True

    @property
    def chunk_ids(self) -> list[str]:
        self._scan()
        if self._chunk_ids is None:
            ids = []
            for start in self._starts:
                cm = _CHUNK.match(self._data, start - 1)
                if cm is None:  # the scan matched it: the file changed under the map
                    raise ValueError(f"{self.path}: malformed chunk at byte {start}")
                ids.append(_jstr(cm.group(1)))
            self._chunk_ids = ids
        return self._chunk_ids

    @property
    def record_ids(self) -> list[str]:
        self._scan()
        return self._record_ids

    @property
    def chunk_count(self) -> int:
        self._scan()
        return len(self._starts)

    def data_as_of(self) -> str | None:
        """Byte-wise maximum `updated_at` (None when no chunk has one)."""
        if self._as_of is False:
            best: str | None = None
            data = self._data
            pos = data.find(_UPDATED_MARK)
            while pos >= 0:
                um = _UPDATED.match(data, pos)
                if um is not None:  # a `null` value does not match: skipped
                    v = _jstr(um.group(1))
                    if best is None or v > best:
                        best = v
                pos = data.find(_UPDATED_MARK, pos + 1)
            self._as_of = best
        return self._as_of if isinstance(self._as_of, str) else None

    def index_of(self, chunk_id: str) -> int | None:
        """The first chunk with this id (store order), or None."""
        if self._by_id is None:
            by: dict[str, int] = {}
            for i, cid in enumerate(self.chunk_ids):
                by.setdefault(cid, i)
            self._by_id = by
        return self._by_id.get(chunk_id)

    def same_record(self, record_id: str) -> list[int]:
        if self._by_record is None:
            groups: dict[str, list[int]] = {}
            for i, rid in enumerate(self.record_ids):
                groups.setdefault(rid, []).append(i)
            self._by_record = groups
        return self._by_record.get(record_id, [])

    def span(self, i: int) -> tuple[int, int]:
        """Byte range of chunk i's object in the file (`{` … `}`)."""
        self._scan()
        start = self._starts[i]
        if i + 1 < len(self._starts):
            return start, self._starts[i + 1] - 2  # drop the `,\n` between objects
        return start, self._end - len(_TAIL) + len(_OBJ_END)

    def raw_chunk(self, i: int) -> dict[str, Any]:
        start, end = self.span(i)
        obj: dict[str, Any] = json.loads(self._data[start:end])
        return obj

    def head_at(self, start: int, end: int) -> tuple[dict[str, Any], bytes | None]:
        """The chunk object at [start, end) without its embedding, and the embedding's
        JSON text; (the whole object, None) when the object is not in the pinned layout."""
        data = self._data
        k = data.find(_EMB_MARK, start, end)
        if k >= 0 and data[end - len(_OBJ_END) : end] == _OBJ_END:
            emb = data[k + len(_EMB_MARK) : end - len(_OBJ_END)]
            # Strings never hold a raw newline, so the mark is structure; a tail with a
            # quote or brace would be another member after the embedding: parse it all.
            if b'"' not in emb and b"{" not in emb:
                head: dict[str, Any] = json.loads(data[start:k] + _OBJ_END)
                return head, emb
        obj: dict[str, Any] = json.loads(data[start:end])
        return obj, None

    def head(self, i: int) -> tuple[dict[str, Any], bytes | None]:
        """`head_at` of chunk i."""
        return self.head_at(*self.span(i))

    def state_reason(self, i: int) -> str | None:
        """Chunk i's `state_reason` without parsing the object."""
        start, end = self.span(i)
        pos = self._data.find(_REASON_MARK, start, end)
        m = _REASON.match(self._data, pos) if pos >= 0 else None
        if m is None:
            value: str | None = self.raw_chunk(i).get("state_reason")
            return value
        raw = m.group(1)
        return None if raw == b"null" else _jstr(raw)

    def record_digest(self, idxs: list[int]) -> bytes:
        """A digest (16 bytes, blake2b) of the given chunk objects' bytes before their
        embeddings: equal digests mean equal members, so equal analysis (the
        embedding is derived from the content)."""
        data = self._data
        h = hashlib.blake2b(digest_size=16)
        for i in idxs:
            start, end = self.span(i)
            k = data.find(_EMB_MARK, start, end)
            h.update(data[start : k if k >= 0 else end])
            h.update(b"\0")
        return h.digest()

    @property
    def size(self) -> int:
        return len(self._data)

    def release(self) -> None:
        """Unmap the pages read so far from this process (they stay in the page cache).

        A streaming reader calls this as it goes: a mapped page counts in the process's
        resident memory until it is released, so a pass over a 600 MB store would
        otherwise look like 600 MB more memory than it holds."""
        data = self._data
        if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
            try:
                data.madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError):
                pass  # only an accounting nicety

    def section(self, i: int) -> Section:
        o = self.raw_chunk(i)
        return Section(**keys_of(o, field_names(Section)))


_POINTERS: dict[Path, tuple[tuple[int, int, int], str]] = {}


def current_signature(root: Path) -> Signature | None:
    """(snapshot, size, mtime) of the store `current` names; None when absent.

    Called on every tool call, so the pointer's text is re-read only when its inode,
    size or mtime changes (`current` is replaced by an atomic rename on every move).
    """
    pointer = knowledge_dir(root) / "current"
    try:
        pst = os.stat(pointer)
        key = (pst.st_ino, pst.st_size, pst.st_mtime_ns)
        hit = _POINTERS.get(root)
        if hit is not None and hit[0] == key:
            snap = hit[1]
        else:
            snap = rs_trim(pointer.read_text(encoding="utf-8"))
            _POINTERS[root] = (key, snap)
        st = os.stat(store_path(root, snap))
    except (OSError, UnicodeDecodeError):
        return None
    return Signature(snap, st.st_size, st.st_mtime_ns)


class LoadedView(StoreView):
    """The same interface over a fully parsed store: the fallback for a store file
    that is valid JSON but not in the pinned layout (e.g. re-formatted by a tool)."""

    def __init__(self, path: Path, store: KnowledgeStore) -> None:
        self.path = path
        self.schema = store.schema
        self.snapshot = store.snapshot
        self.records = store.records
        self._store = store
        self._scanned = True
        self._chunk_ids = [c.chunk_id for c in store.chunks]
        self._record_ids = [c.record_id for c in store.chunks]
        self._starts = array("q", range(len(store.chunks)))
        self._by_id = None
        self._by_record = None
        self._as_of = store.data_as_of()

    @property
    def store(self) -> KnowledgeStore:
        """The parsed store behind this view."""
        return self._store

    def raw_chunk(self, i: int) -> dict[str, Any]:
        c = self._store.chunks[i]
        return {
            "record_id": c.record_id,
            "start_line": c.start_line,
            "end_line": c.end_line,
            "kind": c.kind,
            "chunk_id": c.chunk_id,
            "content": c.content,
        }


def open_view(path: Path) -> StoreView:
    """A view of the store at `path`. Raises OSError/ValueError when it is not a store."""
    try:
        return StoreView(path)
    except ValueError:
        return LoadedView(path, loads(path.read_bytes()))
