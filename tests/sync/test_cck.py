"""The `.cck` codec: goldens, round trip, canonical escaping, strict import errors."""

from __future__ import annotations

import base64
import hashlib
import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cce_knowledge.core.errors import SyncError
from cce_knowledge.store.ingest import ingest_feed
from cce_knowledge.store.snapshots import KnowledgeStore, dumps
from cce_knowledge.sync.cck import (
    PHASE_A_REFUSAL,
    CckError,
    decode_embedding,
    encode_embedding,
    export_cck,
    import_cck,
    import_keyed,
)
from tests.helpers.cck import chunk, floats, plain_stores, plain_texts
from tests.helpers.sync import CURATED

GOLDEN_CHECKSUM = "84284a0ad6981d3c40c4dffd6dbb67d7e000cf6e64ff6e75b321d439ee9f452d"
GOLDEN_RAW_SHA = "1f3f81ddf40f563ce24e4b608e025fb0c03d7b907479f383d2f63cc68dbcd706"
EMPTY_CHECKSUM = "2d38783c612b4f9c5e3527e63ac5130cafb231f288b88c6ded4ffa093727a22d"
STORE_SHA = "ab66052f618f84693cd229a1926dfb28d2570697d803fa9006281ee584a41110"


@pytest.fixture(scope="module")
def fixture_store() -> KnowledgeStore:
    return ingest_feed(CURATED.read_bytes())


def test_fixture_golden(fixture_store: KnowledgeStore) -> None:
    art = export_cck(fixture_store, "fixture")
    assert art.checksum == GOLDEN_CHECKSUM
    assert len(art.data) == 6759
    assert hashlib.sha256(art.data).hexdigest() == GOLDEN_RAW_SHA
    lines = art.data.split(b"\n")
    assert lines[-1] == b"" and len(lines) == 4
    assert [len(x) for x in lines[:3]] == [225, 3337, 3194]
    assert lines[0].startswith(b'{"checksum":"84284a0a')
    assert b"\r" not in art.data


def test_empty_store_golden() -> None:
    art = export_cck(ingest_feed(b""), "fixture")
    assert art.checksum == EMPTY_CHECKSUM
    assert art.data.count(b"\n") == 1 and art.data.endswith(b"}\n")


def test_round_trip_is_byte_identical_store(fixture_store: KnowledgeStore) -> None:
    art = export_cck(fixture_store, "fixture")
    back = import_cck(art.data)
    assert back.store == fixture_store
    assert hashlib.sha256(dumps(back.store)).hexdigest() == STORE_SHA
    assert back.manifest.data_as_of == "2026-02-01T10:00:00Z"
    assert back.manifest.corpus_id == "fixture" and back.manifest.records == 2


def test_escaping_of_non_ascii_and_controls() -> None:
    s = 'é\t\x01/\x7f"\\\u2028x'
    store = KnowledgeStore("0" * 16, 1, [chunk(content=s)])
    data = export_cck(store, "c").data
    expected = b'"\xc3\xa9\\t\\u0001/\x7f\\"\\\\\xe2\x80\xa8x"'
    assert expected in data
    assert import_cck(data).store.chunks[0].content == s


def test_phase_a_store_refused() -> None:
    store = KnowledgeStore("0" * 16, 1, [chunk(embedding=[])])
    with pytest.raises(SyncError) as e:
        export_cck(store, "c")
    assert e.value.message == PHASE_A_REFUSAL


@settings(max_examples=150, deadline=None)
@given(plain_stores(), plain_texts)
def test_property_round_trip(store: KnowledgeStore, corpus: str) -> None:
    art = export_cck(store, corpus)
    back = import_cck(art.data)
    assert back.store == store
    assert back.manifest.corpus_id == corpus
    assert export_cck(back.store, corpus).data == art.data
    assert b"\r" not in art.data  # a CR inside a string is escaped, never raw


@settings(max_examples=200, deadline=None)
@given(st.lists(floats, max_size=40))
def test_property_embedding_codec(v: list[float]) -> None:
    text = encode_embedding(v)
    assert len(text) == 4 * ((8 * len(v) + 2) // 3)
    got = decode_embedding(text)
    assert struct.pack(f"<{len(v)}d", *got) == struct.pack(f"<{len(v)}d", *v)


@settings(max_examples=150, deadline=None)
@given(st.binary(min_size=1, max_size=400), st.data())
def test_property_any_flipped_byte_is_refused(_: bytes, data: st.DataObject) -> None:
    art = export_cck(KnowledgeStore("0" * 16, 1, [chunk(), chunk(record_id="r:2")]), "c")
    i = data.draw(st.integers(0, len(art.data) - 1))
    bit = data.draw(st.integers(0, 7))
    flipped = bytearray(art.data)
    flipped[i] ^= 1 << bit
    try:
        back = import_cck(bytes(flipped))
    except CckError:
        return
    # Only byte variants with the same canonical form may pass (e.g. JSON whitespace).
    assert back.store == import_cck(art.data).store


# ---------------------------------------------------------------- import errors


def _art() -> bytes:
    return export_cck(KnowledgeStore("0" * 16, 1, [chunk()]), "c").data


def _lines() -> list[dict[str, object]]:
    return [json.loads(x) for x in _art().decode().split("\n")[:-1]]


def _emit(objs: list[dict[str, object]]) -> bytes:
    return (
        "\n".join(json.dumps(o, sort_keys=True, separators=(",", ":")) for o in objs) + "\n"
    ).encode()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda m, c: m.pop("data_as_of"), "manifest missing nullable string field `data_as_of`"),
        (lambda m, c: m.update(contract=1), "manifest missing string field `contract`"),
        (lambda m, c: m.pop("corpus_id"), "manifest missing string field `corpus_id`"),
        (lambda m, c: m.update(records=True), "manifest missing integer field `records`"),
        (lambda m, c: m.update(chunk_count=1.0), "manifest missing integer field `chunk_count`"),
        (lambda m, c: m.update(records=-1), "manifest missing integer field `records`"),
        (lambda m, c: m.update(checksum=None), "manifest missing string field `checksum`"),
        (lambda m, c: c.update(embedding=[1.0]), "chunk missing string field `embedding`"),
        (lambda m, c: c.update(start_line="1"), "chunk missing integer field `start_line`"),
        (lambda m, c: c.pop("url"), "chunk missing nullable string field `url`"),
        (lambda m, c: c.update(labels="x"), "chunk missing array field `labels`"),
        (lambda m, c: c.pop("title"), "chunk missing string field `title`"),
        (lambda m, c: c.update(embedding="AAAA"), "embedding byte length 3 is not a multiple of 8"),
        (lambda m, c: c.update(embedding="AAA"), "bad embedding base64"),
        (lambda m, c: c.update(embedding="AAB="), "bad embedding base64"),
        (lambda m, c: c.update(content="tampered"), "checksum mismatch: manifest says "),
        (
            lambda m, c: m.update(chunk_count=2),
            "artifact line count 2 does not match chunk_count 2 (expected 3)",
        ),
    ],
)
def test_import_errors_are_named(mutate, message) -> None:  # type: ignore[no-untyped-def]
    m, c = _lines()
    mutate(m, c)
    with pytest.raises(CckError) as e:
        import_cck(_emit([m, c]))
    assert e.value.message.startswith(message)


def test_import_structural_errors() -> None:
    with pytest.raises(CckError, match=r"^artifact is not UTF-8"):
        import_cck(b"\xff\n")
    with pytest.raises(CckError, match=r"^artifact too short: need at least a manifest line$"):
        import_cck(b"")
    with pytest.raises(CckError, match=r"^bad manifest JSON: "):
        import_cck(b"version https://git-lfs.github.com/spec/v1\n")
    with pytest.raises(CckError, match=r"^artifact line count 3 does not match chunk_count 1"):
        import_cck(_art() + b"\n")
    with pytest.raises(CckError, match=r"^bad chunk JSON: "):
        import_cck(_art().split(b"\n")[0] + b"\n{not json\n")


def test_byte_variants_with_the_same_canonical_form_are_accepted() -> None:
    data = _art()
    crlf = data.replace(b"\n", b"\r\n")
    assert import_cck(crlf).store == import_cck(data).store
    assert import_cck(data[:-1]).checksum == import_cck(data).checksum


def test_keyed_errors_name_the_key() -> None:
    data = bytearray(_art())
    data[data.index(b"body")] ^= 0x01
    with pytest.raises(CckError) as e:
        import_keyed("knowledge/v1/c/0000000000000000.cck", bytes(data))
    assert e.value.message.startswith("knowledge/v1/c/0000000000000000.cck: checksum mismatch")


def test_embedding_codec_is_little_endian_base64() -> None:
    assert encode_embedding([1.0]) == base64.b64encode(struct.pack("<d", 1.0)).decode()
    assert (
        encode_embedding([0.0] * 256).endswith("=") and len(encode_embedding([0.0] * 256)) == 2732
    )
    assert decode_embedding("") == []


# ---------------------------------------------------------------- import straight to store bytes


def _many(n: int) -> KnowledgeStore:
    return KnowledgeStore(
        "0123456789abcdef",
        n,
        [
            chunk(record_id=f"r:{i}", content=f"# T\nbody {i} é", embedding=[i / 7, -1.5e-7, 0.0])
            for i in range(n)
        ],
    )


@pytest.mark.parametrize("jobs", [1, 2])
def test_import_to_store_bytes_matches_model_path(
    jobs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cce_knowledge.sync.cck as cck

    monkeypatch.setattr(cck, "PARALLEL_MIN_CHUNKS", 10)
    for store in (_many(0), _many(1), _many(57)):
        data = export_cck(store, "c").data
        m, raw = cck.import_to_store_bytes(data, jobs=jobs)
        assert raw == dumps(import_cck(data).store) == dumps(store)
        assert m == import_cck(data).manifest


def test_import_to_store_bytes_fixture_golden(fixture_store: KnowledgeStore) -> None:
    import cce_knowledge.sync.cck as cck

    _, raw = cck.import_to_store_bytes(export_cck(fixture_store, "fixture").data)
    assert hashlib.sha256(raw).hexdigest() == STORE_SHA


@pytest.mark.parametrize("jobs", [1, 2])
def test_import_to_store_bytes_reports_the_same_first_error(
    jobs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cce_knowledge.sync.cck as cck

    monkeypatch.setattr(cck, "PARALLEL_MIN_CHUNKS", 10)
    lines = export_cck(_many(40), "c").data.split(b"\n")
    lines[30] = lines[30].replace(b'"start_line":1', b'"start_line":"1"')
    lines[35] = b"{broken"
    bad = b"\n".join(lines)
    with pytest.raises(CckError) as serial:
        import_cck(bad)
    with pytest.raises(CckError) as fast:
        cck.import_to_store_bytes(bad, jobs=jobs)
    assert fast.value.message == serial.value.message == "chunk missing integer field `start_line`"
    flipped = export_cck(_many(40), "c").data.replace(b"body 3 ", b"body 4 ", 1)
    with pytest.raises(CckError, match=r"^checksum mismatch"):
        cck.import_to_store_bytes(flipped, jobs=jobs)


@pytest.mark.parametrize("jobs", [1, 2])
def test_chunk_digests_match_the_model(jobs: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import cce_knowledge.sync.cck as cck
    from cce_knowledge.sync.guard import digests_from_chunks, record_digests

    monkeypatch.setattr(cck, "PARALLEL_MIN_CHUNKS", 10)
    store = _many(33)
    data = export_cck(store, "c").data
    m, pairs = cck.import_chunk_digests(data, jobs=jobs)
    assert m == import_cck(data).manifest
    assert [rid for rid, _ in pairs] == [c.record_id for c in store.chunks]
    assert digests_from_chunks(pairs) == record_digests(store)
    with pytest.raises(CckError, match=r"^checksum mismatch"):
        cck.import_chunk_digests(data.replace(b"body 3 ", b"body 4 ", 1), jobs=jobs)


# ------------------------------------------------------------------ strict path, streamed


def _strict_outcome(data: bytes) -> tuple[str, bytes | str]:
    from cce_knowledge.sync.cck import CckError, import_to_store_bytes

    try:
        return "ok", import_to_store_bytes(data, jobs=1)[1]
    except CckError as e:
        return "error", e.message


def _streamed_outcome(data: bytes) -> tuple[str, bytes | str]:
    """The strict streamed outcome, read through a mapped file as pull reads it."""
    import mmap
    import tempfile

    from cce_knowledge.sync.cck import CckError, strict_stream_store_parts

    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.flush()
        if not data:
            view: bytes | mmap.mmap = b""
        else:
            view = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            _, parts = strict_stream_store_parts(view)
            return "ok", b"".join(parts)
        except CckError as e:
            return "error", e.message


_BASE_CCK = export_cck(ingest_feed(CURATED.read_bytes()), "fixture").data


@settings(max_examples=300, deadline=None)
@given(
    cuts=st.lists(
        st.tuples(
            st.integers(0, len(_BASE_CCK)),
            st.sampled_from([b"", b"\n", b"\xff", b"\xe2\x82", b"\\u0023", b"x", b'"', b"\r"]),
            st.integers(0, 3),
        ),
        max_size=3,
    )
)
def test_streamed_strict_import_matches_the_in_memory_one(
    cuts: list[tuple[int, bytes, int]],
) -> None:
    """Damaged artifacts: the streamed strict path installs the same bytes or refuses
    with the same first error as the in-memory strict path."""
    data = _BASE_CCK
    for at, insert, drop in cuts:
        at = min(at, len(data))
        data = data[:at] + insert + data[at + drop :]
    assert _streamed_outcome(data) == _strict_outcome(data)


def test_streamed_strict_import_of_edge_shapes() -> None:
    head = _BASE_CCK.split(b"\n", 1)[0]
    for data in (b"", b"\n", b"\n\n", head, head + b"\n", _BASE_CCK[:-1], _BASE_CCK + b"\n"):
        assert _streamed_outcome(data) == _strict_outcome(data), data[:40]


def test_streamed_strict_parts_over_many_parts_match(monkeypatch: pytest.MonkeyPatch) -> None:
    from cce_knowledge.sync import cck as C

    data = export_cck(ingest_feed(CURATED.read_bytes()), "fixture").data
    monkeypatch.setattr(C, "_STREAM_PART", 200)  # a part per chunk
    m, parts = C.strict_stream_store_parts(data)
    got = list(parts)
    assert len(got) == 4  # head, "chunks" opener, one part per chunk (the fixture has 2)
    assert (m, b"".join(got)) == C.import_to_store_bytes(data, jobs=1)
