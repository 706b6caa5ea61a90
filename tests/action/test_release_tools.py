"""tools/release_check.py (the release workflow's tag check) and tools/pin_action.py
(moving the shipped SHA pins at a release)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tools import pin_action, release_check

CHANGELOG = """# Changelog

## [Unreleased]

### Added
- next

## [2.1.0] - 2026-12-01

### Fixed
- a fix

## [2.0.0]

- first
"""


def _repo(tmp_path: Path, version: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "x"\nversion = "{version}"\n')
    (tmp_path / "CHANGELOG.md").write_text(CHANGELOG)
    return tmp_path


def test_release_check_gives_the_changelog_section(tmp_path: Path) -> None:
    notes = release_check.check("v2.1.0", _repo(tmp_path, "2.1.0"))
    assert notes == "### Fixed\n- a fix\n"


@pytest.mark.parametrize(
    ("tag", "version", "error"),
    [
        ("2.1.0", "2.1.0", "is not v2.<minor>.<patch>"),
        ("v3.0.0", "3.0.0", "is not v2.<minor>.<patch>"),
        ("v2.1", "2.1.0", "is not v2.<minor>.<patch>"),
        ("v2.01.0", "2.1.0", "is not v2.<minor>.<patch>"),
        ("v2.1.1", "2.1.0", "does not match pyproject.toml's version 2.1.0"),
        ("v2.2.0", "2.2.0", "CHANGELOG.md has no `## [2.2.0]` section"),
    ],
)
def test_release_check_refuses(tmp_path: Path, tag: str, version: str, error: str) -> None:
    with pytest.raises(ValueError, match=r".*" + error.replace("[", r"\[").replace("(", r"\(")):
        release_check.check(tag, _repo(tmp_path, version))


def test_pin_action_moves_every_pin_and_nothing_else() -> None:
    old, new = "a" * 40, "b" * 40
    text = (
        f"uses: cce-knowledge/cce-knowledge/setup@{old} # 2.0.0 (main)\n"
        f"uses: cce-knowledge/cce-knowledge@{old}\n"
        f"uses: cce-knowledge/cce-knowledge/.github/workflows/cce-knowledge-build.yml@{old} # v2.0.0\n"
        f"uses: actions/checkout@{old} # v4.2.2\n"
        "uses: cce-knowledge/cce-knowledge@v2\n"
    )
    out = pin_action.repin(text, new, "v2.1.0")
    assert out == (
        f"uses: cce-knowledge/cce-knowledge/setup@{new} # v2.1.0\n"
        f"uses: cce-knowledge/cce-knowledge@{new} # v2.1.0\n"
        f"uses: cce-knowledge/cce-knowledge/.github/workflows/cce-knowledge-build.yml@{new} # v2.1.0\n"
        f"uses: actions/checkout@{old} # v4.2.2\n"
        "uses: cce-knowledge/cce-knowledge@v2\n"
    )
    assert [p[0] for p in pin_action.pins(out)] == [
        "cce-knowledge/cce-knowledge/setup",
        "cce-knowledge/cce-knowledge",
        "cce-knowledge/cce-knowledge/.github/workflows/cce-knowledge-build.yml",
    ]
