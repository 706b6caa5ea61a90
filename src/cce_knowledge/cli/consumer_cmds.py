"""Consumer commands: `cce mcp`, `cce knowledge status`, `cce doctor`.

argparse only at import time; each handler imports the library it needs (the
MCP SDK in particular is heavy and only `cce mcp` pays for it).

Lazy imports: each handler imports the library it runs, so `cce --help` and every
other command load only what they use (GitPython, the MCP SDK, tree-sitter, numpy).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cce_knowledge.cli.common import add_dir, add_json, add_remote, add_seconds
from cce_knowledge.cli.report import Report, emit
from cce_knowledge.core.errors import StoreError


def register_knowledge(sub: Any) -> None:
    p = sub.add_parser(
        "status",
        help="what knowledge is installed, from where, how fresh",
        description=(
            "Show the installed knowledge store: corpus (or local ingest), snapshot,\n"
            "records/chunks, data as-of, where it was pulled from (credentials stripped),\n"
            "whether the installed bytes still match the pull record, and — best effort,\n"
            "bounded by --timeout — whether the remote corpus has moved on. With semantic\n"
            "retrieval configured (or vectors present): provider, model, vector coverage and\n"
            "the last embed run (the provider is never contacted)."
        ),
        epilog="exit status: 0 reported, 1 no store (or it cannot be loaded), 2 usage error",
    )
    add_dir(p)
    add_json(p, "a cce.knowledge.status/v1 JSON object")
    p.add_argument("--offline", action="store_true", help="do not contact the remote")
    add_remote(p, "remote to compare against (default: from .cce/config)")
    add_seconds(p, "--timeout", 8, "give up on the remote after this long")
    p.set_defaults(func=cmd_status)


def _positive_seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return v


def register_top(sub: Any) -> None:
    m = sub.add_parser(
        "mcp",
        help="serve the knowledge store to agents over MCP (stdio)",
        description=(
            "Run an MCP server over stdio serving context_search, expand_chunk,\n"
            "related_context and index_status for the knowledge store under --dir.\n"
            "The store loads once and reloads when `current` moves (pull/re-index).\n"
            "stdout carries only the protocol; logs go to stderr (level: $CCE_MCP_LOG)."
        ),
        epilog="exit status: 0 when the client closes the session, 2 usage error",
    )
    add_dir(m)
    add_seconds(m, "--remote-timeout", 5, "bound on index_status' remote lookup")
    add_seconds(
        m,
        "--call-timeout",
        60,
        "answer a tool call that takes longer with an error",
        type=_positive_seconds,
    )
    m.set_defaults(func=cmd_mcp)

    d = sub.add_parser(
        "doctor",
        help="health checks for the knowledge store (exit 1 on corruption)",
        description=(
            "Read-only checks of the knowledge store under --dir: contract version,\n"
            "un-redacted facets and secret-shaped record ids (shown redacted), pulled\n"
            "bytes vs the install record, a stale derived search index, a missing\n"
            "native .cck accelerator, and (when configured) semantic vectors missing or\n"
            "made with another model than knowledge.semantic's.\n"
            "Exit 1 only on definite corruption; advisories keep exit 0."
        ),
        epilog=(
            "exit status: 0 healthy (advisories allowed), 1 a FAIL line or nothing to check,\n"
            "2 usage error"
        ),
    )
    add_dir(d)
    d.set_defaults(func=cmd_doctor)


def cmd_status(args: argparse.Namespace) -> int:
    from cce_knowledge.config.settings import load_settings
    from cce_knowledge.health.status import knowledge_status, render_status
    from cce_knowledge.store.snapshots import no_store_message, store_present

    if not store_present(args.dir):
        raise StoreError(no_store_message(args.dir, "no `current` snapshot installed"))
    try:
        st = knowledge_status(
            args.dir,
            offline=args.offline,
            remote_override=args.remote,
            timeout=args.timeout,
            settings=load_settings(args.dir),
        )
    except StoreError as e:
        raise StoreError(
            no_store_message(args.dir, f"the store cannot be loaded: {e.message}")
        ) from e
    emit(args, Report(lambda: render_status(st), st.to_json_obj))
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from cce_knowledge.mcp.server import serve_stdio

    serve_stdio(args.dir, remote_timeout=args.remote_timeout, call_timeout=args.call_timeout)
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from cce_knowledge.config.settings import load_settings_or_problem
    from cce_knowledge.health.doctor import DOCTOR_FAILED, run_doctor

    settings, problem = load_settings_or_problem(args.dir)
    outcome = run_doctor(args.dir, settings=settings, config_problem=problem)
    sys.stdout.write(outcome.report)
    if not outcome.healthy:
        sys.stdout.flush()
        print(f"error: {DOCTOR_FAILED}", file=sys.stderr)
        return 1
    return 0
