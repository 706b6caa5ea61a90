"""`cce corpus serve` (argparse only; the server loads in the handler).

Lazy imports: the handler imports uvicorn, the MCP SDK and the search index, so
`cce --help` and every other command do not pay for them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from cce_knowledge.cli.common import add_dir
from cce_knowledge.core.errors import CceError, UsageError

TOKEN_ENV = "CCE_CORPUS_TOKEN"
DEFAULT_PORT = 8799

DESCRIPTION = f"""\
Serve ROOT's knowledge store over HTTP, read-only, behind a bearer token.

  GET /docs?service=NAME[&q=TERMS]   the reference engine's bridge: {{"docs":[{{"body",
                                     "id","title"}}]}}, each body fitted to 500 characters
  /mcp                               the `cce mcp` tools over MCP Streamable HTTP

Every request needs `Authorization: Bearer <token>`; the token comes from
--token-file (which wins) or {TOKEN_ENV}, trimmed, and is never printed or logged.
Without one the command refuses to start. Ranking, top-k floor and hybrid ranking
come from ROOT/.cce/config, as for `cce knowledge search`.

A `cce knowledge pull` or `index` into ROOT while serving is picked up without a
restart (within about half a second); requests in flight finish on the snapshot
they started on. Before the first pull, /docs answers {{"docs":[]}}; a broken store
refuses to start.

It binds 127.0.0.1 unless --host says otherwise. Put TLS in a reverse proxy in
front of it (docs/serve.md shows Caddy, nginx and a systemd unit).

exit status: 0 stopped by a signal, 1 refused (no token, broken store, port in use),
2 usage error"""


def register_corpus(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="serve the store over HTTP: GET /docs (the reference's bridge) and MCP at /mcp",
        description=DESCRIPTION,
    )
    add_dir(p)
    p.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        metavar="N",
        help=f"port to bind (default {DEFAULT_PORT}; 0 picks a free one, printed)",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1); another warns that TLS "
        "belongs to a reverse proxy",
    )
    p.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help=f"file holding the bearer token (wins over {TOKEN_ENV})",
    )
    p.add_argument(
        "--top-k",
        type=int,
        default=10,
        metavar="K",
        help="docs per /docs answer at most (default 10)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="worker processes sharing the socket and the mapped index (default 1)",
    )
    p.add_argument(
        "--searches",
        type=int,
        metavar="N",
        help="searches at once in each worker (default: cores / workers, at least 1); "
        "more are queued",
    )
    p.add_argument(
        "--deadline",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="a /docs search not answered within this is answered 503 (default 10)",
    )
    p.set_defaults(func=run)


def resolve_token(token_file: Path | None) -> bytes:
    """--token-file wins over the environment; trimmed; never empty."""
    if token_file is not None:
        try:
            raw = token_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise CceError(f"could not read --token-file {token_file}: {e}") from e
    else:
        raw = os.environ.get(TOKEN_ENV, "")
    token = raw.strip()
    if not token:
        raise CceError(
            "corpus serve needs a bearer token and refuses to serve without one: "
            f"set {TOKEN_ENV} or pass --token-file FILE"
        )
    return token.encode("utf-8")


def run(args: argparse.Namespace) -> int:
    for name, low in (("--top-k", 1), ("--workers", 1), ("--searches", 1)):
        value = getattr(args, name[2:].replace("-", "_"))
        if value is not None and value < low:
            raise UsageError(f"{name} must be at least {low}")
    if not 0 <= args.port <= 65535:
        raise UsageError("--port must be 0..65535")
    if not args.deadline > 0:
        raise UsageError("--deadline must be more than 0")
    token = resolve_token(args.token_file)
    # Lazy: uvicorn, the MCP SDK and the semantic layer load only for a server.
    from cce_knowledge.config.settings import load_settings
    from cce_knowledge.semantic.hybrid import HybridRanking
    from cce_knowledge.serve.app import Limits
    from cce_knowledge.serve.corpus import Corpus
    from cce_knowledge.serve.run import ServeOptions, bind, is_loopback, serve

    root = Path(args.dir)
    settings = load_settings(root)
    corpus = Corpus(root, settings, hybrid=HybridRanking())
    corpus.open()  # a broken store stops here (StoreError: exit 1)
    try:
        sock = bind(args.host, args.port)
    except OSError as e:
        raise CceError(f"cannot bind {args.host}:{args.port}: {e.strerror or e}") from e
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    if not is_loopback(args.host):
        print(
            f"warning: serving on {args.host}, beyond this machine, over plain HTTP: "
            "TLS belongs to a reverse proxy in front of it (docs/serve.md)",
            file=sys.stderr,
            flush=True,
        )
    snap = corpus.snapshot
    print(
        f"cce corpus serve: serving http://{shown}:{port}/docs?service=… and "
        f"http://{shown}:{port}/mcp (read-only, bearer-authenticated)"
    )
    print(
        f"knowledge store : {root / '.cce' / 'knowledge'} "
        f"({'snapshot ' + snap if snap else 'none yet: answers are empty until a pull'})"
    )
    print("press Ctrl-C to stop.", flush=True)
    # One search thread per core in all by default: a process runs one search's Python
    # at a time (the GIL), and two threads contending for it cost more CPU per search.
    searches = args.searches or max(1, (os.cpu_count() or 1) // args.workers)
    opts = ServeOptions(
        root,
        args.host,
        port,
        args.top_k,
        args.workers,
        Limits(searches=searches, deadline=args.deadline),
    )
    serve(opts, corpus, token, sock)
    return 0
