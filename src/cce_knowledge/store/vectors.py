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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cce_knowledge.core.errors import StoreError
from cce_knowledge.store.snapshots import knowledge_dir

if TYPE_CHECKING:
    import numpy as np

MAGIC = b"CCEVEC01"
SCHEMA = "cce.vectors/v1"
VECTORS_DIR = "vectors"
KEY_BYTES = 32
MAX_HEADER = 64 * 1024
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
        if len(mv) < 16 or bytes(mv[:8]) != MAGIC:
            raise bad
        hlen = int.from_bytes(mv[8:16], "little")
        if hlen > MAX_HEADER or 16 + hlen > len(mv) or (16 + hlen) % 8:
            raise bad
        try:
            h = json.loads(bytes(mv[16 : 16 + hlen]))
        except (ValueError, UnicodeDecodeError) as e:
            raise bad from e
        if not isinstance(h, dict) or h.get("schema") != SCHEMA:
            raise bad
        try:
            meta = Meta(
                provider=_str(h, "provider"),
                model=_str(h, "model"),
                dim=_int(h, "dim", 1, 16_384),
                count=_int(h, "count", 0, 1 << 32),
                snapshot=_str(h, "snapshot"),
                layout=_str(h, "layout"),
            )
            checksum = _str(h, "payload_sha256")
        except (TypeError, ValueError) as e:
            raise bad from e
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
