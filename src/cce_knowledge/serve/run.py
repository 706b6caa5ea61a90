"""Run the server: uvicorn (h11) on one socket, in one process or N forked workers.

Beyond uvicorn's defaults: a request head over 8 KiB is refused (h11's incomplete
event cap), and a connection that has not sent a whole request head within
HEAD_SECONDS of opening (or of its last answer) is closed — uvicorn alone would
keep an idle or half-sent connection open forever.

Lazy imports: the MCP SDK's transport and the tools load when a server is made.
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import logging
import os
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from cce_knowledge.serve.app import MAX_HEAD_BYTES, CorpusApp, Limits
from cce_knowledge.serve.corpus import Corpus

log = logging.getLogger("cce_knowledge.serve")

HEAD_SECONDS = 10.0


class HeadDeadline(H11Protocol):
    """h11 with a deadline for each request head."""

    head_seconds = HEAD_SECONDS

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def _arm(self) -> None:
        cycle = self.cycle

        def expire() -> None:
            # No new request head since the timer was armed: give the socket back.
            if self.cycle is cycle and not self.transport.is_closing():
                self.transport.close()

        self.loop.call_later(self.head_seconds, expire)


@dataclass(frozen=True)
class ServeOptions:
    root: Path
    host: str
    port: int
    top_k: int
    workers: int
    limits: Limits


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _raise_fd_limit() -> None:
    # Thousands of idle sockets must not starve accept(): use the hard limit.
    try:
        import resource  # POSIX only; lazy so the module imports anywhere

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass


def _mcp_manager(root: Path, loopback: bool) -> Any:
    # Lazy: the MCP SDK's transport is only needed by a running server.
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    from cce_knowledge.mcp.server import build_server
    from cce_knowledge.mcp.tools import KnowledgeTools

    tools = KnowledgeTools(root)
    security = None
    if loopback:  # DNS rebinding: a loopback server answers loopback Host names only
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    # Stateless and JSON answers: any worker can answer any request of a session.
    return StreamableHTTPSessionManager(
        app=build_server(tools), json_response=True, stateless=True, security_settings=security
    )


#: How long a thread may hold the GIL while another waits for it (Python's default is
#: 5 ms). A search is ~10 ms of Python: with the default, the event loop's thread takes
#: the GIL from it mid-search on every incoming request, and each hand-off costs both
#: threads their caches.
SWITCH_SECONDS = 0.05


def _serve_one(sock: socket.socket, app: CorpusApp) -> None:
    # The worker's long-lived objects (the open index, the app) leave the collector's
    # generations: a full collection then walks only what requests allocate.
    gc.freeze()
    sys.setswitchinterval(SWITCH_SECONDS)
    config = uvicorn.Config(
        app,
        http=HeadDeadline,
        loop="asyncio",
        lifespan="on",
        access_log=False,  # a query may hold anything; the token is never logged either
        log_level="warning",
        server_header=False,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    asyncio.run(server.serve(sockets=[sock]))


def serve(opts: ServeOptions, corpus: Corpus, token: bytes, sock: socket.socket) -> None:
    """Serve until SIGINT/SIGTERM. `corpus` is open (its store checked) already."""
    _raise_fd_limit()
    loopback = is_loopback(opts.host)

    def make_app() -> CorpusApp:
        return CorpusApp(
            corpus,
            token,
            top_k=opts.top_k,
            limits=opts.limits,
            mcp=_mcp_manager(opts.root, loopback),
        )

    if opts.workers <= 1:
        _serve_one(sock, make_app())
        return
    children: dict[int, int] = {}

    def spawn(slot: int) -> None:
        pid = os.fork()
        if pid == 0:  # the worker: its own event loop over the shared socket
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us with TERM
            try:
                corpus.poll_once()  # a respawned worker opens the store itself
                _serve_one(sock, make_app())
            finally:
                os._exit(0)
        children[pid] = slot

    for slot in range(opts.workers):
        spawn(slot)
    # The workers hold the snapshot (its pages shared); the parent only supervises, and
    # must not keep a swapped-out snapshot's mappings alive.
    corpus.release()
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid not in children:
            continue
        slot = children.pop(pid)
        if not stopping:
            print(
                f"cce corpus serve: worker {pid} exited ({status}); starting another",
                file=sys.stderr,
                flush=True,
            )
            spawn(slot)
