"""`cce` entry point. Errors become exit codes here and only here.

Command modules are imported eagerly but must stay light at import time (argparse
only); each handler imports the library it needs, so `cce --help` and a cold
`cce knowledge search` do not pay for tree-sitter, git or the MCP SDK.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from cce_knowledge import __version__
from cce_knowledge.cli import (
    action_cmds,
    consumer_cmds,
    contract_cmds,
    corpus_cmds,
    extract_cmd,
    index_cmd,
    retrieval_cmds,
    semantic_cmds,
    sync_cmds,
)
from cce_knowledge.cli.common import Parser, add_group
from cce_knowledge.core import progress
from cce_knowledge.core.errors import CceError

# Order = order in `cce knowledge --help`: the pipeline, then the consumer side.
_KNOWLEDGE_MODULES = (
    extract_cmd,
    contract_cmds,
    index_cmd,
    semantic_cmds,
    retrieval_cmds,
    sync_cmds,
    consumer_cmds,
    action_cmds,
)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="cce",
        description=(
            "cce-knowledge — turn the 'why' behind code (issues, epics, design docs,\n"
            "policies) into searchable knowledge corpora.\n\n"
            "Pipeline: extract → validate → index → push (dry-run first) → pull → search/ask/mcp"
        ),
        epilog="Run `cce knowledge --help` or `cce sync --help` for the command groups.",
    )
    p.add_argument("--version", action="version", version=f"cce-knowledge {__version__}")
    top = p.add_subparsers(dest="group", metavar="COMMAND")

    ksub = add_group(
        top,
        "knowledge",
        "build, publish and query knowledge corpora",
        "Build, publish and query knowledge corpora (cce.knowledge/v1).",
    )
    ssub = add_group(
        top,
        "sync",
        "the git cache: init, list, pull --all, verify",
        "Work with the git cache repository that carries published corpora.",
    )

    csub = add_group(
        top,
        "corpus",
        "serve a corpus over HTTP: GET /docs and MCP",
        "Serve an installed corpus to programs and agents over HTTP.",
    )
    corpus_cmds.register_corpus(csub)

    for mod in _KNOWLEDGE_MODULES:
        reg = getattr(mod, "register_knowledge", None)
        if reg:
            reg(ksub)
    for mod in _KNOWLEDGE_MODULES:
        reg = getattr(mod, "register_sync", None)
        if reg:
            reg(ssub)
    for mod in _KNOWLEDGE_MODULES:
        reg = getattr(mod, "register_top", None)
        if reg:
            reg(top)
    p.set_defaults(_parser=p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        args._parser.print_help(sys.stderr)
        return 2
    # Resolved once here: -q/--quiet, CI, and whether stderr is a terminal.
    previous = progress.current()
    progress.configure(progress.resolve(quiet=bool(getattr(args, "quiet", False))))
    try:
        rc = func(args)
        sys.stdout.flush()
        return int(rc or 0)
    except CceError as e:
        # Lazy: the error path only; sync.remote's import is not free on every start.
        from cce_knowledge.sync.remote import remove_secrets

        sys.stdout.flush()
        # Last line of defence: no token from the environment, in any encoding we send.
        print(f"error: {remove_secrets(e.message)}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        # A typed answer, never a traceback: say what ran out and what to try.
        sys.stdout.flush()
        print(
            "error: out of memory — the input is too large for the memory this process may "
            "use (raise the limit, or split the input)",
            file=sys.stderr,
        )
        return 1
    except BrokenPipeError:
        # Output piped into `head` and closed: not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    finally:
        progress.configure(previous)


if __name__ == "__main__":
    raise SystemExit(main())
