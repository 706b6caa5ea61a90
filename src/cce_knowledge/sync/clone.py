"""The git cache transport: a program-owned working clone driven through GitPython.

docs/spec/sync.md §2.5–2.8. History stays linear: a publish is one commit; a lost
push race resets onto the fresh remote tip and re-applies the change (never merge,
never rebase), at most five attempts; afterwards the remote is read back.

Differences from the reference that do not change the wire:
* the clone is guarded by an flock, so two commands sharing a clone never interleave;
* a clone is created in a temp directory and renamed, so a killed clone leaves nothing;
* an LFS artifact is read as a file for the one key wanted -- a local remote's object
  in place, else `git lfs fetch` of that key (the working tree never smudges,
  `GIT_LFS_SKIP_SMUDGE=1`) -- instead of checking out and downloading every artifact
  of every corpus; a pull from a local remote skips this clone entirely (local_read.py);
* credentials come from the environment only (see remote.py) and every git error
  is scrubbed before it is shown.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import git

from cce_knowledge.core import progress
from cce_knowledge.core.atomic import file_lock
from cce_knowledge.core.errors import SyncError
from cce_knowledge.core.rustcompat import rs_trim
from cce_knowledge.core.untrusted import read_regular, shown
from cce_knowledge.sync import keys as K
from cce_knowledge.sync.local_read import (
    LFS_POINTER_PREFIX,
    has_size,
    head_branch,
    lfs_pointer,
    local_lfs_object,
)
from cce_knowledge.sync.parts import GitParts
from cce_knowledge.sync.remote import Remote, clone_dir, explain_git_error, scrub, sync_home

IDENTITY = ("-c", "user.name=cce-sync", "-c", "user.email=cce-sync@localhost")
MAX_PUSH_ATTEMPTS = 5
CCK_ATTR_LINE = "*.cck filter=lfs diff=lfs merge=lfs -text"
CCE_ATTR_LINE = "*.cce filter=lfs diff=lfs merge=lfs -text"
PARTS_SUFFIX = ".parts"
#: The local ref `fast_commit` builds on before pushing it to the remote branch.
_FAST_REF = "refs/cce/fast-commit"

#: A blob to publish: bytes, or a mapped spool (a big artifact is never read into memory).
Blob = bytes | mmap.mmap


def lfs_available() -> bool:
    return shutil.which("git-lfs") is not None


class GitFailed(SyncError):
    """A git command failed; the message is already scrubbed."""


class UnsafeCacheTree(SyncError):
    """The cache holds a symlink, submodule or other non-regular entry where push
    would write or delete: refused, because following it would leave the clone."""


_TREE_KINDS = {"120000": "a symbolic link", "160000": "a submodule (gitlink)"}


def _unsafe(verb: str, path: str, kind: str) -> UnsafeCacheTree:
    return UnsafeCacheTree(
        f"refusing to {verb} the cache: `{shown(path)}` is {kind} in the cache repository "
        "(push only writes and deletes regular files inside plain directories; someone with "
        "write access to the cache put it there — remove it from the cache)"
    )


def _paths_touched(keys: Iterable[str]) -> dict[str, bool]:
    """Every path a write of `keys` goes through: path -> True for the file itself,
    False for a directory above it."""
    paths: dict[str, bool] = {}
    for key in keys:
        parts = key.split("/")
        for i in range(1, len(parts)):
            paths.setdefault("/".join(parts[:i]), False)
        paths[key] = True
    return paths


class GitCache:
    """An opened working clone of one remote. Use `open_cache()`."""

    def __init__(self, remote: Remote, directory: Path) -> None:
        self.remote = remote
        self.dir = directory
        self.branch = "main"
        self._lfs = lfs_available()
        self._git = git.Git()
        self._env = self._build_env()

    # ------------------------------------------------------------ plumbing

    def _build_env(self) -> dict[str, str]:
        cfg: dict[str, str] = {"commit.gpgsign": "false"}
        if self._lfs:
            # Filters via the environment, so no global `git lfs install` is needed.
            cfg.update(
                {
                    "filter.lfs.clean": "git-lfs clean -- %f",
                    "filter.lfs.smudge": "git-lfs smudge -- %f",
                    "filter.lfs.process": "git-lfs filter-process",
                    "filter.lfs.required": "true",
                }
            )
        cfg.update(self.remote.git_env())
        env = {"GIT_TERMINAL_PROMPT": "0", "GIT_LFS_SKIP_SMUDGE": "1", "GCM_INTERACTIVE": "never"}
        base = int(os.environ.get("GIT_CONFIG_COUNT", "0") or 0)
        for i, (k, v) in enumerate(cfg.items()):
            env[f"GIT_CONFIG_KEY_{base + i}"] = k
            env[f"GIT_CONFIG_VALUE_{base + i}"] = v
        env["GIT_CONFIG_COUNT"] = str(base + len(cfg))
        return env

    def scrub(self, text: str) -> str:
        """`text` fit to show: credentials removed in every encoding, a refused redirect
        explained."""
        return scrub(explain_git_error(text), self.remote.secrets())

    def run(
        self,
        *args: str,
        check: bool = True,
        cwd: Path | None = None,
        istream: BinaryIO | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> tuple[int, bytes, str]:
        """Run `git -C <dir> <args>`; (status, stdout bytes, stderr text)."""
        where = cwd if cwd is not None else self.dir
        cmd = ["git", *IDENTITY, "-C", str(where), *args]
        try:
            status, out, err = self._git.execute(
                cmd,
                with_extended_output=True,
                with_exceptions=False,
                stdout_as_string=False,
                strip_newline_in_stdout=False,
                env={**self._env, **(extra_env or {})},
                istream=istream,
            )
        except git.GitCommandNotFound as e:  # pragma: no cover - git is a hard requirement
            raise GitFailed(f"git is not installed: {e}") from e
        err_text = err.decode("utf-8", "replace") if isinstance(err, bytes) else str(err or "")
        if check and status != 0:
            raise GitFailed(self.scrub(f"git {' '.join(args)} failed: {err_text.strip()}"))
        return status, out if isinstance(out, bytes) else bytes(out or b""), err_text

    def ok(self, *args: str) -> bool:
        return self.run(*args, check=False)[0] == 0

    # ------------------------------------------------------------ open / heal

    def _clone(self) -> None:
        parent = self.dir.parent
        if self.dir.exists():
            # A directory without `.git` is debris of a killed clone: program-owned, discard.
            shutil.rmtree(self.dir, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{self.dir.name}.clone.", dir=parent))
        # No checkout: reads go through `origin/<branch>` objects, and a write resets
        # onto origin first anyway; skipping it skips LFS's filter and hook processes.
        status, _, err = self.run(
            "clone", "--quiet", "--no-checkout", self.remote.url, str(tmp / "c"),
            check=False, cwd=parent,
        )  # fmt: skip
        if status != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise GitFailed(
                self.scrub(
                    f"could not clone remote {self.remote.display}: git clone --quiet "
                    f"{self.remote.display} {self.dir} failed: {err.strip()}"
                )
            )
        os.replace(tmp / "c", self.dir)
        shutil.rmtree(tmp, ignore_errors=True)

    def _heal(self, for_write: bool) -> None:
        gd = self.dir / ".git"
        if (gd / "rebase-merge").exists() or (gd / "rebase-apply").exists():
            if not self.ok("rebase", "--abort"):
                if not self.ok("rebase", "--quit"):
                    raise GitFailed(
                        f"the sync clone at {self.dir} was left mid-rebase and could not "
                        "recover (delete the directory to reset it)"
                    )
        # We hold the clone's lock, so a leftover index.lock is from a killed process.
        with contextlib.suppress(FileNotFoundError):
            (gd / "index.lock").unlink()
        for ref_lock in gd.glob("refs/**/*.lock"):
            with contextlib.suppress(OSError):
                ref_lock.unlink()
        # Keep origin pointing at the credential-free URL (never a token).
        self.run("remote", "set-url", "origin", self.remote.url, check=False)
        if not self.ok("symbolic-ref", "-q", "HEAD"):
            b = self._guess_branch()
            self.run("checkout", "--quiet", "--force", "-B", b, check=False)
        if not for_write:
            return  # reads never touch the working tree
        status, _, err = self.run("reset", "--hard", "--quiet", check=False)
        if status != 0 and self.ok("rev-parse", "--verify", "--quiet", "HEAD"):
            raise GitFailed(
                self.scrub(f"could not restore a clean sync clone at {self.dir}: {err.strip()}")
            )

    def _head_branch(self) -> str:
        # `.git/HEAD` of a non-detached clone is `ref: refs/heads/<branch>`: reading it
        # saves a git process on every open; anything else asks git.
        branch = head_branch(self.dir / ".git")
        if branch:
            return branch
        _, out, _ = self.run("symbolic-ref", "--short", "HEAD", check=False)
        return out.decode().strip() or "main"

    def _guess_branch(self) -> str:
        _, out, _ = self.run("symbolic-ref", "--short", "refs/remotes/origin/HEAD", check=False)
        name = out.decode().strip()
        if name.startswith("origin/"):
            return name[len("origin/") :]
        _, out, _ = self.run("for-each-ref", "--format=%(refname:short)", "refs/heads", check=False)
        heads = [h for h in out.decode().split("\n") if h]
        return heads[0] if len(heads) == 1 else "main"

    def open(self, *, for_write: bool) -> None:
        cloned = not (self.dir / ".git").is_dir()
        if cloned:
            self._clone()
        else:
            self._heal(for_write)
        self.branch = self._head_branch()
        if for_write and self._lfs:
            # Installs the pre-push hook that uploads LFS objects; failures are not fatal.
            self.run("lfs", "install", "--local", check=False)
        if for_write:
            self._sparse_without_parts()
        if not cloned:  # a fresh clone has just fetched
            self.fetch()

    def _sparse_without_parts(self) -> None:
        """Keep published parts out of the working tree: a write resets the checkout
        onto the remote tip, and a parted corpus is thousands of blobs that only git's
        object store needs (parts are written and removed with `fast_commit`)."""
        info = self.dir / ".git" / "info"
        want = "/*\n!/knowledge/*/*/parts/\n"
        try:
            info.mkdir(parents=True, exist_ok=True)
            path = info / "sparse-checkout"
            if not path.is_file() or path.read_text(encoding="utf-8") != want:
                _write_no_follow(path, want.encode())
        except OSError as e:
            raise SyncError(f"cannot configure the sync clone at {self.dir}: {e}") from e
        self.run("config", "core.sparseCheckout", "true", check=False)
        self.run("config", "core.sparseCheckoutCone", "false", check=False)

    # ------------------------------------------------------------ reads

    def git_parts(self, corpus_id: str) -> GitParts:
        """The corpus's published parts as the last fetch saw them."""
        return GitParts(self.dir / ".git", self.origin, K.corpus_prefix(corpus_id), self._env_all())

    def _env_all(self) -> dict[str, str]:
        return {**os.environ, **self._env}

    def part_names(self, corpus_id: str, ref: str | None = None) -> set[str]:
        """The names of the parts published for the corpus at `ref` (the remote tip)."""
        parts = GitParts(self.dir / ".git", ref or self.origin, K.corpus_prefix(corpus_id))
        parts.env = self._env_all()
        return set(parts.entries()) if self.origin_exists() or ref else set()

    def list_parts_indexes(self, corpus_id: str) -> list[str]:
        if not self.origin_exists():
            return []
        names = self.ls_tree_names("--name-only", self.origin, K.corpus_prefix(corpus_id) + "/")
        return sorted(n for n in names if n.endswith(PARTS_SUFFIX))

    @property
    def origin(self) -> str:
        return f"origin/{self.branch}"

    def fetch(self) -> None:
        # Offline => keep reading the last-fetched state (the reference's behaviour).
        self.run("fetch", "--quiet", "origin", check=False)

    def origin_exists(self) -> bool:
        return self.ok("rev-parse", "--verify", "--quiet", self.origin)

    def has(self, key: str, ref: str | None = None) -> bool:
        return self.ok("cat-file", "-e", f"{ref or self.origin}:{key}")

    def blob_id(self, key: str) -> str | None:
        """The hex object id of `key`'s blob on the remote branch (None when absent)."""
        status, out, _ = self.run(
            "rev-parse", "--verify", "--quiet", f"{self.origin}:{key}", check=False
        )
        oid = out.decode("ascii", "replace").strip()
        return oid if status == 0 and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", oid) else None

    def read_blob(self, key: str, ref: str | None = None) -> bytes:
        return self.run("cat-file", "blob", f"{ref or self.origin}:{key}")[1]

    def read_small(self, key: str, limit: int) -> bytes | None:
        """A small plain blob (a statement, a signature), None when absent; one larger
        than `limit` is refused before it is read (a hostile cache cannot make us
        buffer a huge file)."""
        status, out, _ = self.run("cat-file", "-s", f"{self.origin}:{key}", check=False)
        if status != 0:
            return None
        size = int(out.strip() or b"0")
        if size > limit:
            raise SyncError(f"{key}: {size} bytes, larger than {limit}: refused")
        return self.read_blob(key)

    def read_text(self, key: str) -> str:
        return rs_trim(self.read_blob(key).decode("utf-8", "replace"))

    def get(self, key: str) -> bytes:
        """An artifact's bytes, LFS-smudged when the blob is a pointer."""
        if not self.has(key):
            raise SyncError(cache_miss(key))
        data = self.read_blob(key)
        if data.startswith(LFS_POINTER_PREFIX) and len(data) < 1024 and self._lfs:
            with tempfile.TemporaryFile() as f:
                f.write(data)
                f.seek(0)
                status, out, err = self.run(
                    "lfs", "smudge", "--", key, check=False, istream=f,
                    extra_env={"GIT_LFS_SKIP_SMUDGE": "0"},
                )  # fmt: skip
            if status != 0:
                raise SyncError(self.scrub(f"could not read {key} after checkout: {err.strip()}"))
            return out
        return data

    def artifact_source(self, key: str) -> bytes | Path:
        """An artifact's bytes, or for an LFS-stored key the path of a file holding them.

        The file is the local remote's own LFS object read in place (a file:// or path
        remote, like `git clone --local` sharing objects), else the object fetched into
        the clone's LFS store — never a copy through a pipe. Content is verified by the
        caller (the `.cck` checksum), so a stale or wrong file cannot slip through."""
        status, blob, _ = self.run("cat-file", "blob", f"{self.origin}:{key}", check=False)
        if status != 0:
            raise SyncError(cache_miss(key))
        ptr = lfs_pointer(blob)
        if ptr is None:
            return blob
        oid, size = ptr
        # A local remote's object is read in place, with or without git-lfs installed
        # (unless CCE_LFS_IN_PLACE=0, which always goes through `git lfs fetch`).
        obj = local_lfs_object(self.remote.url, oid, size)
        if obj is not None:
            return obj
        if not self._lfs:
            return blob  # the pointer itself: the import then names the problem
        status, out, _ = self.run("rev-parse", "--verify", "--quiet", self.origin, check=False)
        if status == 0:
            self.run("lfs", "fetch", "origin", out.decode().strip(), "-I", key, check=False)
            obj = self.dir / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid
            if has_size(obj, size):
                return obj
        return self.get(key)  # smudge through a pipe, with its error message

    def artifact_size(self, key: str) -> int | None:
        """The size of an artifact's content without reading it: the blob's size, or
        for an LFS pointer the size it names. None when the key is missing."""
        status, out, _ = self.run("cat-file", "-s", f"{self.origin}:{key}", check=False)
        text = out.decode("ascii", "replace").strip()
        if status != 0 or not text.isdigit():
            return None
        size = int(text)
        if size < 1024:
            ptr = lfs_pointer(self.read_blob(key))
            if ptr is not None:
                return ptr[1]
        return size

    def read_artifact(self, key: str) -> bytes:
        """`artifact_source` as bytes (a file read, not a pipe through git-lfs)."""
        src = self.artifact_source(key)
        if isinstance(src, bytes):
            return src
        try:
            return read_regular(src)
        except OSError as e:
            raise SyncError(f"cannot read {key} from the LFS store: {e}") from e

    def ls_tree_names(self, *args: str) -> list[str]:
        status, out, _ = self.run("ls-tree", *args, check=False)
        if status != 0:
            return []
        return [ln for ln in out.decode("utf-8", "replace").split("\n") if ln]

    def list_corpora(self) -> list[str]:
        if not self.origin_exists():
            return []
        names = self.ls_tree_names("-d", "--name-only", self.origin, f"{K.PREFIX}/")
        return sorted({n.rsplit("/", 1)[-1] for n in names})

    def list_cck(self, corpus_id: str) -> list[str]:
        if not self.origin_exists():
            return []
        names = self.ls_tree_names("-r", "--name-only", self.origin, K.corpus_prefix(corpus_id))
        return sorted({n for n in names if n.endswith(".cck")})

    def cck_bytes(self, corpus_id: str) -> int:
        """Sum of the LFS-aware sizes of a corpus's `.cck` keys."""
        if not self.origin_exists():
            return 0
        total = 0
        for line in self.ls_tree_names("-r", "-l", self.origin, K.corpus_prefix(corpus_id)):
            meta, _, path = line.partition("\t")
            f = meta.split()
            if len(f) < 4 or f[1] != "blob" or not path.endswith(".cck"):
                continue
            size = int(f[3])
            if size <= 512:
                blob = self.run("cat-file", "blob", f[2], check=False)[1]
                if blob.startswith(LFS_POINTER_PREFIX):
                    for pl in blob.decode("utf-8", "replace").split("\n"):
                        if pl.startswith("size "):
                            with contextlib.suppress(ValueError):
                                size = int(pl[5:].strip())
                            break
            total += size
        return total

    def first_added(self, corpus_id: str) -> list[str]:
        if not self.origin_exists():
            return []
        _, out, _ = self.run(
            "log", "--reverse", "--format=", "--name-only", "--diff-filter=A",
            self.origin, "--", K.corpus_prefix(corpus_id), check=False,
        )  # fmt: skip
        seen: dict[str, None] = {}
        for ln in out.decode("utf-8", "replace").split("\n"):
            ln = ln.strip()
            if ln and ln not in seen:
                seen[ln] = None
        return list(seen)

    # ------------------------------------------------------------ writes

    def check_tree(self, keys: Iterable[str], *, verb: str, ref: str = "HEAD") -> None:
        """Refuse (UnsafeCacheTree) unless every path to each key is a plain directory
        and the key itself is absent or a regular file — in the tree at `ref` and on
        disk. The checkout puts a committed symlink on disk, and a write through it
        would land wherever it points."""
        paths = _paths_touched(keys)
        status, out, _ = self.run("ls-tree", "-z", ref, "--", *paths, check=False)
        if status == 0:
            for entry in out.split(b"\0"):
                meta, _, raw = entry.partition(b"\t")
                name = raw.decode("utf-8", "replace")
                if name not in paths:
                    continue
                mode = meta.split(b" ", 1)[0].decode("ascii", "replace")
                if mode in _TREE_KINDS:
                    raise _unsafe(verb, name, _TREE_KINDS[mode])
                if paths[name] and mode not in ("100644", "100755"):
                    raise _unsafe(verb, name, "a directory")
                if not paths[name] and mode != "40000" and mode != "040000":
                    raise _unsafe(verb, name, "a file where a directory belongs")
        for name, leaf in paths.items():
            try:
                st = os.lstat(self.dir / name)
            except FileNotFoundError:
                continue
            except OSError as e:
                raise SyncError(f"cannot inspect {shown(name)} in the sync clone: {e}") from e
            if stat.S_ISLNK(st.st_mode):
                raise _unsafe(verb, name, "a symbolic link")
            if leaf and not stat.S_ISREG(st.st_mode):
                raise _unsafe(verb, name, "not a regular file")
            if not leaf and not stat.S_ISDIR(st.st_mode):
                raise _unsafe(verb, name, "a file where a directory belongs")

    def reset_onto_origin(self) -> None:
        if self.origin_exists():
            status, _, err = self.run(
                "checkout", "--quiet", "--force", "-B", self.branch, self.origin, check=False
            )
            if status != 0:
                raise GitFailed(
                    self.scrub(f"could not reset the sync clone onto {self.origin}: {err.strip()}")
                )
            self.run("clean", "-fdq", check=False)

    def _commit_staged(self, message: str) -> None:
        if self.ok("diff", "--cached", "--quiet"):
            return
        self.run("commit", "-q", "-m", message)

    def transact(self, apply: Callable[[], None], message: str, label: str | None = None) -> None:
        """fetch → reset → apply+commit → push, re-applying on a fresh tip up to 5 times.

        With a `label`, the commit (LFS hashing included) and the upload (git push,
        LFS objects first) report progress as `{label}: commit` / `{label}: LFS upload`."""
        self.fetch()
        self.reset_onto_origin()
        with progress.phase(f"{label}: commit") if label else contextlib.nullcontext():
            apply()
            self._commit_staged(message)
        with progress.phase(f"{label}: LFS upload") if label else contextlib.nullcontext():
            self._push_retrying(apply, message)

    def _push_retrying(self, apply: Callable[[], None], message: str) -> None:
        last = ""
        for _attempt in range(MAX_PUSH_ATTEMPTS):
            if not self.ok("rev-parse", "--verify", "--quiet", "HEAD"):
                return  # nothing was ever committed: nothing to push
            status, _, err = self.run(
                "push", "--quiet", "origin", f"HEAD:refs/heads/{self.branch}", check=False
            )
            if status == 0:
                self.fetch()
                return
            last = self.scrub(
                f"git push --quiet origin HEAD:refs/heads/{self.branch} failed: {err.strip()}"
            )
            self.fetch()
            if self.origin_exists():
                self.reset_onto_origin()
                apply()
                self._commit_staged(message)
        raise GitFailed(
            f"push to {self.origin} failed after {MAX_PUSH_ATTEMPTS} attempts (lost a push race "
            f"{MAX_PUSH_ATTEMPTS} times or the remote kept refusing): {last}"
        )

    def _write_entries(
        self, entries: list[tuple[str, Blob]], keep_if_present: frozenset[str] = frozenset()
    ) -> None:
        self.check_tree([k for k, _ in entries], verb="write to")
        written: list[str] = []
        for key, data in entries:
            if key in keep_if_present and self.has(key, "HEAD"):
                continue  # the tip already carries these exact bytes (checked by the caller)
            path = self.dir / key
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise SyncError(f"cannot create {key} dir: {e}") from e
            try:
                _write_no_follow(path, data)
                # Back-date it: a file as new as the index is "racily clean", and git
                # would re-run it through git-lfs's clean filter (re-hashing the whole
                # artifact) at the commit. The clone is ours; only git reads mtimes.
                past = time.time() - 10
                os.utime(path, (past, past))
            except OSError as e:
                raise SyncError(f"cannot write {key}: {e}") from e
            written.append(key)
        if written:
            # Back-dated files can match their old index entries stat for stat (same
            # size, same second, same inode): drop the entries so `add` hashes the
            # new bytes. One `add` for all keys: each run starts git-lfs's filter
            # process and refreshes the index (~0.2 s apiece on a 40 MB artifact).
            self.run("rm", "--cached", "-q", "--ignore-unmatch", "--", *written)
            self.run("add", "--", *written)

    def put_many(
        self,
        entries: list[tuple[str, Blob]],
        message: str,
        keep_if_present: frozenset[str] = frozenset(),
        label: str | None = None,
    ) -> str:
        """Publish `entries` as one commit, then verify the remote carries them. Returns sha.

        Keys in `keep_if_present` are not rewritten when the tip already has them: the
        caller has verified those bytes are identical (an unchanged re-publish), and
        re-adding a large LFS artifact would only re-hash it. Checked again on every
        race retry, so a tip that lost the key gets it back."""
        self.transact(lambda: self._write_entries(entries, keep_if_present), message, label)
        status, out, _ = self.run("rev-parse", "HEAD", check=False)
        if status != 0:
            raise SyncError("push verification failed: cannot resolve the just-pushed commit")
        sha = out.decode().strip()
        self.verify_carried(entries, sha)
        return sha

    def _carries(self, ref: str, key: str, data: Blob) -> bool:
        if key.endswith((".cck", ".cce", ".vec")):
            return self.has(key, ref)
        st, out, _ = self.run("cat-file", "blob", f"{ref}:{key}", check=False)
        return st == 0 and out == bytes(data)

    def verify_carried(self, entries: list[tuple[str, Blob]], sha: str) -> None:
        self.fetch()
        for key, data in entries:
            if self._carries(self.origin, key, data):
                continue
            if not self._carries(sha, key, data):
                raise SyncError(
                    f"push verification failed: neither {self.origin} nor the pushed commit {sha} "
                    f"carries {key} with the just-pushed content — fetch and inspect {self.origin}; "
                    "local stores are unaffected; re-run the push to retry"
                )
            if not self.ok("merge-base", "--is-ancestor", sha, self.origin):
                raise SyncError(
                    f"push verification failed: the pushed commit {sha} carrying {key} never "
                    f"landed on {self.origin} — nothing was published; fetch and inspect "
                    f"{self.origin}; local stores are unaffected; re-run the push to retry"
                )

    def fast_commit(
        self,
        writes: Callable[[set[str]], Iterable[tuple[str, bytes]]],
        deletes: list[str],
        message: str,
        label: str | None = None,
    ) -> int:
        """One commit on the remote tip written with `git fast-import` (no working tree,
        no index): blobs added and paths removed, then pushed, at most 5 attempts, each
        on the fresh tip. `writes(present)` yields the (key, bytes) to add, given the part
        names the tip already carries (those are neither written nor uploaded again).
        Returns the number of blobs written by the attempt that landed."""
        last = ""
        for _attempt in range(MAX_PUSH_ATTEMPTS):
            self.fetch()
            base = None
            if self.origin_exists():
                base = self.run("rev-parse", self.origin)[1].decode().strip()
            written = self._fast_import(base, writes, deletes, message, label)
            if written is None:
                return 0  # nothing to change
            with progress.phase(f"{label}: upload") if label else contextlib.nullcontext():
                status, _, err = self.run(
                    "push", "--quiet", "origin", f"{_FAST_REF}:refs/heads/{self.branch}",
                    check=False, extra_env={"GIT_LFS_SKIP_PUSH": "1"},
                )  # fmt: skip
            if status == 0:
                self.fetch()
                return written
            last = self.scrub(f"git push --quiet origin HEAD:refs/heads/{self.branch} failed: "
                              f"{err.strip()}")  # fmt: skip
        raise GitFailed(
            f"push to {self.origin} failed after {MAX_PUSH_ATTEMPTS} attempts (lost a push race "
            f"{MAX_PUSH_ATTEMPTS} times or the remote kept refusing): {last}"
        )

    def _fast_import(
        self,
        base: str | None,
        writes: Callable[[set[str]], Iterable[tuple[str, bytes]]],
        deletes: list[str],
        message: str,
        label: str | None,
    ) -> int | None:
        present: set[str] = set()
        if base is not None:
            status, out, _ = self.run("ls-tree", "-r", "--name-only", "-z", base, "--",
                                      "knowledge/", check=False)  # fmt: skip
            if status == 0:
                present = {p for p in out.decode("utf-8", "replace").split("\0") if p}
        gone = [d for d in deletes if d in present]
        proc = subprocess.Popen(
            ["git", "-C", str(self.dir), "-c", "pack.compression=1", "fast-import", "--quiet",
             "--force", "--done"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=self._env_all(),
        )  # fmt: skip
        assert proc.stdin is not None and proc.stderr is not None
        paths: list[str] = []
        names = {p.rsplit("/", 1)[-1] for p in present}
        try:
            with progress.phase(f"{label}: write parts") if label else contextlib.nullcontext():
                for key, data in writes(names):
                    if key in present:
                        continue
                    paths.append(key)
                    proc.stdin.write(b"blob\nmark :%d\ndata %d\n" % (len(paths), len(data)))
                    proc.stdin.write(data)
                    proc.stdin.write(b"\n")
            if not paths and not gone:
                proc.stdin.write(b"done\n")
                return None
            msg = message.encode()
            proc.stdin.write(
                b"commit %s\ncommitter cce-sync <cce-sync@localhost> %d +0000\ndata %d\n%s\n"
                % (_FAST_REF.encode(), int(time.time()), len(msg), msg)
            )
            if base is not None:
                proc.stdin.write(b"from %s\n" % base.encode())
            for i, key in enumerate(paths, 1):
                proc.stdin.write(b"M 100644 :%d %s\n" % (i, key.encode()))
            for key in gone:
                proc.stdin.write(b"D %s\n" % key.encode())
            proc.stdin.write(b"\ndone\n")
        finally:
            with contextlib.suppress(OSError):
                proc.stdin.close()
            err = proc.stderr.read().decode("utf-8", "replace")
            status = proc.wait()
        if status != 0:
            raise GitFailed(self.scrub(f"git fast-import failed: {err.strip()}"))
        return len(paths)

    def remove_many(self, keys: list[str], message: str) -> None:
        if not keys:
            return

        def apply() -> None:
            self.check_tree(keys, verb="delete from")
            self.run("rm", "-q", "--ignore-unmatch", "--", *keys)

        self.transact(apply, message)

    def ensure_attribute(self, line: str, needle: str, message: str) -> bool:
        """Commit `line` to `.gitattributes` unless it already mentions `needle`. True if added."""
        return self.ensure_attributes({needle: line}, message)

    def ensure_attributes(self, lines: dict[str, str], message: str) -> bool:
        """Commit, in one commit, each `lines[needle]` that `.gitattributes` does not
        already mention by its needle. True if anything was added."""
        self.fetch()
        self.reset_onto_origin()
        path = self.dir / ".gitattributes"

        def current_text() -> str:
            self.check_tree([".gitattributes"], verb="write to")
            try:
                return path.read_text(encoding="utf-8")
            except FileNotFoundError:
                return ""
            except (OSError, UnicodeDecodeError) as e:
                raise SyncError(f"cannot write .gitattributes: {e}") from e

        def missing(text: str) -> list[str]:
            return [line for needle, line in lines.items() if needle not in text]

        if not missing(current_text()):
            return False
        if self._lfs:
            self.run("lfs", "install", "--local", check=False)

        def apply() -> None:
            text = current_text()
            add = missing(text)
            if not add:
                return
            if text and not text.endswith("\n"):
                text += "\n"
            try:
                _write_no_follow(path, (text + "".join(f"{ln}\n" for ln in add)).encode("utf-8"))
            except OSError as e:
                raise SyncError(f"cannot write .gitattributes: {e}") from e
            self.run("add", "--", ".gitattributes")

        self.transact(apply, message)
        return True


def cache_miss(key: str) -> str:
    return f"cache miss: {shown(key)} not found on the remote"


def _write_no_follow(path: Path, data: Blob) -> None:
    """Replace a regular file's bytes; a symlink at `path` is an error, never followed
    (`check_tree` has refused one already: this is the second lock on the door)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


@contextlib.contextmanager
def open_cache(
    remote: Remote, *, for_write: bool = False, lock_timeout: float | None = None
) -> Iterator[GitCache]:
    """Open (clone or heal) the working clone for `remote`, holding its lock.

    `lock_timeout=None` waits for another command using the same clone to finish.
    """
    d = clone_dir(remote)
    home = sync_home()
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SyncError(f"cannot create sync home: {e}") from e
    busy = "the sync working clone is busy (another cce command holds it)"
    with file_lock(home / f".{d.name}.lock", busy=busy, timeout=lock_timeout, error=SyncError):
        cache = GitCache(remote, d)
        cache.open(for_write=for_write)
        yield cache
