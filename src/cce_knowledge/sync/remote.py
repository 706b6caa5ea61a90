"""Remote resolution and credential handling (docs/spec/sync.md §3.3, issue #4 item 6).

Better than the reference on secrets: a token given in the remote URL's userinfo or
in `CCE_SYNC_TOKEN` / `GITHUB_TOKEN` never reaches `.cce/config`, stdout/stderr, the
clone's `.git/config` or its directory name. The URL is split into a clean,
printable URL and a `Credentials` value; git receives the secret only through the
environment (an `http.extraheader` passed as `GIT_CONFIG_*` variables), scoped to
the remote's scheme+host.

A credential goes only to the origin it was given for (docs/security.md):
* authenticated requests never follow an HTTP redirect (`http.followRedirects=false`):
  git would send the header to whatever origin the redirect names;
* a token is never sent over plain `http://` (loopback included) unless
  `CCE_ALLOW_INSECURE_HTTP=1`; without it nothing is sent and the error names the
  variable;
* error text is scrubbed of the token in every encoding it may come back in
  (core/secrets.py): raw, any letter case, percent-encoded, JSON-escaped, base64
  at any offset and inside the basic-auth base64 of `user:token`.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from cce_knowledge.config.settings import Settings, cce_home
from cce_knowledge.core.errors import SyncError
from cce_knowledge.core.secrets import EMBED_API_KEY_ENV
from cce_knowledge.core.secrets import scrub as scrub_forms
from cce_knowledge.core.secrets import secret_forms as core_secret_forms

TOKEN_ENV_VARS = ("CCE_SYNC_TOKEN", "GITHUB_TOKEN")
#: The explicit opt-in for sending a token over plain http:// (e.g. a loopback test server).
ALLOW_INSECURE_ENV = "CCE_ALLOW_INSECURE_HTTP"
DEFAULT_USER = "x-access-token"

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
    #: Where the secret came from ("the remote URL" or a variable's name), for messages.
    secret_source: str = "the remote URL"

    @property
    def display(self) -> str:
        return self.url

    def secrets(self) -> list[str]:
        """Strings that must never appear in output: the secret in every encoding we send."""
        return secret_forms(self.secret, self.username) if self.secret else []

    def git_env(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        """`GIT_CONFIG_*` entries that authenticate HTTP(S) requests to this remote only.

        Raises SyncError, before anything is sent, for a token over plain http://
        without the CCE_ALLOW_INSECURE_HTTP=1 opt-in."""
        if not self.secret or not self.url.lower().startswith(("http://", "https://")):
            return {}
        parts = urlsplit(self.url)
        env = os.environ if environ is None else environ
        if parts.scheme.lower() == "http" and env.get(ALLOW_INSECURE_ENV) != "1":
            raise SyncError(
                f"refusing to send the token from {self.secret_source} over plain http:// to "
                f"{self.url} (it would cross the network unencrypted); nothing was sent. Use "
                f"an https:// remote, or set {ALLOW_INSECURE_ENV}=1 to allow it for a host "
                "you trust (such as a loopback test server)"
            )
        scope = urlunsplit((parts.scheme, parts.netloc, "/", "", ""))
        user = self.username or DEFAULT_USER
        basic = base64.b64encode(f"{user}:{self.secret}".encode()).decode("ascii")
        return {
            f"http.{scope}.extraheader": f"AUTHORIZATION: basic {basic}",
            # git re-sends extra headers to wherever a redirect points: never follow one.
            "http.followRedirects": "false",
        }


def secret_forms(secret: str, username: str | None = None) -> list[str]:
    """`secret` as it may come back in an error (core.secrets.secret_forms), with the
    base64 of the basic-auth `user:secret` pair we send."""
    return core_secret_forms(secret, {username or DEFAULT_USER, DEFAULT_USER})


_REDIRECT_REFUSED = re.compile(r"returned error: 30[12378]\b")


def explain_git_error(text: str) -> str:
    """`text` plus why, when git refused a redirect we told it not to follow."""
    if _REDIRECT_REFUSED.search(text):
        return (
            f"{text} (the remote answered with an HTTP redirect: cce never follows a "
            "redirect while it holds a credential, which would go to the other origin; "
            "configure the final URL as the remote)"
        )
    return text


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
    source = "the remote URL"
    if pw is None:
        for var in TOKEN_ENV_VARS:
            tok = environ.get(var)
            if tok:
                pw, source = tok, var
                break
    if user is not None and pw is None:
        # A plain `user@` (e.g. ssh://git@host) is not a secret; keep it in the URL.
        return Remote(url=url)
    return Remote(url=clean, username=user, secret=pw, secret_source=source)


def scrub(text: str, secrets: list[str] | tuple[str, ...] = ()) -> str:
    """Remove URL userinfo and any known secret from a message (git stderr included)."""
    return remove_secrets(_USERINFO.sub(lambda m: m.group("scheme") + "***@", text), secrets)


def remove_secrets(text: str, secrets: list[str] | tuple[str, ...] = ()) -> str:
    """`text` with `secrets`, the token variables' and the embedding key's values
    (every form, any letter case) replaced by ***."""
    forms = [s for s in secrets if s and len(s) >= 4]
    for var in TOKEN_ENV_VARS:
        tok = os.environ.get(var)
        if tok:
            forms.extend(secret_forms(tok))
    key = os.environ.get(EMBED_API_KEY_ENV)
    if key:
        forms.extend(core_secret_forms(key))
    return scrub_forms(text, forms)


def slug(remote: Remote) -> str:
    """The working clone's directory name: derived from the credential-free URL only."""
    return hashlib.sha256(remote.url.encode("utf-8")).hexdigest()[:16]


def sync_home() -> Path:
    home = cce_home()
    return (home if home is not None else Path(".cce")) / "sync"


def clone_dir(remote: Remote) -> Path:
    return sync_home() / slug(remote)


def resolve_remote(settings: Settings, cli: str | Remote | None) -> Remote:
    """`knowledge push|pull` chain: --remote, knowledge.sync.remote, sync.remote (§3.3)."""
    if isinstance(cli, Remote):
        return cli
    url = cli if cli is not None else settings.knowledge.sync.remote or settings.sync.remote
    if url is None:
        raise SyncError(NO_REMOTE_KNOWLEDGE)
    return make_remote(url)


def resolve_listing_remote(settings: Settings, cli: str | Remote | None) -> Remote:
    """`sync list` / `sync pull --all` chain: --remote, else sync.remote only."""
    if isinstance(cli, Remote):
        return cli
    url = cli if cli is not None else settings.sync.remote
    if url is None:
        raise SyncError(NO_REMOTE_SYNC)
    return make_remote(url)


@dataclass(frozen=True, slots=True)
class RemoteCurrent:
    """A corpus' published `current` (None when unknown), its `pushed_at` from
    corpus.json when readable, and why `current` is unknown."""

    current: str | None = None
    pushed_at: str | None = None
    problem: str | None = None
