"""Issue 21 §7: the shipped SHA pins run what the docs document.

Every `cce-knowledge/cce-knowledge…@<sha> # vX.Y.Z` in workflows/, the reusable
workflow, the README and the docs names one commit, whose actions (and reusable
workflow) have every input and output today's have — read from that commit with git —
and whose pyproject.toml declares the version the comment names (docs/versioning.md).
An adopter who copies a pin gets the inputs the docs describe, none silently ignored.
"""

from __future__ import annotations

import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.paths import REPO

sys.path.insert(0, str(REPO / "tools"))
import pin_action

REUSABLE = ".github/workflows/cce-knowledge-build.yml"
COMMENT = re.compile(r"v(\d+)\.(\d+)\.(\d+)")


def _all_pins() -> list[tuple[str, str, str, str]]:
    """(file, action, sha, comment) for every pin shipped."""
    return [
        (str(f.relative_to(REPO)), action, sha, comment)
        for f in pin_action.files()
        for action, sha, comment in pin_action.pins(f.read_text(encoding="utf-8"))
    ]


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False
    )


@cache
def _at(sha: str, path: str) -> str | None:
    p = _git("show", f"{sha}:{path}")
    return p.stdout if p.returncode == 0 else None


def _interface(doc: dict[str, Any]) -> tuple[set[str], set[str]]:
    if "runs" in doc:  # an action
        return set(doc.get("inputs") or {}), set(doc.get("outputs") or {})
    call = (doc.get("on") or doc.get(True) or {})["workflow_call"]  # `on:` reads as True
    return set(call.get("inputs") or {}), set(call.get("outputs") or {}) | set(
        call.get("secrets") or {}
    )


def _pinned_paths() -> list[str]:
    """Every action of this repository a pin may name, and the reusable workflow."""
    actions = sorted(p.relative_to(REPO).as_posix() for p in REPO.glob("*/action.yml"))
    return ["action.yml", *actions, REUSABLE]


def test_every_pin_names_one_commit_with_a_release_comment() -> None:
    pins = _all_pins()
    assert len(pins) > 20
    assert len({sha for _, _, sha, _ in pins}) == 1, sorted({(f, sha) for f, _, sha, _ in pins})
    bad = [(f, c) for f, _, _, c in pins if not COMMENT.fullmatch(c)]
    assert not bad, f"pins whose comment is not `# vX.Y.Z` (docs/versioning.md): {bad}"
    assert len({c for *_, c in pins}) == 1


def test_the_pinned_commit_declares_the_commented_version() -> None:
    _, _, sha, comment = _all_pins()[0]
    assert _git("cat-file", "-e", f"{sha}^{{commit}}").returncode == 0, (
        f"the pinned commit {sha} is not in this clone's history (CI checks out with "
        "fetch-depth: 0 so that it is)"
    )
    pyproject = _at(sha, "pyproject.toml")
    assert pyproject is not None
    m = re.search(r'^version = "([^"]+)"', pyproject, re.M)
    assert m and f"v{m[1]}" == comment, (m and m[1], comment)


#: Inputs added since the pinned release, each documented as such (docs/action.md,
#: docs/reusable-workflow.md: "unreleased") and named in CHANGELOG.md's Unreleased
#: section. The release that moves the pins (tools/pin_action.py) empties this: an
#: entry the pinned commit already has fails the test below.
UNRELEASED_INPUTS: dict[str, set[str]] = {
    "action.yml": {"incremental"},
    "index/action.yml": {"incremental", "corpus", "remote", "cache-token"},
    REUSABLE: {"incremental"},
}


def _unreleased_changelog() -> str:
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    return text.split("## [Unreleased]", 1)[1].split("\n## [", 1)[0]


@pytest.mark.parametrize("path", _pinned_paths())
def test_the_pinned_commit_has_todays_interface(path: str) -> None:
    _, _, sha, _ = _all_pins()[0]
    then = _at(sha, path)
    assert then is not None, f"{path} does not exist at the pinned commit {sha}"
    now_in, now_out = _interface(yaml.safe_load((REPO / path).read_text(encoding="utf-8")))
    then_in, then_out = _interface(yaml.safe_load(then))
    new = UNRELEASED_INPUTS.get(path, set())
    assert not new & then_in, f"{path}: {sorted(new & then_in)} are released: drop them here"
    for name in new:
        assert f"`{name}`" in _unreleased_changelog(), f"CHANGELOG Unreleased: `{name}`"
    now_in -= new
    assert now_in <= then_in, f"{path}: inputs missing at {sha[:12]}: {sorted(now_in - then_in)}"
    assert now_out <= then_out, (
        f"{path}: outputs missing at {sha[:12]}: {sorted(now_out - then_out)}"
    )


def test_every_pinned_path_is_one_of_ours() -> None:
    known = {"cce-knowledge/cce-knowledge"} | {
        f"cce-knowledge/cce-knowledge/{Path(p).parent.as_posix()}"
        for p in _pinned_paths()
        if p != "action.yml" and p != REUSABLE
    }
    known.add(f"cce-knowledge/cce-knowledge/{REUSABLE}")
    assert {a for _, a, _, _ in _all_pins()} <= known


def test_the_check_sees_a_missing_input() -> None:
    """Against the commit the examples used to pin (2.0.0's first sub-actions), the
    check names the inputs docs/action.md documents and that commit lacks."""
    old = "9dcb44f7e42d89487ca94d9525fe0d31f68dbed8"
    if _git("cat-file", "-e", f"{old}^{{commit}}").returncode != 0:
        pytest.skip("the old pin is not in this clone's history")
    now_in, _ = _interface(yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8")))
    then_in, _ = _interface(yaml.safe_load(_at(old, "action.yml") or ""))
    assert {"allow-empty", "semantic-url", "semantic-model"} <= now_in - then_in
