"""`cce action run` — argument parsing for the Action's pipeline driver.

The driver itself lives in `cce_knowledge.action.driver` and is imported only when
the command runs, so a cold `cce knowledge search` never pays for it.

Lazy imports: each handler imports the library it runs, so `cce --help` and every
other command load only what they use (GitPython, the MCP SDK, tree-sitter, numpy).
"""

from __future__ import annotations

import argparse
from typing import Any

from cce_knowledge.action.interface import (  # noqa: F401 (INPUTS/OUTPUTS re-exported)
    INPUTS,
    OUTPUTS,
    STEP_INPUTS,
)


def _handle_run(args: argparse.Namespace) -> int:
    from cce_knowledge.action.driver import run_from_args

    return run_from_args(args)


_HELP = {
    "feed": "cce.knowledge/v1 feed path (required unless --extract)",
    "manifest": "cce.feed-manifest/v1 sidecar; index refuses a feed that does not match",
    "chunk-policy": "cce.chunk-policy/v1 file for index --chunk-policy (docs/chunk-policies.md)",
    "extract": "adapter and its arguments, e.g. 'github --repo acme/app'",
    "corpus": "corpus id (default: knowledge.sync.corpus_id)",
    "remote": "cache git URL (default: knowledge.sync.remote / sync.remote)",
    "cache-token": "token for the cache (prefer the CCE_IN_CACHE_TOKEN env var)",
    "source-token": "READ token for the extract source (prefer CCE_IN_SOURCE_TOKEN)",
    "retention": "all | keep-last-<n>, written to knowledge.sync.retention",
    "dry-run": "true: run everything up to the push, publish nothing",
    "force": "true: allow a shrinking or overwriting publish (skips the push guard)",
    "ask-suite": "cce.knowledge.ask/v1 suite that must pass before publishing",
    "incremental": (
        "true (default): pull the published store first so index reuses its chunks "
        "(a first publish indexes in full)"
    ),
    "allow-empty": "true: a feed with no records may replace the corpus (else the step fails)",
    "working-directory": "project root holding .cce/ (created if missing; default .)",
    "files": "paths or globs to validate, space-separated (default '**/*.jsonl **/*.manifest.json')",
    "fail-on-shrink": "true (default): fail when records would be dropped or a snapshot diverges",
    "skip-unchanged": "true (default): publish nothing when the remote already has this snapshot",
    "snapshot": "a published snapshot to install (default: the remote `current`)",
    "semantic-url": "embedding server for index/pull (sets CCE_EMBED_URL; docs/semantic.md)",
    "semantic-model": "embedding model for semantic-url (sets CCE_EMBED_MODEL)",
    "allowed-signers": "OpenSSH allowed_signers file (pull: verify; run: the signing key must be listed)",
}

#: Inputs read only from their CCE_IN_<NAME> variable: a private key never goes in argv.
_ENV_ONLY = frozenset({"signing-key"})

_STEP_HELP = {
    "run": (
        "extract → validate → pull → index → shrink guard → ask gate → push, with outputs and summary",
        "Run the Action's pipeline: optional extract, validate, pull the published\n"
        "store (with --incremental, the default, so index reuses its chunks), index\n"
        "(with the manifest when given), push --dry-run as the shrink guard,\n"
        "optional ask gate, then push --skip-unchanged (an unchanged snapshot\n"
        "publishes nothing unless --force).",
    ),
    "validate": (
        "validate feeds, manifests and ask suites with file/line annotations",
        "Validate every file the patterns match with `cce knowledge validate --json`\n"
        "and annotate each problem with its file and line (the validate sub-action).",
    ),
    "index": (
        "optional extract, validate and index a feed into the store",
        "Optional extract, then validate the feed, pull the published store when a\n"
        "cache remote is known (--incremental, the default), and index the feed\n"
        "(with the manifest when given) into <working-directory>/.cce/knowledge\n"
        "(the index sub-action).",
    ),
    "guard": (
        "the shrink-guard dry-run: diff the store against the remote current",
        "Run `cce knowledge push --dry-run --json` and report added/removed/changed\n"
        "records and a markdown diff; fail on a shrink unless --force or\n"
        "--fail-on-shrink false (the guard sub-action).",
    ),
    "push": (
        "optional ask gate, then publish with retention (skip an unchanged snapshot)",
        "Optional retention and ask gate, then `cce knowledge push --json`\n"
        "(--skip-unchanged by default; the push's own guard refuses a shrink unless\n"
        "--force) (the push sub-action).",
    ),
    "pull": (
        "install a published corpus from the cache",
        "Run `cce knowledge pull --json` into <working-directory> (the pull sub-action).",
    ),
}

_COMMON_TAIL = (
    "\n\nEach option defaults to its CCE_IN_<NAME> environment variable (how the\n"
    "action.yml files pass inputs). Outputs go to $GITHUB_OUTPUT (or stdout as\n"
    "name=value outside Actions); a markdown summary goes to $GITHUB_STEP_SUMMARY\n"
    "when set. The signing key (run, push) is read only from CCE_IN_SIGNING_KEY,\n"
    "never from the command line. Exit 1 when any step refuses."
)


def register_top(sub: Any) -> None:
    ap = sub.add_parser(
        "action",
        help="GitHub Action helpers (the Action's step driver)",
        description=(
            "Helpers behind the cce-knowledge GitHub Action: `run` is the all-in-one\n"
            "root action.yml, the others are its composable sub-actions."
        ),
    )
    asub = ap.add_subparsers(dest="action_command", metavar="SUBCOMMAND")
    ap.set_defaults(_parser=ap)
    for step, inputs in STEP_INPUTS.items():
        short, long = _STEP_HELP[step]
        rp = asub.add_parser(step, help=short, description=long + _COMMON_TAIL)
        for inp in inputs:
            if inp in _ENV_ONLY:
                continue
            rp.add_argument(
                f"--{inp}",
                dest=inp.replace("-", "_"),
                default=None,
                metavar="VALUE",
                help=_HELP[inp],
            )
        rp.set_defaults(func=_handle_run)
