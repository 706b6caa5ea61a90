"""Reference ranking (docs/spec/core.md §6-§7): anchors, behaviours, goldens, fast == straightforward."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from cce_knowledge.core.rustcompat import format6
from cce_knowledge.engine.ranking_primitives import BM25, bm25_idf, rrf
from cce_knowledge.engine.tokenizer import tokenize
from cce_knowledge.retrieval import Hit, hit_header, provenance_line, search_knowledge
from cce_knowledge.retrieval.reference import is_code_lookup, reference_search
from cce_knowledge.retrieval.search_index import SearchIndex, build_bytes
from cce_knowledge.store.ingest import ingest_feed
from tests.helpers.corpora import make_store, queries, stores
from tests.helpers.paths import TESTS

VECTORS = TESTS / "vectors"
ASK_CORPUS = VECTORS / "ask" / "corpus.knowledge.jsonl"


def _fast(store):  # type: ignore[no-untyped-def]
    return SearchIndex(Path("mem"), build_bytes(store), lambda: store)


@pytest.fixture(scope="module")
def ask_store():  # type: ignore[no-untyped-def]
    return ingest_feed(ASK_CORPUS.read_bytes(), 400)


# ---------------------------------------------------------------- §6 anchors


def test_bm25_anchor() -> None:
    bm = BM25([tokenize("user login user"), tokenize("payment process")])
    # The reference pins this anchor to ±1e-4 (its test tolerance).
    assert bm.score(0, ["user"]) == pytest.approx(0.902273, abs=1e-4)
    assert bm.score(1, ["user"]) == 0.0
    assert bm25_idf(2, 1) > 0


def test_rrf_anchor() -> None:
    assert format6(rrf(0, 2, 1.0)) == "0.032796"
    assert rrf(0, None, 1.5) == 1.0 / 60.0


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("where is the login handler", True),
        ("the class of problems", True),
        ("look in main.rs please", True),
        ("a .jsx component", True),
        ("main.rsx", False),
        ("find the retry function", True),
        ("how is it defined", True),
        ("FUNCTION", True),
        ("functional retries", False),
        ("login policy", False),
    ],
)
def test_code_lookup_intent(query: str, expected: bool) -> None:
    assert is_code_lookup(query) is expected


# ---------------------------------------------------------------- §7.3 provenance


def test_provenance_lines_are_pinned() -> None:
    assert (
        provenance_line(
            "Password hashing policy", "closed", "2026-02-01T10:00:00Z", "https://example.test/1"
        )
        == "[knowledge] Password hashing policy — closed · 2026-02-01T10:00:00Z · https://example.test/1"
    )
    assert provenance_line("Epic", None, "", "https://x/2") == "[knowledge] Epic — https://x/2"
    assert provenance_line("Bare", None, None, None) == "[knowledge] Bare"
    assert provenance_line("", None, None, None) == "[knowledge] "
    assert (
        provenance_line("Line1\n## Injected heading", "open", None, "https://x/1")
        == "[knowledge] Line1 ## Injected heading — open · https://x/1"
    )
    assert provenance_line("T", "\n", None, None) == "[knowledge] T —  "
    assert provenance_line("a\u2028b\x85c", None, None, None) == "[knowledge] a b c"


def test_hit_header_right_aligns_rank() -> None:
    h = Hit(10, "abc", "r", "T", "k", "n", None, None, None, 0.9868855, "", 1, 2)
    assert hit_header(h) == "10. [0.986886] [knowledge] T #abc"


# ---------------------------------------------------------------- behaviours (G16)


def test_ask_login_lockout_top5_matches_spec(ask_store) -> None:  # type: ignore[no-untyped-def]
    hits = search_knowledge(
        ask_store,
        "how many failed login attempts before an account is locked",
        5,
        0.30,
        ranking="reference",
    )
    got = [(h.record_id, format6(h.score)) for h in hits]
    assert got == [
        ("gh:acme/shop#101", "0.946886"),
        ("gh:acme/shop#102", "0.923588"),
        ("gh:acme/shop#104", "0.890364"),
        ("gh:acme/shop#108", "0.882049"),
        ("gh:acme/shop#105", "0.877475"),
    ]


def _feed(*recs: dict) -> bytes:  # type: ignore[type-arg]
    return ("\n".join(json.dumps(r) for r in recs) + "\n").encode()


def _rec(i: str, title: str, body: str, **kw: object) -> dict:  # type: ignore[type-arg]
    return {"id": i, "title": title, "body": body, "source": "t", **kw}


def test_recency_breaks_ties_newest_first() -> None:
    from cce_knowledge.retrieval.reference import finish_hits
    from cce_knowledge.store.snapshots import KnowledgeChunk

    def ch(cid: str, upd: str | None) -> KnowledgeChunk:
        return KnowledgeChunk(cid, "r" + cid, "k", "n", 1, 1, 1, "c", "s", updated_at=upd)

    # Equal at 6 decimals → updated_at (raw string, missing = "") desc → chunk_id asc.
    ranked = [
        (ch("a", "2026-01-01"), 0.5000001),
        (ch("b", "2026-03-01"), 0.5000002),
        (ch("c", None), 0.5),
        (ch("d", "2026-03-01"), 0.5),
        (ch("e", "2026-9-1"), 0.4),
    ]
    assert [h.chunk_id for h in finish_hits(ranked, 10)] == ["b", "d", "a", "c", "e"]
    assert [h.rank for h in finish_hits(ranked, 2)] == [1, 2]
    # In the default ranking identical twins tie exactly; the newer one leads.
    st = ingest_feed(
        _feed(
            _rec("a", "Refund windows", "refunds are allowed for 30 days", updated_at="2026-01-01"),
            _rec("b", "Refund windows", "refunds are allowed for 30 days", updated_at="2026-03-01"),
        )
    )
    hits = search_knowledge(st, "refund windows", 5, 0.0, ranking="default")
    assert [h.record_id for h in hits] == ["b", "a"]


def test_pr_link_boost_beats_a_newer_twin() -> None:
    st = ingest_feed(
        _feed(
            _rec(
                "a",
                "Refund windows",
                "refunds are allowed for 30 days",
                updated_at="2026-01-01",
                links=["https://github.com/o/r/pull/7"],
            ),
            _rec("b", "Refund windows", "refunds are allowed for 30 days", updated_at="2026-03-01"),
        )
    )
    hits = search_knowledge(st, "refund windows", 5, 0.3, ranking="reference")
    assert [h.record_id for h in hits] == ["a", "b"]
    plain = ingest_feed(
        _feed(
            _rec("a", "Refund windows", "refunds are allowed for 30 days", updated_at="2026-01-01"),
            _rec("b", "Refund windows", "refunds are allowed for 30 days", updated_at="2026-03-01"),
        )
    )
    pre = {
        h.record_id: h.score
        for h in search_knowledge(plain, "refund windows", 5, 0.3, ranking="reference")
    }
    assert hits[0].score == pre["a"] * 1.10
    assert hits[1].score == pre["b"]


def test_not_planned_never_surfaces_but_near_spellings_do() -> None:
    st = ingest_feed(
        _feed(
            _rec("drop1", "Refund windows", "refunds", state_reason="not_planned"),
            _rec("drop2", "Refund windows", "refunds", state_reason="wontfix"),
            _rec("keep", "Refund windows", "refunds", state_reason="Not_Planned"),
        )
    )
    for ranking in ("reference", "default"):
        hits = search_knowledge(st, "refund windows", 5, 0.0, ranking=ranking)
        assert [h.record_id for h in hits] == ["keep"]


def test_no_shared_token_means_no_hit() -> None:
    st = ingest_feed(_feed(_rec("a", "Refund windows", "refunds are allowed")))
    assert search_knowledge(st, "quantum chromodynamics", 5, 0.0, ranking="reference") == []
    assert search_knowledge(st, "!!!", 5, 0.0, ranking="reference") == []
    assert search_knowledge(st, "   ", 5, 0.0, ranking="reference") == []
    assert search_knowledge(st, "refund", 0, 0.0, ranking="reference") == []


def test_at_most_three_sections_per_record() -> None:
    body = "\n\n".join(f"## Part {i}\n\nrefund rules part {i}" for i in range(6))
    st = ingest_feed(_feed(_rec("big", "Refund rules", body)), 8)
    assert len(st.chunks) >= 5
    hits = search_knowledge(st, "refund rules", 10, 0.0, ranking="reference")
    assert len(hits) == 3


def test_min_score_floor_is_checked_before_the_boost(ask_store) -> None:  # type: ignore[no-untyped-def]
    q = "how many failed login attempts before an account is locked"
    everything = search_knowledge(ask_store, q, 20, 0.0, ranking="reference")
    # A floor just above a boosted hit's pre-boost score removes it even though
    # its boosted score is higher than the floor.
    with_pr = {c.chunk_id for c in ask_store.chunks if any("/pull/" in x for x in c.links)}
    h = [h for h in everything if h.chunk_id in with_pr][-1]
    pre = h.score / 1.10
    kept = search_knowledge(ask_store, q, 20, pre + 1e-9, ranking="reference")
    assert h.chunk_id not in {k.chunk_id for k in kept}
    assert h.score > pre + 1e-9


# ---------------------------------------------------------------- fast path == straightforward


def test_fast_reference_matches_on_the_ask_corpus(ask_store) -> None:  # type: ignore[no-untyped-def]
    fi = _fast(ask_store)
    for line in (VECTORS / "ask" / "ask.jsonl").read_text().splitlines()[1:]:
        q = json.loads(line)["query"]
        for floor in (0.0, 0.3):
            assert fi.search(q, 5, floor, ranking="reference") == reference_search(
                ask_store.chunks, q, 5, floor
            )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    store=stores,
    query=queries,
    top_k=__import__("hypothesis").strategies.integers(1, 12),
    floor=__import__("hypothesis").strategies.sampled_from([0.0, 0.3, 0.6]),
)
def test_fast_reference_is_bit_identical(store, query, top_k, floor) -> None:  # type: ignore[no-untyped-def]
    expected = reference_search(store.chunks, query, top_k, floor)
    assert _fast(store).search(query, top_k, floor, ranking="reference") == expected


@settings(max_examples=60, deadline=None)
@given(store=stores, query=queries)
def test_reference_is_a_pure_function(store, query) -> None:  # type: ignore[no-untyped-def]
    a = reference_search(store.chunks, query, 8, 0.0)
    b = reference_search(list(store.chunks), query, 8, 0.0)
    assert a == b
    # Result order never depends on the order records appear in the store.
    rev = make_store([])
    rev.chunks = _records_reversed(store.chunks)
    assert [(h.chunk_id, h.score) for h in reference_search(rev.chunks, query, 8, 0.0)] == [
        (h.chunk_id, h.score) for h in a
    ]


def _records_reversed(chunks):  # type: ignore[no-untyped-def]
    groups: dict[str, list] = {}  # type: ignore[type-arg]
    for c in chunks:
        groups.setdefault(c.record_id, []).append(c)
    return [c for rid in reversed(list(groups)) for c in groups[rid]]
