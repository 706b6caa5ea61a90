"""Small edges of `cce knowledge index` (issue 35 §8): its last progress line says the
step finished (or stopped), never "done in" (read as time left); a Markdown file given
as the feed names the command that makes a feed of it. Real `cce` processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from tests.helpers.cce_proc import CCE, run_cce


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(CCE_PROGRESS="lines", CCE_PROGRESS_INTERVAL="0")
    return env


def _record(i: int) -> str:
    return json.dumps({"id": f"r{i}", "title": f"T{i}", "body": "text", "source": "docs"})


def test_the_last_progress_line_says_finished(tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    feed.write_text("".join(_record(i) + "\n" for i in range(50)))
    r = run_cce("knowledge", "index", str(feed), "--dir", str(tmp_path), env=_env())
    assert r.returncode == 0, r.stderr
    last = [ln for ln in r.stderr.splitlines() if ln.startswith("index: ")][-1]
    assert ", finished, took " in last and "done in" not in r.stderr


def _sigint_as_a_terminal_gives_it() -> None:
    """In the child: SIGINT unblocked and at its default, whatever the test runner's
    process inherited or set (an ignored or blocked SIGINT passes to children across
    exec, and Python then never raises KeyboardInterrupt)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_an_interrupted_step_says_stopped_not_done(tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    body = " ".join(f"word{i}" for i in range(200))
    feed.write_text(
        "".join(
            json.dumps({"id": f"r{i}", "title": "T", "body": body, "source": "docs"}) + "\n"
            for i in range(100_000)
        )
    )
    env = _env()
    env["CCE_PROGRESS_INTERVAL"] = "0.2"
    p = subprocess.Popen(
        [*CCE, "knowledge", "index", str(feed), "--dir", str(tmp_path)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
        preexec_fn=_sigint_as_a_terminal_gives_it,
    )
    assert p.stderr is not None
    first = p.stderr.readline()  # the step is under way
    assert first.startswith("index: "), first
    p.send_signal(signal.SIGINT)
    rest = p.stderr.read()
    assert p.wait(timeout=120) == 130
    lines = [first, *rest.splitlines()]
    assert lines[-1] == "error: interrupted"
    last = [ln for ln in lines if ln.startswith("index: ")][-1]
    assert ", stopped after " in last and "done in" not in rest and "finished" not in rest


def test_a_markdown_file_given_as_the_feed_names_extract_docs(tmp_path: Path) -> None:
    md = tmp_path / "notes.md"
    md.write_text("# Notes\n\nSome text.\n")
    r = run_cce("knowledge", "index", str(md), "--dir", str(tmp_path))
    assert r.returncode == 1
    assert "invalid cce.knowledge/v1 record" in r.stderr
    assert "cce knowledge extract docs --root DIR --out feed.jsonl" in r.stderr
    # A feed that is merely broken gets no such hint.
    bad = tmp_path / "feed.jsonl"
    bad.write_text(_record(1) + "\n{oops\n")
    r = run_cce("knowledge", "index", str(bad), "--dir", str(tmp_path))
    assert r.returncode == 1 and "extract docs" not in r.stderr
