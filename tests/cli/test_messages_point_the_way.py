"""Issue 21 §6: messages that point the right way, through real `cce` processes.

A feed that grew past its manifest says to regenerate the manifest; a BOM is named (and
refused, as the reference refuses it); `cce mcp` without a store says so on stderr and
keeps serving; `ask` says which corpus answered; `index` uses one word per thing; and
the progress bar draws on a pseudo-terminal that reports no size (`script -qc`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcp import ClientSession
from tests.helpers.cce_proc import CCE, run_cce
from tests.helpers.paths import REPO, TESTS
from tests.helpers.pty_run import run_in_pty

FEEDS = TESTS / "fixtures" / "feeds"


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CI", "GITHUB_ACTIONS", "CCE_PROGRESS", "CCE_PROGRESS_INTERVAL")
    }
    env["PYTHONPATH"] = str(REPO / "src")
    env.update(extra)
    return env


def cce(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_cce(*args, cwd=cwd, env=_env())


def _record(i: int) -> str:
    return json.dumps(
        {
            "id": f"adr:{i}",
            "title": f"Decision {i}",
            "source": "docs",
            "body": f"## Context\n\nWhy we chose option {i} for the cache layer.\n",
        }
    )


# --------------------------------------------------------------------- manifest


def test_a_grown_feed_says_regenerate_the_manifest(tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    feed.write_text(_record(1) + "\n")
    assert (
        cce("knowledge", "manifest", str(feed), "--out", str(tmp_path / "m.json")).returncode == 0
    )
    feed.write_text(_record(1) + "\n" + _record(2) + "\n")
    p = cce(
        "knowledge",
        "index",
        str(feed),
        "--manifest",
        str(tmp_path / "m.json"),
        "--dir",
        str(tmp_path),
    )
    assert p.returncode == 1
    assert p.stderr == (
        "error: feed does not match its manifest: manifest declares 1 record(s), feed has 2 — "
        "the feed has more records than its manifest; if the feed is the one you meant, "
        "regenerate the manifest (`cce knowledge manifest FEED --out MANIFEST`)\n"
    )
    assert "truncated" not in p.stderr
    # A feed that shrank still says what the reference says.
    feed.write_text("")
    (tmp_path / "m2.json").write_text('{"records": 1, "sha256": "' + "0" * 64 + '"}')
    p = cce(
        "knowledge",
        "index",
        str(feed),
        "--manifest",
        str(tmp_path / "m2.json"),
        "--dir",
        str(tmp_path),
    )
    assert "feed has 0 — the feed is truncated or incomplete" in p.stderr


# -------------------------------------------------------------------------- BOM


def test_a_bom_is_named_and_refused_as_the_reference_refuses_it(tmp_path: Path) -> None:
    bom = FEEDS / "bom.jsonl"
    assert bom.read_bytes().startswith(b"\xef\xbb\xbf")
    p = cce("knowledge", "index", str(bom), "--dir", str(tmp_path))
    assert p.returncode == 1
    assert (
        "expected value at line 1 column 1 — the line starts with a UTF-8 byte order mark"
        in p.stderr
    )
    assert "save it as UTF-8 without a BOM" in p.stderr
    assert not (tmp_path / ".cce" / "knowledge" / "current").exists()  # the reference's store
    p = cce("knowledge", "validate", str(bom))
    assert p.returncode == 1 and "byte order mark (BOM, bytes EF BB BF)" in p.stdout


# -------------------------------------------------------------------------- MCP


def test_mcp_without_a_store_says_so_on_stderr_and_keeps_serving(tmp_path: Path) -> None:
    root = tmp_path / "nowhere"
    errlog = tmp_path / "stderr.txt"

    async def main() -> tuple[str, str]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "cce_knowledge", "mcp", "--dir", str(root)],
            env=_env(CCE_HOME=str(tmp_path / "home")),
        )
        with errlog.open("w") as err:
            async with stdio_client(params, errlog=err) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                status = await s.call_tool("index_status", {})
                assert not status.is_error
                # A store that appears later is served without a restart.
                feed = tmp_path / "feed.jsonl"
                feed.write_text(_record(1) + "\n")
                p = cce("knowledge", "index", str(feed), "--dir", str(root), "-q")
                assert p.returncode == 0, p.stderr
                hit = await s.call_tool("context_search", {"query": "cache layer option"})
                return status.content[0].text, hit.content[0].text  # type: ignore[union-attr]

    status, hit = anyio.run(main)
    err = errlog.read_text()
    assert err.startswith(
        f"cce mcp: warning: no knowledge store under {root}/.cce/knowledge (no such directory) — "
        f"build one with `cce knowledge index FEED --dir {root}` or install a published one "
        f"with `cce knowledge pull --dir {root}`; serving anyway"
    )
    assert "no knowledge store" in status
    assert "[knowledge] Decision 1" in hit


# -------------------------------------------------------------------------- ask


def test_ask_says_which_corpus_answered(tmp_path: Path) -> None:
    suite = REPO / "examples" / "ask.jsonl"
    p = cce("knowledge", "ask", str(suite))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[1] == "  corpus   : feed.jsonl"
    assert lines[2] == (
        f"  source   : the suite's `corpus` feed {REPO / 'examples' / 'feed.jsonl'}, indexed in "
        "memory — not an installed store (pass --dir ROOT for that)"
    )
    store = tmp_path / "store"
    assert (
        cce(
            "knowledge", "index", str(REPO / "examples" / "feed.jsonl"), "--dir", str(store), "-q"
        ).returncode
        == 0
    )
    p = cce("knowledge", "ask", str(suite), "--dir", str(store))
    assert p.returncode == 0, p.stderr
    assert (
        p.stdout.splitlines()[2]
        == f"  source   : the store installed under {store}/.cce/knowledge (--dir)"
    )
    # The JSON report (a published contract) is unchanged.
    p = cce("knowledge", "ask", str(suite), "--json")
    assert "source" not in json.loads(p.stdout)
    helptext = cce("knowledge", "ask", "--help").stdout
    assert "NOT the store in the current directory" in helptext
    assert "the report's `source` line says it" in helptext


# ------------------------------------------------------------ index and progress


def _bare_pty(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """A fresh pseudo-terminal left at its 0x0 size — what `script -qc` gives without a
    controlling terminal, and some CI runners and editor shells give too."""
    return run_in_pty(argv, env, size=None, quiet_for=120)


def _feed(tmp_path: Path, n: int) -> Path:
    p = tmp_path / "feed.jsonl"
    p.write_text("".join(_record(i) + "\n" for i in range(n)))
    return p


def _check_bars(text: str, n: int) -> None:
    frames = text.split("\r")
    # Drawn in place, with a percentage, during both steps.
    assert any(f.startswith("index: ") and "%|" in f and "records/s" in f for f in frames), text
    # One pass: the reference ranking's sections wait for its first use.
    step = "search index: "
    assert any(f.startswith(step) and "%|" in f and "chunks/s" in f for f in frames), text
    assert "(1/2)" not in text
    assert f"{n}/{n}" in text
    # One word per thing: `index` prints chunks, and so does the search index's bar.
    assert "sections" not in text
    assert f"  chunks    : {n}" in text


@pytest.mark.slow
def test_the_bar_draws_on_a_pty_that_reports_no_size(tmp_path: Path) -> None:
    feed = _feed(tmp_path, 60)
    rc, text = _bare_pty(
        [*CCE, "knowledge", "index", str(feed), "--dir", str(tmp_path), "--jobs", "1"],
        _env(CCE_PROGRESS_INTERVAL="0", TERM="xterm"),
    )
    assert rc == 0, text
    _check_bars(text, 60)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("script") is None, reason="util-linux `script` is not installed")
def test_the_bar_draws_under_script(tmp_path: Path) -> None:
    """The issue's own reproduction: `script -qc "cce knowledge index FEED"`."""
    feed = _feed(tmp_path, 60)
    cmd = " ".join([*CCE, "knowledge", "index", str(feed), "--dir", str(tmp_path), "--jobs", "1"])
    p = subprocess.run(
        ["script", "-qc", cmd, "/dev/null"],
        env=_env(CCE_PROGRESS_INTERVAL="0", TERM="xterm"),
        capture_output=True,
        stdin=subprocess.DEVNULL,
        check=False,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout
    _check_bars(p.stdout.decode("utf-8", "replace"), 60)


def test_index_and_its_search_index_line_use_one_word(tmp_path: Path) -> None:
    feed = _feed(tmp_path, 5)
    p = subprocess.run(
        [*CCE, "knowledge", "index", str(feed), "--dir", str(tmp_path)],
        env=_env(CCE_PROGRESS="lines", CCE_PROGRESS_INTERVAL="0"),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    out: Any = p.stdout + p.stderr
    assert "  chunks    : 5" in out
    assert "search index: 5/5 chunks (100%)" in out
    assert "sections" not in out
