"""Properties of the bounded readers (issue 25): the provider's body decoder and number
check, and the streamed check of a published vectors file, on hostile input."""

from __future__ import annotations

import gzip
import io
import json
import zlib
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from cce_knowledge.core.errors import StoreError
from cce_knowledge.semantic.provider import ProviderError, _Decoder, finite_row
from cce_knowledge.store.vectors import KEY_BYTES, CheckedCopy, Meta, VectorFile, encode

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=30,
)


@given(json_values)
def test_finite_row_never_raises(v: Any) -> None:
    row = finite_row(v)
    if row is not None:
        assert row and all(isinstance(x, float) for x in row)
        assert np.isfinite(np.sum(np.square(np.asarray(row, dtype=np.float64))))


@given(
    st.binary(max_size=3000),
    st.sampled_from(["gzip", "deflate"]),
    st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=20),
)
def test_decoder_gives_the_bytes_whatever_the_chunking(
    data: bytes, coding: str, cuts: list[int]
) -> None:
    wire = gzip.compress(data) if coding == "gzip" else zlib.compress(data)
    dec = _Decoder(coding, "x")
    pos = 0
    for n in cuts * (len(wire) // max(1, sum(cuts)) + 1):
        if pos >= len(wire):
            break
        dec.feed(wire[pos : pos + n])
        pos += n
    dec.feed(wire[pos:])
    dec.finish()
    assert bytes(dec.data) == data


@given(st.binary(max_size=2000), st.sampled_from(["gzip", "deflate", "", "identity"]))
def test_decoder_on_garbage_is_bytes_or_a_provider_error(raw: bytes, coding: str) -> None:
    try:
        dec = _Decoder(coding, "x")
        dec.feed(raw)
        dec.finish()
    except ProviderError:
        return
    assert coding in ("gzip", "deflate") or bytes(dec.data) == raw


def _good(count: int = 6, dim: int = 4) -> bytes:
    rng = np.random.default_rng(1)
    m = rng.normal(size=(count, dim)).astype(np.float64)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    keys = b"".join(bytes([i + 1]) * KEY_BYTES for i in range(count))
    return b"".join(encode(Meta("ollama", "m", dim, count, "0" * 16, "L"), keys, m.astype("<f4")))


def _copy(data: bytes, count: int = 6) -> bytes:
    c = CheckedCopy(io.BytesIO(data), count=count, layout="L", where="k")
    return b"".join(c.parts())


def test_a_good_file_is_copied_as_is() -> None:
    data = _good()
    assert _copy(data) == data


@given(st.integers(min_value=0), st.integers(min_value=0, max_value=255))
def test_any_flipped_byte_is_refused_or_harmless(pos: int, value: int) -> None:
    data = bytearray(_good())
    pos %= len(data)
    assume(data[pos] != value)
    data[pos] = value
    try:
        out = _copy(bytes(data))
    except StoreError:
        return
    # Accepted only if still a valid file of finite unit rows (header padding, say).
    vf = VectorFile(out, verify=True)
    present = vf.present_mask()
    norms = np.linalg.norm(vf.matrix.astype(np.float64), axis=1)
    assert np.all(np.abs(norms[present] - 1) <= 1e-3) and np.all(norms[~present] == 0)


@pytest.mark.parametrize("cut", [0, 10, 100, -1])
def test_truncated_or_padded_files_are_refused(cut: int) -> None:
    data = _good()
    with pytest.raises(StoreError):
        _copy(data[:cut] if cut >= 0 else data + b"\0")
    with pytest.raises(StoreError, match="rows for a store of 7 chunks"):
        _copy(data, count=7)


def test_header_nested_deeply_is_refused() -> None:
    head = json.dumps({"schema": "x"}).encode()[:-1] + b"," + b'"a":' + b"[" * 60_000
    head += b" " * (-(16 + len(head)) % 8)
    data = b"CCEVEC01" + len(head).to_bytes(8, "little") + head
    with pytest.raises(StoreError):
        _copy(data)
