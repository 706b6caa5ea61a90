"""Progress reporting: a bar on a (pseudo-)terminal, calm lines in CI or a pipe, nothing
with -q/--quiet, and stdout untouched either way."""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import pytest

from cce_knowledge.core import progress
from cce_knowledge.core.progress import Mode, ProgressSettings, Task, resolve
from tests.helpers.cce_proc import CCE
from tests.helpers.paths import REPO, TESTS
from tests.helpers.pty_run import run_in_pty

CURATED = TESTS / "vectors" / "knowledge" / "curated.jsonl"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


# ---------------------------------------------------------------- mode resolution


@pytest.mark.parametrize(
    ("env", "tty", "quiet", "mode"),
    [
        ({}, True, False, Mode.BAR),
        ({}, False, False, Mode.LINES),
        ({"CI": "true"}, True, False, Mode.LINES),
        ({"GITHUB_ACTIONS": "true"}, True, False, Mode.LINES),
        ({"CI": "false"}, True, False, Mode.BAR),
        ({"TERM": "dumb"}, True, False, Mode.LINES),
        ({}, True, True, Mode.OFF),
        ({"CI": "true"}, False, True, Mode.OFF),
        ({"CCE_PROGRESS": "off"}, True, False, Mode.OFF),
        ({"CCE_PROGRESS": "lines"}, True, False, Mode.LINES),
        ({"CCE_PROGRESS": "bar", "CI": "1"}, False, False, Mode.BAR),
        ({"CCE_PROGRESS": "bar"}, False, True, Mode.OFF),
    ],
)
def test_resolve(env: dict[str, str], tty: bool, quiet: bool, mode: Mode) -> None:
    stream = _Tty() if tty else io.StringIO()
    assert resolve(quiet=quiet, env=env, stream=stream).mode is mode


def test_interval_from_env() -> None:
    st = resolve(env={"CCE_PROGRESS_INTERVAL": "0.25"}, stream=io.StringIO())
    assert (st.interval, st.delay) == (0.25, 0.25)
    st = resolve(env={"CCE_PROGRESS_INTERVAL": "soon"}, stream=io.StringIO())
    assert st.interval == progress.DEFAULT_INTERVAL


def test_library_default_is_silent(capsys: pytest.CaptureFixture[str]) -> None:
    with progress.task("work", total=3, unit="things") as t:
        t.advance(3)
    assert capsys.readouterr() == ("", "")


# ---------------------------------------------------------------- lines mode


def test_lines_have_count_percent_rate_and_no_carriage_return() -> None:
    out = io.StringIO()
    st = ProgressSettings(mode=Mode.LINES, interval=0.0, stream=out)
    with Task("index: records", total=4, unit="records", settings=st) as t:
        for _ in range(4):
            t.advance()
    text = out.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert lines[0].startswith("index: records: 1/4 records (25%), ")
    assert "records/s" in lines[0]
    assert lines[-1].startswith("index: records: 4/4 records (100%), ")
    assert lines[-1].endswith(" s") and "finished, took" in lines[-1]


def test_lines_are_paced_and_a_quick_step_stays_silent() -> None:
    out = io.StringIO()
    st = ProgressSettings(mode=Mode.LINES, interval=3600.0, stream=out)
    with Task("push: export", total=1000, settings=st) as t:
        for _ in range(1000):
            t.advance()
    assert out.getvalue() == ""


def test_lines_bytes_and_unknown_total() -> None:
    out = io.StringIO()
    st = ProgressSettings(mode=Mode.LINES, interval=0.0, stream=out)
    with Task("push: LFS upload", unit="B", settings=st) as t:
        t.advance(3 * 1024 * 1024)
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("push: LFS upload: 3.0 MiB, ") and "iB/s" in last
    out = io.StringIO()
    with Task("pull: fetch", settings=ProgressSettings(Mode.LINES, 0.0, stream=out)):
        pass
    assert out.getvalue().startswith("pull: fetch: finished, took ")


def test_bar_mode_draws_with_tqdm() -> None:
    out = _Tty()
    st = ProgressSettings(mode=Mode.BAR, delay=0.0, stream=out)
    with Task("ask: cases", total=5, unit="cases", settings=st) as t:
        t.advance(5)
    text = out.getvalue()
    assert "\r" in text and "ask: cases" in text and "5/5" in text and "cases/s" in text


# ---------------------------------------------------------------- the CLI, end to end


def _feed(tmp_path: Path, n: int) -> Path:
    lines = [
        json.dumps(
            {
                "schema": "cce.knowledge/v1",
                "id": f"r-{i}",
                "source": "docs",
                "title": f"Record {i}",
                "body": f"Why we chose option {i} for the cache layer.\n",
            }
        )
        for i in range(n)
    ]
    p = tmp_path / "feed.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS", "CCE_PROGRESS")}
    env["CCE_PROGRESS_INTERVAL"] = "0"
    env["PYTHONPATH"] = str(REPO / "src")
    env.update(extra)
    return env


@pytest.mark.slow
def test_index_on_a_pty_draws_a_bar(tmp_path: Path) -> None:
    feed = _feed(tmp_path, 40)
    rc, text = run_in_pty(
        [*CCE, "knowledge", "index", str(feed), "--dir", str(tmp_path), "--jobs", "1"], _env()
    )
    assert rc == 0, text
    assert "index: " in text
    assert "\r" in text  # redrawn in place
    assert "40/40" in text and "records/s" in text
    assert "Indexed knowledge from" in text


@pytest.mark.slow
def test_index_on_a_pty_quiet_draws_nothing(tmp_path: Path) -> None:
    feed = _feed(tmp_path, 40)
    rc, text = run_in_pty(
        [*CCE, "knowledge", "index", str(feed), "--dir", str(tmp_path), "-q"], _env()
    )
    assert rc == 0, text
    assert "index: " not in text and "records/s" not in text
    assert "Indexed knowledge from" in text


@pytest.mark.slow
@pytest.mark.parametrize("ci", [{"CI": "true"}, {}])
def test_index_in_ci_or_a_pipe_prints_lines(tmp_path: Path, ci: dict[str, str]) -> None:
    feed = _feed(tmp_path, 40)
    proc = subprocess.run(
        [*CCE, "knowledge", "index", str(feed), "--dir", str(tmp_path), "--jobs", "1"],
        env=_env(**ci),
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr.decode()
    assert b"\r" not in proc.stderr and "\x1b" not in err
    assert "index: 40/40 records (100%), " in err and "records/s" in err
    assert "records/s" not in proc.stdout.decode()


@pytest.mark.slow
def test_quiet_in_ci_prints_nothing_on_stderr(tmp_path: Path) -> None:
    feed = _feed(tmp_path, 40)
    proc = subprocess.run(
        [*CCE, "knowledge", "index", str(feed), "--dir", str(tmp_path), "--quiet"],
        env=_env(CI="true"),
        capture_output=True,
        check=False,
    )
    assert (proc.returncode, proc.stderr) == (0, b"")
