"""Instruction prefixes: the built-in table, the config override, what reaches the
provider (a loopback server records it), and that a changed prefix re-embeds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cce_knowledge.cli.main import main
from cce_knowledge.config.settings import SemanticSettings, check_prefix, load_settings
from cce_knowledge.core.errors import ConfigError
from cce_knowledge.semantic import build as B
from cce_knowledge.semantic.prefixes import builtin, normalise, resolve
from cce_knowledge.semantic.textprep import chunk_text
from tests.helpers.embed_server import EmbedServer

from .conftest import index

RETRIEVE = "Represent this sentence for searching relevant passages: "
QWEN = "Instruct: Given a web search query, retrieve relevant passages that answer the query\n"


@pytest.mark.parametrize(
    ("model", "query", "document"),
    [
        ("nomic-embed-text", "search_query: ", "search_document: "),
        ("nomic-embed-text:latest", "search_query: ", "search_document: "),
        ("nomic-ai/nomic-embed-text-v1.5", "search_query: ", "search_document: "),
        ("text-embedding-nomic-embed-text-v1.5@q8_0", "search_query: ", "search_document: "),
        ("intfloat/e5-small-v2", "query: ", "passage: "),
        ("intfloat/multilingual-e5-small", "query: ", "passage: "),
        ("jeffh/intfloat-multilingual-e5-large:f16", "query: ", "passage: "),
        ("multilingual-e5-small-q4", "query: ", "passage: "),
        ("intfloat/multilingual-e5-large-instruct", QWEN + "Query: ", ""),
        ("bge-large:335m", RETRIEVE, ""),
        ("BAAI/bge-small-en-v1.5", RETRIEVE, ""),
        ("bge-m3:latest", "", ""),
        ("BAAI/bge-large-zh-v1.5", "为这个句子生成表示以用于检索相关文章：", ""),
        ("mxbai-embed-large", RETRIEVE, ""),
        ("mixedbread-ai/mxbai-embed-large-v1", RETRIEVE, ""),
        ("snowflake-arctic-embed:335m", RETRIEVE, ""),
        ("Snowflake/snowflake-arctic-embed-m-v1.5", RETRIEVE, ""),
        ("snowflake-arctic-embed2", "query: ", ""),
        ("Snowflake/snowflake-arctic-embed-l-v2.0", "query: ", ""),
        ("embeddinggemma:300m", "task: search result | query: ", "title: none | text: "),
        ("google/embeddinggemma-300m", "task: search result | query: ", "title: none | text: "),
        ("qwen3-embedding:0.6b", QWEN + "Query:", ""),
        ("dengcao/Qwen3-Embedding-8B:Q4_K_M", QWEN + "Query:", ""),
        # Families without prefixes, and names that only look alike.
        ("all-minilm", "", ""),
        ("text-embedding-3-small", "", ""),
        ("qwen2.5-coder", "", ""),
        ("tiny-ngrams", "", ""),
    ],
)
def test_builtin_prefixes_by_family(model: str, query: str, document: str) -> None:
    got = builtin(model)
    assert (got.query, got.document) == (query, document)


def test_normalise_drops_only_a_tag() -> None:
    assert normalise(" Nomic-Embed-Text:latest ") == "nomic-embed-text"
    assert normalise("intfloat/e5-small-v2") == "intfloat/e5-small-v2"
    assert normalise("ns/model:q4") == "ns/model"


def _write(root: Path, server: EmbedServer, model: str, extra: str = "") -> None:
    (root / ".cce").mkdir(parents=True, exist_ok=True)
    (root / ".cce" / "config").write_text(
        "knowledge:\n  semantic:\n    provider: ollama\n"
        f"    url: {server.url}\n    model: {model}\n{extra}",
        encoding="utf-8",
    )


def test_config_overrides_and_empty_means_none(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / ".cce").mkdir(parents=True)
    (root / ".cce" / "config").write_text(
        "knowledge:\n  semantic:\n    model: nomic-embed-text\n"
        '    query_prefix: "ask: "\n    document_prefix: ""\n',
        encoding="utf-8",
    )
    cfg = load_settings(root, env={}).knowledge.semantic_config()
    assert cfg is not None and (cfg.query_prefix, cfg.document_prefix) == ("ask: ", "")
    p = resolve(cfg)
    assert (p.query, p.document) == ("ask: ", "")
    # One side set: the other keeps the family's.
    half = SemanticSettings(model="intfloat/e5-small-v2", query_prefix="q> ")
    assert (resolve(half).query, resolve(half).document) == ("q> ", "passage: ")


@pytest.mark.parametrize(
    ("value", "why"),
    [('"a\\x01b"', "control character U+0001"), ('"' + "x" * 1100 + '"', "longer than 1024")],
)
def test_a_bad_prefix_is_named(tmp_path: Path, value: str, why: str) -> None:
    root = tmp_path / "r"
    (root / ".cce").mkdir(parents=True)
    (root / ".cce" / "config").write_text(
        f"knowledge:\n  semantic:\n    model: m\n    query_prefix: {value}\n", encoding="utf-8"
    )
    k = load_settings(root, env={}).knowledge
    with pytest.raises(ConfigError, match=re.escape("knowledge.semantic.query_prefix: " + why)):
        k.semantic_config()


def test_the_prefixed_texts_reach_the_provider(
    tmp_path: Path, server: EmbedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "r"
    _write(root, server, "nomic-embed-text:latest")
    assert index(root) == 0  # embeds at index time
    sent = server.texts()
    assert sent and all(t.startswith("search_document: ") for t in sent)
    assert not any(t.startswith("search_document: search_document") for t in sent)
    server.requests.clear()
    q = "stop a customer from being charged twice when the request is sent again"
    rc = main(["knowledge", "search", q, "--dir", str(root), "--ranking", "hybrid", "--json"])
    assert rc == 0
    assert server.texts() == ["search_query: " + q]


def test_changing_the_document_prefix_re_embeds(tmp_path: Path, server: EmbedServer) -> None:
    root = tmp_path / "r"
    _write(root, server, "intfloat/e5-small-v2")
    assert index(root) == 0
    first = server.texts()
    assert first and all(t.startswith("passage: ") for t in first)
    cfg = load_settings(root, env={}).knowledge.semantic_config()
    assert cfg is not None
    # Same prefix: nothing to send.
    server.requests.clear()
    assert B.embed_root(root, cfg).new == 0 and server.texts() == []
    # Another document prefix: every chunk again, with the new text.
    _write(root, server, "intfloat/e5-small-v2", '    document_prefix: "doc: "\n')
    cfg2 = load_settings(root, env={}).knowledge.semantic_config()
    assert cfg2 is not None
    rep = B.embed_root(root, cfg2)
    again = server.texts()
    assert rep.new == len(first) == len(again)
    assert [t.removeprefix("doc: ") for t in again] == [t.removeprefix("passage: ") for t in first]


def test_the_title_is_sent_once() -> None:
    got = chunk_text(
        "Private fields",
        "# Private fields › ## Summary",
        "## Summary\n\nThis is an RFC to make all struct fields private.",
    )
    assert got == "Private fields › Summary\n\nThis is an RFC to make all struct fields private."
    top = chunk_text("Private fields", "# Private fields", "# Private fields\n\n- Start Date: x")
    assert top == "Private fields\n\n- Start Date: x"
    assert top is not None and top.count("Private fields") == 1
    # A body that does not open with its heading keeps every line.
    plain = chunk_text("T", "# T › ## A", "Some text\n## A later heading")
    assert plain == "T › A\n\nSome text\n## A later heading"
    assert chunk_text("T", "", "body", "passage: ") == "passage: T\n\nbody"


@given(st.text(max_size=200))
def test_any_model_name_gets_prefixes_without_error(model: str) -> None:
    p = builtin(model)
    assert isinstance(p.query, str) and isinstance(p.document, str)
    # The tag never decides the family.
    assert builtin(model + ":latest") == p or ":" in model


@given(st.text(max_size=1200))
def test_a_configured_prefix_is_kept_as_written_or_refused(value: str) -> None:
    try:
        got = check_prefix(value, "x: knowledge.semantic.query_prefix")
    except ConfigError as e:
        assert e.message.startswith("x: knowledge.semantic.query_prefix: ")
    else:
        assert got == value and len(value) <= 1024
        assert all(ch in "\n\t" or 0x20 <= ord(ch) < 0x7F or ord(ch) > 0x9F for ch in value)
