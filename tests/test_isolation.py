"""The suite cannot see the developer's machine: a poisoned global config, CCE_HOME,
embedding provider and GitHub token in the shell change nothing (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cce_knowledge.config.settings import global_config_path, load_settings
from tests.helpers.paths import REPO

POISON_URL = "file:///poisoned/cache.git"


def test_no_developer_config_reaches_settings(tmp_path: Path) -> None:
    # Run by the probe below with a poisoned environment; harmless in a normal run.
    home = global_config_path()
    assert home is not None and not str(home).startswith(os.environ.get("POISONED_HOME", "\0"))
    settings = load_settings(tmp_path)
    assert settings.sync.remote != POISON_URL
    assert settings.knowledge.semantic_config() is None
    leaked = [
        v
        for v in os.environ
        if (v.startswith("CCE_") and v not in {"CCE_NATIVE", "CCE_REQUIRE_NATIVE", "CCE_NO_NATIVE"})
        or v.startswith("GITHUB_")
    ]
    assert leaked == []


def _probe(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    poisoned = tmp_path / "dev-home"
    (poisoned / ".cce").mkdir(parents=True)
    cfg = f"sync:\n  remote: {POISON_URL}\n"
    (poisoned / ".cce" / "config.yml").write_text(cfg, encoding="utf-8")
    env = {
        **os.environ,
        "HOME": str(poisoned),
        "POISONED_HOME": str(poisoned),
        "CCE_EMBED_PROVIDER": "ollama",
        "CCE_EMBED_URL": "http://127.0.0.1:9",
        "CCE_EMBED_MODEL": "poison",
        "GITHUB_TOKEN": "ghp_poisonpoisonpoisonpoisonpoisonpois",
    }
    env.pop("CCE_HOME", None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *extra,
            f"{Path(__file__).relative_to(REPO)}::test_no_developer_config_reaches_settings",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_a_poisoned_machine_changes_nothing(tmp_path: Path) -> None:
    ok = _probe(tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # The same probe without the suite's conftest sees the poison: the fixture is what
    # keeps it out.
    bare = _probe(tmp_path / "control", "--noconftest")
    assert bare.returncode != 0, bare.stdout
