"""pytest fixtures for the sync tests (imported explicitly by each test module)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import git
import pytest

from cce_knowledge.cli.main import main
from tests.helpers.paths import TEST_IDENTITY
from tests.helpers.sync import make_bare


@dataclass(frozen=True)
class Link:
    """A symlink to commit into the cache (its target as git stores it)."""

    target: str


@dataclass
class SyncEnv:
    tmp: Path
    bare: Path
    url: str
    monkeypatch: pytest.MonkeyPatch

    def home(self, name: str) -> None:
        """Switch CCE_HOME (a different machine / a fresh working clone)."""
        self.monkeypatch.setenv("CCE_HOME", str(self.tmp / name))

    def root(self, name: str) -> Path:
        p = self.tmp / name
        p.mkdir(parents=True, exist_ok=True)
        return p

    def seed(self, files: dict[str, bytes | Link | None], message: str = "seed") -> None:
        """Commit files straight into the bare repo (None deletes, a `Link` commits a
        symlink), bypassing cce."""
        work = self.tmp / "seed-work"
        if not work.exists():
            repo = git.Repo.clone_from(self.url, work)
        else:
            repo = git.Repo(work)
            repo.git.fetch("origin")
            if repo.git.ls_remote("origin", "refs/heads/main"):
                repo.git.checkout("-B", "main", "origin/main")
        for key, data in files.items():
            p = work / key
            if data is None:
                repo.git.rm("-q", "--ignore-unmatch", "--", key)
                continue
            p.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(data, Link):
                if p.is_symlink() or p.is_file():
                    p.unlink()
                p.symlink_to(data.target)
            else:
                p.write_bytes(data)
            repo.git.add("--", key)
        # The test sets its own identity; the machine may have none.
        repo.git.commit("-q", "-m", message, env=TEST_IDENTITY)
        repo.git.push("-q", "origin", "HEAD:refs/heads/main")


@pytest.fixture(name="sync_env")
def sync_env_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SyncEnv:
    monkeypatch.setenv("CCE_HOME", str(tmp_path / "home-a"))
    monkeypatch.delenv("CCE_SYNC_TOKEN", raising=False)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    bare = tmp_path / "cache.git"
    return SyncEnv(tmp_path, bare, make_bare(bare), monkeypatch)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        rc = main(list(argv))
    except SystemExit as e:  # argparse usage errors
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def push_cli(
    env: SyncEnv, capsys: pytest.CaptureFixture[str], root: Path, *extra: str, corpus: str = "kn"
) -> tuple[int, str, str]:
    """`cce knowledge push` of `root`'s store to the env's cache, as the CLI runs it."""
    return cli(
        capsys, "knowledge", "push", "--corpus", corpus, "--remote", env.url, "--dir", str(root),
        *extra,
    )  # fmt: skip
