"""The C analyser (`_analyzefast`) against analyze.py and the pure Python build: the same
terms for any text, the same index bytes for any store, linear time on hostile text,
and memory safety under AddressSanitizer (tools/fuzz_analyzefast.py)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cce_knowledge.retrieval import analyze, analyze_native
from cce_knowledge.retrieval import search_index as si
from cce_knowledge.retrieval.default import LEAD_TERMS
from cce_knowledge.store.snapshots import KnowledgeStore
from tests.helpers.corpora import SNAP, varied_stores, write_store
from tests.helpers.redos import growth
from tests.helpers.sanitized import fuzz_sanitized

MOD = analyze_native.native_module()
needs_native = pytest.mark.skipif(
    MOD is None, reason="native analyser not built (pip install -e . compiles it)"
)


def test_native_analyser_is_built_where_ci_requires_it() -> None:
    # .ci/run sets CCE_REQUIRE_NATIVE=1: a broken build must fail CI, not fall back.
    if os.environ.get("CCE_REQUIRE_NATIVE") == "1":
        assert MOD is not None


@contextmanager
def pure_python() -> Iterator[None]:
    """The build without the C analyser (what CCE_NATIVE=0 or no compiler gives)."""
    saved = analyze_native.ANALYSER.module
    analyze_native.ANALYSER.module = None
    try:
        yield
    finally:
        analyze_native.ANALYSER.module = saved


# Identifier shapes, the stemmer's suffixes, stopwords, separators and characters of
# every width: the places where the C rules could part from analyze.py's.
PIECES = [
    *("HTTPServer", "getUserName", "aws_eks_cluster", "A1b2C3", "ABCdef", "x_", "_", "a_b"),
    *("running", "stopped", "fizzing", "allocations", "lifetimes", "realize", "buses"),
    *("national", "ations", "ness", "ingly", "edly", "sses", "ies", "ly", "ize", "ise"),
    *sorted(analyze.STOPWORDS)[:40],
    *(" ", "\n", "-", ".", "é", "ß", "中", "\U0001f600", "\x00", "'", "s", "S", "Y", "9"),
]
texts = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=40).map("".join),
    st.text(alphabet=st.sampled_from("aAbBeEsSyYiIzZlL09_ -.é中"), max_size=80),
    st.text(max_size=60),
)


@needs_native
@settings(max_examples=600, deadline=None)
@given(text=texts, bigrams=st.booleans())
def test_the_c_analyser_gives_analyze_py_terms(text: str, bigrams: bool) -> None:
    g = MOD.Gatherer(analyze.STOPWORDS, LEAD_TERMS)  # type: ignore[union-attr]
    old = analyze.BIGRAMS
    analyze.BIGRAMS = bigrams
    try:
        assert g.analyze(text, bigrams) == analyze.analyze(text)
    finally:
        analyze.BIGRAMS = old
    # The token cache answers the second time: the same terms.
    assert g.analyze(text, bigrams) == g.analyze(text, bigrams)


@needs_native
def test_known_terms() -> None:
    g = MOD.Gatherer(analyze.STOPWORDS, LEAD_TERMS)  # type: ignore[union-attr]
    # "get" and "the" are stopwords; "aws" is too short to stem; pairs come last.
    assert g.analyze("getUserName aws_eks_cluster the locks") == [
        *("getusername", "user", "name", "aws_eks_cluster", "aws", "eks", "cluster", "lock"),
        *("getusername aws_eks_cluster", "aws_eks_cluster lock"),
    ]
    assert g.analyze("HTTPServer running", False) == ["httpserver", "http", "server", "run"]


@needs_native
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(store=varied_stores(), inline=st.booleans(), bigrams=st.booleans())
def test_the_index_is_the_same_bytes_with_or_without_the_c_analyser(
    store: KnowledgeStore, inline: bool, bigrams: bool
) -> None:
    old = analyze.BIGRAMS
    analyze.BIGRAMS = bigrams
    try:
        with tempfile.TemporaryDirectory() as d:
            path = write_store(Path(d), store)
            fast = b"".join(si.index_parts(path, workers=1, inline_docs=inline))
            with pure_python():
                slow = b"".join(si.index_parts(path, workers=1, inline_docs=inline))
                split = b"".join(si.index_parts(path, workers=2, inline_docs=inline))
            assert fast == slow == split
            assert b"".join(si.index_parts(path, workers=2, inline_docs=inline)) == fast
    finally:
        analyze.BIGRAMS = old


@needs_native
def test_a_real_sized_store_builds_the_same_bytes(tmp_path: Path) -> None:
    from tests.helpers.corpora import make_store

    words = [p for p in PIECES if p.strip()]
    specs = [
        (
            f"r{i % 37}",
            " ".join(words[(i * 7 + k) % len(words)] for k in range(60 + i % 50)),
            f"Title {words[i % len(words)]} {i % 11}",
            None,
            None,
            [],
            [],
        )
        for i in range(400)
    ]
    store = make_store(specs)
    path = write_store(tmp_path, KnowledgeStore(SNAP, store.records, store.chunks))
    fast = b"".join(si.index_parts(path, workers=1))
    with pure_python():
        assert b"".join(si.index_parts(path, workers=1)) == fast


@needs_native
@pytest.mark.parametrize(
    "build",
    [
        lambda n: "A" * n,  # one upper-case run: the acronym rule's look-ahead
        lambda n: "aB" * n,  # one identifier of n sub-words
        lambda n: "_" * n,
        lambda n: "ABc" * n,
        lambda n: "word " * (n // 5),  # many tokens, one term: pairs of one pair
        lambda n: " ".join(f"w{i}x" for i in range(n // 6)),  # every token new
        lambda n: "sses" * (n // 4),
    ],
)
def test_the_c_analyser_is_linear_on_hostile_text(build: object) -> None:
    def run(text: str) -> object:
        g = MOD.Gatherer(analyze.STOPWORDS, LEAD_TERMS)  # type: ignore[union-attr]
        g.section(text, True)
        g.record(text[:1000])
        return g.finish()

    ratio, times = growth(run, build, sizes=(50_000, 200_000, 800_000))  # type: ignore[arg-type]
    assert ratio < 8, times  # 4x the input: ~4x the time when linear, ~16x when quadratic


@needs_native
def test_a_stale_analyser_is_not_used(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    analyser = analyze_native.ANALYSER
    assert analyser.load() is MOD  # built from the source beside it
    good = MOD.SOURCE_SHA256  # type: ignore[union-attr]
    monkeypatch.setattr(MOD, "SOURCE_SHA256", "0" * 64)
    assert analyser.load() is None
    assert "search-index analyser is stale" in capsys.readouterr().err
    monkeypatch.setenv("CCE_NATIVE", "0")
    monkeypatch.setattr(MOD, "SOURCE_SHA256", good)
    assert analyser.load() is None


@pytest.mark.slow
def test_the_c_analyser_is_memory_safe(tmp_path: Path) -> None:
    assert "gatherers" in fuzz_sanitized(tmp_path, "ANALYZE_SOURCE", "fuzz_analyzefast.py")


@needs_native
@settings(max_examples=200, deadline=None)
@given(tids=st.lists(st.integers(0, 40), max_size=300))
def test_term_order_is_numpys_stable_argsort(tids: list[int]) -> None:
    import numpy as np

    a = np.array(tids, dtype=np.int32)
    got = np.frombuffer(MOD.term_order(a, 41), dtype=np.int64)  # type: ignore[union-attr]
    assert got.tolist() == np.argsort(a, kind="stable").tolist()


@needs_native
def test_term_order_refuses_ids_out_of_range() -> None:
    import numpy as np

    for bad in ([0, 5], [-1]):
        with pytest.raises(ValueError, match="out of range"):
            MOD.term_order(np.array(bad, dtype=np.int32), 5)  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="int32"):
        MOD.term_order(b"abc", 5)  # type: ignore[union-attr]
