"""Push's store-file export fast path == `export_cck`, byte for byte; the float text
the native pull renders == serde's; strict verdicts on non-canonical artifacts.

(Pull's native path is checked against the strict decoder in test_sync_native.py.)
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cce_knowledge.sync.cck as cck
from cce_knowledge.core.jsonout import canonical
from cce_knowledge.core.rustcompat import serde_f64
from cce_knowledge.store.snapshots import KnowledgeStore, dumps
from cce_knowledge.sync.cck import CckError, export_cck
from tests.helpers.cck import embedder_like, many, raw_cck, stores, texts, u64

# ---------------------------------------------------------------- float text


@settings(max_examples=1000, deadline=None)
@given(u64)
def test_bits_text_is_serde_f64(bits: int) -> None:
    x = struct.unpack("<d", bits.to_bytes(8, "little"))[0]
    assert cck._bits_text(bits).decode() == serde_f64(x)


@pytest.mark.parametrize(
    "x",
    [
        1e-5,
        1e-4,
        1.5e-5,
        9.999e-5,
        1e15,
        9.999999999999998e15,
        1e16,
        123.456,
        5e-324,
        -0.0,
        0.0,
        math.inf,
        -math.inf,
        math.nan,
        1.7976931348623157e308,
    ],
)
def test_bits_text_exponent_boundaries(x: float) -> None:
    bits = int.from_bytes(struct.pack("<d", x), "little")
    assert cck._bits_text(bits).decode() == serde_f64(x)


# ---------------------------------------------------------------- strict verdicts


def _reseal_raw(data: bytes) -> bytes:
    """Re-seal with the hash of the RAW bytes, as a non-conforming producer might."""
    head, _, body = data.partition(b"\n")
    try:
        mo = json.loads(head)
        mo["checksum"] = ""
        blank = canonical(mo).encode() + b"\n"
        mo["checksum"] = hashlib.sha256(blank + body).hexdigest()
        return canonical(mo).encode() + b"\n" + body
    except (ValueError, TypeError):
        return data


def test_same_value_variants_are_accepted() -> None:
    store = many(5)
    base = raw_cck(store)
    variant = base.replace(b'"name":"#', b'"name":"\\u0023').replace(b'"kind":"', b'"kind": "')
    assert variant != base
    assert cck.import_to_store_bytes(variant) == cck.import_to_store_bytes(base)


def test_raw_resealed_non_canonical_artifact_is_rejected() -> None:
    # Its raw bytes hash to the manifest checksum, but the canonical re-serialisation
    # (what the reference hashes) does not: both paths must refuse it.
    variant = _reseal_raw(raw_cck(many(5)).replace(b'"kind":"', b'"kind": "'))
    for fn in (cck.import_to_store_bytes, cck.import_chunk_digests):
        with pytest.raises(CckError, match=r"^checksum mismatch"):
            fn(variant)


# ---------------------------------------------------------------- push: store file -> .cck

finite_embs = st.lists(
    st.just(0.0) | st.just(-0.0) | embedder_like | st.floats(allow_nan=False, allow_infinity=False),
    min_size=1,
    max_size=24,
)


@settings(max_examples=100, deadline=None)
@given(stores(), texts, st.data())
def test_export_fast_path_equals_export_cck(
    store: KnowledgeStore, corpus: str, data: st.DataObject
) -> None:
    for c in store.chunks:
        c.embedding = data.draw(finite_embs)
    fast = cck.fast_export_store_bytes(dumps(store), corpus)
    assert fast is not None and fast is not True, "our own store layout takes the fast path"
    m, blob, pairs = fast
    art = export_cck(store, corpus)
    assert (m, blob) == (art.manifest, art.data)
    assert pairs == [(c.record_id, cck.chunk_digest(c.content)) for c in store.chunks]


@settings(max_examples=60, deadline=None)
@given(stores(), texts, st.data(), st.booleans())
def test_spooled_export_equals_the_in_memory_one(
    store: KnowledgeStore, corpus: str, data: st.DataObject, native: bool
) -> None:
    """Push's export to a spool file (a big store never in memory) writes the same
    artifact, manifest and pairs as the in-memory export, on both render paths."""
    import mmap
    import tempfile

    from cce_knowledge.sync.accelerator import iter_export_slices

    for c in store.chunks:
        c.embedding = data.draw(finite_embs)
    raw = dumps(store)
    want = cck.fast_export_store_bytes(raw, corpus)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "store.json"
        p.write_bytes(raw)
        with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            got = cck.export_store_spooled(
                mm, corpus, d, native_iter=iter_export_slices if native else None
            )
        assert got is not None and got is not True and want is not None and want is not True
        m, art, pairs = got
        assert (m, bytes(art), pairs) == want
        art.close()
        assert [x for x in os.listdir(d) if x != "store.json"] == []  # spools unlinked


def test_export_fast_path_phase_a_and_zero_chunks() -> None:
    store = many(12)  # every 11th chunk has no embedding
    assert cck.fast_export_store_bytes(dumps(store), "c") is True
    empty = KnowledgeStore("0123456789abcdef", 3, [])
    fast = cck.fast_export_store_bytes(dumps(empty), "c")
    assert fast is not None and fast is not True
    assert fast[1] == export_cck(empty, "c").data


@pytest.mark.parametrize("jobs", [1, 2])
def test_export_fast_path_forked_equals_export_cck(
    jobs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cck, "PARALLEL_MIN_CHUNKS", 10)
    monkeypatch.setattr(cck, "_RANGE_BYTES", 900)  # many ranges, even with one worker
    store = many(97)
    for c in store.chunks:
        c.embedding = c.embedding or [1.0]
    fast = cck.fast_export_store_bytes(dumps(store), "c", jobs)
    assert fast is not None and fast is not True
    assert fast[1] == export_cck(store, "c").data


def _store_variants(text: bytes) -> list[bytes]:
    return [
        text.replace(b'"kind": "', b'"kind":  "', 1),  # other whitespace: model path
        text.replace(b'"name": "#', b'"name": "\\u0023', 1),  # same value, other spelling
        text.replace(b"        0.0,", b"        0e0,", 1),  # same value, other number text
        text.replace(b"        0.0,", b"        1E400,", 1),  # serde: out of range
        text.replace(b'"start_line": 1,', b'"start_line": "1",', 1),  # wrong type
        text.replace(b'"group": null', b'"group": 5', 1),
        text.replace(b'"labels": [],', b'"labels": [\n        1\n      ],', 1),
        text.replace(b"\n    },\n    {\n", b"\n    }, {\n", 1),
        text.replace(b'      "url": null,\n', b"", 1),  # missing optional field
        text[:-1],
        text + b"\n",
    ]


def test_push_outgoing_matches_the_model_path_on_store_variants(tmp_path: Any) -> None:
    from cce_knowledge.core.errors import CceError
    from cce_knowledge.store.snapshots import save_store_bytes
    from cce_knowledge.sync.outgoing import outgoing_from_store
    from cce_knowledge.sync.push import _outgoing

    store = many(8)
    for c in store.chunks:
        c.embedding = c.embedding or [0.0, 2.5]
    base = dumps(store)
    tried = 0
    for variant in [base, *_store_variants(base)]:
        if variant == base and tried:
            continue
        root = tmp_path / f"v{tried}"
        save_store_bytes(root, store.snapshot, variant)

        def run(fn: Any, root: Any = root) -> tuple[str, Any]:
            try:
                out = fn(root, "c")
            except CceError as e:
                return "error", e.message
            return "ok", (out.manifest, bytes(out.data), out.chunks, out.phase_a)

        assert run(_outgoing) == run(outgoing_from_store), variant
        tried += 1
    assert tried == 12
