"""Fixtures: a root indexed from the example feed, and a loopback embeddings server."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from cce_knowledge.cli.main import main
from tests.helpers.embed_server import EmbedServer, embed_server
from tests.helpers.paths import REPO

FEED = REPO / "examples" / "feed.jsonl"


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (
        "CCE_EMBED_PROVIDER",
        "CCE_EMBED_URL",
        "CCE_EMBED_MODEL",
        "CCE_EMBED_API_KEY",
        "CCE_ALLOW_INSECURE_HTTP",
        "OLLAMA_HOST",
    ):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def server() -> Iterator[EmbedServer]:
    with embed_server() as s:
        yield s


def write_config(root: Path, provider: str, url: str, model: str = "tiny-ngrams") -> None:
    (root / ".cce").mkdir(parents=True, exist_ok=True)
    (root / ".cce" / "config").write_text(
        f"knowledge:\n  semantic:\n    provider: {provider}\n    url: {url}\n    model: {model}\n",
        encoding="utf-8",
    )


def index(root: Path, feed: Path = FEED) -> int:
    return main(["knowledge", "index", str(feed), "--dir", str(root), "--jobs", "1"])


@pytest.fixture
def indexed(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    assert index(root) == 0
    return root


def copy_feed(tmp_path: Path) -> Path:
    dst = tmp_path / "feed.jsonl"
    shutil.copy(FEED, dst)
    return dst
