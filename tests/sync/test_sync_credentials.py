"""A credential goes only to the origin it was given for, and never back out in text.

Real git against a loopback git smart-HTTP server (`git http-backend`, see
tests/helpers/git_http.py): a redirect to a second port must not carry the token
(issue 12 item 4); error bodies that echo the Authorization header are scrubbed in every
encoding we send (item 7); a token never goes over plain http:// without
CCE_ALLOW_INSECURE_HTTP=1 (item 7).
"""

from __future__ import annotations

import base64
import shutil
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cce_knowledge.sync.remote import ALLOW_INSECURE_ENV, make_remote, scrub, secret_forms
from tests.helpers.git_http import GitHttpServer, git_http_server
from tests.helpers.sync import CURATED, index
from tests.helpers.sync_env import SyncEnv, cli

pytestmark = pytest.mark.slow

# Characters that change under percent-encoding and base64 padding that is not a multiple
# of three, so every form differs from the raw token.
TOKEN = "ghs_S3cret/Tok+en=Value~0123456789"


def _every_form() -> list[str]:
    # Computed here as well, so a bug in secret_forms cannot hide a leak.
    return [
        *secret_forms(TOKEN, "x-access-token"),
        base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode(),
        urllib.parse.quote(TOKEN, safe=""),
        TOKEN,
    ]


def _assert_clean(text: str) -> None:
    for form in _every_form():
        assert form not in text, (form, text)


@pytest.fixture
def seeded(sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]) -> SyncEnv:
    """A cache holding corpus `c`, pushed over file:// (no token involved)."""
    root = sync_env.root("builder")
    index(root, CURATED.read_bytes())
    rc, _, err = cli(
        capsys, "knowledge", "push", "--corpus", "c", "--remote", sync_env.url, "--dir", str(root)
    )
    assert rc == 0, err
    sync_env.home("home-consumer")
    return sync_env


@pytest.fixture
def served(seeded: SyncEnv) -> Iterator[GitHttpServer]:
    with git_http_server(seeded.bare.parent) as srv:
        yield srv


def _project(env: SyncEnv, remote: str) -> Path:
    """A project whose committed .cce/config names `remote` (the untrusted-config case)."""
    root = env.root("proj")
    (root / ".cce").mkdir(exist_ok=True)
    (root / ".cce" / "config").write_text(
        f"sync:\n  remote: {remote}\nknowledge:\n  sync:\n    remote: {remote}\n    corpus_id: c\n"
    )
    return root


def _commands(env: SyncEnv, remote: str) -> dict[str, list[str]]:
    """Every command that talks to the remote, each with the remote given explicitly."""
    proj = _project(env, remote)
    pushroot = env.root("pusher")
    if not (pushroot / ".cce" / "knowledge").exists():
        index(pushroot, CURATED.read_bytes())
    return {
        "push": ["knowledge", "push", "--corpus", "c", "--remote", remote, "--dir", str(pushroot)],
        "pull": ["knowledge", "pull", "--corpus", "c", "--remote", remote, "--dir", str(proj)],
        "sync list": ["sync", "list", "--remote", remote],
        "sync init": ["sync", "init", "--remote", remote, "--dir", str(proj)],
        "sync pull --all": ["sync", "pull", "--all", "--remote", remote, "--into", str(proj)],
    }


# ---------------------------------------------------------------- the server is real


def test_sync_list_over_loopback_http_with_the_opt_in(
    served: GitHttpServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Positive control: with the opt-in the token reaches the configured origin, and
    real git reads the cache through it."""
    monkeypatch.setenv(ALLOW_INSECURE_ENV, "1")
    monkeypatch.setenv("CCE_SYNC_TOKEN", TOKEN)
    rc, out, err = cli(capsys, "sync", "list", "--remote", f"{served.base}/cache.git")
    assert rc == 0, err
    assert "\nc          598e1b3891572bbb          1" in out, out
    want = "basic " + base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    assert served.authorizations() and set(served.authorizations()) == {want}
    _assert_clean(out + err)


# ---------------------------------------------------------------- item 4: redirects


@pytest.mark.parametrize("how", ["env", "url"])
@pytest.mark.parametrize("command", ["sync list", "pull", "sync pull --all", "push"])
def test_token_never_follows_a_redirect_to_another_origin(
    seeded: SyncEnv,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    how: str,
) -> None:
    monkeypatch.setenv(ALLOW_INSECURE_ENV, "1")
    with (
        git_http_server(seeded.bare.parent) as b,
        git_http_server(seeded.bare.parent, redirect_to=b.base) as a,
    ):
        if how == "env":
            monkeypatch.setenv("CCE_SYNC_TOKEN", TOKEN)
            remote = f"{a.base}/cache.git"
        else:
            remote = f"http://x-access-token:{urllib.parse.quote(TOKEN, safe='')}@127.0.0.1:{a.port}/cache.git"
        argv = _commands(seeded, remote)[command]
        rc, out, err = cli(capsys, *argv)
        assert a.requests, "the configured origin was asked"
        assert a.authorizations(), "the configured origin got the credential"
        assert b.authorizations() == [], "the redirect target must never see the credential"
        assert rc == 1
        assert "redirect" in err and "final URL" in err, err
        _assert_clean(out + err)


@pytest.mark.skipif(shutil.which("git-lfs") is None, reason="needs git-lfs")
def test_lfs_api_redirect_to_another_origin_gets_no_credential(
    seeded: SyncEnv, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """git serves the clone from the configured origin; only git-lfs's batch API
    redirects to a second port. git-lfs scopes the header by URL: the second origin is
    asked, without the credential."""
    monkeypatch.setenv(ALLOW_INSECURE_ENV, "1")
    monkeypatch.setenv("CCE_SYNC_TOKEN", TOKEN)
    with (
        git_http_server(seeded.bare.parent) as b,
        git_http_server(seeded.bare.parent, redirect_to=b.base) as a,
    ):
        a.redirect_only = "/info/lfs/"
        proj = seeded.root("lfs-consumer")
        remote = f"{a.base}/cache.git"
        rc, out, err = cli(
            capsys, "knowledge", "pull", "--corpus", "c", "--remote", remote, "--dir", str(proj)
        )
        batch_a = [r for r in a.requests if "/info/lfs/" in r.path]
        assert batch_a and all("authorization" in r.headers for r in batch_a)
        assert b.authorizations() == []
    assert rc == 1  # the second origin has no LFS API: nothing installed
    assert not (proj / ".cce" / "knowledge" / "current").exists()
    _assert_clean(out + err)


# ---------------------------------------------------------------- item 7: error bodies


@pytest.mark.parametrize("status", [403, 500])
@pytest.mark.parametrize("command", ["push", "pull", "sync list", "sync init", "sync pull --all"])
def test_error_body_echoing_the_credential_is_scrubbed(
    sync_env: SyncEnv,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    status: int,
) -> None:
    monkeypatch.setenv(ALLOW_INSECURE_ENV, "1")
    monkeypatch.setenv("CCE_SYNC_TOKEN", TOKEN)
    with git_http_server(sync_env.bare.parent, fail_status=status) as srv:
        argv = _commands(sync_env, f"{srv.base}/cache.git")[command]
        rc, out, err = cli(capsys, *argv)
        assert srv.authorizations(), "the server saw (and echoed) the credential"
    assert rc == 1
    # git shows the body: the echo is there, its secret is not.
    assert "denied: Authorization=basic ***" in err, err
    assert "user=x-access-token&token=***" in err, err
    _assert_clean(out + err)


# ---------------------------------------------------------------- item 7: plain http


@pytest.mark.parametrize("command", ["push", "pull", "sync list", "sync init", "sync pull --all"])
@pytest.mark.parametrize("var", ["CCE_SYNC_TOKEN", "GITHUB_TOKEN"])
def test_no_token_over_plain_http_without_the_opt_in(
    served: GitHttpServer,
    seeded: SyncEnv,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    var: str,
) -> None:
    monkeypatch.delenv(ALLOW_INSECURE_ENV, raising=False)
    monkeypatch.setenv(var, TOKEN)
    argv = _commands(seeded, f"{served.base}/cache.git")[command]
    rc, out, err = cli(capsys, *argv)
    assert rc == 1
    assert served.requests == [], "nothing at all is sent"
    assert ALLOW_INSECURE_ENV in err and "plain http://" in err and var in err, err
    _assert_clean(out + err)


def test_committed_config_naming_plain_http_gets_no_token(
    served: GitHttpServer,
    seeded: SyncEnv,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A `.cce/config` from the repository (untrusted) names an http:// host: the
    ambient GITHUB_TOKEN is not sent there."""
    monkeypatch.delenv(ALLOW_INSECURE_ENV, raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    proj = _project(seeded, f"{served.base}/cache.git")
    rc, out, err = cli(capsys, "knowledge", "pull", "--dir", str(proj))
    assert rc == 1 and served.requests == []
    assert f"{ALLOW_INSECURE_ENV}=1" in err
    _assert_clean(out + err)


def test_opt_in_must_be_exactly_one(monkeypatch: pytest.MonkeyPatch) -> None:
    rem = make_remote("http://127.0.0.1:9/c.git", {"CCE_SYNC_TOKEN": TOKEN})
    for value in ("", "0", "true", "yes"):
        with pytest.raises(Exception, match=ALLOW_INSECURE_ENV):
            rem.git_env({ALLOW_INSECURE_ENV: value})
    env = rem.git_env({ALLOW_INSECURE_ENV: "1"})
    assert env["http.followRedirects"] == "false"
    https = make_remote("https://h.example/c.git", {"CCE_SYNC_TOKEN": TOKEN}).git_env({})
    assert (
        https["http.followRedirects"] == "false" and "http.https://h.example/.extraheader" in https
    )


# ---------------------------------------------------------------- the scrubber


@settings(max_examples=300, deadline=None)
@given(
    token=st.text(
        st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="@"),
        min_size=8,
        max_size=60,
    ),
    user=st.sampled_from([None, "x-access-token", "bot"]),
    prefix=st.text(max_size=20),
)
def test_scrub_removes_every_encoding(token: str, user: str | None, prefix: str) -> None:
    who = user or "x-access-token"
    b64 = base64.b64encode(f"{who}:{token}".encode()).decode()
    text = (
        f"{prefix}Authorization=basic {b64} / {b64.rstrip('=')} url=/{urllib.parse.quote(token)}"
        f" q={urllib.parse.quote(token, safe='')} raw={token}"
    )
    out = scrub(text, secret_forms(token, user))
    assert token not in out
    assert b64.rstrip("=") not in out
    assert urllib.parse.quote(token, safe="") not in out
