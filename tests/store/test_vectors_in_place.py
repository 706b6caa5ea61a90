"""`store.vectors.in_place`: the check that lets the vectors step of index and pull do
nothing — only for a file of the same model, layout, rows and (when given) row keys."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cce_knowledge.core.atomic import atomic_write_parts
from cce_knowledge.store.vectors import KEY_BYTES, ZERO_KEY, Meta, encode, in_place

KEYS = bytes(range(1, KEY_BYTES + 1)) + ZERO_KEY  # row 0 has a vector, row 1 none
META = Meta("ollama", "m", 4, 2, "0123456789abcdef", "L1")


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "0123456789abcdef-000000000000.vec"
    mat = np.zeros((2, 4), dtype="<f4")
    mat[0, 0] = 1.0
    atomic_write_parts(path, encode(META, KEYS, mat))
    return path


def test_the_same_file_is_in_place(tmp_path: Path) -> None:
    path = _file(tmp_path)
    assert in_place(path, model="m", layout="L1", count=2) == META
    assert in_place(path, model="m", layout="L1", count=2, keys=KEYS) == META


def test_any_difference_is_not(tmp_path: Path) -> None:
    path = _file(tmp_path)
    assert None is in_place(path, model="other", layout="L1", count=2)
    assert None is in_place(path, model="m", layout="L2", count=2)
    assert None is in_place(path, model="m", layout="L1", count=3)
    assert None is in_place(path, model="m", layout="L1", count=2, keys=ZERO_KEY + ZERO_KEY)
    assert None is in_place(tmp_path / "missing.vec", model="m", layout="L1", count=2)
    path.write_bytes(path.read_bytes()[:-1])  # damaged: never "in place"
    assert None is in_place(path, model="m", layout="L1", count=2)
