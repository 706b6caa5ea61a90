"""Where each record's chunks sit in a store: what lets `index` reuse them.

`index` writes, beside the store `<snapshot>.json`, a chunk map
`.cce/knowledge/reuse/<snapshot>.map`: a one-line JSON header, then one 36-byte row per
record in feed order, `digest (16) | offset (u64) | length (u64) | chunks (u32)`, little
endian: the BLAKE2b-128 of the record's feed line (without its line end), and the byte
span of its chunk objects in the store body (`length` 0 when it has none). A record's
chunk text is a function of its line bytes and of the settings the header names, so the
next `index` under the same settings copies the span of every line it finds in the map
and renders only the others: the same bytes as a full index.

The map is ours, not part of the store contract (no reader, push or pull needs it). The
header pins the store file it describes (snapshot, size, mtime): a store replaced by
`pull`, edited or truncated, a changed setting or another code version are each a
reason for a full build, which `index` names on stderr.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cce_knowledge import __version__
from cce_knowledge.core.atomic import atomic_write_parts
from cce_knowledge.store.snapshots import SNAPSHOT_RE, knowledge_dir, read_current, store_path

if TYPE_CHECKING:
    import numpy as np

    from cce_knowledge.contract.chunk_policy import ChunkPolicy

SCHEMA = "cce.knowledge.chunkmap/v1"
#: Raise when code that shapes a record's chunk text (parsing, redaction, chunking,
#: embedding, the store's chunk layout) changes: older maps then give full builds. The
#: package version is in the fingerprint as well.
CHUNK_CODE = 1
ROW = struct.Struct("<16sQQI")
#: A record's `_render_segment` mark: the length and chunk count of its body.
MARK = struct.Struct("<QI")
DIGEST_SIZE = 16
MARK_SIZE = DIGEST_SIZE + MARK.size
_HEADER_MAX = 4096


def _current_snapshot(root: str | os.PathLike[str]) -> str:
    """The snapshot `current` names, else why not (a phrase for `full index: …`)."""
    try:
        snapshot = read_current(root)
    except (OSError, UnicodeDecodeError):
        return "no readable `current`"
    return snapshot if SNAPSHOT_RE.fullmatch(snapshot) else "`current` names no snapshot"


def line_digest(line: bytes) -> bytes:
    """The map's key of one feed line (its bytes without `\\n` or `\\r\\n`)."""
    return hashlib.blake2b(line, digest_size=DIGEST_SIZE).digest()


def fingerprint(budget: int, redaction: str, policy: ChunkPolicy | None) -> str:
    """The settings a record's chunks depend on, as one string (hashed)."""
    facts = {
        "budget": budget,
        "redaction": redaction,
        # The rules are frozen dataclasses of strings, numbers and tuples: a stable repr.
        "policy": None if policy is None else repr(policy.rules),
        "code": [CHUNK_CODE, __version__],
    }
    text = json.dumps(facts, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def reuse_dir(root: str | os.PathLike[str]) -> Path:
    return knowledge_dir(root) / "reuse"


def map_path(root: str | os.PathLike[str], snapshot: str) -> Path:
    return reuse_dir(root) / f"{snapshot}.map"


def _row_dtype() -> np.dtype[Any]:
    # Lazy: numpy costs ~0.1-0.2 s; only an index needs it.
    import numpy as np

    return np.dtype([("h1", "<u8"), ("h2", "<u8"), ("off", "<u8"), ("len", "<u8"), ("n", "<u4")])


def write_map(
    root: str | os.PathLike[str],
    snapshot: str,
    settings: str,
    body_start: int,
    records: int,
    rows: bytes,
) -> None:
    """Write the map of the store just saved as `<snapshot>.json` (call it before
    `current` moves: the header records the store file's size and mtime)."""
    st = os.stat(store_path(root, snapshot))
    head = {
        "schema": SCHEMA,
        "snapshot": snapshot,
        "settings": settings,
        "store_size": st.st_size,
        "store_mtime_ns": st.st_mtime_ns,
        "body_start": body_start,
        "records": records,
    }
    reuse_dir(root).mkdir(parents=True, exist_ok=True)
    line = json.dumps(head, sort_keys=True).encode() + b"\n"
    atomic_write_parts(map_path(root, snapshot), (line, rows))


@dataclass
class ChunkMap:
    """A loaded map of the current store: rows sorted by digest for lookups."""

    snapshot: str
    store: Path
    body_start: int
    data: bytes  # the rows (ROW), feed order
    rows: np.ndarray  # the same as _row_dtype()
    order: np.ndarray  # indexes of rows sorted by h1

    def lookup(self, digests: bytes) -> np.ndarray:
        """For each 16-byte digest, the index of a row with that digest, or -1."""
        # Lazy: numpy costs ~0.1-0.2 s; only an index needs it.
        import numpy as np

        d = np.frombuffer(digests, dtype=[("h1", "<u8"), ("h2", "<u8")])
        out = np.full(len(d), -1, dtype=np.int64)
        if not len(self.rows) or not len(d):
            return out
        h1 = self.rows["h1"][self.order]
        at = np.minimum(np.searchsorted(h1, d["h1"]), len(h1) - 1)
        cand = self.order[at]
        # A repeated first half with another second half is a miss (the line is then
        # rendered: slower, never wrong); equal digests mean equal lines.
        hit = (h1[at] == d["h1"]) & (self.rows["h2"][cand] == d["h2"])
        out[hit] = cand[hit]
        return out


def load_map(root: str | os.PathLike[str], settings: str) -> ChunkMap | str:
    """The current store's map when it can be reused under `settings`, else why not
    (a phrase for `full index: …`)."""
    # Lazy: numpy costs ~0.1-0.2 s; only an index needs it.
    import numpy as np

    snapshot = _current_snapshot(root)
    if not SNAPSHOT_RE.fullmatch(snapshot):
        return snapshot  # why there is none
    store = store_path(root, snapshot)
    try:
        st = os.stat(store)
    except OSError:
        return f"the store of snapshot {snapshot} is missing"
    path = map_path(root, snapshot)
    try:
        with open(path, "rb") as f:
            head_line = f.readline(_HEADER_MAX)
            head = json.loads(head_line)
            data = f.read()
            rows = np.frombuffer(data, dtype=_row_dtype())
    except FileNotFoundError:
        return f"snapshot {snapshot} has no chunk map (it was pulled, or built by another version)"
    except (OSError, ValueError, UnicodeDecodeError) as e:
        return f"the chunk map of snapshot {snapshot} is unreadable ({e})"
    if not isinstance(head, dict) or head.get("schema") != SCHEMA:
        return f"the chunk map of snapshot {snapshot} is not a {SCHEMA} map"
    if head.get("snapshot") != snapshot:
        return f"the chunk map does not describe snapshot {snapshot}"
    if head.get("settings") != settings:
        return (
            "the settings changed since the last index (section tokens, redaction, "
            "chunk policy or cce-knowledge version)"
        )
    if head.get("store_size") != st.st_size or head.get("store_mtime_ns") != st.st_mtime_ns:
        return f"the store of snapshot {snapshot} changed since it was indexed"
    body_start = head.get("body_start")
    records = head.get("records")
    if not isinstance(body_start, int) or not isinstance(records, int) or records != len(rows):
        return f"the chunk map of snapshot {snapshot} is corrupt"
    body = st.st_size - body_start
    if len(rows) and (
        body < 0
        or bool(np.any(rows["off"] > body))
        or bool(np.any(rows["len"] > body - rows["off"]))
    ):
        return f"the chunk map of snapshot {snapshot} is corrupt"
    order = np.argsort(rows["h1"], kind="stable")
    return ChunkMap(snapshot, store, body_start, data, rows, order)


# ------------------------------------------------------------- a map kept in a CI cache
#
# A CI runner starts empty: the nightly builder pulls the published store (its bytes
# verified by `pull`) and keeps its chunk map in the CI's own cache. A pulled store is
# a new file, so the map's size-and-mtime pin cannot hold; an exported map names the
# store's SHA-256 instead, and is adopted only for a store with exactly those bytes.

_EXPORT_SCHEMA = SCHEMA + "+export"


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def export_map(root: str | os.PathLike[str], snapshot: str) -> bytes | None:
    """The map of `snapshot` as a self-contained file for a CI cache (the store's
    SHA-256 in place of its mtime), or None when the store has no valid map."""
    store = store_path(root, snapshot)
    try:
        with open(map_path(root, snapshot), "rb") as f:
            head = json.loads(f.readline(_HEADER_MAX))
            rows = f.read()
        st = os.stat(store)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if (
        not isinstance(head, dict)
        or head.get("schema") != SCHEMA
        or head.get("snapshot") != snapshot
        or head.get("store_size") != st.st_size
        or head.get("store_mtime_ns") != st.st_mtime_ns
    ):
        return None
    head = {k: v for k, v in head.items() if k != "store_mtime_ns"}
    head.update(schema=_EXPORT_SCHEMA, store_sha256=_file_sha256(store))
    return json.dumps(head, sort_keys=True).encode() + b"\n" + rows


def _exported(data: bytes, snapshot: str) -> tuple[dict[str, Any], bytes] | str:
    """(header, rows) of an exported map of `snapshot` whose rows are whole, else why not."""
    end = data.find(b"\n", 0, _HEADER_MAX)
    try:
        head = json.loads(data[:end]) if end > 0 else None
    except (ValueError, UnicodeDecodeError):
        head = None
    if not isinstance(head, dict) or head.get("schema") != _EXPORT_SCHEMA:
        return "the cached chunk map is not an exported chunk map"
    if head.get("snapshot") != snapshot:
        return f"the cached chunk map does not describe snapshot {snapshot}"
    rows = data[end + 1 :]
    records, body_start = head.get("records"), head.get("body_start")
    if (
        not isinstance(records, int)
        or not isinstance(body_start, int)
        or body_start < 0
        or len(rows) != records * ROW.size
    ):
        return "the cached chunk map is corrupt"
    return head, rows


def _spans_inside(rows: bytes, body: int) -> bool:
    return body >= 0 and all(
        off <= body and length <= body - off for _d, off, length, _n in ROW.iter_unpack(rows)
    )


def adopt_map(root: str | os.PathLike[str], data: bytes) -> str | None:
    """Install `data` (an `export_map` file from an untrusted cache) as the chunk map of
    the current store; None when done, else why not (a phrase for `full index: …`).

    Adopted only when it describes the current snapshot and a store of exactly these
    bytes (size and SHA-256), its rows are whole and their spans lie inside the store's
    body. `index` then checks it like any map (settings, spans) before it copies a byte.
    """
    snapshot = _current_snapshot(root)
    if not SNAPSHOT_RE.fullmatch(snapshot):
        return snapshot  # why there is none
    got = _exported(data, snapshot)
    if isinstance(got, str):
        return got
    head, rows = got
    store = store_path(root, snapshot)
    try:
        st = os.stat(store)
        if head.get("store_size") != st.st_size or head.get("store_sha256") != _file_sha256(store):
            return f"the cached chunk map was made for other bytes of snapshot {snapshot}"
    except OSError as e:
        return f"the store of snapshot {snapshot} is unreadable ({e})"
    if not _spans_inside(rows, st.st_size - head["body_start"]):
        return "the cached chunk map is corrupt"
    head = {k: v for k, v in head.items() if k != "store_sha256"}
    head.update(schema=SCHEMA, store_mtime_ns=st.st_mtime_ns)
    line = json.dumps(head, sort_keys=True).encode() + b"\n"
    try:
        reuse_dir(root).mkdir(parents=True, exist_ok=True)
        atomic_write_parts(map_path(root, snapshot), (line, rows))
    except OSError as e:
        return f"the chunk map could not be written ({e})"
    return None
