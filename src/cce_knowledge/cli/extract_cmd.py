"""`cce knowledge extract github|docs|okf` — reference adapters that emit cce.knowledge/v1.

Light at import (argparse only); handlers import the adapters.

Lazy imports: each handler imports the library it runs, so `cce --help` and every
other command load only what they use (GitPython, the MCP SDK, tree-sitter, numpy).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from cce_knowledge.cli.common import add_switches
from cce_knowledge.core.errors import UsageError

_OUT_HELP = "write the feed here (atomically) instead of stdout"
_EXIT = "exit status: 0 feed written, 1 failed (nothing written), 2 usage error"
_EXIT_GITHUB = (
    _EXIT
    + ",\n3 stopped at the rate limit (nothing written; with --checkpoint the next run resumes)"
)
_MANIFEST_HELP = "also write the cce.feed-manifest/v1 sidecar (records + sha256) here"


def _common_out(p: argparse.ArgumentParser, *, out_help: str = _OUT_HELP) -> None:
    p.add_argument("--out", metavar="FILE", help=out_help)
    p.add_argument("--manifest", metavar="FILE", help=_MANIFEST_HELP)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress or summary on stderr")


def register_knowledge(sub: Any) -> None:
    ep = sub.add_parser(
        "extract",
        help="run a reference adapter: github, docs or okf → cce.knowledge/v1 NDJSON",
        description=(
            "Run a reference adapter and write a deterministic cce.knowledge/v1 feed:\n"
            "same source state → same bytes → same snapshot."
        ),
    )
    ep.set_defaults(_parser=ep)
    esub = ep.add_subparsers(dest="adapter", metavar="ADAPTER")
    _register_github(esub)
    _register_docs(esub)
    _register_okf(esub)


def _register_github(esub: Any) -> None:
    gh = esub.add_parser(
        "github",
        help="issues and pull requests over the GitHub REST API",
        description=(
            "Issues and pull requests of one repository over the GitHub REST API, read by\n"
            "pages: the issues list, the repository-wide comments (--include-comments), and\n"
            "links from the pull requests' bodies. Base URL from GITHUB_API_URL (default\n"
            "https://api.github.com); token from GITHUB_TOKEN or the variable named by\n"
            "--token-env. not_planned items are dropped unless --keep-not-planned. With\n"
            "--checkpoint, later runs fetch only what changed, and a run stopped by the rate\n"
            "limit or an error resumes.\n\n"
            "Lockdown: --authors keeps text by trusted authors only (author_association).\n"
            "Without it, one request reads the repository's visibility: public →\n"
            "collaborators, private → all, unreadable → all with a warning. Hidden text\n"
            "(HTML comments outside code, tag characters, bidi controls, zero-width\n"
            "characters) is removed from every record; stderr counts what was left out.\n\n"
            + _EXIT_GITHUB
        ),
    )
    gh.add_argument("--repo", required=True, metavar="OWNER/NAME", help="the repository")
    _common_out(gh, out_help=_OUT_HELP + " (required with --since/--checkpoint)")
    _github_incremental_args(gh)
    _github_content_args(gh)
    _github_http_args(gh)
    gh.set_defaults(func=_github)


def _github_incremental_args(gh: argparse.ArgumentParser) -> None:
    gh.add_argument(
        "--since",
        metavar="T",
        help="incremental: fetch items and comments updated at/after ISO-8601 T, merge into --out",
    )
    gh.add_argument(
        "--checkpoint",
        metavar="FILE",
        help="incremental state (FILE, FILE.mirror): resume stopped runs, continue from the last",
    )
    gh.add_argument(
        "--full", action="store_true", help="ignore the checkpoint's state and refetch everything"
    )


def _github_content_args(gh: argparse.ArgumentParser) -> None:
    gh.add_argument(
        "--state",
        choices=("open", "closed", "all"),
        default="all",
        help="which items to keep (default: all)",
    )
    add_switches(
        gh,
        ("--include-comments", "append comments under a '## Comments' section"),
        ("--keep-not-planned", "keep items closed as not_planned (dropped by default)"),
    )
    tl = gh.add_mutually_exclusive_group()
    tl.add_argument(
        "--timeline",
        action="store_true",
        help="also read each issue's timeline: links from PR comments and other repositories "
        "(one or more requests per issue)",
    )
    tl.add_argument("--no-timeline", action="store_true", help="the default (kept for old scripts)")
    gh.add_argument(
        "--authors",
        choices=("collaborators", "contributors", "all"),
        help="whose items and comments to keep: collaborators (OWNER, MEMBER, COLLABORATOR), "
        "contributors (also CONTRIBUTOR) or all; default: collaborators for a public "
        "repository, all for a private one (one extra request)",
    )
    gh.add_argument(
        "--scrub",
        action="append",
        default=[],
        metavar="REGEX",
        help="replace matches in titles/bodies with [SCRUBBED] (repeatable)",
    )


def _github_http_args(gh: argparse.ArgumentParser) -> None:
    gh.add_argument(
        "--token-env",
        default="GITHUB_TOKEN",
        metavar="NAME",
        help="environment variable holding the token (default: GITHUB_TOKEN)",
    )
    gh.add_argument(
        "--max-wait",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="total time to wait for rate-limit resets and retries; a longer rate-limit wait "
        "stops the run (exit 3) (default 300)",
    )
    gh.add_argument(
        "--retries",
        type=int,
        default=4,
        metavar="N",
        help="retries for 5xx and network errors, with exponential backoff (default 4)",
    )
    gh.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help="pages fetched in parallel (default 4); per-issue timeline requests run one at "
        "a time unless N is given",
    )


def _add_naming(p: argparse.ArgumentParser, tag: str, path: str) -> None:
    """`--source` and `--id-prefix` of a file adapter: its records' source tag (default
    `tag`) and id prefix (default `tag:`), the id being the prefix + the file's `path`."""
    p.add_argument(
        "--source", default=tag, metavar="TAG", help=f"record source tag (default: {tag})"
    )
    p.add_argument(
        "--id-prefix",
        default=f"{tag}:",
        metavar="P",
        help=f"record id = P + {path} (default: {tag}:)",
    )


def _register_docs(esub: Any) -> None:
    dp = esub.add_parser(
        "docs",
        help="one record per Markdown file of a docs tree or git repository",
        description=(
            "One record per Markdown file (*.md, *.markdown): YAML frontmatter gives\n"
            "title/labels/group, else the first heading, else the file name. updated_at\n"
            "and url come from the last commit touching the file, so a shallow clone\n"
            "(actions/checkout's default) is refused: check out with `fetch-depth: 0`,\n"
            "or pass --allow-shallow. Hidden folders, vendor/ and node_modules/ are\n"
            "skipped. Hidden text (HTML comments outside code, tag characters, bidi\n"
            "controls, zero-width characters) is removed and counted on stderr.\n\n" + _EXIT
        ),
    )
    src = dp.add_mutually_exclusive_group(required=True)
    src.add_argument("--root", metavar="DIR", help="a local directory")
    src.add_argument("--repo", metavar="GIT_URL", help="a git repository to clone (temporarily)")
    dp.add_argument("--ref", metavar="R", help="branch, tag or commit to read (with --repo)")
    dp.add_argument(
        "--glob",
        action="append",
        default=[],
        metavar="PATTERN",
        help="include paths matching PATTERN (repeatable; default **/*.md, **/*.markdown)",
    )
    dp.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="exclude paths matching PATTERN (repeatable)",
    )
    _add_naming(dp, "docs", "relative path")
    dp.add_argument(
        "--url-base",
        metavar="URL",
        help="file URLs as URL/<sha>/<path> instead of deriving them from the remote",
    )
    dp.add_argument(
        "--allow-shallow",
        action="store_true",
        help="read a shallow git clone anyway, leaving updated_at out of every file "
        "whose last change the cut history cannot show",
    )
    _common_out(dp)
    dp.set_defaults(func=_docs)


def _register_okf(esub: Any) -> None:
    op = esub.add_parser(
        "okf",
        help="an A3S knowledge base's promoted wiki/ (OKF Markdown)",
        description=(
            "Records from an A3S knowledge base's promoted wiki/**/*.md only (never\n"
            "sources/ or .a3s/compilation-output/). Documents need YAML frontmatter with\n"
            "the OKF `type` field; others are skipped with a warning. Hidden text is\n"
            "removed as by the docs adapter and counted on stderr.\n\n" + _EXIT
        ),
    )
    op.add_argument("--root", required=True, metavar="KNOWLEDGE_BASE", help="the knowledge base")
    _add_naming(op, "okf", "path under wiki/")
    _common_out(op)
    op.set_defaults(func=_okf)


def _say(args: argparse.Namespace) -> Any:
    def say(msg: str) -> None:
        if not args.quiet:
            print(f"extract {args.adapter}: {msg}", file=sys.stderr, flush=True)

    return say


def _warn(args: argparse.Namespace) -> Any:
    def warn(msg: str) -> None:
        print(f"warning: {msg}", file=sys.stderr, flush=True)

    return warn


def _summary(args: argparse.Namespace, n: int) -> None:
    dest = args.out or "stdout"
    _say(args)(f"{n} records → {dest}" + (f" (manifest {args.manifest})" if args.manifest else ""))


def _github_options(args: argparse.Namespace) -> Any:
    from cce_knowledge.extract.github import GitHubOptions

    if args.retries < 0 or args.max_wait < 0:
        raise UsageError("--retries and --max-wait must not be negative")
    return GitHubOptions(
        repo=args.repo,
        state=args.state,
        include_comments=args.include_comments,
        keep_not_planned=args.keep_not_planned,
        timeline=args.timeline,
        scrub=list(args.scrub),
        concurrency=4 if args.concurrency is None else args.concurrency,
        item_concurrency=1 if args.concurrency is None else args.concurrency,
        authors=args.authors,
    )


def _github(args: argparse.Namespace) -> int:

    from cce_knowledge.extract.checkpoint import run_github
    from cce_knowledge.extract.github import Fetcher
    from cce_knowledge.extract.httpclient import DEFAULT_API, GitHubClient

    opts = _github_options(args)
    token = os.environ.get(args.token_env) or None
    base = os.environ.get("GITHUB_API_URL") or DEFAULT_API
    say = _say(args)
    with GitHubClient(
        base, token, repo=args.repo, max_wait=args.max_wait, retries=args.retries
    ) as client:
        stats = run_github(
            Fetcher(client, opts),
            out=args.out,
            manifest=args.manifest,
            checkpoint=args.checkpoint,
            since=args.since,
            full=args.full,
            progress=say,
            warn=_warn(args),
        )
    since = f" since {stats.since}" if stats.since else ""
    budget = f", {stats.rate_remaining} requests left" if stats.rate_remaining is not None else ""
    say(
        f"{stats.mode} run{since}: {stats.pages} pages, {stats.requests} requests{budget}, "
        f"{stats.upserts} items fetched, {stats.removals} dropped, {stats.comments} comments, "
        f"waited {stats.waited:.0f}s"
    )
    _trust_summary(args, stats.authors, stats.left_items, stats.left_comments, stats.hidden)
    _summary(args, stats.records)
    return 0


def _trust_summary(
    args: argparse.Namespace, authors: str, items: int, comments: int, hidden: Any
) -> None:
    """What lockdown and hidden-text removal left out (the Action's job summary reads
    the `trust:` and `hidden text` lines)."""
    from cce_knowledge.extract.feed import hidden_lines

    say = _say(args)
    if authors != "all":
        say(
            f"trust: --authors {authors} left out {items} item(s) and {comments} comment(s) "
            "by other authors"
        )
    for line in hidden_lines(hidden):
        say(line)


def _hidden_summary(args: argparse.Namespace, hidden: Any) -> None:
    from cce_knowledge.extract.feed import hidden_lines

    for line in hidden_lines(hidden):
        _say(args)(line)


def _write_records(
    args: argparse.Namespace, extract: Callable[[Any, dict[str, Any]], list[Any]]
) -> int:
    """A file adapter's run: `extract(warn, hidden)`'s records written as the feed, then
    what hidden text was removed and how many records, on stderr."""
    from cce_knowledge.extract.feed import feed_bytes
    from cce_knowledge.extract.output import write_feed

    hidden: dict[str, Any] = {}
    records = extract(_warn(args), hidden)
    write_feed(feed_bytes(records), records, out=args.out, manifest=args.manifest)
    _hidden_summary(args, hidden)
    _summary(args, len(records))
    return 0


def _docs(args: argparse.Namespace) -> int:
    from cce_knowledge.extract.docs import DocsOptions, extract_docs

    opts = DocsOptions(
        root=args.root,
        repo=args.repo,
        ref=args.ref,
        globs=list(args.glob),
        exclude=list(args.exclude),
        source=args.source,
        id_prefix=args.id_prefix,
        url_base=args.url_base,
        allow_shallow=args.allow_shallow,
    )
    return _write_records(args, lambda warn, hidden: extract_docs(opts, warn=warn, hidden=hidden))


def _okf(args: argparse.Namespace) -> int:
    from cce_knowledge.extract.okf import OkfOptions, extract_okf

    opts = OkfOptions(root=args.root, source=args.source, id_prefix=args.id_prefix)
    return _write_records(args, lambda warn, hidden: extract_okf(opts, warn=warn, hidden=hidden))
