"""Default ranking: analysis, behaviours, purity, and fast index == straightforward."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cce_knowledge.retrieval import search_knowledge
from cce_knowledge.retrieval.analyze import _token_terms, analyze, query_terms, stem
from cce_knowledge.retrieval.default import (
    build_model,
    default_search,
    rank_records,
    search_model,
)
from cce_knowledge.retrieval.search_index import SearchIndex, build_bytes
from cce_knowledge.store.ingest import ingest_feed
from tests.helpers.corpora import make_store, queries, stores


def _feed(*recs: dict) -> bytes:  # type: ignore[type-arg]
    return ("\n".join(json.dumps(r) for r in recs) + "\n").encode()


def _rec(i: str, title: str, body: str, **kw: object) -> dict:  # type: ignore[type-arg]
    return {"id": i, "title": title, "body": body, "source": "t", **kw}


# ---------------------------------------------------------------- analysis


def test_identifiers_keep_the_whole_token_and_add_sub_words() -> None:
    assert analyze("getUserName") == ["getusername", "user", "name"]  # "get" is a stopword
    assert analyze("aws_eks_cluster") == ["aws_eks_cluster", "aws", "eks", "cluster"]
    assert query_terms("getUserName getUserName") == [
        "getusername",
        "user",
        "name",
        "getusername getusername",
    ]
    assert "http" in analyze("HTTPServer") and "server" in analyze("HTTPServer")


def test_light_stemming_joins_inflections() -> None:
    for group in (
        ("lock", "locks", "locked", "locking"),
        ("retry", "retries"),
        ("allocation", "allocations"),
        ("lifetime", "lifetimes"),
    ):
        assert len({stem(w) for w in group}) == 1, group
    assert stem("number") == "number" and stem("string") == "string"


def test_stopwords_and_pairs() -> None:
    terms = query_terms("how is the lock file shared")
    assert "how" not in terms and "the" not in terms
    assert "lock file" in terms  # the neighbouring-word pair
    assert query_terms("the of and") == []


@given(st.text(max_size=60))
def test_analysis_is_deterministic_and_ascii(s: str) -> None:
    a = analyze(s)
    assert a == analyze(s)
    assert all(t.isascii() and t for t in a)


def _analyze_token_by_token(text: str) -> list[str]:
    """The analysis rule spelled out one token at a time: each word's terms, then the
    pairs of neighbouring words' first terms (words with no terms skipped)."""
    out: list[str] = []
    heads: list[str] = []
    for tok in re.findall(r"[A-Za-z0-9_]+", text):
        terms = _token_terms(tok)
        out.extend(terms)
        if terms:
            heads.append(terms[0])
    return out + [heads[i] + " " + heads[i + 1] for i in range(len(heads) - 1)]


_WORDISH = st.text(
    alphabet=st.sampled_from("aAbBzZ09_ -\n.éThe of getUserName HTTPServer running"), max_size=200
)


@given(st.one_of(_WORDISH, st.text(max_size=200)))
def test_analysis_equals_the_token_by_token_rule(s: str) -> None:
    # `analyze` maps and joins in C (one pass of the index build over every token);
    # it must say exactly what the rule says, cached or not.
    assert analyze(s) == _analyze_token_by_token(s)
    assert analyze(s) == _analyze_token_by_token(s)


# ---------------------------------------------------------------- behaviours


def test_identifier_query_finds_snake_case_record() -> None:
    stx = ingest_feed(
        _feed(
            _rec("a", "Cluster sizing", "We size the aws_eks_cluster by peak load."),
            _rec("b", "Unrelated", "Nothing to see here about clusters of grapes."),
        )
    )
    hits = search_knowledge(stx, "eks cluster sizing", 5, 0.0)
    assert hits[0].record_id == "a"
    hits = search_knowledge(stx, "getUserName", 5, 0.0)
    assert hits == []


def test_record_level_aggregation_beats_a_single_repetitive_section() -> None:
    body_a = "## Why\n\nAccounts lock after failed login attempts.\n\n## How\n\nThe counter resets after fifteen minutes."
    body_b = "## Notes\n\nlogin login login login login login"
    stx = ingest_feed(_feed(_rec("a", "Account lockout", body_a), _rec("b", "Misc", body_b)), 10)
    hits = search_knowledge(stx, "when does a login lockout counter reset", 5, 0.0)
    assert hits[0].record_id == "a"
    # The hit cites the best matching section of the record, with its lines.
    assert "counter" in hits[0].content
    assert hits[0].start_line > 1


def test_scores_are_fractions_and_floor_applies() -> None:
    stx = ingest_feed(
        _feed(
            _rec("a", "Refund windows", "refunds are allowed for 30 days"),
            _rec("b", "Shipping", "parcels ship in two days"),
        )
    )
    hits = search_knowledge(stx, "refund window for parcels", 5, 0.0)
    assert hits and all(0.0 < h.score < 1.0 for h in hits)
    top = hits[0].score
    assert [h.record_id for h in search_knowledge(stx, "refund window for parcels", 5, top)] == [
        "a"
    ]


def test_scores_stay_below_one_when_every_signal_is_near_full() -> None:
    """Title, record and two sections all saturated by one query word: still < 1."""
    word = " ".join(["refund"] * 60)
    stx = ingest_feed(_feed(_rec("a", "Refund", f"## One\n\n{word}\n\n## Two\n\n{word}")), 8)
    hits = search_knowledge(stx, "refund", 5, 0.0)
    assert len(hits) == 1 and 0.9 < hits[0].score < 1.0


def test_one_hit_per_record() -> None:
    body = "\n\n".join(f"## Part {i}\n\nrefund rules part {i}" for i in range(6))
    stx = ingest_feed(
        _feed(_rec("big", "Refund rules", body), _rec("small", "Refund", "refund")), 8
    )
    hits = search_knowledge(stx, "refund rules", 10, 0.0)
    assert sorted(h.record_id for h in hits) == ["big", "small"]


def test_a_record_answering_in_one_section_beats_one_spreading_the_words() -> None:
    """Same words, same lengths (equal BM25F share); the record whose query words meet in
    one section is re-ranked first even though the other one is newer."""
    focused = "## One\n\nrefund alpha window beta parcel\n\n## Two\n\ngamma delta epsilon\n\n## Three\n\nzeta eta theta"
    spread = "## One\n\nrefund alpha gamma delta\n\n## Two\n\nwindow beta epsilon zeta\n\n## Three\n\nparcel eta theta"
    stx = ingest_feed(
        _feed(
            _rec("focused", "Notes", focused, updated_at="2026-01-01T00:00:00Z"),
            _rec("spread", "Notes", spread, updated_at="2026-02-01T00:00:00Z"),
        ),
        8,
    )
    model = build_model(stx.chunks)
    shares = dict((rd.record_id, s) for rd, s in rank_records(model, "refund window parcel", 0.0))
    assert shares["focused"] == shares["spread"]
    hits = search_knowledge(stx, "refund window parcel", 5, 0.0)
    assert [h.record_id for h in hits] == ["focused", "spread"]
    assert hits[0].score > hits[1].score
    assert "parcel" in hits[0].content and "refund" in hits[0].content


# ---------------------------------------------------------------- fast == straightforward


def _fast(store):  # type: ignore[no-untyped-def]
    return SearchIndex(Path("mem"), build_bytes(store, with_reference=False), lambda: store)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    store=stores, query=queries, top_k=st.integers(1, 12), floor=st.sampled_from([0.0, 0.05, 0.3])
)
def test_fast_default_is_bit_identical(store, query, top_k, floor) -> None:  # type: ignore[no-untyped-def]
    assert _fast(store).search(query, top_k, floor) == default_search(
        store.chunks, query, top_k, floor
    )


@settings(max_examples=60, deadline=None)
@given(store=stores, query=queries)
def test_default_is_a_pure_function_of_store_and_query(store, query) -> None:  # type: ignore[no-untyped-def]
    a = default_search(store.chunks, query, 8, 0.0)
    assert a == default_search(store.chunks, query, 8, 0.0)
    assert a == search_model(build_model(store.chunks), query, 8, 0.0)
    # Record order in the store does not matter.
    groups: dict[str, list] = {}  # type: ignore[type-arg]
    for c in store.chunks:
        groups.setdefault(c.record_id, []).append(c)
    rev = make_store([])
    rev.chunks = [c for rid in reversed(list(groups)) for c in groups[rid]]
    assert default_search(rev.chunks, query, 8, 0.0) == a
    # Staleness: a dropped record never surfaces.
    assert not any(
        c.state_reason in ("not_planned", "wontfix")
        for h in a
        for c in store.chunks
        if c.chunk_id == h.chunk_id
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    store=stores, query=queries, top_k=st.integers(1, 12), floor=st.sampled_from([0.0, 0.05, 0.3])
)
def test_numpy_path_for_long_postings_is_bit_identical(store, query, top_k, floor) -> None:  # type: ignore[no-untyped-def]
    import cce_knowledge.retrieval.search_index as fx

    saved = fx.NUMPY_POSTINGS
    fx.NUMPY_POSTINGS = -1  # force the vectorised path even on tiny corpora
    try:
        got = _fast(store).search(query, top_k, floor)
    finally:
        fx.NUMPY_POSTINGS = saved
    assert got == default_search(store.chunks, query, top_k, floor)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    store=stores,
    query=queries,
    top_k=st.integers(1, 12),
    floor=st.sampled_from([0.0, 0.05, 0.3]),
    rerank=st.integers(1, 4),
    vectorised=st.booleans(),
    mapped=st.booleans(),
)
def test_rerank_boundary_is_bit_identical(
    store, query, top_k, floor, rerank, vectorised, mapped
) -> None:  # type: ignore[no-untyped-def]
    """With a tiny re-ranking depth the candidate cut (ties included) falls inside these
    small stores: the fast index (numpy or not, postings copied or bisected in the mapped
    file) still equals the straightforward code."""
    import cce_knowledge.retrieval.default as d
    import cce_knowledge.retrieval.search_index as fx

    saved = d.RERANK, fx.RERANK, fx.NUMPY_POSTINGS, fx.COPY_POSTINGS
    d.RERANK = fx.RERANK = rerank
    if vectorised:
        fx.NUMPY_POSTINGS = -1
    if mapped:
        fx.COPY_POSTINGS = -1
    try:
        got = _fast(store).search(query, top_k, floor)
        want = default_search(store.chunks, query, top_k, floor)
    finally:
        d.RERANK, fx.RERANK, fx.NUMPY_POSTINGS, fx.COPY_POSTINGS = saved
    assert got == want
    assert all(0.0 <= h.score < 1.0 for h in got)


def test_index_layout_reaches_its_fixed_point() -> None:
    """A store whose header needed a fourth layout pass (offsets gaining a digit): the
    sections must start right where the header says (it once shifted them by 8 bytes)."""
    store = make_store(
        [
            (
                "gh:o/r#1",
                "aws_eks_cluster aws_eks_cluster",
                "aws_eks_cluster login login",
                None,
                None,
                [],
                [],
            )
        ]
    )
    data = build_bytes(store, with_reference=False)
    fi = SearchIndex(Path("mem"), data, lambda: store)
    hlen = int.from_bytes(data[8:16], "little")
    first = min(off for off, _ in fi.header["sections"].values())
    assert first == 16 + hlen + (-(16 + hlen) % 8)
    assert bytes(fi.term_blob).startswith(b"aws")
    assert fi.search("login", 1, 0.0) == default_search(store.chunks, "login", 1, 0.0) != []


def test_parallel_build_gives_the_same_bytes() -> None:
    """The reference sections built in a forked child: byte-identical index."""
    recs = [
        _rec(
            f"r{i}",
            f"Title {i} lock file",
            f"# H\n\nbody {i} getUserName retries\n\n## Two\n\nmore {i % 7}",
        )
        for i in range(40)
    ]
    store = ingest_feed(_feed(*recs), 400)
    assert build_bytes(store, workers=2) == build_bytes(store, workers=1)


def test_parallel_build_reports_a_failing_worker(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import pytest

    import cce_knowledge.retrieval.search_index_build as fr
    from cce_knowledge.core.errors import StoreError

    def boom(*_a: object) -> dict[str, bytes]:
        raise ValueError("broken")

    monkeypatch.setattr(fr, "reference_sections", boom)
    store = ingest_feed(_feed(_rec("a", "t", "b")), 400)
    with pytest.raises(StoreError, match="ValueError: broken"):
        build_bytes(store, workers=2)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(store=stores)
def test_model_numbers_match_a_naive_recount(store) -> None:  # type: ignore[no-untyped-def]
    """build_model counts section by section; a naive whole-record recount agrees."""
    from array import array
    from collections import Counter

    from cce_knowledge.retrieval import default as d

    model = build_model(store.chunks)
    chunks = model.chunks
    per_chunk = [analyze(c.content) for c in chunks]
    rows = []
    for rd in model.records:
        body = [t for ci in rd.chunks for t in per_chunk[ci]]
        rows.append((analyze(chunks[rd.chunks[-1]].title), body, body[: d.LEAD_TERMS]))
    n = len(rows)
    avg = [sum(len(r[k]) for r in rows) / n if n else 0.0 for k in range(3)]
    for rd, (tt, bt, lt) in zip(model.records, rows, strict=True):
        ct, cb, cl = Counter(tt), Counter(bt), Counter(lt)
        norms = (
            d.field_norm(d.TITLE_B, len(tt), avg[0]),
            d.field_norm(d.BODY_B, len(bt), avg[1]),
            d.field_norm(d.LEAD_B, len(lt), avg[2]),
        )
        want = {t: d.saturate(ct[t], cb[t], cl[t], *norms) for t in set(ct) | set(cb)}
        assert rd.sat == dict(zip(want, array("f", want.values()), strict=True))
    avg_c = sum(len(ts) for ts in per_chunk) / len(chunks) if chunks else 0.0
    for ts, sw in zip(per_chunk, model.section_w, strict=True):
        norm = d.field_norm(d.SECTION_B, len(ts), avg_c)
        assert sw == {t: array("f", [d.section_weight(f, norm)])[0] for t, f in Counter(ts).items()}
