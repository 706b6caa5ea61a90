"""Last-commit metadata for files in a git work tree (GitPython), and web URLs.

One `git log --name-only` pass over the tree gives every file's last commit, instead
of one `git log -1 -- path` per file (which is quadratic on large doc trees).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

_SCP = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")


@dataclass(slots=True, frozen=True)
class FileCommit:
    sha: str
    updated_at: str  # committer date, UTC, YYYY-MM-DDTHH:MM:SSZ


@dataclass(slots=True)
class GitInfo:
    toplevel: Path
    commits: dict[str, FileCommit]  # toplevel-relative posix path → last commit
    web_url: str | None
    #: A shallow clone (`actions/checkout` fetches one commit by default): the history
    #: stops at the `boundary` commits, so every file older than them is attributed to
    #: one of them — a date and a commit that are not the file's.
    shallow: bool = False
    boundary: frozenset[str] = frozenset()

    def updated_at(self, commit: FileCommit) -> str | None:
        """The file's last-change date, or None when the history is cut at that commit
        (a shallow clone's boundary): left out rather than wrong."""
        return None if commit.sha in self.boundary else commit.updated_at

    def lookup(self, path: Path) -> tuple[str, FileCommit] | None:
        try:
            rel = path.resolve().relative_to(self.toplevel).as_posix()
        except ValueError:
            return None
        c = self.commits.get(rel)
        return (rel, c) if c else None

    def file_url(self, rel: str, commit: FileCommit) -> str | None:
        if not self.web_url:
            return None
        blob = "/-/blob/" if "gitlab" in self.web_url else "/blob/"
        return f"{self.web_url}{blob}{commit.sha}/{quote(rel, safe='/')}"


def web_url(remote: str | None) -> str | None:
    """https web URL of a GitHub-like remote (https, ssh:// or scp-style), else None.

    Credentials in the URL are dropped: they must never reach a feed.
    """
    if not remote:
        return None
    remote = remote.strip()
    if remote.startswith(("https://", "http://", "ssh://", "git://")):
        parts = urlsplit(remote)
        host = parts.hostname
        path = parts.path
        if not host or parts.scheme == "http":
            return None
    else:
        m = _SCP.match(remote)
        if not m or remote.startswith(("/", ".", "file:")):
            return None
        host, path = m.group(1), m.group(2)
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    if path.count("/") < 1 or not host or host in ("localhost", "127.0.0.1"):
        return None
    return f"https://{host}/{path}"


def git_info(root: Path, *, remote_url: str | None = None) -> GitInfo | None:
    """Metadata for the work tree holding `root`, or None if it is not in one."""
    # Lazy: GitPython costs ~60-130 ms; only called for a work tree.
    import git

    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    try:
        if repo.working_tree_dir is None:
            return None
        top = Path(repo.working_tree_dir).resolve()
        try:
            scope = root.resolve().relative_to(top).as_posix() or "."
        except ValueError:
            return None
        if remote_url is None:
            try:
                remote_url = repo.remotes.origin.url if repo.remotes else None
            except (AttributeError, ValueError):
                remote_url = None
        try:
            raw = repo.git.log(
                "--format=%x01%H %ct", "--name-only", "-z", "--no-renames", "HEAD", "--", scope
            )
        except git.GitCommandError:  # no commits yet
            raw = ""
        shallow = repo.git.rev_parse("--is-shallow-repository").strip() == "true"
        return GitInfo(
            top,
            _parse_log(raw),
            web_url(remote_url),
            shallow=shallow,
            boundary=_boundary(Path(repo.common_dir)) if shallow else frozenset(),
        )
    finally:
        repo.close()


def _boundary(git_dir: Path) -> frozenset[str]:
    """The commits a shallow clone's history stops at (`$GIT_DIR/shallow`)."""
    try:
        text = (git_dir / "shallow").read_text(encoding="ascii", errors="replace")
    except OSError:
        return frozenset()
    return frozenset(ln.strip() for ln in text.splitlines() if ln.strip())


def shallow_refusal(shown_root: str) -> str:
    """Why a docs extract refuses a shallow clone, and the two ways out."""
    return (
        f"{shown_root} is in a shallow git clone: its history is cut, so every file older "
        "than the cut would get the cut's date and commit (wrong `updated_at`, and a new "
        "snapshot on every commit). Fetch the whole history — `fetch-depth: 0` on "
        "actions/checkout, or `git fetch --unshallow` — or pass --allow-shallow to leave "
        "`updated_at` out of those files"
    )


def _parse_log(raw: str) -> dict[str, FileCommit]:
    out: dict[str, FileCommit] = {}
    for chunk in raw.split("\x01"):
        if not chunk:
            continue
        head, _, rest = chunk.partition("\x00")
        sha, _, ts = head.strip().partition(" ")
        stamp = dt.datetime.fromtimestamp(int(ts), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        fc = FileCommit(sha, stamp)
        for name in rest.lstrip("\n").split("\x00"):
            name = name.strip("\n")
            if name and name not in out:  # newest first: the first sighting wins
                out[name] = fc
    return out
