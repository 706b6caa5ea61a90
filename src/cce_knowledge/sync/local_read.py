"""Reading a cache repository that is on this machine, in place (pull's fast path).

A `file://` or path remote already has on disk everything a pull needs: the branch
tip, two small blobs (`current`, the artifact's LFS pointer) and the LFS object the
pointer names. Cloning first would only copy refs to read them back, so pull reads
them where they are:

* objects through gitdb — the object database GitPython itself is built on (loose
  objects, packs, alternates), imported in ~10 ms instead of GitPython's ~50 ms and
  with no `git` process per blob;
* the branch from `HEAD` and `refs/heads/…` or `packed-refs`;
* the LFS object as a file under `lfs/objects/` (no git-lfs binary needed).

Anything unusual — a SHA-256 repository, a missing object, a symbolic or odd ref, a
read error — returns None and the caller takes the working-clone path through
GitPython and git, which owns every error message. Content is never trusted here:
the `.cck` checksum is verified by the import either way.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from cce_knowledge.core.errors import SyncError
from cce_knowledge.core.untrusted import file_kind, read_regular

LFS_POINTER_PREFIX = b"version https://git-lfs"

_HEX40 = re.compile(rb"[0-9a-f]{40}")


def local_path(url: str) -> Path | None:
    """The directory of a `file://` or absolute-path remote; None for network remotes."""
    if url.startswith("file://"):
        return Path(unquote(urlsplit(url).path))
    return Path(url) if os.path.isabs(url) else None


def head_branch(git_dir: Path) -> str | None:
    """The branch `git_dir/HEAD` names (`ref: refs/heads/<branch>`); None if detached,
    missing or unreadable."""
    try:
        head = read_regular(git_dir / "HEAD").decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    prefix = "ref: refs/heads/"
    if not head.startswith(prefix):
        return None
    return head[len(prefix) :] or None


def lfs_pointer(blob: bytes) -> tuple[str, int] | None:
    """(sha256 oid, size) of a git-lfs pointer blob, else None."""
    if not blob.startswith(LFS_POINTER_PREFIX) or len(blob) >= 1024:
        return None
    oid: str | None = None
    size: int | None = None
    for line in blob.decode("ascii", "replace").split("\n"):
        if line.startswith("oid sha256:"):
            cand = line[len("oid sha256:") :]
            if len(cand) == 64 and all(c in "0123456789abcdef" for c in cand):
                oid = cand
        elif line.startswith("size ") and line[5:].isdigit():
            size = int(line[5:])
    return (oid, size) if oid is not None and size is not None else None


def lfs_in_place_enabled() -> bool:
    """CCE_LFS_IN_PLACE=0 sends every LFS read through `git lfs fetch` (tests and the
    benchmark cover both routes)."""
    return os.environ.get("CCE_LFS_IN_PLACE", "1") != "0"


def local_lfs_object(url: str, oid: str, size: int) -> Path | None:
    """The LFS object `oid` of a remote on this machine, if it is there with the
    pointer's size (a bare repo keeps it in `lfs/`, a working repo in `.git/lfs/`);
    None for network remotes or with CCE_LFS_IN_PLACE=0."""
    base = local_path(url)
    if base is None or not lfs_in_place_enabled():
        return None
    for store in (base / "lfs" / "objects", base / ".git" / "lfs" / "objects"):
        obj = store / oid[:2] / oid[2:4] / oid
        if has_size(obj, size):
            return obj
    return None


def has_size(path: Path, size: int) -> bool:
    """`path` is a regular file of `size` bytes; False when absent. Anything else there
    (a FIFO, a device, a symlink) is refused: opening it could hang or read elsewhere."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        raise SyncError(
            f"the cache's LFS object {path} is {file_kind(st.st_mode)}, not a regular file — "
            "refusing to read it (someone tampered with the cache's LFS store)"
        )
    return st.st_size == size


class LocalRepo:
    """One branch of a git repository on this machine, read without a clone.

    Every miss is None (see the module docstring)."""

    def __init__(self, url: str, git_dir: Path, branch: str) -> None:
        self.url = url
        self.git_dir = git_dir
        self.branch = branch
        self._db: Any = None
        self._root_tree: bytes | bool | None = False  # False = not resolved yet

    def _tip(self) -> bytes | None:
        """The branch tip's binary sha from the loose ref or `packed-refs`."""
        ref = f"refs/heads/{self.branch}"
        try:
            text = read_regular(self.git_dir / ref).strip()
        except OSError:
            text = b""
        if text:
            return bytes.fromhex(text.decode()) if _HEX40.fullmatch(text) else None
        try:
            packed = read_regular(self.git_dir / "packed-refs")
        except OSError:
            return None
        want = ref.encode()
        for line in packed.split(b"\n"):
            sha, _, name = line.partition(b" ")
            if name == want and _HEX40.fullmatch(sha):
                return bytes.fromhex(sha.decode())
        return None

    def _object(self, binsha: bytes, kind: bytes) -> bytes | None:
        try:
            if self._db is None:
                # Lazy: gitdb costs ~20-60 ms; only a local remote read in place needs it.
                from gitdb import GitDB

                self._db = GitDB(str(self.git_dir / "objects"))
            stream = self._db.stream(binsha)
            if stream.type != kind:
                return None
            data: bytes = stream.read()
        except Exception:  # gitdb raises several types (BadObject, OSError, zlib.error)
            return None
        return data

    def _tree(self) -> bytes | None:
        if self._root_tree is False:
            self._root_tree = None
            tip = self._tip()
            commit = self._object(tip, b"commit") if tip else None
            if commit is not None and commit.startswith(b"tree ") and len(commit) >= 45:
                head = commit[5:45]
                if _HEX40.fullmatch(head):
                    self._root_tree = bytes.fromhex(head.decode())
        return self._root_tree if isinstance(self._root_tree, bytes) else None

    def _blob_sha(self, key: str) -> bytes | None:
        sha = self._tree()
        parts = key.split("/")
        for i, name in enumerate(parts):
            if sha is None:
                return None
            tree = self._object(sha, b"tree")
            if tree is None:
                return None
            last = i == len(parts) - 1
            sha = _tree_entry(tree, name.encode(), want_tree=not last)
        return sha

    def blob(self, key: str) -> bytes | None:
        """The blob at `key` (a `/`-separated path) on the branch tip."""
        sha = self._blob_sha(key)
        return None if sha is None else self._object(sha, b"blob")

    def small_blob(self, key: str, limit: int) -> bytes | None:
        """Like `blob`, but a blob larger than `limit` raises SyncError before it is
        inflated (a statement or signature from a hostile cache)."""
        sha = self._blob_sha(key)
        if sha is None:
            return None
        try:
            size = int(self._db.info(sha).size)
        except Exception:  # gitdb raises several types; the read below decides
            size = 0
        if size > limit:
            raise SyncError(f"{key}: {size} bytes, larger than {limit}: refused")
        return self._object(sha, b"blob")

    def entry_id(self, key: str) -> str | None:
        """The hex object id of the regular file at `key` on the branch tip (its blob is
        not read)."""
        sha = self._blob_sha(key)
        return None if sha is None else sha.hex()

    def dir_names(self, key: str) -> list[str] | None:
        """The names of the trees directly under the tree at `key` (None when absent or
        unreadable)."""
        sha = self._tree()
        for name in key.split("/"):
            tree = self._object(sha, b"tree") if sha is not None else None
            if tree is None:
                return None
            sha = _tree_entry(tree, name.encode(), want_tree=True)
        tree = self._object(sha, b"tree") if sha is not None else None
        if tree is None:
            return None
        return [n.decode("utf-8", "replace") for n in _tree_names(tree, b"40000")]

    def artifact_in_place(self, key: str) -> bytes | Path | None:
        """The artifact's bytes or its LFS object's path; None when not readable here."""
        blob = self.blob(key)
        if blob is None:
            return None
        ptr = lfs_pointer(blob)
        if ptr is None:
            return blob
        return local_lfs_object(self.url, *ptr)


def _tree_entry(tree: bytes, name: bytes, *, want_tree: bool) -> bytes | None:
    """The sha of `name` in a raw tree object (`<mode> <name>\\0<20-byte sha>`…), if it
    is a tree (`want_tree`) or a regular file."""
    pos, n = 0, len(tree)
    while pos < n:
        sp = tree.find(b" ", pos)
        nul = tree.find(b"\0", sp + 1)
        if sp < 0 or nul < 0 or nul + 21 > n:
            return None
        mode, entry = tree[pos:sp], tree[sp + 1 : nul]
        if entry == name:
            ok = mode == b"40000" if want_tree else mode in (b"100644", b"100755")
            return tree[nul + 1 : nul + 21] if ok else None
        pos = nul + 21
    return None


def _tree_names(tree: bytes, want_mode: bytes) -> list[bytes]:
    """The names of a raw tree object's entries with mode `want_mode`."""
    names: list[bytes] = []
    pos, n = 0, len(tree)
    while pos < n:
        sp = tree.find(b" ", pos)
        nul = tree.find(b"\0", sp + 1)
        if sp < 0 or nul < 0 or nul + 21 > n:
            break
        if tree[pos:sp] == want_mode:
            names.append(tree[sp + 1 : nul])
        pos = nul + 21
    return names


def open_local(url: str) -> LocalRepo | None:
    """A `LocalRepo` for a remote that is a SHA-1 git repository on this machine, else
    None."""
    base = local_path(url)
    if base is None:
        return None
    for git_dir in (base, base / ".git"):
        branch = head_branch(git_dir)
        if branch and (git_dir / "objects").is_dir():
            if _sha256_repo(git_dir):
                return None
            return LocalRepo(url, git_dir, branch)
    return None


def _sha256_repo(git_dir: Path) -> bool:
    try:
        config = read_regular(git_dir / "config").decode("utf-8", "replace")
    except OSError:
        return True  # unreadable: let git decide
    return re.search(r"(?im)^\s*objectformat\s*=\s*sha256\b", config) is not None
