"""The vectors file: one snapshot's chunk vectors for one model.

    <root>/.cce/knowledge/vectors/<snapshot>-<model key>.vec

Layout: the 8-byte magic `CCEVEC01`, an 8-byte little-endian header length, a
compact JSON header, zero padding to a multiple of 8, then `count` 32-byte keys (the
sha256 of the exact text sent for each chunk; all zero for a chunk without a
vector) and `count × dim` little-endian float32 (unit length; zeros when absent).
Rows follow the search index's chunk order. The header names the provider, model,
dimension, snapshot, the search index layout the rows follow, and the sha256 of
everything after the header (its own checksum, checked before a pulled file is
installed). The same bytes are what `push` publishes beside a corpus artifact.

Lazy imports: numpy (~100 ms) loads only when a vectors file is read or written, not
when a path or a name is.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from cce_knowledge.core.errors import StoreError
from cce_knowledge.store.snapshots import knowledge_dir

if TYPE_CHECKING:
    import numpy as np

MAGIC = b"CCEVEC01"
SCHEMA = "cce.vectors/v1"
VECTORS_DIR = "vectors"
KEY_BYTES = 32
MAX_HEADER = 64 * 1024
MAX_DIM = 16_384
#: How far a stored row's length may be from 1 (float32 rounding is ~1e-7 a value).
UNIT_TOLERANCE = 1e-3
ZERO_KEY = bytes(KEY_BYTES)
_NAME_RE = re.compile(r"([0-9a-f]{16})-([0-9a-f]{12})\.vec")


def model_key(model: str) -> str:
    return hashlib.sha256(model.encode("utf-8")).hexdigest()[:12]


def vectors_dir(root: str | os.PathLike[str]) -> Path:

    return knowledge_dir(root) / VECTORS_DIR


def vectors_path(root: str | os.PathLike[str], snapshot: str, model: str) -> Path:
    return vectors_dir(root) / f"{snapshot}-{model_key(model)}.vec"


def parse_name(name: str) -> tuple[str, str] | None:
    """(snapshot, model key) of a vectors file name, None for anything else."""
    m = _NAME_RE.fullmatch(name)
    return (m.group(1), m.group(2)) if m else None


@dataclass(frozen=True)
class Meta:
    provider: str
    model: str
    dim: int
    count: int
    snapshot: str
    layout: str

    def header(self, payload_sha256: str) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "provider": self.provider,
            "model": self.model,
            "dim": self.dim,
            "count": self.count,
            "snapshot": self.snapshot,
            "layout": self.layout,
            "payload_sha256": payload_sha256,
        }


def encode(meta: Meta, keys: bytes, matrix: np.ndarray) -> list[bytes]:
    """The file's bytes as parts (deterministic: same rows, same bytes)."""
    import numpy as np

    if len(keys) != meta.count * KEY_BYTES or matrix.shape != (meta.count, meta.dim):
        raise ValueError("keys/matrix do not match the header")
    body = np.ascontiguousarray(matrix, dtype="<f4").tobytes()
    h = hashlib.sha256(keys)
    h.update(body)
    head = json.dumps(meta.header(h.hexdigest()), sort_keys=True, separators=(",", ":")).encode()
    head += b" " * (-(16 + len(head)) % 8)
    return [MAGIC + len(head).to_bytes(8, "little") + head, keys, body]


class VectorFile:
    """A vectors file, memory-mapped and validated (sizes always; checksum on request)."""

    def __init__(self, data: bytes | mmap.mmap, *, verify: bool = False, where: str = "") -> None:
        import numpy as np

        self.where = where
        mv = memoryview(data)
        bad = StoreError(f"{where}: not a vectors file (or damaged)")
        if len(mv) < 16:
            raise bad
        hlen = header_length(bytes(mv[:16]), where)
        if 16 + hlen > len(mv):
            raise bad
        meta, checksum = parse_header(bytes(mv[16 : 16 + hlen]), where)
        start = 16 + hlen
        kend = start + meta.count * KEY_BYTES
        end = kend + meta.count * meta.dim * 4
        if end != len(mv):
            raise bad
        if verify and hashlib.sha256(mv[start:end]).hexdigest() != checksum:
            raise StoreError(f"{where}: vectors checksum mismatch")
        self.meta = meta
        self.checksum = checksum
        self._data = data
        self.keys = mv[start:kend]
        self.matrix = np.frombuffer(data, dtype="<f4", count=meta.count * meta.dim, offset=kend)
        self.matrix = self.matrix.reshape(meta.count, meta.dim)

    def key(self, i: int) -> bytes:
        return bytes(self.keys[i * KEY_BYTES : (i + 1) * KEY_BYTES])

    def present_mask(self) -> np.ndarray:
        """Per row: does it carry a vector (its key is not all zero)."""
        import numpy as np

        keys = np.frombuffer(self.keys, dtype=np.uint8).reshape(self.meta.count, KEY_BYTES)
        return np.asarray(keys.any(axis=1), dtype=bool)

    def present(self) -> int:
        """How many rows carry a vector."""
        return int(self.present_mask().sum())

    @classmethod
    def open(cls, path: Path, *, verify: bool = False) -> VectorFile:
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                data: bytes | mmap.mmap = (
                    mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
                )
        except OSError as e:
            raise StoreError(f"{path}: cannot read vectors ({e.strerror})") from e
        return cls(data, verify=verify, where=str(path))


def in_place(
    path: Path, *, model: str, layout: str, count: int, keys: bytes | None = None
) -> Meta | None:
    """The header of the vectors file at `path` when it already holds `model`'s vectors
    for `count` rows in search-index `layout` (and, given `keys`, exactly those row keys:
    zero for a row without a vector) — fetching or embedding them again would write the
    same file. None for a missing, damaged or different file."""
    try:
        vf = VectorFile.open(path)
    except StoreError:
        return None
    m = vf.meta
    if (m.model, m.layout, m.count) != (model, layout, count):
        return None
    return m if keys is None or vf.keys == keys else None


def header_length(prefix: bytes, where: str) -> int:
    """The header length the first 16 bytes announce (checked: magic, bound, alignment)."""
    hlen = int.from_bytes(prefix[8:16], "little")
    if len(prefix) < 16 or prefix[:8] != MAGIC or hlen > MAX_HEADER or (16 + hlen) % 8:
        raise StoreError(f"{where}: not a vectors file (or damaged)")
    return hlen


def parse_header(head: bytes, where: str) -> tuple[Meta, str]:
    """(Meta, payload checksum) of a header's JSON; StoreError when it is not one."""
    bad = StoreError(f"{where}: not a vectors file (or damaged)")
    try:
        h = json.loads(head)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise bad from e
    if not isinstance(h, dict) or h.get("schema") != SCHEMA:
        raise bad
    try:
        meta = Meta(
            provider=_str(h, "provider"),
            model=_str(h, "model"),
            dim=_int(h, "dim", 1, MAX_DIM),
            count=_int(h, "count", 0, 1 << 32),
            snapshot=_str(h, "snapshot"),
            layout=_str(h, "layout"),
        )
        return meta, _str(h, "payload_sha256")
    except (TypeError, ValueError) as e:
        raise bad from e


def max_size(count: int) -> int:
    """The largest vectors file `count` chunks can have (the widest rows, the longest
    header): anything larger is refused before a byte of it is read."""
    return 16 + MAX_HEADER + count * (KEY_BYTES + 4 * MAX_DIM)


class CheckedCopy:
    """A vectors file read from `src` in steps and handed on as it is checked
    (`parts()`, for atomic_write_parts): the header must name `count` rows in
    `layout`; every row with a key must be finite and of unit length, every row
    without one all zeros; the checksum must hold. Memory: the keys (32 bytes a row)
    and one step of rows, whatever the file claims. A failure raises StoreError
    naming the first bad row, and the partial copy is dropped by the writer."""

    def __init__(self, src: BinaryIO, *, count: int, layout: str, where: str) -> None:
        self.src = src
        self.count = count
        self.layout = layout
        self.where = where
        self.meta: Meta | None = None
        self.present = 0

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            got = self.src.read(min(n - len(out), 1 << 20))
            if not got:
                raise StoreError(f"{self.where}: truncated vectors file")
            out += got
        return bytes(out)

    def _head(self) -> tuple[bytes, Meta, str]:
        prefix = self._read(16)
        hlen = header_length(prefix, self.where)
        head = self._read(hlen)
        meta, checksum = parse_header(head, self.where)
        if meta.count != self.count:
            raise StoreError(f"{self.where}: {meta.count} rows for a store of {self.count} chunks")
        if meta.layout != self.layout:
            raise StoreError(
                f"{self.where}: rows follow search index layout {meta.layout[:16]!r}, "
                f"not this version's {self.layout!r}"
            )
        return prefix + head, meta, checksum

    def parts(self) -> Iterator[bytes]:
        import numpy as np

        head, meta, checksum = self._head()
        self.meta = meta
        yield head
        keys = self._read(meta.count * KEY_BYTES)
        digest = hashlib.sha256(keys)
        yield keys
        present = np.asarray(
            np.frombuffer(keys, dtype=np.uint8).reshape(meta.count, KEY_BYTES).any(axis=1),
            dtype=bool,
        )
        self.present = int(present.sum())
        step = max(1, (4 << 20) // (4 * meta.dim))
        for start in range(0, meta.count, step):
            n = min(step, meta.count - start)
            block = self._read(n * meta.dim * 4)
            digest.update(block)
            self._check_rows(block, present[start : start + n], start, meta.dim)
            yield block
        if self.src.read(1):
            raise StoreError(f"{self.where}: data after the last row")
        if digest.hexdigest() != checksum:
            raise StoreError(f"{self.where}: vectors checksum mismatch")

    def _check_rows(self, block: bytes, present: Any, start: int, dim: int) -> None:
        import numpy as np

        rows = np.frombuffer(block, dtype="<f4").reshape(-1, dim).astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
        # NaN fails both comparisons, so a NaN row is never "unit" nor "zero".
        ok = np.where(present, np.abs(norms - 1.0) <= UNIT_TOLERANCE, norms == 0.0)
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            what = (
                "a vector that is not finite and of unit length"
                if present[i]
                else ("values but no key")
            )
            raise StoreError(f"{self.where}: row {start + i + 1} has {what}")


def _str(h: dict[str, Any], k: str) -> str:
    v = h.get(k)
    if not isinstance(v, str) or not v or len(v) > 1024:
        raise ValueError(k)
    return v


def _int(h: dict[str, Any], k: str, lo: int, hi: int) -> int:
    v = h.get(k)
    if type(v) is not int or not lo <= v <= hi:
        raise ValueError(k)
    return v


def list_files(root: str | os.PathLike[str]) -> list[tuple[str, str, Path]]:
    """(snapshot, model key, path) of every vectors file (sorted; never follows symlinks)."""
    d = vectors_dir(root)
    out = []
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return []
    for name in names:
        got = parse_name(name)
        if got is not None and not (d / name).is_symlink():
            out.append((got[0], got[1], d / name))
    return out
