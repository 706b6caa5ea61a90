"""Shared fixtures for the sync tests: real bare git repos over file://, LFS on."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import git
import pytest

from cce_knowledge.store.ingest import ingest_feed
from cce_knowledge.store.snapshots import save

VECTORS = Path(__file__).resolve().parent.parent / "vectors"
CURATED = VECTORS / "knowledge" / "curated.jsonl"


def isolated_git_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HOME with only a git identity, CCE_HOME under tmp_path, no system git
    config, and a fresh bare cache (`git init --bare`, git's default branch); returns it."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CCE_HOME", str(tmp_path / "cce-home"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for k, v in (("user.name", "t"), ("user.email", "t@localhost")):
        subprocess.run(["git", "config", "--global", k, v], check=True)
    bare = tmp_path / "cache.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    return bare


def make_bare(path: Path) -> str:
    """A fresh bare repository with default branch `main`; returns its file:// URL."""
    git.Repo.init(path, bare=True, initial_branch="main")
    return path.resolve().as_uri()


def feed(records: Sequence[tuple[str, str]] | Sequence[str], *, title_prefix: str = "") -> bytes:
    """A compact feed; each record is an id or (id, body)."""
    lines = []
    for r in records:
        rid, body = (r, f"Body of {r}.") if isinstance(r, str) else r
        lines.append(
            json.dumps(
                {
                    "id": rid,
                    "title": f"{title_prefix}Record {rid}",
                    "body": body,
                    "source": "test",
                    "updated_at": "2026-03-01T00:00:00Z",
                },
                sort_keys=True,
                separators=(",", ":"),
            )
        )
    return ("\n".join(lines) + "\n").encode()


def index(root: Path, raw: bytes) -> str:
    """Index feed bytes into `root` (the engine's ingest + store save). Returns the snapshot."""
    store = ingest_feed(raw)
    save(root, store)
    return store.snapshot


def refs(bare: Path) -> str:
    """Every ref and its sha in a bare repo (to prove a refusal left it untouched)."""
    out = subprocess.run(
        ["git", "-C", str(bare), "for-each-ref", "--format=%(objectname) %(refname)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out


def bare_file(bare: Path, key: str) -> bytes | None:
    """A blob's raw bytes at the tip of `main` (None if absent)."""
    r = subprocess.run(
        ["git", "-C", str(bare), "cat-file", "blob", f"main:{key}"], capture_output=True
    )
    return r.stdout if r.returncode == 0 else None


def bare_ls(bare: Path, prefix: str = "") -> list[str]:
    r = subprocess.run(
        [
            "git",
            "-C",
            str(bare),
            "ls-tree",
            "-r",
            "--name-only",
            "main",
            *([prefix] if prefix else []),
        ],
        capture_output=True,
        text=True,
    )
    return [x for x in r.stdout.split("\n") if x] if r.returncode == 0 else []


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CCE_SYNC_TOKEN", "GITHUB_TOKEN", "CCE_SIGNING_KEY")
    }
    env.update(extra or {})
    return env


def store_files(root: Path) -> dict[str, bytes]:
    """The knowledge dir's files and bytes, minus the writer lock file (`.lock` holds
    only the last writer's name: a refused pull that waited its turn may touch it)."""
    kdir = root / ".cce" / "knowledge"
    return {p.name: p.read_bytes() for p in kdir.iterdir() if p.is_file() and p.name != ".lock"}


def knowledge_files(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under root/.cce/knowledge/ (lock files, search index and vectors
    included): its bytes and mtime — equal before and after means nothing was written."""
    kd = root / ".cce" / "knowledge"
    return {
        str(p.relative_to(kd)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(kd.rglob("*"))
        if p.is_file()
    }
