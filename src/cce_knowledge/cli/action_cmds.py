"""`cce action run` — argument parsing for the Action's pipeline driver.

The driver itself lives in `cce_knowledge.action.driver` and is imported only when
the command runs, so a cold `cce knowledge search` never pays for it.
"""

from __future__ import annotations

import argparse
from typing import Any

from cce_knowledge.action.interface import INPUTS, OUTPUTS  # noqa: F401 (re-exported)


def _handle_run(args: argparse.Namespace) -> int:
    from cce_knowledge.action.driver import run_from_args

    return run_from_args(args)


def register_top(sub: Any, formatter_class: type[argparse.HelpFormatter]) -> None:
    ap = sub.add_parser(
        "action",
        help="GitHub Action helpers (the Action's pipeline driver)",
        formatter_class=formatter_class,
        description="Helpers behind the cce-knowledge GitHub Action (action.yml).",
    )
    asub = ap.add_subparsers(dest="action_command", metavar="SUBCOMMAND")
    ap.set_defaults(_parser=ap)
    rp = asub.add_parser(
        "run",
        help="extract → validate → index → shrink guard → ask gate → push, with outputs and summary",
        formatter_class=formatter_class,
        description=(
            "Run the Action's pipeline: optional extract, validate, index (with the\n"
            "manifest when given), push --dry-run as the shrink guard, optional ask\n"
            "gate, then push. Each option defaults to its CCE_IN_<NAME> environment\n"
            "variable (how action.yml passes inputs). Outputs go to $GITHUB_OUTPUT\n"
            "(or stdout as name=value outside Actions); a markdown summary goes to\n"
            "$GITHUB_STEP_SUMMARY when set. Exit 1 when any step refuses."
        ),
    )
    help_text = {
        "feed": "cce.knowledge/v1 feed path (required unless --extract)",
        "manifest": "cce.feed-manifest/v1 sidecar; index refuses a feed that does not match",
        "extract": "adapter and its arguments, e.g. 'github --repo acme/app'",
        "corpus": "corpus id (default: knowledge.sync.corpus_id)",
        "remote": "cache git URL (default: knowledge.sync.remote / sync.remote)",
        "cache-token": "WRITE token for the cache (prefer the CCE_IN_CACHE_TOKEN env var)",
        "source-token": "READ token for the extract source (prefer CCE_IN_SOURCE_TOKEN)",
        "retention": "all | keep-last-<n>, written to knowledge.sync.retention",
        "dry-run": "true: run everything up to the push, publish nothing",
        "force": "true: allow a shrinking publish",
        "ask-suite": "cce.knowledge.ask/v1 suite that must pass before publishing",
        "working-directory": "project root holding .cce/ (created if missing; default .)",
    }
    for inp in INPUTS:
        rp.add_argument(
            f"--{inp}",
            dest=inp.replace("-", "_"),
            default=None,
            metavar="VALUE",
            help=help_text[inp],
        )
    rp.set_defaults(func=_handle_run)
