"""Suite-wide pytest set-up: fixtures shared by several test packages."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The `sync_env` fixture (a bare cache repo over file:// and an isolated CCE_HOME).
pytest_plugins = ["tests.helpers.sync_env"]

#: The run's own switches (.ci/run sets them for the native and pure-Python passes):
#: kept, while every other CCE_* variable of the developer's shell is dropped.
KEPT_CCE = frozenset({"CCE_NATIVE", "CCE_REQUIRE_NATIVE", "CCE_NO_NATIVE"})
XDG = ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")


@pytest.fixture(autouse=True)
def _isolated_machine(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test sees the developer's machine: a fresh HOME (so no ~/.cce/config.yml, no
    ~/.gitconfig), no CCE_HOME, no XDG directories, and none of the shell's CCE_*
    (embedding provider, tokens) or GITHUB_* (an Actions runner's) variables."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for var in list(os.environ):
        if (var.startswith("CCE_") and var not in KEPT_CCE) or var.startswith("GITHUB_"):
            monkeypatch.delenv(var)
    for var in XDG:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("OLLAMA_HOST", raising=False)


def fake_home() -> Path:
    """The HOME this test runs with (tests/test_isolation.py checks it)."""
    return Path(os.environ["HOME"])
