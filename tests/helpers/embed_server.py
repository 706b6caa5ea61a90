"""A loopback embeddings server speaking Ollama's `/api/embed` and OpenAI's `/v1/embeddings`.

Vectors are deterministic: hashed character trigrams (sha256 buckets, signed), so
texts that share words are close and the same text always gives the same vector.
The server records every request and can be told to misbehave (reject a batch that
contains a marker, redirect, answer garbage, answer given bytes under a given
Content-Encoding, drip its answer a byte at a time) to test the client's handling.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.helpers.loopback import serving

DIM = 64

#: How a careless server may echo a key back in an error body.
ECHO_FORMS = {
    "raw": lambda k: k,
    "upper": str.upper,
    "lower": str.lower,
    "percent": lambda k: urllib.parse.quote(k, safe=""),
    "percent-lower": lambda k: urllib.parse.quote(k, safe="").lower(),
    "json": lambda k: json.dumps(k)[1:-1],
    "base64": lambda k: base64.b64encode(k.encode()).decode(),
    "base64-urlsafe": lambda k: base64.urlsafe_b64encode(k.encode()).decode(),
    "base64-header": lambda k: base64.b64encode(f"Authorization: Bearer {k}".encode()).decode(),
    "base64-basic": lambda k: base64.b64encode(f"user:{k}".encode()).decode(),
}


def ngram_vector(text: str, dim: int = DIM) -> list[float]:
    t = f"  {text.lower()}  "
    v = [0.0] * dim
    for i in range(len(t) - 2):
        h = hashlib.sha256(t[i : i + 3].encode("utf-8")).digest()
        b = int.from_bytes(h[:4], "little") % dim
        v[b] += 1.0 if h[4] & 1 else -1.0
    if not any(v):
        v[0] = 1.0
    return v


@dataclass
class EmbedServer:
    port: int = 0
    dim: int = DIM
    reject_marker: str | None = None  # a batch with a text containing it gets HTTP 400
    redirect_to: str | None = None  # answer 307 to this URL
    garbage: bool = False  # answer 200 with a non-JSON body
    require_key: str | None = None  # answer 401 unless `Authorization: Bearer <it>`
    die_after: int | None = None  # after this many requests, hang up without answering
    body: bytes | None = None  # answer 200 with exactly these bytes
    encoding: str | None = None  # sent as Content-Encoding (the body is sent as given)
    drip: float | None = None  # send the answer one byte every `drip` seconds
    poison: bytes | None = None  # a well-formed answer whose first number is this text
    #: Answer 401 echoing the received bearer key in this encoding (see ECHO_FORMS).
    echo_key_as: str | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def texts(self) -> list[str]:
        return [t for r in self.requests for t in r["input"]]


def _handler(state: EmbedServer) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(code)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            if state.encoding is not None:
                self.send_header("Content-Encoding", state.encoding)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if state.drip is None:
                self.wfile.write(body)
                return
            for i in range(len(body)):
                if state.stopping.wait(state.drip):
                    return
                try:
                    self.wfile.write(body[i : i + 1])
                    self.wfile.flush()
                except OSError:
                    return  # the client gave up

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            doc = json.loads(self.rfile.read(n))
            inputs = doc["input"] if isinstance(doc["input"], list) else [doc["input"]]
            with state.lock:
                state.requests.append(
                    {
                        "path": self.path,
                        "model": doc.get("model"),
                        "input": inputs,
                        "authorization": self.headers.get("Authorization"),
                    }
                )
                dead = state.die_after is not None and len(state.requests) > state.die_after
            if dead:
                self.close_connection = True  # no status line: the client sees a dropped peer
                return
            if state.redirect_to is not None:
                self._send(307, b"", {"Location": state.redirect_to + self.path})
                return
            if state.echo_key_as is not None:
                key = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                echoed = ECHO_FORMS[state.echo_key_as](key)
                self._send(401, json.dumps({"error": f"invalid key {echoed}"}).encode())
                return
            if state.require_key and self.headers.get("Authorization") != (
                f"Bearer {state.require_key}"
            ):
                self._send(401, b'{"error":"missing or wrong API key"}')
                return
            if state.garbage:
                self._send(200, b"<html>not json</html>")
                return
            if state.body is not None:
                self._send(200, state.body, {"Content-Type": "application/json"})
                return
            if state.reject_marker and any(state.reject_marker in t for t in inputs):
                self._send(400, b'{"error":"input rejected"}')
                return
            vecs = [ngram_vector(t, state.dim) for t in inputs]
            if state.poison is not None:
                vecs[0][0] = 12345.5  # a placeholder, replaced in the bytes below
            if self.path == "/api/embed":
                out: dict[str, Any] = {"model": doc.get("model"), "embeddings": vecs}
            elif self.path == "/v1/embeddings":
                out = {
                    "object": "list",
                    "model": doc.get("model"),
                    "data": [
                        {"object": "embedding", "index": i, "embedding": v}
                        for i, v in enumerate(vecs)
                    ],
                }
            else:
                self._send(404, b'{"error":"not found"}')
                return
            data = json.dumps(out).encode()
            if state.poison is not None:
                data = data.replace(b"12345.5", state.poison, 1)
            self._send(200, data, {"Content-Type": "application/json"})

    return H


@contextmanager
def embed_server(**kw: Any) -> Iterator[EmbedServer]:
    state = EmbedServer(**kw)
    with serving(_handler(state)) as srv:
        state.port = srv.server_address[1]
        try:
            yield state
        finally:
            state.stopping.set()  # before the server stops: handlers still streaming end
