"""`cce mcp` against a hostile store (issue 25 point 2), through the official SDK client.

A pulled corpus may hold a record id of any length; display redaction once took tens
of seconds on `gh:acme/app#1 key` + 1,500 spaces, and tool calls ran on the event
loop, so the whole server (ping included) waited for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import cce_knowledge
from cce_knowledge.store.snapshots import store_path
from cce_knowledge.store.view import current_signature, open_view

pytestmark = pytest.mark.slow

SRC = str(Path(cce_knowledge.__file__).resolve().parents[1])
HOSTILE_ID = "gh:acme/app#1 key" + " " * 1500
BODY = "## One\n\nwebhook retries use backoff\n\n## Two\n\nwebhook dead letters\n"


def _cce(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "cce_knowledge", *args],
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": SRC},
    )


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    (r / ".cce").mkdir(parents=True)
    (r / ".cce" / "config").write_text("markdown:\n  max_section_tokens: 20\n")
    feed = tmp_path / "feed.jsonl"
    recs = [
        {"id": HOSTILE_ID, "title": "hostile", "body": BODY, "source": "docs"},
        {"id": "docs:ok.md", "title": "fine", "body": BODY, "source": "docs"},
    ]
    feed.write_text("".join(json.dumps(x) + "\n" for x in recs))
    _cce("knowledge", "index", str(feed), "--dir", str(r))
    return r


def _hostile_chunk(root: Path) -> str:
    sig = current_signature(root)
    assert sig is not None
    view = open_view(store_path(root, sig.snapshot))
    return next(
        c for c, rid in zip(view.chunk_ids, view.record_ids, strict=True) if rid == HOSTILE_ID
    )


@asynccontextmanager
async def session(root: Path, *extra: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cce_knowledge", "mcp", "--dir", str(root), "--remote-timeout", "1", *extra],
        env={"CCE_HOME": str(root.parent / "cce-home"), "PYTHONPATH": SRC},
    )
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            yield s


def test_ping_answers_while_a_tool_runs_on_a_hostile_id(root: Path) -> None:
    chunk = _hostile_chunk(root)
    got: dict[str, object] = {}

    async def main() -> None:
        async with session(root) as s:
            await s.send_ping()  # the server is up

            async def related() -> None:
                t0 = time.perf_counter()
                res = await s.call_tool("related_context", {"chunk_id": chunk})
                got["related_s"] = time.perf_counter() - t0
                got["related"] = res

            async with anyio.create_task_group() as tg:
                tg.start_soon(related)
                await anyio.sleep(0.05)
                t0 = time.perf_counter()
                with anyio.fail_after(20):
                    await s.send_ping()
                got["ping_s"] = time.perf_counter() - t0
                with anyio.fail_after(60):
                    while "related" not in got:
                        await anyio.sleep(0.05)

    anyio.run(main)
    assert got["ping_s"] < 2.0, got
    res = got["related"]
    text = res.content[0].text  # type: ignore[attr-defined]
    assert not res.is_error, text  # type: ignore[attr-defined]
    # The id is shown cut, not as 1,500 spaces.
    assert "gh:acme/app#1 key" in text and " " * 600 not in text


def test_a_call_past_its_deadline_is_an_error_and_the_server_lives_on(root: Path) -> None:
    chunk = _hostile_chunk(root)
    out: list[tuple[bool, str]] = []

    async def main() -> None:
        # A deadline no call can meet: every call answers with the deadline's error.
        async with session(root, "--call-timeout", "0.000001") as s:
            with anyio.fail_after(60):
                # More calls than there are slots, one after the other: each given-up
                # call frees its slot once its thread ends (or at once if it never
                # started), so none is refused as "still running".
                for _ in range(6):
                    res = await s.call_tool("related_context", {"chunk_id": chunk})
                    out.append((bool(res.is_error), res.content[0].text))  # type: ignore[union-attr]
                    await anyio.sleep(0.5)
                await s.send_ping()
                res = await s.call_tool("index_status", {})
                out.append((bool(res.is_error), res.content[0].text))  # type: ignore[union-attr]

    anyio.run(main)
    for is_error, text in out:
        assert is_error
        assert "gave no answer within 1e-06 s" in text, text
