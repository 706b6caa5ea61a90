"""Issue 21 §5: the docs adapter and shallow clones, on real `git clone --depth N` copies.

A shallow clone attributes every older file to the cut commit, so `extract docs` refuses
it (naming `fetch-depth: 0`); `--allow-shallow` leaves `updated_at` out rather than
wrong; and every shipped workflow or doc example that extracts docs fetches the whole
history.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.paths import REPO, TEST_IDENTITY

DATES = {
    "a.md": "2020-01-01T00:00:00Z",
    "b.md": "2021-01-01T00:00:00Z",
    "c.md": "2022-01-01T00:00:00Z",
}


def _git(cwd: Path, *args: str, date: str | None = None) -> str:
    env = {**os.environ, **TEST_IDENTITY}
    if date:
        env |= {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    return subprocess.run(
        ["git", "-c", "commit.gpgsign=false", *args],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three commits, one file each, a year apart."""
    src = tmp_path_factory.mktemp("origin") / "src"
    (src / "docs").mkdir(parents=True)
    _git(src, "init", "-q", "-b", "main")
    for name, date in DATES.items():
        (src / "docs" / name).write_text(f"# {name}\n\nAbout {name}.\n", encoding="utf-8")
        _git(src, "add", ".")
        _git(src, "commit", "-q", "-m", name, date=date)
    return src


def _clone(origin: Path, dest: Path, *depth: str) -> Path:
    subprocess.run(
        ["git", "clone", "-q", *depth, origin.as_uri(), str(dest)], check=True, capture_output=True
    )
    return dest


def extract(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CCE_", "GITHUB_"))}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "cce_knowledge",
            "knowledge",
            "extract",
            "docs",
            "--root",
            "docs",
            *args,
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def dates(stdout: str) -> dict[str, str | None]:
    return {
        r["id"].removeprefix("docs:"): r.get("updated_at")
        for r in map(json.loads, stdout.splitlines())
    }


def test_a_full_clone_dates_every_file(origin: Path, tmp_path: Path) -> None:
    full = _clone(origin, tmp_path / "full")
    p = extract(full)
    assert p.returncode == 0, p.stderr
    assert dates(p.stdout) == DATES


def test_a_shallow_clone_is_refused_naming_fetch_depth(origin: Path, tmp_path: Path) -> None:
    shallow = _clone(origin, tmp_path / "shallow", "--depth", "1")
    assert _git(shallow, "rev-parse", "--is-shallow-repository").strip() == "true"
    p = extract(shallow, "--out", "feed.jsonl")
    assert p.returncode == 1
    assert p.stdout == ""
    assert not (shallow / "feed.jsonl").exists()
    assert p.stderr.startswith("error: docs is in a shallow git clone: ")
    assert "`fetch-depth: 0` on actions/checkout" in p.stderr
    assert "git fetch --unshallow" in p.stderr and "--allow-shallow" in p.stderr


def test_allow_shallow_leaves_out_only_the_dates_the_cut_hides(
    origin: Path, tmp_path: Path
) -> None:
    one = _clone(origin, tmp_path / "one", "--depth", "1")
    p = extract(one, "--allow-shallow")
    assert p.returncode == 0, p.stderr
    # Depth 1: every file is attributed to the cut, so no date is known (today's code
    # gave all three HEAD's date, 2022).
    assert dates(p.stdout) == {"a.md": None, "b.md": None, "c.md": None}
    two = _clone(origin, tmp_path / "two", "--depth", "2")
    p = extract(two, "--allow-shallow")
    assert p.returncode == 0, p.stderr
    # Depth 2: c.md changed in a commit the history shows; a.md and b.md sit on the cut.
    assert dates(p.stdout) == {"a.md": None, "b.md": None, "c.md": DATES["c.md"]}
    # Unshallowed, the same tree needs no flag and is fully dated.
    _git(two, "fetch", "-q", "--unshallow")
    p = extract(two)
    assert p.returncode == 0, p.stderr
    assert dates(p.stdout) == DATES


# ----------------------------------------------------- shipped workflows and examples


def _workflow_files() -> list[Path]:
    return sorted(
        [*(REPO / "workflows").glob("*.yml"), *(REPO / ".github" / "workflows").glob("*.yml")]
    )


def _extracts_docs(step: dict[str, Any]) -> bool:
    extract = str((step.get("with") or {}).get("extract", ""))
    run = str(step.get("run", ""))
    # The reusable workflow passes its caller's `extract` through: it may be docs.
    return (
        extract.startswith("docs")
        or "inputs.extract" in extract
        or bool(re.search(r"extract\s+docs", run))
    )


def _fetches_everything(step: dict[str, Any]) -> bool:
    return str(step.get("uses", "")).startswith("actions/checkout@") and (
        (step.get("with") or {}).get("fetch-depth") == 0
    )


@pytest.mark.parametrize("path", _workflow_files(), ids=lambda p: p.name)
def test_every_workflow_that_extracts_docs_fetches_the_whole_history(path: Path) -> None:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    for name, job in (doc.get("jobs") or {}).items():
        steps = job.get("steps") or []
        if any(_extracts_docs(s) for s in steps):
            assert any(_fetches_everything(s) for s in steps), (
                f"{path.name}: job {name} extracts docs without `fetch-depth: 0` on its checkout"
            )


def test_some_shipped_workflow_extracts_docs() -> None:
    """The check above is not vacuous."""
    hits = [
        p.name
        for p in _workflow_files()
        for job in (yaml.safe_load(p.read_text()).get("jobs") or {}).values()
        if any(_extracts_docs(s) for s in job.get("steps") or [])
    ]
    assert {"composed-pipeline.yml", "cce-knowledge-build.yml"} <= set(hits)


def test_doc_examples_that_extract_docs_fetch_the_whole_history() -> None:
    pages = [*(REPO / "docs").rglob("*.md"), REPO / "README.md"]
    found = 0
    for page in pages:
        for block in re.findall(r"```ya?ml\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            if re.search(r"extract:\s*docs\b", block):
                found += 1
                assert "fetch-depth: 0" in block, f"{page.relative_to(REPO)}: {block[:200]}"
    assert found >= 1
    # No example passes the docs tree positionally (`--root` is required).
    for page in pages:
        assert not re.search(r"`docs \./", page.read_text(encoding="utf-8")), page
