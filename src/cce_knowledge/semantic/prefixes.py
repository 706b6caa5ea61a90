"""The instruction prefixes an embedding model expects on queries and on documents.

Many retrieval models are trained asymmetrically: a query and a passage are told apart
by a fixed text in front of them, and without it the vectors are worse (nomic-embed-text
"requires" its prefixes, by its card). The built-in table below follows each family's
model card (docs/semantic.md cites them); `knowledge.semantic.query_prefix` and
`document_prefix` override it ("" sends none).

A model name is matched by family, whatever way a server spells it: an Ollama tag
(`nomic-embed-text:latest`, `mxbai-embed-large:335m`), a Hugging Face id
(`intfloat/e5-small-v2`), a namespaced Ollama model (`dengcao/Qwen3-Embedding-0.6B:Q8_0`)
or an OpenAI-compatible server's alias (`text-embedding-nomic-embed-text-v1.5`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cce_knowledge.config.settings import SemanticSettings


@dataclass(frozen=True, slots=True)
class Prefixes:
    query: str = ""
    document: str = ""
    family: str | None = None  # the built-in family matched, None when none or overridden


_RETRIEVE = "Represent this sentence for searching relevant passages: "
_WEB_SEARCH = (
    "Instruct: Given a web search query, retrieve relevant passages that answer the query\n"
)

#: (family, pattern searched in the normalised name, query prefix, document prefix).
#: First match wins, so a more specific pattern comes before a broader one.
FAMILIES: tuple[tuple[str, re.Pattern[str], str, str], ...] = tuple(
    (family, re.compile(pattern), query, document)
    for family, pattern, query, document in (
        # nomic-ai/nomic-embed-text-v1, -v1.5, -v2-moe: "search_query: " / "search_document: ".
        ("nomic-embed-text", r"nomic-embed-text", "search_query: ", "search_document: "),
        # google/embeddinggemma-300m: its sentence-transformers prompts for retrieval.
        (
            "embeddinggemma",
            r"embeddinggemma",
            "task: search result | query: ",
            "title: none | text: ",
        ),
        # Qwen/Qwen3-Embedding-*: an instruction on queries only ("Query:" then the text).
        ("qwen3-embedding", r"qwen3-embedding", _WEB_SEARCH + "Query:", ""),
        # Snowflake/snowflake-arctic-embed-*-v2.0 (Ollama: snowflake-arctic-embed2).
        ("snowflake-arctic-embed-v2", r"arctic-embed(?:2|-[a-z]+-v2)", "query: ", ""),
        # Snowflake/snowflake-arctic-embed-xs/s/m/l (v1, v1.5): the query instruction.
        ("snowflake-arctic-embed", r"arctic-embed", _RETRIEVE, ""),
        # mixedbread-ai/mxbai-embed-large-v1: the query prompt only.
        ("mxbai-embed-large", r"mxbai-embed-large", _RETRIEVE, ""),
        # intfloat/multilingual-e5-large-instruct, e5-mistral-7b-instruct: an instruction
        # on queries, none on documents.
        (
            "e5-instruct",
            r"(?:^|[/_.-])(?:multilingual-)?e5-.*instruct",
            _WEB_SEARCH + "Query: ",
            "",
        ),
        # intfloat/e5-*, multilingual-e5-*: "query: " / "passage: " on every input.
        ("e5", r"(?:^|[/_.-])(?:multilingual-)?e5-", "query: ", "passage: "),
        # BAAI/bge-m3 needs no instruction; the Chinese bge models have their own.
        ("bge-m3", r"(?:^|[/_.-])bge-m3", "", ""),
        ("bge-zh", r"(?:^|[/_.-])bge-.*zh", "为这个句子生成表示以用于检索相关文章：", ""),
        # BAAI/bge-*-en(-v1.5), Ollama's bge-large: the query instruction.
        ("bge", r"(?:^|[/_.-])bge-", _RETRIEVE, ""),
    )
)


def normalise(model: str) -> str:
    """The lower-cased name without an Ollama tag (`:latest`, `:335m-v1-fp16`)."""
    name = model.strip().lower()
    head, sep, tag = name.rpartition(":")
    # A tag never holds a slash; `host:port/...` is not a model name anyway.
    if sep and "/" not in tag:
        name = head
    return name


def builtin(model: str) -> Prefixes:
    """The built-in prefixes of `model`'s family (none for an unknown model)."""
    name = normalise(model)
    for family, pattern, query, document in FAMILIES:
        if pattern.search(name):
            return Prefixes(query, document, family)
    return Prefixes()


def resolve(cfg: SemanticSettings) -> Prefixes:
    """The prefixes sent for `cfg`: the configured ones where set, else the built-ins."""
    base = builtin(cfg.model)
    if cfg.query_prefix is None and cfg.document_prefix is None:
        return base
    query = base.query if cfg.query_prefix is None else cfg.query_prefix
    document = base.document if cfg.document_prefix is None else cfg.document_prefix
    return Prefixes(query, document, None)
