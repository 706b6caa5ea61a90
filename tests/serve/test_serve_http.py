"""`cce corpus serve` as a real process over loopback: every /docs rule, the token
sources, hostile clients, the MCP transport and the snapshot swap."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

TOKEN = "tok-9f2c41d7e0"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _feed(path: Path, extra: str = "") -> Path:
    recs = [
        {
            "id": "kn:checkout",
            "title": "Checkout service runbook",
            "body": "## Restart\n\nThe checkout service restarts cleanly; drain first. "
            + "The gateway drains in-flight requests before it exits. " * 20,
            "source": "handbook",
            "updated_at": "2026-02-01T10:00:00Z",
        },
        {
            "id": "kn:other",
            "title": "Data retention window" + extra,
            "body": "## Rule\n\nPurge inactive account records after ninety days." + extra,
            "source": "handbook",
            "updated_at": "2026-01-01T00:00:00Z",
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return path


def _cce(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cce_knowledge", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _index(root: Path, extra: str = "") -> None:
    r = _cce("knowledge", "index", str(_feed(root / "feed.jsonl", extra)), "--dir", str(root))
    assert r.returncode == 0, r.stderr


class Server:
    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None) -> None:
        e = dict(os.environ if env is None else env)
        e.setdefault("CCE_CORPUS_TOKEN", TOKEN)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cce_knowledge",
                "corpus",
                "serve",
                "--dir",
                str(root),
                "--port",
                "0",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=e,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/docs", line)
        assert m, line + (self.proc.stderr.read() if self.proc.stderr else "")
        self.first_line = line
        self.port = int(m.group(1))

    def url(self, target: str) -> str:
        return f"http://127.0.0.1:{self.port}{target}"

    def get(
        self, target: str, headers: dict[str, str] | None = None, method: str = "GET"
    ) -> tuple[int, dict[str, str], bytes]:
        req = urllib.request.Request(self.url(target), headers=headers or {}, method=method)
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def raw(self, data: bytes, timeout: float = 10) -> bytes:
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            s.sendall(data)
            out = b""
            try:
                while chunk := s.recv(65536):
                    out += chunk
                    if b"\r\n\r\n" in out and b"connection: close" not in out.lower():
                        break
            except (TimeoutError, ConnectionResetError):
                pass
            return out

    def stop(self) -> tuple[str, str]:
        self.proc.terminate()
        out, err = self.proc.communicate(timeout=30)
        return self.first_line + out, err


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("served")
    _index(root)
    return root


@pytest.fixture(scope="module")
def server(store: Path) -> Iterator[Server]:
    s = Server(store)
    yield s
    out, err = s.stop()
    assert TOKEN not in out + err  # never printed or logged, in any form
    assert TOKEN.encode().hex() not in out + err


def test_docs_answer_is_the_reference_shape(server: Server, store: Path) -> None:
    status, headers, body = server.get("/docs?service=checkout&q=gateway", AUTH)
    assert status == 200 and headers["content-type"] == "application/json"
    assert body.startswith(b'{"docs":[{"body":"')
    docs = json.loads(body)["docs"]
    assert [list(d) for d in docs] == [["body", "id", "title"]] * len(docs)
    top = docs[0]
    assert top["title"] == "Checkout service runbook"
    assert len(top["body"]) <= 500 and top["body"].endswith(".")
    store_json = json.loads(next((store / ".cce/knowledge").glob("*.json")).read_bytes())
    assert top["id"] in {c["chunk_id"] for c in store_json["chunks"]}
    assert (
        body
        == json.dumps(
            json.loads(body), separators=(",", ":"), ensure_ascii=False, sort_keys=True
        ).encode()
    )


def test_auth_first_on_every_path(server: Server) -> None:
    for target, method in [
        ("/docs?service=checkout", "GET"),
        ("/nope", "GET"),
        ("/docs", "POST"),
        ("/mcp", "POST"),
        ("/../etc/passwd", "GET"),
    ]:
        for headers in [
            None,
            {"Authorization": "Bearer wrong"},
            {"Authorization": f"Basic {TOKEN}"},
            {"Authorization": TOKEN},
        ]:
            status, h, body = server.get(target, headers, method)
            assert (status, body) == (401, b'{"error":"unauthorized"}'), (target, headers)
            assert h["www-authenticate"] == "Bearer"
    status, _, _ = server.get("/docs?service=checkout", {"Authorization": f"bearer {TOKEN}"})
    assert status == 200


def test_405_then_404_then_400(server: Server) -> None:
    assert server.get("/nope", AUTH, "POST")[::2] == (405, b'{"error":"method not allowed"}')
    assert server.get("/nope", AUTH)[::2] == (404, b'{"error":"not found"}')
    assert server.get("/docs/", AUTH)[::2] == (404, b'{"error":"not found"}')
    assert server.get("/docs/../docs?service=x", AUTH)[0] == 404  # no normalising
    assert server.get("/%64ocs?service=x", AUTH)[0] == 404  # nor decoding the path
    assert server.get("/docs", AUTH)[::2] == (400, b'{"error":"missing service"}')
    assert server.get("/docs?service=+%20&q=x", AUTH)[::2] == (400, b'{"error":"missing service"}')


@pytest.mark.parametrize(
    "q",
    [
        "%27%3B+DROP+TABLE+docs%3B+--",
        "a%0d%0aX-Injected:+evil",
        "..%2F..%2Fetc%2Fpasswd",
        "%00%00",
        "z" * 6000,
        "%E2%80%AEevil%F3%A0%80%81",
        "%FF%FE",
    ],
)
def test_hostile_q_and_service_answer_200(server: Server, q: str) -> None:
    status, h, body = server.get(f"/docs?service={q[:2000]}&q={q}", AUTH)
    assert status == 200 and isinstance(json.loads(body)["docs"], list)
    assert "x-injected" not in {k.lower() for k in h}


def test_oversized_malformed_and_smuggling_heads_are_refused(server: Server) -> None:
    auth = f"Authorization: Bearer {TOKEN}\r\n".encode()
    big = (
        b"GET /docs?service=x HTTP/1.1\r\nHost: a\r\n"
        + auth
        + b"X-Pad: "
        + b"a" * 9000
        + b"\r\n\r\n"
    )
    assert server.raw(big).split(b" ")[1] in (b"400", b"431")
    for head in [
        b"POST /docs HTTP/1.1\r\nHost: a\r\n"
        + auth
        + b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /docs HTTP/1.1\r\nHost: a\r\n"
        + auth
        + b"Content-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
        b"GET /docs HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n",
        b"GET /docs\x00 HTTP/1.1\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40,
    ]:
        out = server.raw(head)
        assert out == b"" or out.startswith(b"HTTP/1.1 400"), (head, out[:80])
    assert server.get("/docs?service=checkout", AUTH)[0] == 200  # still serving


def test_idle_sockets_and_a_token_flood_do_not_delay_a_client(server: Server) -> None:
    idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(400)]
    half = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(100)]
    for s in half:
        s.sendall(b"GET /docs?service=x HTTP/1.1\r\nHost: a\r\n")
    try:
        for _ in range(200):
            assert server.get("/docs?service=x", {"Authorization": "Bearer guess"})[0] == 401
        t0 = time.monotonic()
        assert server.get("/docs?service=checkout", AUTH)[0] == 200
        assert time.monotonic() - t0 < 5
    finally:
        for s in idle + half:
            s.close()


def test_idle_connection_is_closed_after_the_head_deadline(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(b"GET /docs?service=x HTTP/1.1\r\n")  # half a head, then nothing
        t0 = time.monotonic()
        assert s.recv(100) == b""  # closed by the server
        assert 5 < time.monotonic() - t0 < 25


def _mcp_post_head(length: str = "", chunked: bool = False) -> bytes:
    return (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + f"Authorization: Bearer {TOKEN}\r\n".encode()
        + b"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        + (f"Content-Length: {length}\r\n".encode() if length else b"")
        + (b"Transfer-Encoding: chunked\r\n" if chunked else b"")
        + b"\r\n"
    )


def _read_answer(s: socket.socket) -> bytes:
    out = b""
    try:
        while chunk := s.recv(65536):
            out += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return out


def test_mcp_body_too_large_is_refused_before_it_is_read(server: Server) -> None:
    # Declared: refused on the head alone, the body never sent.
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(_mcp_post_head(length=str(64 * 1024 * 1024)))
        out = _read_answer(s)  # the server closes the connection after its answer
    assert out.startswith(b"HTTP/1.1 413") and out.endswith(b'{"error":"request body too large"}')
    # Undeclared (chunked): refused once past the cap, the rest never read.
    sent = 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(_mcp_post_head(chunked=True))
        piece = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
        try:
            for _ in range(512):  # 32 MiB offered
                s.sendall(piece)
                sent += 0x10000
        except (BrokenPipeError, ConnectionResetError):
            pass
        out = _read_answer(s)
    assert out.startswith(b"HTTP/1.1 413"), out[:80]
    assert sent < 16 * 1024 * 1024  # the server stopped reading long before the end
    assert server.get("/docs?service=checkout", AUTH)[0] == 200


def test_slow_mcp_bodies_hold_nothing_and_end_at_the_deadline(server: Server) -> None:
    slow = [socket.create_connection(("127.0.0.1", server.port), timeout=30) for _ in range(50)]
    try:
        for s in slow:
            s.sendall(_mcp_post_head(length="1000") + b'{"jsonrpc":')  # then nothing
        t0 = time.monotonic()
        assert server.get("/docs?service=checkout", AUTH)[0] == 200  # not held up
        assert time.monotonic() - t0 < 5
        out = _read_answer(slow[0])
        waited = time.monotonic() - t0
        assert out.startswith(b"HTTP/1.1 408"), out[:80]
        assert out.endswith(b'{"error":"request body timeout"}')
        assert 5 < waited < 25
        for s in slow[1:]:
            assert _read_answer(s).startswith(b"HTTP/1.1 408")
    finally:
        for s in slow:
            s.close()


def test_mcp_over_streamable_http(server: Server) -> None:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> tuple[list[str], str]:
        async with (
            httpx2.AsyncClient(headers=AUTH, timeout=30) as http,
            streamable_http_client(server.url("/mcp"), http_client=http) as (r, w),
            ClientSession(r, w) as s,
        ):
            await s.initialize()
            names = [t.name for t in (await s.list_tools()).tools]
            res = await s.call_tool("context_search", {"query": "checkout restart"})
            return names, res.content[0].text  # type: ignore[union-attr]

    names, text = anyio.run(main)
    assert {"context_search", "expand_chunk", "related_context", "index_status"} <= set(names)
    assert "Checkout service runbook" in text
    status, _h, _ = server.get("/mcp", None, "POST")
    assert status == 401


def test_token_sources_and_refusal(tmp_path: Path, store: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CCE_CORPUS_TOKEN"}
    r = _cce("corpus", "serve", "--dir", str(store), "--port", "0", env=env)
    assert r.returncode == 1
    assert "CCE_CORPUS_TOKEN" in r.stderr and "--token-file" in r.stderr
    (tmp_path / "tok").write_text("  \n")
    r = _cce(
        "corpus",
        "serve",
        "--dir",
        str(store),
        "--token-file",
        str(tmp_path / "tok"),
        env={**env, "CCE_CORPUS_TOKEN": TOKEN},
    )
    assert r.returncode == 1  # the file wins, even empty
    (tmp_path / "tok").write_text(" filetok\n")
    s = Server(store, "--token-file", str(tmp_path / "tok"), env={**env, "CCE_CORPUS_TOKEN": TOKEN})
    try:
        assert s.get("/docs?service=x", {"Authorization": "Bearer filetok"})[0] == 200
        assert s.get("/docs?service=x", AUTH)[0] == 401
    finally:
        out, err = s.stop()
    assert "filetok" not in out + err


def test_empty_before_first_pull_and_broken_store_refused(tmp_path: Path) -> None:
    s = Server(tmp_path)
    try:
        assert "127.0.0.1" in s.first_line
        assert s.get("/docs?service=x", AUTH)[::2] == (200, b'{"docs":[]}')
    finally:
        s.stop()
    kd = tmp_path / ".cce" / "knowledge"
    kd.mkdir(parents=True)
    (kd / "current").write_text("00000000deadbeef\n")
    r = _cce(
        "corpus",
        "serve",
        "--dir",
        str(tmp_path),
        "--port",
        "0",
        env={**os.environ, "CCE_CORPUS_TOKEN": TOKEN},
    )
    assert r.returncode == 1 and "error:" in r.stderr
    _index(tmp_path)
    snap = (kd / "current").read_text().strip()
    (kd / f"{snap}.json").write_bytes(b'{"schema": "cce.knowledge/v1", "chunks": [')
    for idx in (kd / "search").glob("*"):
        idx.unlink()
    r = _cce(
        "corpus",
        "serve",
        "--dir",
        str(tmp_path),
        "--port",
        "0",
        env={**os.environ, "CCE_CORPUS_TOKEN": TOKEN},
    )
    assert r.returncode == 1 and "error:" in r.stderr


def _tree(pid: int) -> list[int]:
    kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [pid, *(p for k in kids for p in _tree(int(k)))]


def test_swap_under_load_without_failures(tmp_path: Path) -> None:
    _index(tmp_path)
    s = Server(tmp_path, "--workers", "2")
    failures: list[object] = []
    seen: set[bytes] = set()
    stop = threading.Event()

    def hammer() -> None:
        while not stop.is_set():
            try:
                st, _, body = s.get("/docs?service=retention&q=zanzibar", AUTH)
                if st != 200:
                    failures.append(st)
                seen.add(body)
            except OSError as e:
                failures.append(e)

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    old = (tmp_path / ".cce/knowledge/current").read_text().strip()
    mapped_after: list[str] = []
    try:
        for t in threads:
            t.start()
        time.sleep(1)
        _index(tmp_path, extra=" zanzibar")  # replaces `current` while requests run
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(b"zanzibar" in b for b in seen):
            time.sleep(0.2)
        time.sleep(1)
        stop.set()
        for t in threads:
            t.join()
        time.sleep(1.5)  # a poll or two: the old snapshot's last requests have ended
        for pid in _tree(s.proc.pid):
            maps = Path(f"/proc/{pid}/maps").read_text()
            mapped_after += [ln for ln in maps.splitlines() if old in ln]
    finally:
        stop.set()
        for t in threads:
            t.join()
        s.stop()
    assert mapped_after == []  # the old snapshot is released once its requests end
    assert failures == []
    assert any(b"zanzibar" in b for b in seen)
    # every answer is wholly one snapshot's: the old title or the new, never a mix
    for body in seen:
        for d in json.loads(body)["docs"]:
            if d["title"].startswith("Data retention"):
                assert ("zanzibar" in d["title"]) == ("zanzibar" in d["body"])


def test_searches_and_workers_below_one_are_usage_errors(store: Path) -> None:
    env = {**os.environ, "CCE_CORPUS_TOKEN": TOKEN}
    for flag in ("--searches", "--workers"):
        r = _cce("corpus", "serve", "--dir", str(store), "--port", "0", flag, "0", env=env)
        assert r.returncode == 2 and f"{flag} must be at least 1" in r.stderr
