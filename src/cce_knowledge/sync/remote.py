"""Remote resolution and credential handling (docs/spec/sync.md §3.3, issue #4 item 6).

Better than the reference on secrets: a token given in the remote URL's userinfo or
in `CCE_SYNC_TOKEN` / `GITHUB_TOKEN` never reaches `.cce/config`, stdout/stderr, the
clone's `.git/config` or its directory name. The URL is split into a clean,
printable URL and a `Credentials` value; git receives the secret only through the
environment (an `http.extraheader` passed as `GIT_CONFIG_*` variables), scoped to
the remote's scheme+host.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from cce_knowledge.config.reader import load_knowledge_sync_config, load_sync_config
from cce_knowledge.core.errors import SyncError

TOKEN_ENV_VARS = ("CCE_SYNC_TOKEN", "GITHUB_TOKEN")

NO_REMOTE_KNOWLEDGE = (
    "no sync remote configured — run `cce sync init --remote <git-url>`, set "
    "`knowledge.sync.remote` in .cce/config, or pass --remote <url>"
)
NO_REMOTE_SYNC = (
    "no sync remote configured — run `cce sync init --remote <git-url>` or pass `--remote <url>`"
)

# scheme://userinfo@host — userinfo runs to the last '@' before the path.
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/\s]*)@")


@dataclass(frozen=True)
class Remote:
    """A remote as git should see it (`url`, no secrets) plus how to authenticate."""

    url: str
    username: str | None = None
    secret: str | None = field(default=None, repr=False)

    @property
    def display(self) -> str:
        return self.url

    def secrets(self) -> list[str]:
        """Strings that must never appear in output (raw and percent-decoded forms)."""
        out: list[str] = []
        if self.secret:
            out.append(self.secret)
        return out

    def git_env(self) -> dict[str, str]:
        """`GIT_CONFIG_*` entries that authenticate HTTP(S) requests to this remote only."""
        if not self.secret or not self.url.lower().startswith(("http://", "https://")):
            return {}
        parts = urlsplit(self.url)
        scope = urlunsplit((parts.scheme, parts.netloc, "/", "", ""))
        user = self.username or "x-access-token"
        basic = base64.b64encode(f"{user}:{self.secret}".encode()).decode("ascii")
        return {f"http.{scope}.extraheader": f"AUTHORIZATION: basic {basic}"}


def split_userinfo(url: str) -> tuple[str, str | None, str | None]:
    """(url without userinfo, username, password). Non-URL remotes pass through."""
    m = _USERINFO.match(url)
    if not m:
        return url, None, None
    userinfo = m.group("userinfo")
    clean = m.group("scheme") + url[m.end() :]
    if ":" in userinfo:
        user, pw = userinfo.split(":", 1)
        return clean, unquote(user) or None, unquote(pw)
    if not m.group("scheme").lower().startswith("http"):
        # `ssh://git@host/...`: a user name, not a secret; git needs it in the URL.
        return url, None, None
    # Over HTTP(S) a lone userinfo such as `https://TOKEN@host/...` is a token.
    return clean, None, unquote(userinfo) or None


def make_remote(url: str, env: dict[str, str] | None = None) -> Remote:
    """Split credentials out of `url`; fall back to the token environment variables."""
    environ = os.environ if env is None else env
    clean, user, pw = split_userinfo(url)
    if pw is None:
        for var in TOKEN_ENV_VARS:
            tok = environ.get(var)
            if tok:
                pw = tok
                break
    if user is not None and pw is None:
        # A plain `user@` (e.g. ssh://git@host) is not a secret; keep it in the URL.
        return Remote(url=url)
    return Remote(url=clean, username=user, secret=pw)


def scrub(text: str, secrets: list[str] | tuple[str, ...] = ()) -> str:
    """Remove URL userinfo and any known secret from a message (git stderr included)."""
    out = _USERINFO.sub(lambda m: m.group("scheme") + "***@", text)
    for s in secrets:
        if s and len(s) >= 4:
            out = out.replace(s, "***")
    for var in TOKEN_ENV_VARS:
        tok = os.environ.get(var)
        if tok and len(tok) >= 4:
            out = out.replace(tok, "***")
    return out


def slug(remote: Remote) -> str:
    """The working clone's directory name: derived from the credential-free URL only."""
    return hashlib.sha256(remote.url.encode("utf-8")).hexdigest()[:16]


def sync_home() -> Path:
    home = os.environ.get("CCE_HOME")
    if home:
        return Path(home) / "sync"
    h = os.environ.get("HOME")
    if h:
        return Path(h) / ".cce" / "sync"
    return Path(".cce") / "sync"


def clone_dir(remote: Remote) -> Path:
    return sync_home() / slug(remote)


def resolve_remote(root: str | os.PathLike[str], cli: str | Remote | None) -> Remote:
    """`knowledge push|pull` chain: --remote, knowledge.sync.remote, sync.remote (§3.3)."""
    if isinstance(cli, Remote):
        return cli
    if cli is not None:
        return make_remote(cli)
    ks = load_knowledge_sync_config(root)
    if ks.remote:
        return make_remote(ks.remote)
    sc = load_sync_config(root)
    if sc.remote:
        return make_remote(sc.remote)
    raise SyncError(NO_REMOTE_KNOWLEDGE)


def resolve_listing_remote(root: str | os.PathLike[str], cli: str | None) -> Remote:
    """`sync list` / `sync pull --all` chain: --remote, else sync.remote only."""
    if cli is not None:
        return make_remote(cli)
    sc = load_sync_config(root)
    if sc.remote:
        return make_remote(sc.remote)
    raise SyncError(NO_REMOTE_SYNC)
