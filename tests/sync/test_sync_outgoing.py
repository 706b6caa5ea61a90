"""The push's fast store-file → .cck path equals the model path, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings

import cce_knowledge.sync.cck as cck
import cce_knowledge.sync.outgoing as og
from cce_knowledge.core.errors import SyncError
from cce_knowledge.store.ingest import ingest_feed
from cce_knowledge.store.snapshots import KnowledgeStore, dumps, save
from cce_knowledge.sync.guard import digests_from_chunks, record_digests
from tests.helpers.cck import chunk, plain_stores
from tests.helpers.sync import CURATED


def _check_same(root: Path, store: KnowledgeStore, jobs: int, cid: str = "c") -> og.Outgoing:
    out = og.outgoing_from_store(root, cid, jobs=jobs)
    art = cck.export_cck(store, cid)
    assert out.data == art.data and out.manifest == art.manifest
    assert digests_from_chunks(out.chunks) == record_digests(store)
    return out


@pytest.mark.parametrize("jobs", [1, 2])
def test_fixture_and_large_store(
    tmp_path: Path, jobs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cck, "PARALLEL_MIN_CHUNKS", 10)
    store = ingest_feed(CURATED.read_bytes())
    save(tmp_path, store)
    out = _check_same(tmp_path, store, jobs, cid="fixture")
    assert out.checksum == "84284a0ad6981d3c40c4dffd6dbb67d7e000cf6e64ff6e75b321d439ee9f452d"
    big = KnowledgeStore(
        "0123456789abcdef",
        50,
        [chunk(record_id=f"r{i % 7}", updated_at=f"2026-0{i % 9 + 1}") for i in range(50)],
    )
    save(tmp_path, big)
    _check_same(tmp_path, big, jobs)
    save(tmp_path, ingest_feed(b""))
    _check_same(tmp_path, ingest_feed(b""), jobs)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(plain_stores())
def test_property_fast_equals_model(tmp_path: Path, store: KnowledgeStore) -> None:
    assume(all(c.embedding for c in store.chunks) and store.records < 2**64)
    store.snapshot = "0123456789abcdef"  # it names the file
    save(tmp_path, store)
    _check_same(tmp_path, store, 1)


def test_other_layouts_fall_back_to_the_model_path(tmp_path: Path) -> None:
    store = ingest_feed(CURATED.read_bytes())
    save(tmp_path, store)
    p = tmp_path / ".cce/knowledge" / f"{store.snapshot}.json"
    p.write_text(json.dumps(json.loads(dumps(store))))  # compact: valid JSON, other layout
    assert og.outgoing_from_store(tmp_path, "c").data == cck.export_cck(store, "c").data
    p.write_text("{not json")
    with pytest.raises(SyncError, match=r"^no local knowledge store under"):
        og.outgoing_from_store(tmp_path, "c")


def test_phase_a_is_flagged_not_raised(tmp_path: Path) -> None:
    save(tmp_path, KnowledgeStore("0" * 16, 1, [chunk(embedding=[])]))
    assert og.outgoing_from_store(tmp_path, "c").phase_a
