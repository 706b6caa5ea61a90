"""Issue 34 §12: `expand_chunk` and `related_context` with an id the store does not hold
answer that the id is unknown (the reference's words for its own index), not "no
knowledge store yet" — which sent an agent to build a store that exists. A root with no
store keeps that answer. `cce mcp` as a subprocess, through the official SDK's client."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from cce_knowledge.mcp import render
from tests.helpers.cce_proc import run_cce
from tests.helpers.paths import REPO

FEED = REPO / "examples" / "feed.jsonl"
UNKNOWN = "0000000000000000"
STALE = f"no chunk with id {UNKNOWN} in the current index — it may be stale; re-run context_search."


def _answers(root: Path, calls: list[tuple[str, dict[str, object]]]) -> list[tuple[str, bool]]:
    async def main() -> list[tuple[str, bool]]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "cce_knowledge", "mcp", "--dir", str(root), "--remote-timeout", "3"],
            env={"CCE_HOME": str(root.parent / "cce-home"), "PATH": os.environ["PATH"]},
        )
        out = []
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                for name, args in calls:
                    res = await s.call_tool(name, args)
                    assert len(res.content) == 1 and res.content[0].type == "text"
                    out.append((res.content[0].text, bool(res.is_error)))
        return out

    return anyio.run(main)


CALLS: list[tuple[str, dict[str, object]]] = [
    ("expand_chunk", {"chunk_id": UNKNOWN}),
    ("expand_chunk", {"chunk_id": UNKNOWN, "scope": "file"}),
    ("related_context", {"chunk_id": UNKNOWN}),
    ("expand_chunk", {"chunk_id": "\x1b[31m" + "z" * 5000}),
]


def test_an_unknown_id_on_a_store_is_unknown_not_a_missing_store(tmp_path: Path) -> None:
    root = tmp_path / "root"
    p = run_cce("knowledge", "index", str(FEED), "--dir", str(root), "-q")
    assert p.returncode == 0, p.stderr
    got = _answers(root, CALLS)
    assert got[:3] == [(STALE, False)] * 3
    # The caller's id is shown escaped and cut, never echoed raw at any length.
    text, _ = got[3]
    assert text.startswith("no chunk with id \\x1b[31m" + "z" * 95 + "… in the current index")
    assert "\x1b" not in text and len(text) < 300
    assert all(render.NOT_INDEXED_MESSAGE not in t for t, _ in got)


def test_a_root_without_a_store_still_says_so(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    assert _answers(root, CALLS[:3]) == [(render.NOT_INDEXED_MESSAGE, False)] * 3
