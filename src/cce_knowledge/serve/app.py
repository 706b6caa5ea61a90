"""The ASGI application: auth first on every path, then `/mcp` (the SDK's Streamable
HTTP transport) or the reference's `GET /docs`.

Searches run on a bounded thread pool, off the event loop; each request has a
deadline, and a queue past its bound is answered 503 at once instead of piling up.
Nothing here logs a request's query or headers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from cce_knowledge.serve import wire
from cce_knowledge.serve.corpus import Corpus

log = logging.getLogger("cce_knowledge.serve")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TIMEOUT = b'{"error":"timeout"}'
BUSY = b'{"error":"busy"}'
INTERNAL = b'{"error":"internal error"}'
HEAD_TOO_LARGE = b'{"error":"request head too large"}'
AMBIGUOUS = b'{"error":"ambiguous message framing"}'
BODY_TOO_LARGE = b'{"error":"request body too large"}'
BODY_TIMEOUT = b'{"error":"request body timeout"}'
#: A request head (request line and headers) over this many bytes is refused. h11's
#: own cap (set to the same figure) only sees a head that arrives in pieces.
MAX_HEAD_BYTES = 8 * 1024
#: An `/mcp` request body (one JSON-RPC message or batch) over this is refused (413),
#: and one not wholly received within BODY_SECONDS is answered 408: the SDK itself
#: would read any body, however large or slow, into memory before looking at it.
MAX_BODY_BYTES = 256 * 1024
BODY_SECONDS = 10.0


def head_size(scope: Scope) -> int:
    """The request head's bytes as sent, give or take the spaces h11 trimmed."""
    line = len(scope["method"]) + len(scope.get("raw_path", b"")) + 1
    line += len(scope.get("query_string", b"")) + 12
    return line + sum(len(k) + len(v) + 4 for k, v in scope["headers"]) + 2


def declared_length(scope: Scope) -> int | None:
    """The request's Content-Length (h11 has checked it is one well-formed number)."""
    for k, v in scope["headers"]:
        if k.lower() == b"content-length":
            return int(v)
    return None


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None once it passes `limit` bytes (the rest is not read)."""
    parts: list[bytes] = []
    size = 0
    while True:
        msg = await receive()
        if msg["type"] != "http.request":  # http.disconnect: the client has gone
            raise ConnectionAbortedError
        chunk = msg.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
        if not msg.get("more_body", False):
            return b"".join(parts)


def replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the body already read once, then the client's events."""
    sent = False

    async def again() -> MutableMapping[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


class Limits:
    """Searches at once (threads), requests waiting for one, and the deadline."""

    def __init__(
        self, searches: int | None = None, queued: int = 1024, deadline: float = 10.0
    ) -> None:
        self.searches = searches or max(1, os.cpu_count() or 1)
        self.queued = queued
        self.deadline = deadline


def ambiguous_framing(scope: Scope) -> bool:
    """Content-Length beside Transfer-Encoding: h11 follows the latter, as RFC 9112
    allows, but a proxy in front may follow the former (request smuggling)."""
    names = {k.lower() for k, _ in scope["headers"]}
    return b"content-length" in names and b"transfer-encoding" in names


async def _answer(
    send: Send, status: int, body: bytes, challenge: bool = False, close: bool = False
) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if challenge:
        headers.append((b"www-authenticate", b"Bearer"))
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class CorpusApp:
    def __init__(
        self,
        corpus: Corpus,
        token: bytes,
        *,
        top_k: int = 10,
        limits: Limits | None = None,
        mcp: Any | None = None,
    ) -> None:
        """`mcp`: the SDK's StreamableHTTPSessionManager for `/mcp` (None: 404)."""
        self.corpus = corpus
        self._token = token
        self.top_k = top_k
        self.limits = limits or Limits()
        self.mcp = mcp
        self._pool = concurrent.futures.ThreadPoolExecutor(
            self.limits.searches, thread_name_prefix="cce-serve-search"
        )
        self._pending = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
        elif kind == "http":
            await self._http(scope, receive, send)
        # websocket and anything else: not served (uvicorn closes it)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        async with contextlib.AsyncExitStack() as stack:
            if self.mcp is not None:
                await stack.enter_async_context(self.mcp.run())
            self.corpus.start()
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
            self.corpus.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)
        await send({"type": "lifespan.shutdown.complete"})

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if head_size(scope) > MAX_HEAD_BYTES:
            await _answer(send, 431, HEAD_TOO_LARGE, close=True)
            return
        if ambiguous_framing(scope):
            await _answer(send, 400, AMBIGUOUS, close=True)
            return
        if not wire.authorized(scope["headers"], self._token):
            await _answer(send, 401, wire.UNAUTHORIZED, challenge=True)
            return
        path = scope.get("raw_path") or scope["path"].encode("utf-8")
        if path == b"/mcp" and self.mcp is not None:
            await self._mcp(scope, receive, send)
            return
        if scope["method"] != "GET":
            await _answer(send, 405, wire.METHOD_NOT_ALLOWED)
            return
        if path != b"/docs":
            await _answer(send, 404, wire.NOT_FOUND)
            return
        query = scope.get("query_string", b"")
        service = wire.service_param(query)
        if service is None:
            await _answer(send, 400, wire.MISSING_SERVICE)
            return
        status, body = await self._docs(wire.search_query(service, wire.q_param(query)))
        await _answer(send, status, body)

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The body read here first, bounded in size and time; then the SDK's transport."""
        assert self.mcp is not None
        if scope["method"] == "POST":
            length = declared_length(scope)
            if length is not None and length > MAX_BODY_BYTES:
                await _answer(send, 413, BODY_TOO_LARGE, close=True)
                return
            try:
                body = await asyncio.wait_for(read_body(receive, MAX_BODY_BYTES), BODY_SECONDS)
            except TimeoutError:
                await _answer(send, 408, BODY_TIMEOUT, close=True)
                return
            except ConnectionAbortedError:
                return
            if body is None:
                await _answer(send, 413, BODY_TOO_LARGE, close=True)
                return
            receive = replay(body, receive)
        await self.mcp.handle_request(scope, receive, send)

    async def _docs(self, query: str) -> tuple[int, bytes]:
        served = self.corpus.served  # this request's snapshot, from here to the end
        if served is None:
            return 200, wire.EMPTY_DOCS
        if self._pending >= self.limits.searches + self.limits.queued:
            return 503, BUSY
        self._pending += 1
        fut = self._pool.submit(self._search, served, query)
        try:
            body = await asyncio.wait_for(asyncio.wrap_future(fut), self.limits.deadline)
        except TimeoutError:
            fut.cancel()  # still queued: never runs; running: finishes, nobody waits
            log.warning("a /docs search gave no answer within %g s", self.limits.deadline)
            return 503, TIMEOUT
        except Exception:
            log.exception("a /docs search failed")
            return 500, INTERNAL
        finally:
            self._pending -= 1
        return 200, body

    def _search(self, served: Any, query: str) -> bytes:
        return wire.docs_body(self.corpus.search(served, query, self.top_k))
