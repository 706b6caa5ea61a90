"""`cce mcp` driven as a subprocess through the official SDK's stdio client."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from cce_knowledge.engine.redaction.reference import redact
from cce_knowledge.mcp import render
from cce_knowledge.retrieval import provenance_line, search_knowledge
from cce_knowledge.store import snapshots as S
from cce_knowledge.sync.marker import SyncMarker, write_marker
from tests.helpers.cce_proc import run_cce

pytestmark = pytest.mark.slow

AWS = "AKIAIOSFODNN7EXAMPLE"


def rec(rid: str, title: str, body: str, **kw: Any) -> dict[str, Any]:
    return {"id": rid, "title": title, "body": body, "source": "docs", **kw}


POLICY_BODY = (
    "Customer passwords are never stored in clear text.\n\n"
    "## Algorithm\n\nPasswords are hashed with argon2id: 64 MiB memory, 3 iterations,\n"
    "parallelism 2 and a random 16-byte salt per password.\n\n"
    "## Pepper\n\nA server-side pepper from the secrets manager is applied before hashing;\n"
    "it rotates yearly.\n\n"
    "## Login throttling\n\nFive failed logins in fifteen minutes lock the account.\n"
)
FEED_A = [
    rec("docs:policies/password-hashing.md", "Password hashing policy", POLICY_BODY,
        state="active", updated_at="2026-01-15T09:00:00Z",
        url="https://docs.example/policies/password-hashing.md"),
    rec("docs:adr/0002.md", "ADR 0002: Idempotency keys for checkout retries",
        "## Decision\n\nEvery place-order request carries an Idempotency-Key header.\n",
        state="accepted", updated_at="2026-02-03T14:30:00Z"),
    rec(f"gh:{AWS}", "A record whose id leaks a key",
        "## One\n\nwebhook retries use backoff\n\n## Two\n\nwebhook dead letters\n"),
]  # fmt: skip
FEED_B = [
    rec("docs:runbooks/outage.md", "Runbook: payment gateway outage",
        "## Switch\n\nFlip the fallback gateway flag to reroute card payments.\n",
        updated_at="2026-03-10T16:45:00Z"),
]  # fmt: skip


def write_feed(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def cce(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cce(*args, check=True)


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    (r / ".cce").mkdir(parents=True)
    # A small split budget so each record has several sections to expand and relate.
    (r / ".cce" / "config").write_text("markdown:\n  max_section_tokens: 20\n")
    cce("knowledge", "index", str(write_feed(tmp_path / "a.jsonl", FEED_A)), "--dir", str(r))
    return r


@asynccontextmanager
async def session(root: Path, env: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cce_knowledge", "mcp", "--dir", str(root), "--remote-timeout", "3"],
        env={"CCE_HOME": str(root.parent / "cce-home"), **(env or {})},
    )
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            yield s


def drive(root: Path, body: Callable[[ClientSession], Awaitable[None]]) -> None:
    async def main() -> None:
        async with session(root) as s:
            await body(s)

    anyio.run(main)


async def call(s: ClientSession, name: str, args: dict[str, Any] | None = None) -> tuple[str, bool]:
    res = await s.call_tool(name, args or {})
    assert len(res.content) == 1 and res.content[0].type == "text"
    return res.content[0].text, bool(res.is_error)


def store_of(root: Path) -> S.KnowledgeStore:
    return S.load_current(root)


HEADER = re.compile(r"^( \d|\d\d)\. \[(\d+\.\d{6})\] (\[knowledge\] .*) #([0-9a-f]{16})$")


async def check_tool_list(s: ClientSession) -> None:
    tools = (await s.list_tools()).tools
    assert [t.name for t in tools] == [
        "context_search", "index_status", "expand_chunk", "related_context"
    ]  # fmt: skip
    by = {t.name: t.input_schema for t in tools}
    assert by["context_search"]["required"] == ["query"]
    assert by["context_search"]["properties"]["top_k"]["default"] == 8
    assert by["context_search"]["properties"]["source"]["enum"] == ["code", "knowledge", "both"]
    assert by["expand_chunk"]["properties"]["scope"]["enum"] == ["body", "file", "neighbors"]
    assert by["related_context"]["required"] == ["chunk_id"]


def test_tools_search_expand_related_status(root: Path) -> None:
    """One session: tool list, search, expand, related, status, errors, redacted ids."""
    st = store_of(root)
    by_id = {c.chunk_id: c for c in st.chunks}

    async def body(s: ClientSession) -> None:
        await check_tool_list(s)
        await check_errors_and_not_found(s, root)
        await check_secret_ids_displayed_redacted(s, root)
        text, err = await call(
            s, "context_search", {"query": "argon2id password hashing", "top_k": 3}
        )
        assert not err
        blocks = text.split("\n\n")
        first = blocks[0].split("\n")
        m = HEADER.match(first[0])
        assert m, first[0]
        assert m.group(1) == " 1"
        hit = by_id[m.group(4)]
        assert hit.record_id == "docs:policies/password-hashing.md"
        assert m.group(3).startswith("[knowledge] Password hashing policy — active · 2026-01-15")
        # The body is the whole stored section, then one blank line.
        assert text.startswith(f"{first[0]}\n{hit.content}")
        assert text.endswith(render.COMPACT_HINT)
        ranks = [ln[:3] for ln in text.split("\n") if HEADER.match(ln)]
        assert ranks == [f"{i:>2}." for i in range(1, len(ranks) + 1)] and len(ranks) <= 3

        # ranking=reference: the reference engine's hits at its 0.30 floor, blend bytes.
        ref, _ = await call(s, "context_search", {"query": "argon2id password hashing",
                                                  "ranking": "reference"})  # fmt: skip
        ref_hits = search_knowledge(st, "argon2id password hashing", 8, 0.30, ranking="reference")
        assert ref_hits
        expected = render.render_blend(
            [render.BlendRow(h.score, h.chunk_id,
                             provenance_line(h.title, h.state, h.updated_at, h.url), h.content)
             for h in ref_hits],
            top_k=8, total_chunks=len(st.chunks),
        )  # fmt: skip
        assert ref == expected

        # `both` on a root without a code index is the same knowledge-only answer.
        assert (await call(s, "context_search", {"query": "argon2id password hashing", "top_k": 3,
                                                  "source": "both"}))[0] == text  # fmt: skip
        assert (await call(s, "context_search", {"query": "argon2id", "source": "code"}))[0] == (
            render.NOT_INDEXED_MESSAGE
        )

        # expand: body is exact; file is every section in order; neighbours exclude the target.
        body_text, _ = await call(s, "expand_chunk", {"chunk_id": hit.chunk_id})
        assert body_text == hit.content
        same = sorted(
            (c for c in st.chunks if c.record_id == hit.record_id),
            key=lambda c: (c.start_line, c.chunk_id),
        )
        assert len(same) >= 3
        file_text, _ = await call(s, "expand_chunk", {"chunk_id": hit.chunk_id, "scope": "file"})
        assert file_text.startswith(f"document {hit.record_id} — {len(same)} section(s):\n")
        headers = re.findall(r"^docs:policies/password-hashing\.md:(\d+)-(\d+) \((.*)\) #(\w+)$",
                             file_text, flags=re.M)  # fmt: skip
        assert [h[3] for h in headers] == [c.chunk_id for c in same]
        nb_text, _ = await call(s, "expand_chunk", {"chunk_id": hit.chunk_id, "scope": "neighbors"})
        assert f"#{hit.chunk_id}\n" not in nb_text
        assert nb_text.startswith(f"neighbours of {hit.record_id} — {len(same) - 1} section(s):\n")

        # related: the other sections, compact (first line + elision marker).
        rel, _ = await call(s, "related_context", {"chunk_id": hit.chunk_id, "top_k": 2})
        assert rel.startswith(f"related to {hit.record_id} in the same document — 2 section(s):\n")
        others = [c for c in same if c.chunk_id != hit.chunk_id][:2]
        for c in others:
            assert f"\n#{c.chunk_id}\n" not in rel
            assert f" #{c.chunk_id}\n{render.compact_body(c.content)}\n" in rel
        assert "… (+" in rel

        # index_status: no code index (never a command that does not exist), then the
        # knowledge block.
        status, _ = await call(s, "index_status")
        assert status.startswith(render.KNOWLEDGE_ONLY_STATUS + "\n")
        assert status.endswith(
            "  knowledge :\n"
            "    corpus         : (local ingest)\n"
            f"    snapshot       : {st.snapshot}\n"
            f"    records/chunks : {st.records} / {len(st.chunks)}\n"
            "    data as-of     : 2026-02-03T14:30:00Z\n"
            "    remote current : -\n"
            "    behind remote  : no\n"
        )

    drive(root, body)


async def check_errors_and_not_found(s: ClientSession, root: Path) -> None:
    assert await call(s, "context_search", {"query": "  \t "}) == (
        "context_search requires a non-empty `query`.",
        True,
    )
    assert await call(s, "expand_chunk", {"chunk_id": ""}) == (
        "expand_chunk requires a `chunk_id` (from a prior context_search result).",
        True,
    )
    assert await call(s, "expand_chunk", {"chunk_id": "abc", "scope": "whole\n"}) == (
        'expand_chunk: unknown scope "whole"; use "body", "file", or "neighbors".',
        True,
    )
    assert await call(s, "expand_chunk", {"chunk_id": "0000000000000000"}) == (
        render.unknown_chunk("0000000000000000"),
        False,
    )
    text, err = await call(s, "context_search", {"query": "zzqx nothing matches this"})
    assert not err
    n = len(store_of(root).chunks)
    assert (
        text
        == f"No matching context found. The index has {n} chunk(s) — try broader or different terms."
    )
    text, err = await call(s, "context_search", {"query": "argon2id", "ranking": "nope"})
    assert err and "unknown ranking" in text


async def check_secret_ids_displayed_redacted(s: ClientSession, root: Path) -> None:
    leaky = [c for c in store_of(root).chunks if c.record_id == f"gh:{AWS}"]
    assert len(leaky) >= 2
    for scope in ("file", "neighbors"):
        text, _ = await call(s, "expand_chunk", {"chunk_id": leaky[0].chunk_id, "scope": scope})
        assert AWS not in text
        assert redact(f"gh:{AWS}") in text
    text, _ = await call(s, "related_context", {"chunk_id": leaky[0].chunk_id})
    assert AWS not in text and "gh:[REDACTED:AWS_ACCESS_KEY]" in text


def test_store_replaced_underneath_is_picked_up(root: Path, tmp_path: Path) -> None:
    feed_b = write_feed(tmp_path / "b.jsonl", FEED_B)

    async def body(s: ClientSession) -> None:
        before, _ = await call(s, "context_search", {"query": "fallback gateway flag"})
        assert before.startswith("No matching context found.")
        old = store_of(root).snapshot
        # Re-index another feed into the same root while the server keeps running.
        await anyio.to_thread.run_sync(
            lambda: cce("knowledge", "index", str(feed_b), "--dir", str(root))
        )
        after, _ = await call(s, "context_search", {"query": "fallback gateway flag"})
        assert "[knowledge] Runbook: payment gateway outage" in after
        status, _ = await call(s, "index_status")
        new = store_of(root).snapshot
        assert new != old and f"    snapshot       : {new}\n" in status
        gone, _ = await call(s, "context_search", {"query": "argon2id password hashing"})
        n = len(store_of(root).chunks)
        assert gone.startswith(f"No matching context found. The index has {n} chunk(s)")

    drive(root, body)


def test_corrupt_store_notice_then_disabled(root: Path) -> None:
    st = store_of(root)
    S.store_path(root, st.snapshot).write_text("{ truncated")

    async def body(s: ClientSession) -> None:
        text, err = await call(s, "context_search", {"query": "argon2id"})
        assert not err
        assert text == (
            render.KNOWLEDGE_LOAD_NOTICE + "\n\n"
            "No matching context found. The index has 0 chunk(s) — try broader or different terms."
        )
        status, _ = await call(s, "index_status")
        assert "knowledge :" not in status

        # Same session: knowledge disabled in .cce/config is honoured on the next call.
        (root / ".cce" / "config").write_text("knowledge:\n  enabled: false\n")
        # No explicit source: disabled knowledge resolves to the (absent) code index.
        assert (await call(s, "context_search", {"query": "argon2id"}))[
            0
        ] == render.NOT_INDEXED_MESSAGE
        text, _ = await call(s, "context_search", {"query": "argon2id", "source": "knowledge"})
        assert text.startswith("No matching context found. The index has 0 chunk(s)")

    drive(root, body)


def test_index_status_remote_freshness(root: Path, tmp_path: Path) -> None:
    st = store_of(root)
    write_marker(root, SyncMarker("acme-docs", st.snapshot, "c" * 64, None))
    bare = tmp_path / "cache.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    work = tmp_path / "w"
    subprocess.run(["git", "clone", "-q", str(bare), str(work)], check=True, capture_output=True)
    d = work / "knowledge" / "v1" / "acme-docs"
    d.mkdir(parents=True)
    (d / "current").write_text("fedcba9876543210\n")
    for args in (["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "p"],
                 ["push", "-q", "origin", "HEAD"]):  # fmt: skip
        subprocess.run(["git", *args], cwd=work, check=True, capture_output=True)
    (root / ".cce" / "config").write_text(f"knowledge:\n  sync:\n    remote: {bare.as_uri()}\n")

    async def body(s: ClientSession) -> None:
        status, _ = await call(s, "index_status")
        assert "    corpus         : acme-docs\n" in status
        assert "    remote current : fedcba9876543210\n" in status
        assert status.endswith("    behind remote  : yes — run `cce knowledge pull`\n")

    drive(root, body)


def test_unreachable_remote_does_not_hang(root: Path) -> None:
    st = store_of(root)
    write_marker(root, SyncMarker("acme-docs", st.snapshot, "c" * 64, None))
    (root / ".cce" / "config").write_text(
        "knowledge:\n  sync:\n    remote: https://127.0.0.1:9/nowhere.git\n"
    )

    async def body(s: ClientSession) -> None:
        t0 = time.monotonic()
        status, err = await call(s, "index_status")
        assert not err and time.monotonic() - t0 < 10
        assert "    remote current : -\n" in status
        assert status.endswith("    behind remote  : no\n")

    drive(root, body)


def test_stdout_carries_only_the_protocol(root: Path) -> None:
    """Raw exchange: every line the server writes to stdout is a JSON-RPC message."""
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "context_search", "arguments": {"query": "argon2id"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "index_status", "arguments": {}}},
    ]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "cce_knowledge", "mcp", "--dir", str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "CCE_MCP_LOG": "DEBUG"},
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for m in msgs:
            proc.stdin.write(json.dumps(m) + "\n")
        proc.stdin.flush()
        parsed = []
        while {1, 2, 3} - {p.get("id") for p in parsed}:
            line = proc.stdout.readline()
            assert line, "server closed stdout early"
            parsed.append(json.loads(line))  # any non-JSON byte on stdout fails here
        assert all(p.get("jsonrpc") == "2.0" for p in parsed)
        answers = {p["id"]: p for p in parsed if "id" in p}
        assert answers[2]["result"]["content"][0]["text"].startswith(" 1. [")
        assert "knowledge :" in answers[3]["result"]["content"][0]["text"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_warm_up_builds_the_search_index_before_the_first_query(root: Path) -> None:
    from cce_knowledge.mcp.tools import KnowledgeTools

    search_dir = root / ".cce" / "knowledge" / "search"
    shutil.rmtree(search_dir, ignore_errors=True)
    tools = KnowledgeTools(root)
    tools.warm().join(timeout=120)
    assert search_dir.is_dir() and any(search_dir.iterdir())
    out = tools.call("context_search", {"query": "retry backoff"})
    assert not out.is_error


def test_warm_up_prepares_the_reference_ranking_when_it_is_configured(root: Path) -> None:
    from cce_knowledge.mcp.tools import KnowledgeTools

    search_dir = root / ".cce" / "knowledge" / "search"
    assert not list(search_dir.glob("*.ref.idx"))  # index leaves it to its first use
    KnowledgeTools(root).warm().join(timeout=120)
    assert not list(search_dir.glob("*.ref.idx"))  # default ranking: nothing more
    with (root / ".cce" / "config").open("a") as f:
        f.write("knowledge:\n  ranking: reference\n")
    tools = KnowledgeTools(root)
    tools.warm().join(timeout=120)
    assert len(list(search_dir.glob("*.ref.idx"))) == 1
    out = tools.call("context_search", {"query": "retry backoff"})
    assert not out.is_error


def test_warm_up_without_a_store_is_quiet(tmp_path: Path) -> None:
    from cce_knowledge.mcp.tools import KnowledgeTools

    KnowledgeTools(tmp_path).warm().join(timeout=30)
    assert not (tmp_path / ".cce").exists()
