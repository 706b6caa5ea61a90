"""`--ranking hybrid`: fusion, fallbacks, and the other rankings left untouched."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cce_knowledge.cli.main import main
from cce_knowledge.config.settings import load_settings
from cce_knowledge.retrieval.searcher import Searcher
from cce_knowledge.semantic.hybrid import (
    Fusion,
    HybridRanking,
    dense_records,
    dense_weight,
    fuse,
)
from cce_knowledge.store.snapshots import load_current
from tests.helpers.embed_server import EmbedServer

from .conftest import write_config

QUERIES = [
    "idempotency keys for checkout retries",
    "why do we use postgres",
    "rate limiting bots on the coupon endpoint",
    "what happens when the payment provider is down",
]
#: Worded unlike their records: little lexical evidence, so the vectors count.
REWORDED = [
    "stop a customer from being charged twice when the request is sent again",
    "which database did we pick and why",
]


def _weight(root: Path, q: str) -> float:
    idx = Searcher(root).index()
    assert idx is not None
    return dense_weight(idx.default_ranked(q, 30, 0.0))


def _search(
    root: Path, q: str, ranking: str, capsys: pytest.CaptureFixture[str]
) -> tuple[str, str]:
    capsys.readouterr()
    rc = main(["knowledge", "search", q, "--dir", str(root), "--ranking", ranking, "--json"])
    out = capsys.readouterr()
    assert rc == 0
    return out.out, out.err


@pytest.fixture
def embedded(tmp_path: Path, server: EmbedServer) -> Path:
    root = tmp_path / "sem"
    write_config(root, "ollama", server.url)
    from .conftest import index

    assert index(root) == 0
    assert server.requests
    return root


def test_hybrid_answers_and_cites_true_lines(
    embedded: Path, server: EmbedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    chunks = {c.chunk_id: c for c in load_current(embedded).chunks}
    weights = {q: _weight(embedded, q) for q in QUERIES + REWORDED}
    # Both paths are exercised: confident words, and words that leave room for vectors.
    assert min(weights.values()) == 0.0 and all(weights[q] > 0 for q in REWORDED)
    for q, w in weights.items():
        n0 = len(server.requests)
        out, err = _search(embedded, q, "hybrid", capsys)
        assert err == ""
        hits = json.loads(out)
        assert hits
        if w == 0.0:
            # The words are enough: the default's answer, and the provider is not asked.
            assert len(server.requests) == n0
            assert out == _search(embedded, q, "default", capsys)[0]
        else:
            assert len(server.requests) == n0 + 1  # the query: one request
            assert server.requests[-1]["input"] == [q]
        for h in hits:
            c = chunks[h["chunk_id"]]
            assert h["lines"] == [c.start_line, c.end_line] and h["record_id"] == c.record_id


def test_default_and_reference_unchanged_by_semantic(
    embedded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from .conftest import index

    plain = tmp_path / "plain"
    plain.mkdir()
    assert index(plain) == 0
    for q in QUERIES:
        for rk in ("default", "reference"):
            assert _search(embedded, q, rk, capsys) == _search(plain, q, rk, capsys)


def test_fallbacks_say_why_and_exit_0(
    embedded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from .conftest import index

    q = REWORDED[0]
    want, _ = _search(embedded, q, "default", capsys)
    # Provider down at query time.
    write_config(embedded, "ollama", "http://127.0.0.1:9")
    out, err = _search(embedded, q, "hybrid", capsys)
    assert out == want and "note: hybrid ranking unavailable" in err and "unreachable" in err
    # A query the words answer confidently never asks the provider, so nothing is missed.
    sure = QUERIES[0]
    assert _weight(embedded, sure) == 0.0
    assert _search(embedded, sure, "hybrid", capsys) == _search(embedded, sure, "default", capsys)
    # No provider configured.
    plain = tmp_path / "plain"
    plain.mkdir()
    assert index(plain) == 0
    out, err = _search(plain, q, "hybrid", capsys)
    assert out == want and "knowledge.semantic" in err
    # Provider configured, vectors missing.
    write_config(plain, "ollama", "http://127.0.0.1:9", model="other")
    out, err = _search(plain, q, "hybrid", capsys)
    assert out == want and "cce knowledge embed" in err


def test_ranking_from_config(
    embedded: Path, server: EmbedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = (embedded / ".cce" / "config").read_text()
    (embedded / ".cce" / "config").write_text(cfg + "  ranking: hybrid\n")
    n0 = len(server.requests)
    capsys.readouterr()
    assert main(["knowledge", "search", REWORDED[1], "--dir", str(embedded)]) == 0
    assert len(server.requests) == n0 + 1


def test_ask_hybrid(embedded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "s.ask.jsonl"
    suite.write_text(
        '{"schema": "cce.knowledge.ask/v1"}\n'
        '{"id": "pg", "query": "why do we use postgres", "expect": ["docs:adr/0001-use-postgres.md"], "k": 5}\n'
    )
    assert (
        main(["knowledge", "ask", str(suite), "--dir", str(embedded), "--ranking", "hybrid"]) == 0
    )
    assert "note:" not in capsys.readouterr().err


def test_fusion_keeps_a_confident_lexical_order() -> None:
    lex = [(0, 0, 0.9), (1, 1, 0.5), (2, 2, 0.3)]
    cos = np.array([0.1, 0.2, 0.3, 0.95])  # record 3 is the nearest by far
    arg = np.arange(4)
    fused = fuse(lex, cos, arg, Fusion(alpha=1.0, tau=0.6))
    order = [r for r, _c, s in sorted(fused, key=lambda t: -t[2]) if s > 0]
    assert order == [0, 1, 2]
    # Weak lexical evidence: the vectors pull record 3 up.
    weak = [(0, 0, 0.12), (1, 1, 0.1), (2, 2, 0.08)]
    fused = fuse(weak, cos, arg, Fusion(alpha=2.0, tau=0.6))
    assert max(fused, key=lambda t: t[2])[0] == 3


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=40),
    st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=40),
)
def test_fusion_properties(lex_scores: list[float], cosines: list[float]) -> None:
    n = max(len(lex_scores), len(cosines))
    cos = np.full(n, -np.inf)
    cos[: len(cosines)] = cosines
    lex = [(r, r, f) for r, f in enumerate(lex_scores)]
    fu = Fusion(lex_pool=10, dense_pool=10)
    fused = fuse(lex, cos, np.arange(n), fu)
    recs = [r for r, _c, _s in fused]
    assert len(recs) == len(set(recs)) and all(0.0 <= s <= 1.0 + 1e-12 for _r, _c, s in fused)
    pool = sorted(lex, key=lambda t: (-t[2], t[0]))[: fu.lex_pool]
    assert {r for r, _c, _f in pool} <= set(recs)  # the vectors add candidates, never drop one
    if dense_weight(lex, fu) == 0.0 and pool[0][2] > 0:
        # Confident words: every lexical candidate keeps its place above the rest.
        score = {r: s for r, _c, s in fused}
        assert all(score[r] == pytest.approx(f / pool[0][2]) for r, _c, f in pool)
    assert sorted(fuse(list(reversed(lex)), cos, np.arange(n), fu)) == sorted(fused)


def test_dense_records_best_chunk_and_missing_rows() -> None:
    cos = np.array([0.1, 0.5, 0.5, 0.9, 0.2], dtype=np.float32)
    ptr = np.array([0, 3, 5])
    present = np.array([True, True, True, False, True])
    best, first = dense_records(cos, ptr, present)
    assert best.tolist() == pytest.approx([0.5, 0.2]) and first.tolist() == [1, 4]


def test_searcher_without_semantic_block_is_unchanged(indexed: Path) -> None:
    s = Searcher(indexed, load_settings(indexed), hybrid=HybridRanking)
    hits = s.search(QUERIES[0], 5, ranking="hybrid")
    assert s.last_note is not None and [h.chunk_id for h in hits] == [
        h.chunk_id for h in s.search(QUERIES[0], 5, ranking="default")
    ]


def test_a_searcher_given_no_hybrid_ranking_falls_back_with_a_note(indexed: Path) -> None:
    # retrieval/ cannot import semantic/: the edge hands the ranking in, or there is none.
    s = Searcher(indexed, load_settings(indexed))
    hits = s.search(QUERIES[0], 5, ranking="hybrid")
    assert s.last_note is not None and "no hybrid ranking" in s.last_note
    assert [h.chunk_id for h in hits] == [
        h.chunk_id for h in s.search(QUERIES[0], 5, ranking="default")
    ]


def test_mcp_context_search_hybrid_note_in_meta(indexed: Path) -> None:
    from mcp.client import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def run() -> None:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "cce_knowledge", "mcp", "--dir", str(indexed)],
            env={"CCE_HOME": str(indexed.parent / "home"), "PATH": os.environ.get("PATH", "")},
        )
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                res = await s.call_tool(
                    "context_search", {"query": QUERIES[0], "ranking": "hybrid"}
                )
                assert not res.is_error and res.content[0].text
                assert res.meta is not None and "knowledge.semantic" in res.meta["cce/ranking_note"]
                status = await s.call_tool("index_status", {})
                assert "semantic :" not in status.content[0].text  # not configured here
                plain = await s.call_tool("context_search", {"query": QUERIES[0]})
                # No ranking note without hybrid; the hits' provenance rides along (#22).
                assert plain.meta is not None and "cce/ranking_note" not in plain.meta
                assert plain.meta["cce/provenance"] == res.meta["cce/provenance"]
                assert plain.content[0].text == res.content[0].text

    anyio.run(run)


def test_status_doctor_show_semantic(
    embedded: Path, server: EmbedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["knowledge", "status", "--dir", str(embedded), "--offline", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    sem = doc["semantic"]
    assert sem["provider"] == "ollama" and sem["model"] == "tiny-ngrams" and sem["dim"] == 64
    assert sem["embedded"] == sem["total"] > 0 and sem["last_run_requests"] == 1
    assert main(["knowledge", "status", "--dir", str(embedded), "--offline"]) == 0
    out = capsys.readouterr().out
    assert "semantic       : ollama" in out and f"{sem['total']}/{sem['total']} chunks" in out
    # doctor: OK line, then a model mismatch is flagged.
    main(["doctor", "--dir", str(embedded)])
    assert "semantic vectors: tiny-ngrams · 64 dims" in capsys.readouterr().out
    write_config(embedded, "ollama", server.url, model="another")
    main(["doctor", "--dir", str(embedded)])
    out = capsys.readouterr().out
    assert "vectors made with tiny-ngrams are present, but the configured model is another" in out
    from cce_knowledge.store.snapshots import read_current
    from cce_knowledge.store.vectors import vectors_path

    # The advisory names the file to delete.
    assert f"delete {vectors_path(embedded, read_current(embedded), 'tiny-ngrams')}" in out
    assert "semantic vectors: none for another yet — run `cce knowledge embed`" in out
    assert main(["knowledge", "status", "--dir", str(embedded), "--offline"]) == 0
    out = capsys.readouterr().out
    assert "vectors        : none yet — run `cce knowledge embed`" in out and "0/0" not in out


def test_a_held_back_key_is_named_in_the_note(
    embedded: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers.embed_server import embed_server

    q = REWORDED[0]
    assert _weight(embedded, q) > 0  # the query needs the provider
    monkeypatch.setenv("CCE_EMBED_API_KEY", "sk-held-back-123")
    with embed_server(require_key="sk-held-back-123") as locked:
        write_config(embedded, "openai", locked.url)
        _out, err = _search(embedded, q, "hybrid", capsys)
        assert "HTTP 401" in err and "CCE_ALLOW_INSECURE_HTTP=1" in err
        assert "sk-held-back-123" not in err
        monkeypatch.setenv("CCE_ALLOW_INSECURE_HTTP", "1")
        _out, err = _search(embedded, q, "hybrid", capsys)
        assert "note:" not in err
        assert locked.requests[-1]["authorization"] == "Bearer sk-held-back-123"


def test_status_json_unchanged_without_semantic(
    indexed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["knowledge", "status", "--dir", str(indexed), "--offline", "--json"]) == 0
    assert "semantic" not in json.loads(capsys.readouterr().out)


def test_mcp_index_status_shows_semantic(embedded: Path) -> None:
    from cce_knowledge.mcp.tools import KnowledgeTools

    text = KnowledgeTools(embedded).index_status({}).text
    assert "  semantic :\n" in text and "model tiny-ngrams" in text and "64 dims" in text


def test_long_answer_lists_are_not_cut_to_the_pools(tmp_path: Path, server: EmbedServer) -> None:
    import json as _json

    from .conftest import index

    root = tmp_path / "many"
    write_config(root, "ollama", server.url)
    feed = tmp_path / "many.jsonl"
    feed.write_text(
        "".join(
            _json.dumps(
                {
                    "id": f"r:{i}",
                    "title": f"Retry note {i}",
                    "body": f"retry policy {i}",
                    "source": "t",
                }
            )
            + "\n"
            for i in range(60)
        )
    )
    assert index(root, feed) == 0
    s = Searcher(root, load_settings(root), hybrid=HybridRanking)
    assert len(s.search("retry policy", 50, ranking="hybrid")) == 50 and s.last_note is None
