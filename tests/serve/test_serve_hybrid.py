"""`cce corpus serve` with `knowledge.semantic` configured: /docs answers in the hybrid
ranking through a loopback embeddings server (Ollama's shape), and an outage of that
server degrades to the default ranking, still 200, with one warning on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.embed_server import embed_server
from tests.helpers.paths import REPO
from tests.serve.test_serve_http import AUTH, TOKEN, Server

FEED = REPO / "examples" / "feed.jsonl"
#: Worded unlike its record: the words leave room for the vectors (see
#: tests/semantic/test_hybrid.py), so only the vector side can give hybrid's order.
SERVICE, Q = "stop", "a customer from being charged twice when the request is sent again"
OTHER_SERVICE, OTHER_Q = "which", "database did we pick and why"

ENV = {
    k: v
    for k, v in os.environ.items()
    if not k.startswith("CCE_EMBED_") and k not in ("CCE_ALLOW_INSECURE_HTTP", "OLLAMA_HOST")
}


def _cce(*args: str) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "cce_knowledge", *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def _ids_by(root: Path, query: str, ranking: str) -> list[str]:
    out = _cce(
        "knowledge", "search", query, "--dir", str(root), "-k", "10", "--ranking", ranking, "--json"
    )
    return [h["chunk_id"] for h in json.loads(out)]


def _served_ids(s: Server, service: str, q: str) -> list[str]:
    status, _h, body = s.get(f"/docs?service={service}&q={q.replace(' ', '+')}", AUTH)
    assert status == 200
    return [d["id"] for d in json.loads(body)["docs"]]


def test_docs_rank_hybrid_and_an_outage_falls_back_to_default(tmp_path: Path) -> None:
    with embed_server() as emb:
        (tmp_path / ".cce").mkdir()
        (tmp_path / ".cce" / "config").write_text(
            "knowledge:\n"
            "  ranking: hybrid\n"
            "  semantic:\n"
            f"    provider: ollama\n    url: {emb.url}\n    model: tiny-ngrams\n",
            encoding="utf-8",
        )
        _cce("knowledge", "index", str(FEED), "--dir", str(tmp_path), "--jobs", "1")
        assert emb.requests  # the chunks were embedded at index time
        query = f"{SERVICE} {Q}"
        hybrid = _ids_by(tmp_path, query, "hybrid")
        default = _ids_by(tmp_path, query, "default")
        assert hybrid != default  # an order only the vector side gives
        s = Server(tmp_path, env=ENV | {"CCE_CORPUS_TOKEN": TOKEN})
        try:
            n0 = len(emb.requests)
            assert _served_ids(s, SERVICE, Q) == hybrid
            assert [r["input"] for r in emb.requests[n0:]] == [[query]]  # one query embedded
            # The provider goes down: it hangs up on every request from now on.
            emb.die_after = len(emb.requests)
            other = f"{OTHER_SERVICE} {OTHER_Q}"
            assert _served_ids(s, SERVICE, Q) == default
            assert _served_ids(s, OTHER_SERVICE, OTHER_Q) == _ids_by(tmp_path, other, "default")
        finally:
            _out, err = s.stop()
    assert err.count("hybrid ranking unavailable") == 1, err  # said once, not per request
    assert "showing the default ranking" in err
    assert Q not in err and OTHER_Q not in err  # no query in the log
