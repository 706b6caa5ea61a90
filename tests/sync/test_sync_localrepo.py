"""In-place reads of a local cache repository (sync/local_read.py) against real git.

Every read is compared with what `git cat-file` says about the same repository, in
loose and packed form; anything unusual must come back None (the clone path decides).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cce_knowledge.sync.local_read import LocalRepo, lfs_pointer, local_path, open_local

ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@localhost",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@localhost",
}


def git(*args: str, cwd: Path) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True).stdout


def git_blob(repo: Path, key: str) -> bytes | None:
    r = subprocess.run(
        ["git", "cat-file", "blob", f"HEAD:{key}"], cwd=repo, env=ENV, capture_output=True
    )
    return r.stdout if r.returncode == 0 else None


def make_repo(tmp: Path, files: dict[str, bytes], *, bare: bool = True) -> Path:
    work = tmp / "work"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work)
    for key, data in files.items():
        p = work / key
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "files", "--allow-empty", cwd=work)
    if not bare:
        return work
    dest = tmp / "cache.git"
    git("clone", "-q", "--bare", str(work), str(dest), cwd=tmp)
    return dest


FILES = {
    "knowledge/v1/fx/current": b"0123456789abcdef\n",
    "knowledge/v1/fx/corpus.json": b'{"schema": "cce.knowledgemeta/v1"}\n',
    "knowledge/v1/other/current": b"fedcba9876543210\n",
    ".gitattributes": b"*.cck filter=lfs diff=lfs merge=lfs -text\n",
    "top": b"",
}


@pytest.mark.parametrize("packed", [False, True])
def test_blobs_match_git_loose_and_packed(tmp_path: Path, packed: bool) -> None:
    repo = make_repo(tmp_path, FILES)
    if packed:
        git("gc", "-q", "--aggressive", "--prune=now", cwd=repo)
        assert not (repo / "refs/heads/main").exists(), "the ref now lives in packed-refs"
        assert b"refs/heads/main" in (repo / "packed-refs").read_bytes()
    local = open_local(repo.as_uri())
    assert local is not None and local.branch == "main"
    for key, data in FILES.items():
        assert local.blob(key) == data == git_blob(repo, key)
    for missing in ("knowledge/v1/fx", "knowledge/v1/none/current", "top/x", "", "nope"):
        assert local.blob(missing) is None, missing


def test_a_working_repository_and_a_plain_path_are_read_too(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, FILES, bare=False)
    for url in (str(repo), repo.as_uri()):
        local = open_local(url)
        assert local is not None
        assert local.blob("knowledge/v1/fx/current") == FILES["knowledge/v1/fx/current"]


def test_only_regular_files_are_blobs(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work)
    (work / "run.sh").write_bytes(b"#!/bin/sh\n")
    (work / "run.sh").chmod(0o755)
    os.symlink("run.sh", work / "link")
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "m", cwd=work)
    local = open_local(str(work))
    assert local is not None
    assert local.blob("run.sh") == b"#!/bin/sh\n"
    assert local.blob("link") is None  # a symlink is not an artifact: the clone decides


def test_misses_are_none_never_errors(tmp_path: Path) -> None:
    assert open_local("https://example.invalid/cache.git") is None
    assert open_local("relative/path") is None
    assert open_local(str(tmp_path / "absent")) is None
    empty = tmp_path / "empty.git"
    git("init", "-q", "--bare", "-b", "main", str(empty), cwd=tmp_path)
    local = open_local(str(empty))
    assert local is not None and local.blob("knowledge/v1/fx/current") is None
    # A damaged object: gitdb's error becomes a miss.
    (tmp_path / "d").mkdir()
    repo = make_repo(tmp_path / "d", FILES)
    loose = list((repo / "objects").glob("??/*"))
    assert loose, "a local bare clone keeps loose objects"
    for obj in loose:
        obj.chmod(0o644)
        obj.write_bytes(b"not zlib")
    damaged = open_local(str(repo))
    assert damaged is not None and damaged.blob("knowledge/v1/fx/current") is None
    # A ref that is not a plain sha.
    (repo / "refs/heads/main").write_text("ref: refs/heads/other\n")
    assert LocalRepo(str(repo), repo, "main").blob("top") is None


def test_a_sha256_repository_is_left_to_git(tmp_path: Path) -> None:
    repo = tmp_path / "s.git"
    r = subprocess.run(
        ["git", "init", "-q", "--bare", "--object-format=sha256", str(repo)], capture_output=True
    )
    if r.returncode != 0:
        pytest.skip("this git cannot create SHA-256 repositories")
    assert open_local(str(repo)) is None


def test_lfs_pointer_and_local_path() -> None:
    oid = "a" * 64
    ptr = f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize 12\n".encode()
    assert lfs_pointer(ptr) == (oid, 12)
    assert lfs_pointer(ptr.replace(b"size 12", b"size x")) is None
    assert lfs_pointer(b"plain") is None
    assert local_path("file:///tmp/a%20b.git") == Path("/tmp/a b.git")
    assert local_path("/srv/cache.git") == Path("/srv/cache.git")
    assert local_path("ssh://host/cache.git") is None


_NAME = st.text(alphabet="abcdefghij-_.0123456789", min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..") and not s.startswith(".git")
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    tree=st.dictionaries(
        st.lists(_NAME, min_size=1, max_size=3).map("/".join), st.binary(max_size=300),
        min_size=1, max_size=8,
    ),
    packed=st.booleans(),
)  # fmt: skip
def test_random_trees_read_like_git(
    tmp_path_factory: pytest.TempPathFactory, tree: dict[str, bytes], packed: bool
) -> None:
    # Drop paths that are a prefix directory of another path (a file and a directory
    # cannot share a name).
    keys = sorted(tree)
    files = {k: tree[k] for k in keys if not any(o.startswith(k + "/") for o in keys if o != k)}
    tmp = tmp_path_factory.mktemp("rt")
    repo = make_repo(tmp, files)
    if packed:
        git("gc", "-q", "--prune=now", cwd=repo)
    local = open_local(str(repo))
    assert local is not None
    for key in files:
        assert local.blob(key) == git_blob(repo, key)
        assert local.blob(key + "x") == git_blob(repo, key + "x")


def test_the_pull_module_does_not_import_gitpython() -> None:
    # The in-place pull must not pay GitPython's import; the clone path imports it.
    code = "import sys, cce_knowledge.sync.pull; print('git' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
