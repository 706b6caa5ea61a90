"""Credentials never leak: not into .cce/config, output, errors, git config or clone names.

A local HTTP server stands in for the git host: it records the headers git sends and
answers 404, so we can prove the token travels only as an HTTP header.
"""

from __future__ import annotations

import base64
import http.server
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from cce_knowledge.sync.remote import make_remote, slug
from tests.helpers.loopback import serving
from tests.helpers.sync import CURATED, index
from tests.helpers.sync_env import SyncEnv, cli

pytestmark = pytest.mark.slow

TOKEN = "ghs_S3cretTok3nValue0123456789"


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, str]]] = []

    def do_GET(self) -> None:
        type(self).seen.append({k.lower(): v for k, v in self.headers.items()})
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def git_host(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, list[dict[str, str]]]]:
    # A loopback plain-http host: sending it a token needs the explicit opt-in.
    monkeypatch.setenv("CCE_ALLOW_INSECURE_HTTP", "1")
    _Recorder.seen = []
    with serving(_Recorder) as srv:
        yield f"127.0.0.1:{srv.server_address[1]}", _Recorder.seen


def _no_token_anywhere(root: Path) -> None:
    for p in root.rglob("*"):
        assert TOKEN not in p.name
        if p.is_file():
            assert TOKEN.encode() not in p.read_bytes(), p


def test_token_in_url_goes_only_to_the_http_header(
    sync_env: SyncEnv,
    git_host: tuple[str, list[dict[str, str]]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    host, seen = git_host
    root = sync_env.root("p")
    index(root, CURATED.read_bytes())
    url = f"http://x-access-token:{TOKEN}@{host}/acme/cache.git"
    rc, out, err = cli(
        capsys, "knowledge", "push", "--corpus", "c", "--remote", url, "--dir", str(root)
    )
    assert rc == 1
    assert TOKEN not in out + err
    assert err.startswith(f"error: could not clone remote http://{host}/acme/cache.git: ")
    auth = {h.get("authorization") for h in seen}
    want = "basic " + base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    assert any(a is not None and a.lower() == want.lower() for a in auth)
    _no_token_anywhere(sync_env.tmp)


def test_token_from_environment(
    sync_env: SyncEnv,
    git_host: tuple[str, list[dict[str, str]]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    host, seen = git_host
    monkeypatch.setenv("CCE_SYNC_TOKEN", TOKEN)
    rc, out, err = cli(capsys, "sync", "list", "--remote", f"http://{host}/acme/cache.git")
    assert rc == 1 and TOKEN not in out + err
    assert any(
        TOKEN.encode() in base64.b64decode(h.get("authorization", "x y").split()[1] + "==")
        for h in seen
    )
    _no_token_anywhere(sync_env.tmp)


def test_sync_init_never_stores_or_prints_the_token(
    sync_env: SyncEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    root = sync_env.root("proj")
    (root / ".cce").mkdir()
    (root / ".cce" / "config").write_text("# mine\nknowledge:\n  sync:\n    corpus_id: fixture\n")
    bare_path = sync_env.bare.resolve()
    token_url = f"file://x-access-token:{TOKEN}@{bare_path}"
    rc, out, err = cli(capsys, "sync", "init", "--remote", token_url, "--dir", str(root))
    assert rc == 0, err
    assert TOKEN not in out + err
    clean = f"file://{bare_path}"
    assert out.startswith(
        f"Configured sync remote: {clean}\n  git-LFS       : enabled (*.cck, *.cce)\n"
    )
    text = (root / ".cce" / "config").read_text()
    assert text.startswith("# mine\nknowledge:\n  sync:\n    corpus_id: fixture\n")
    assert f"remote: {clean}" in text
    clone = sync_env.tmp / "home-a" / "sync" / slug(make_remote(clean))
    assert (clone / ".git").is_dir()
    # The configured project pushes without --remote or --corpus.
    index(root, CURATED.read_bytes())
    rc, out, err = cli(capsys, "knowledge", "push", "--dir", str(root))
    assert rc == 0, err
    _no_token_anywhere(sync_env.tmp)
