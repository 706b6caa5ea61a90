"""A loopback git smart-HTTP server: `git http-backend` (CGI) behind a small Python server.

Real git on both ends, no mocks. Each server records the requests it receives (method,
path, headers) so tests can prove which origin saw a credential. Two switches turn it
hostile: `redirect_to` answers every request with a 302 to another base URL, and
`fail_status` answers with that status and a text/plain body that echoes the request's
Authorization header, its URL and the decoded credential URL-encoded — the way a
careless proxy or error page does.
"""

from __future__ import annotations

import base64
import http.server
import os
import subprocess
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.loopback import serving


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class GitHttpServer:
    """State shared by one server's handler threads."""

    project_root: Path
    redirect_to: str | None = None
    #: Redirect only paths that contain this (e.g. "/info/lfs/": git-lfs's API).
    redirect_only: str | None = None
    fail_status: int | None = None
    requests: list[Seen] = field(default_factory=list)
    port: int = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def authorizations(self) -> list[str]:
        return [s.headers["authorization"] for s in self.requests if "authorization" in s.headers]


def _basic_pair(header: str) -> tuple[str, str, str]:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return "", "", ""
    try:
        return base64.b64decode(value).decode("utf-8").partition(":")
    except (ValueError, UnicodeDecodeError):
        return "", "", ""


def _handler(state: GitHttpServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                out = bytearray()
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return bytes(out)
                    out += self.rfile.read(size)
                    self.rfile.readline()
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _serve(self) -> None:
            body = self._body()
            state.requests.append(
                Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
            )
            if state.redirect_to is not None and (
                state.redirect_only is None or state.redirect_only in self.path
            ):
                self._reply(302, [("Location", state.redirect_to + self.path)], b"")
                return
            if state.fail_status is not None:
                auth = self.headers.get("Authorization", "")
                user, _, token = _basic_pair(auth)
                echo = (
                    f"denied: Authorization={auth} url={self.path}\n"
                    f"form: user={urllib.parse.quote(user)}&token="
                    f"{urllib.parse.quote(token, safe='')}\n"
                )
                self._reply(
                    state.fail_status,
                    [("Content-Type", "text/plain; charset=utf-8")],
                    echo.encode(),
                )
                return
            path, _, query = self.path.partition("?")
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": str(state.project_root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": urllib.parse.unquote(path),
                "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_USER": "tester",  # enables receive-pack (push)
                "REMOTE_ADDR": "127.0.0.1",
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            }
            proc = subprocess.run(
                ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
            )
            head, _, payload = proc.stdout.partition(b"\r\n\r\n")
            if not _:
                head, _, payload = proc.stdout.partition(b"\n\n")
            status, headers = 200, []
            for line in head.decode("latin-1").splitlines():
                k, _, v = line.partition(":")
                if k.lower() == "status":
                    status = int(v.strip().split()[0])
                elif k:
                    headers.append((k, v.strip()))
            self._reply(status, headers, payload)

        do_GET = _serve
        do_POST = _serve

    return Handler


@contextmanager
def git_http_server(
    project_root: Path, *, redirect_to: str | None = None, fail_status: int | None = None
) -> Iterator[GitHttpServer]:
    """Serve the bare repositories under `project_root` at `http://127.0.0.1:<port>/<name>`."""
    state = GitHttpServer(project_root, redirect_to=redirect_to, fail_status=fail_status)
    with serving(_handler(state)) as srv:
        state.port = srv.server_address[1]
        yield state
