"""The CLI reference in docs/ stays in step with `--help`."""

from __future__ import annotations

import importlib.util

from tests.helpers.paths import REPO

ROOT = REPO


def test_cli_reference_matches_help() -> None:
    spec = importlib.util.spec_from_file_location("gen", ROOT / "tools" / "gen_cli_reference.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    expected = mod.render()
    actual = (ROOT / "docs" / "cli-reference.md").read_text(encoding="utf-8")
    assert actual == expected, (
        "docs/cli-reference.md is stale: run python tools/gen_cli_reference.py"
    )
