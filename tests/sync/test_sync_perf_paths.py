"""Fast sync paths == straightforward paths, byte for byte and error for error.

Pull's canonical fast path (`cck._fast_store_bytes`) must produce exactly the store
bytes of the strict re-serialising verifier, and `import_to_store_bytes` (fast, then
strict on any deviation) must accept/reject exactly the artifacts the strict path does,
with the same message. Push's export fast path is checked against `export_cck`.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cce_knowledge.sync.cck as cck
from cce_knowledge.core.jsonout import canonical
from cce_knowledge.core.rustcompat import serde_f64
from cce_knowledge.store.store_file import KnowledgeStore, dumps
from cce_knowledge.sync.cck import CckError, export_cck
from tests.helpers.cck import embedder_like, many, mutated_artifacts, raw_cck, stores, texts, u64


def _outcome(fn: Any, data: bytes) -> tuple[str, Any]:
    try:
        m, raw = fn(data, 1)
    except CckError as e:
        return "error", e.message
    return "ok", (m, raw)


def _strict(data: bytes, jobs: int | None = None) -> tuple[cck.CckManifest, bytes]:
    return cck.strict_import_to_store_bytes(data, jobs)


# ---------------------------------------------------------------- equivalence on canonical input


@settings(max_examples=100, deadline=None)
@given(stores())
def test_fast_path_is_taken_and_byte_identical(store: KnowledgeStore) -> None:
    data = raw_cck(store)
    fast = cck._fast_store_bytes(data, 1)
    assert fast is not None, "a canonical artifact must take the fast path"
    m, raw = fast
    assert (m, raw) == _strict(data)
    assert raw == dumps(store)
    assert cck.import_to_store_bytes(data) == (m, raw)
    digests = cck._fast_run(data, 1, cck._fast_digests)
    assert digests is not None
    assert (digests[0], [x for ids in digests[1] for x in ids]) == (
        cck.strict_import_chunk_digests(data, 1)
    )


def test_zero_chunk_store_fast_path() -> None:
    store = KnowledgeStore("0123456789abcdef", 0, [])
    data = raw_cck(store)
    fast = cck._fast_store_bytes(data, 1)
    assert fast is not None and fast[1] == dumps(store) == _strict(data)[1]
    assert fast[1].endswith(b'  "chunks": []\n}\n')


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("batch", [3, 4096])
def test_forked_and_batched_fast_path_equals_strict(
    jobs: int, batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cck, "PARALLEL_MIN_CHUNKS", 10)
    monkeypatch.setattr(cck, "_EMB_BATCH", batch)
    monkeypatch.setattr(cck, "_RANGE_BYTES", 700 if batch == 3 else 16 << 20)  # many ranges
    store = many(97)
    data = raw_cck(store)
    fast = cck._fast_store_bytes(data, jobs)
    assert fast is not None
    assert fast == _strict(data, jobs)
    assert fast[1] == dumps(store)


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


# ---------------------------------------------------------------- accept/reject parity


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


@pytest.mark.parametrize("reseal", [False, True])
def test_fast_and_strict_accept_and_reject_the_same_mutations(reseal: bool) -> None:
    tried = 0
    for mutated, raw in mutated_artifacts():
        data = _reseal_raw(raw) if reseal else raw
        fast, strict = _outcome(cck.import_to_store_bytes, data), _outcome(_strict, data)
        assert fast == strict, mutated
        assert _outcome(cck.import_chunk_digests, data) == _outcome(
            cck.strict_import_chunk_digests, data
        ), mutated
        tried += 1
    assert tried > 40


def test_same_value_variants_are_accepted_via_the_strict_fallback() -> None:
    store = many(5)
    base = raw_cck(store)
    variant = base.replace(b'"name":"#', b'"name":"\\u0023').replace(b'"kind":"', b'"kind": "')
    assert variant != base
    assert cck._fast_store_bytes(variant, 1) is None  # not canonical: not the fast path
    assert cck.import_to_store_bytes(variant) == _strict(base) == _strict(variant)


def test_raw_resealed_non_canonical_artifact_is_rejected() -> None:
    # Its raw bytes hash to the manifest checksum, but the canonical re-serialisation
    # (what the reference hashes) does not: both paths must refuse it.
    variant = _reseal_raw(raw_cck(many(5)).replace(b'"kind":"', b'"kind": "'))
    for fn in (cck.import_to_store_bytes, _strict):
        with pytest.raises(CckError, match=r"^checksum mismatch"):
            fn(variant)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stores(max_chunks=3), st.data())
def test_any_single_byte_change_gets_the_strict_verdict(
    store: KnowledgeStore, data: st.DataObject
) -> None:
    art = raw_cck(store)
    pos = data.draw(st.integers(0, len(art) - 1))
    new = data.draw(st.integers(0, 255))
    mutated = art[:pos] + bytes([new]) + art[pos + 1 :]
    if data.draw(st.booleans()):
        mutated = _reseal_raw(mutated)
    assert _outcome(cck.import_to_store_bytes, mutated) == _outcome(_strict, mutated)
    assert _outcome(cck.import_chunk_digests, mutated) == _outcome(
        cck.strict_import_chunk_digests, mutated
    )


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
    from cce_knowledge.store.store_file import save_store_bytes
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
            return "ok", (out.manifest, out.data, out.chunks, out.phase_a)

        assert run(_outgoing) == run(outgoing_from_store), variant
        tried += 1
    assert tried == 12
