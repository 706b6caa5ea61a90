"""A code repository's cache id, from its git `origin` (docs/spec/sync.md §3.4).

`cce sync init` records `sync.repo_id` from `--repo-id`, or else from the normalised
`origin` URL of the project's git repository. The id names the code-artifact key space
(`hash/2.3/<repo_id>/…`), so it must be the same string the reference derives:
`host__org__repo` — scheme, user info (a token included) and a trailing `.git`
dropped, path segments joined by `__`, any character outside `[A-Za-z0-9._-]` as `_`.
"""

from __future__ import annotations

import os
import re

from cce_knowledge.core.rustcompat import rs_trim

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def normalize_repo_id(origin: str) -> str:
    """`https://github.com/acme/billing.git`, `git@github.com:acme/billing.git` and
    `ssh://git@github.com/acme/billing` all give `github.com__acme__billing`; a bare
    path keeps its segments (`acme/bill ing` → `acme__bill_ing`)."""
    s = rs_trim(origin).removesuffix(".git")
    host, path = "", s
    _, sep, rest = s.partition("://")
    if sep:
        authority, _, path = rest.partition("/")
        host = authority.rpartition("@")[2]
    elif ":" in s:
        auth, _, after = s.partition(":")
        # scp-like `[user@]host:path`, unless it reads as a plain path.
        if "@" in auth or ("/" not in auth and not after.startswith("/")):
            host, path = auth.rpartition("@")[2], after
    parts = ([host] if host else []) + [seg for seg in path.split("/") if seg]
    return _UNSAFE.sub("_", "__".join(parts))


def origin_repo_id(root: str | os.PathLike[str]) -> str | None:
    """The normalised `origin` of the git repository at `root`, or None (not a
    repository, no `origin`, git missing). Never prints: the URL may carry a token."""
    # Lazy: GitPython costs ~60-130 ms; only `sync init` without --repo-id needs it.
    import git

    try:
        url = git.Git(os.fspath(root)).execute(
            ["git", "remote", "get-url", "origin"], with_exceptions=True
        )
    except (git.GitCommandError, git.GitCommandNotFound, OSError):
        return None
    repo_id = normalize_repo_id(str(url))
    return repo_id or None
