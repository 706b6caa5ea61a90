"""`cce knowledge push|pull` and `cce sync init|list|pull --all|verify` (argparse only here).

Handlers import the sync library lazily so `cce --help` never loads GitPython.

Lazy imports: each handler imports the library it runs, so `cce --help` and every
other command load only what they use (GitPython, the MCP SDK, tree-sitter, numpy).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from cce_knowledge.cli.common import (
    add_corpus,
    add_dir,
    add_json,
    add_quiet,
    add_remote,
    add_switches,
    report_search_build,
)
from cce_knowledge.cli.report import Report, emit

if TYPE_CHECKING:
    from cce_knowledge.sync.pull import PullResult
    from cce_knowledge.sync.push import PushResult

_ALLOWED_HELP = (
    "OpenSSH allowed_signers file (default: knowledge.sync.allowed_signers): install only a "
    "snapshot whose statement a listed key signed (namespace cce-knowledge), that matches "
    "the artifact and is not older than the one installed"
)
_EXIT = "exit status: 0 {ok}, 1 refused or failed, 2 usage error"


def _emit(text: str) -> None:
    sys.stdout.write(text)


# ---------------------------------------------------------------- knowledge push / pull


def _push_data(res: PushResult, *, dry_run: bool) -> dict[str, Any]:
    """The program-facing push report (what the Action's driver reads)."""
    return {
        "added": res.added,
        "changed": res.changed,
        "checksum": res.checksum,
        "chunks": res.chunks,
        "corpus_id": res.corpus_id,
        "data_as_of": res.data_as_of,
        "dry_run": dry_run,
        "guard": res.guard,
        "key": res.key,
        # ours: removed records the extractor left out by author (lockdown), or null
        "left_out_by_author": None
        if not res.left_out
        else {"authors": res.left_out_authors, "records": res.left_out},
        "published": res.published,
        "pruned": res.pruned,
        "pushed_at": res.pushed_at,
        "records": res.records,
        "remote": res.remote,
        "remote_snapshot": res.remote_snapshot,
        "removed": res.removed,
        "report": res.report,
        "retention": res.retention,
        "retention_warning": res.retention_warning,
        "signature": None
        if res.signed_by is None
        else {
            "counter": res.counter,
            "previous_ignored": res.signing_warning,
            "signed_by": res.signed_by,
            "statement_key": res.statement_key,
        },
        "snapshot": res.snapshot,
        "unchanged_skipped": res.unchanged_skipped,
    }


def _push(args: argparse.Namespace) -> int:
    from cce_knowledge.config.settings import load_settings
    from cce_knowledge.sync.push import push_corpus

    res = push_corpus(
        args.dir,
        settings=load_settings(args.dir),
        corpus=args.corpus,
        remote=args.remote,
        force=args.force,
        dry_run=args.dry_run,
        skip_unchanged=args.skip_unchanged,
        lfs=False if args.no_lfs else None,
        sign_key=args.sign_key,
    )
    emit(args, Report(lambda: res.report, lambda: _push_data(res, dry_run=args.dry_run)))
    if res.signing_warning:
        print(f"warning: {res.signing_warning}", file=sys.stderr)
    return 0


def _pull_data(res: PullResult) -> dict[str, Any]:
    """The program-facing pull report."""
    v = res.verified
    return {
        "signature": None
        if res.signed_by is None and v is None
        else {
            "counter": v.statement.counter if v else None,
            "published_at": v.statement.published_at if v else None,
            "signed_by": v.signer if v else res.signed_by,
            "verified": v is not None,
        },
        "checksum": res.checksum,
        "chunks": res.chunks,
        "corpus_id": res.corpus_id,
        "installed_sha256": res.installed_sha256,
        "records": res.records,
        "remote": res.remote,
        "snapshot": res.snapshot,
        "store": res.store_display,
        "up_to_date": res.up_to_date,
    }


def _pull(args: argparse.Namespace) -> int:
    from cce_knowledge.config.settings import load_settings
    from cce_knowledge.retrieval.search_index import build_step, ensure_step
    from cce_knowledge.sync.pull import pull_corpus
    from cce_knowledge.sync.pull_target import resolve_pull_target

    settings = load_settings(args.dir)
    # A bare pull refreshes what is installed, from where it came (flags and config win).
    target = resolve_pull_target(args.dir, settings, args.corpus, args.remote)
    for note in target.notes:
        print(note, file=sys.stderr)
    res = pull_corpus(
        args.dir,
        settings=settings,
        corpus=target.corpus,
        snapshot=args.snapshot,
        force=args.force,
        remote=target.remote,
        after_install=None if args.no_search_index else lambda snap: build_step(args.dir, snap),
        allowed_signers=args.allowed_signers,
        if_current=None if args.no_search_index else lambda snap: ensure_step(args.dir, snap),
        reset_trust=args.reset_trust,
    )
    emit(args, Report(lambda: res.report, lambda: _pull_data(res)))
    report_search_build(res.search)
    for w in res.warnings:
        print(f"warning: {w}", file=sys.stderr)
    from cce_knowledge.cli.semantic_cmds import embed_step
    from cce_knowledge.retrieval.search_index import INDEX_KEY, index_path, try_open
    from cce_knowledge.sync.vector_share import pull_published_vectors

    # Published vectors must have one row per chunk of the index search reads.
    idx = try_open(index_path(args.dir, res.snapshot), res.snapshot)
    line = pull_published_vectors(
        args.dir,
        res.corpus_id,
        res.snapshot,
        target.remote,
        settings,
        expected=res.verified.statement.vectors if res.verified is not None else None,
        count=res.chunks if idx is None else idx.n_chunks,
        layout=INDEX_KEY,
    )
    if line:
        print(f"note: {line}", file=sys.stderr)

    embed_step(args.dir, settings)
    return 0


def register_knowledge(sub: Any) -> None:
    p = sub.add_parser(
        "push",
        help="publish the local store to the git cache (shrink guard first)",
        description=(
            "Export the local knowledge store as a .cck and publish it to the git cache as\n"
            "knowledge/v1/<corpus>/<snapshot>.cck, moving `current` and rewriting corpus.json in\n"
            "one commit. The shrink guard compares against the remote current first and refuses\n"
            "to drop records unless --force. Nothing local is written."
        ),
        epilog=_EXIT.format(ok="published or dry-run reported"),
    )
    add_corpus(p)
    add_remote(p)
    add_dir(p)
    add_switches(
        p,
        ("--force", "skip the shrink guard (intentional shrink)"),
        (
            "--no-lfs",
            "publish the .cck as a plain git blob (without git-lfs, push refuses instead)",
        ),
        ("--dry-run", "report what a push would change; publish nothing"),
        (
            "--skip-unchanged",
            "publish nothing (no cache commit) when the remote `current` already names this "
            "snapshot with identical content; without it an unchanged push re-publishes, "
            "refreshing pushed_at (the reference's behaviour)",
        ),
    )
    p.add_argument(
        "--sign-key",
        metavar="PATH",
        help=(
            "OpenSSH private key (ed25519, ecdsa or rsa, no passphrase) to sign the publish "
            "with: a statement and its .sig go beside the artifact (default: the key text in "
            "CCE_SIGNING_KEY, else knowledge.sync.signing_key; none: unsigned)"
        ),
    )
    add_json(p)
    add_quiet(p)
    p.set_defaults(func=_push)

    q = sub.add_parser(
        "pull",
        help="install a published corpus from the git cache",
        description=(
            "Fetch knowledge/v1/<corpus>/<snapshot>.cck (default: the remote `current`), verify\n"
            "its checksum, and install a byte-identical store under <dir>/.cce/knowledge/ with a\n"
            "synced.json marker. `current` moves last, so a failed pull never touches the\n"
            "active store.\n\n"
            "When the installed store already is that snapshot (synced.json, `current` and the\n"
            'store\'s recorded sha256 agree), the pull says "up to date", fetches no artifact\n'
            "and rewrites nothing under .cce/knowledge/ (--force reinstalls).\n\n"
            "Like `git pull` with an upstream, a bare pull refreshes what is installed from\n"
            "where it came. The corpus: --corpus, else knowledge.sync.corpus_id, else the\n"
            "installed one (synced.json), else the cache's only corpus. The remote: --remote,\n"
            "else knowledge.sync.remote, else sync.remote, else the one the installed corpus\n"
            "was pulled from (pulled-from.json; `cce knowledge status` shows it). When a flag\n"
            "or the config overrides a different value below it, a note on stderr says which\n"
            "one was used (a --corpus other than the installed one is refused by the marker\n"
            "guard instead, which names both).\n\n"
            "With an embedding provider configured (knowledge.semantic, or CCE_EMBED_MODEL),\n"
            "vectors the corpus published for that model are installed too, and chunks still\n"
            "without one are embedded (a provider that is down is a warning, never a failed\n"
            "pull; docs/semantic.md)."
        ),
        epilog=_EXIT.format(ok="installed or up to date"),
    )
    add_corpus(
        q,
        "corpus id (default: knowledge.sync.corpus_id, else the installed corpus, else the "
        "cache's only corpus)",
    )
    g = q.add_mutually_exclusive_group()
    g.add_argument("--latest", action="store_true", help="the remote `current` (the default)")
    g.add_argument("--snapshot", metavar="ID", help="a specific published snapshot")
    q.add_argument(
        "--force",
        action="store_true",
        help="fetch and reinstall even when the snapshot is already installed, and replace "
        "a store that came from a different corpus",
    )
    add_remote(q)
    q.add_argument("--allowed-signers", metavar="FILE", help=_ALLOWED_HELP)
    q.add_argument(
        "--reset-trust",
        action="store_true",
        help="replace this root's rollback floor for the corpus with the snapshot pulled now "
        "(still verified under allowed signers): the recovery from an unusable or poisoned "
        "floor (docs/security.md)",
    )
    q.add_argument(
        "--no-search-index",
        action="store_true",
        help="leave the derived search index to the first search on this root: a nightly "
        "builder pulls only to index incrementally, and its index step builds it (or skips "
        "it too)",
    )
    add_dir(q)
    add_json(q)
    add_quiet(q)
    q.set_defaults(func=_pull)


# ---------------------------------------------------------------- sync group


def _init(args: argparse.Namespace) -> int:
    from cce_knowledge.config.settings import load_settings
    from cce_knowledge.sync.remote_setup import sync_init

    configured = load_settings(args.dir, warn=False).sync.repo_id
    res = sync_init(
        args.dir, args.remote, lfs=args.lfs, repo_id=args.repo_id, configured_repo_id=configured
    )
    if res.backup is not None:
        print(
            f"warning: {args.dir}/.cce/config could not be parsed; the old file was kept as {res.backup}",
            file=sys.stderr,
        )
    _emit(res.report)
    return 0


def _list(args: argparse.Namespace) -> int:
    from cce_knowledge.config.settings import load_settings
    from cce_knowledge.sync.clone import open_cache
    from cce_knowledge.sync.listing import list_cache, listing_data, render_human
    from cce_knowledge.sync.remote import resolve_listing_remote

    rem = resolve_listing_remote(load_settings(args.dir), args.remote)
    with open_cache(rem) as cache:
        lst = list_cache(cache)
    emit(args, Report(lambda: render_human(lst), lambda: listing_data(lst)))
    return 0


def _sync_pull(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args._cmd_parser
    if args.corpus is not None and not args.all:
        parser.error("--corpus requires --all")
    if not args.all:
        parser.error(
            "cce-knowledge carries no code artifacts: use `cce sync pull --all --into <dir>` "
            "or `cce knowledge pull`"
        )
    if args.into is None:
        parser.error("--all requires --into <dir>")
    from cce_knowledge.config.settings import load_settings
    from cce_knowledge.retrieval.search_index import ensure_step
    from cce_knowledge.sync.pull_all import pull_all

    res = pull_all(
        args.into,
        settings=load_settings(args.into),
        remote=args.remote,
        corpus=args.corpus,
        after_install=lambda snap: ensure_step(args.into, snap),
        allowed_signers=args.allowed_signers,
    )
    _emit(res.report)
    report_search_build(res.search)
    if res.refusal is not None:
        from cce_knowledge.sync.signing import SignatureRefused

        raise SignatureRefused(res.refusal)
    return 0


def _verify(args: argparse.Namespace) -> int:
    if not args.checksum_only:
        args._cmd_parser.error(
            "a knowledge corpus can only be verified with --checksum-only "
            "(the puller lacks the source feed, so there is no rebuild-verify)"
        )
    from cce_knowledge.config.settings import load_settings
    from cce_knowledge.sync.verify import verify_root

    configured = load_settings(args.dir).knowledge.sync.allowed_signers
    _emit(verify_root(args.dir, args.allowed_signers, configured))
    return 0


def register_sync(sub: Any) -> None:
    p = sub.add_parser(
        "init",
        help="point this project at a cache remote (edits .cce/config in place)",
        description=(
            "Clone the cache and, with LFS on, commit its *.cck and *.cce attribute lines\n"
            "(one commit), then set sync.remote (and sync.lfs / sync.repo_id) in\n"
            "<dir>/.cce/config, keeping every other block and comment. A remote that cannot\n"
            "be reached leaves the config unchanged. Credentials in the URL are NOT stored:\n"
            "give a token through CCE_SYNC_TOKEN or GITHUB_TOKEN at run time. A token goes\n"
            "only to the remote's own origin (redirects are not followed) and never over\n"
            "plain http:// unless CCE_ALLOW_INSECURE_HTTP=1."
        ),
        epilog=_EXIT.format(ok="configured"),
    )
    add_remote(p, "cache repository URL", required=True)
    lfs = p.add_mutually_exclusive_group()
    lfs.add_argument(
        "--lfs", dest="lfs", action="store_true", default=True, help="use git-LFS (default)"
    )
    lfs.add_argument(
        "--no-lfs", dest="lfs", action="store_false", help="store artifacts as plain git blobs"
    )
    p.add_argument("--repo-id", metavar="ID", help="code repo id recorded as sync.repo_id")
    add_dir(p)
    p.set_defaults(func=_init)

    ls = sub.add_parser(
        "list",
        help="list what the cache carries (knowledge corpora and code repos)",
        description="List the corpora (and any code repos) the cache carries. Read-only.",
        epilog=_EXIT.format(ok="listed"),
    )
    add_remote(ls, "cache repository URL (overrides sync.remote)")
    add_json(ls, "cce.synclist/v1 JSON")
    add_dir(ls)
    ls.set_defaults(func=_list)

    pl = sub.add_parser(
        "pull",
        help="install the cache's knowledge corpus into a directory (--all --into)",
        description=(
            "Install everything the cache offers into <dir>. cce-knowledge installs the\n"
            "knowledge corpus (one per root); code repos are reported as skipped. Never fails\n"
            "because of the knowledge step: problems are printed as warnings, except a\n"
            "snapshot refused under allowed signers (exit 1)."
        ),
        epilog=_EXIT.format(ok="done (knowledge problems are warnings)"),
    )
    pl.add_argument("--all", action="store_true", help="pull everything the cache carries")
    pl.add_argument("--into", metavar="DIR", help="destination root (required with --all)")
    add_remote(pl, "cache repository URL (overrides sync.remote)")
    add_corpus(pl, "which corpus to install when the cache has several")
    pl.add_argument("--allowed-signers", metavar="FILE", help=_ALLOWED_HELP)
    add_quiet(pl)
    pl.set_defaults(func=_sync_pull, _cmd_parser=pl)

    v = sub.add_parser(
        "verify",
        help="check the pulled store against its install checksum",
        description=(
            "Re-hash the pulled knowledge store and compare it with the sha256 recorded in\n"
            "synced.json at pull time. Detects corruption or local edits, not a malicious\n"
            "build: trust stays with the pusher and the git host's access control. With\n"
            "allowed signers, the installed snapshot's statement must also be signed by a\n"
            "listed key, name this snapshot and not be older than the newest accepted."
        ),
        epilog=_EXIT.format(ok="verified or no install record"),
    )
    v.add_argument(
        "--checksum-only", action="store_true", help="required: compare install checksums"
    )
    v.add_argument(
        "--allowed-signers",
        metavar="FILE",
        help=(
            "OpenSSH allowed_signers file (default: knowledge.sync.allowed_signers): also "
            "check the installed snapshot's signed statement"
        ),
    )
    add_dir(v)
    add_quiet(v)
    v.set_defaults(func=_verify, _cmd_parser=v)
