"""`cce knowledge index FEED [--dir ROOT] [--manifest PATH] [--chunk-policy FILE] [--jobs N]
[--on-bad-record skip|fail]`.

Light at import: the handler imports the engine (tree-sitter) only when it runs.

Lazy imports: each handler imports the library it runs, so `cce --help` and every
other command load only what they use (GitPython, the MCP SDK, tree-sitter, numpy).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from cce_knowledge.cli.common import add_dir, add_quiet, report_search_build
from cce_knowledge.core.errors import ContractError, UsageError

if TYPE_CHECKING:
    from cce_knowledge.contract.chunk_policy import ChunkPolicy

DESCRIPTION = """\
Index a cce.knowledge/v1 NDJSON feed into the local knowledge store.

Each record becomes a markdown document (`# title` + body), is redacted, split at
its headings (markdown.max_section_tokens, default 400), hash-embedded (the reference
ranking's 256-d vectors; no model, no network) and written to
ROOT/.cce/knowledge/<snapshot>.json; `current` then points at it. The snapshot id is
the first 16 hex of the feed's sha256, so the same feed always gives the same bytes.

Redaction (--redaction, else knowledge.redaction, else extended): `extended` applies
the reference engine's rules and then the secret shapes of detect-secrets' regex
plugins plus a few more (fine-grained GitHub tokens, Slack app tokens, Stripe test
keys, unterminated PEM keys, DB_PASSWORD=... and "the password is ..."), after
removing hidden text: HTML comments outside code, Unicode tag characters, bidi
controls and zero-width characters (docs/security.md#prompt-injection); `reference`
applies the reference's rules exactly and keeps hidden text. A feed the extra rules
and the hidden-text pass find nothing in gives identical bytes either way.

A chunk policy (--chunk-policy FILE, else knowledge.chunk_policy in .cce/config, a
path relative to ROOT) is a cce.chunk-policy/v1 file of rules: the records a rule
selects (by source, group, label or an id glob; the first matching rule wins) are
cut by its policy: a whole-file gate, splits at one heading level with a single
size fallback, own-chunk / skip / merge-up sections by heading text. Every other
record goes through the reference chunker byte for byte, so a policy that selects
nothing changes nothing. A bad policy is a usage error (exit 2) naming the file and
the JSON path, before anything is read or written (docs/chunk-policies.md).

One record may cost only so much: at most 64 + one chunk per 64 of its bytes, 64 KiB +
4x its bytes of heading breadcrumbs (each chunk's name repeats its enclosing headings'
text), and 256 KiB + 32x its bytes of store. A record past a bound (a hostile issue of
200,000 `## h` lines, or a 1 MiB title over 1,500 headings) is left out with a warning
naming FILE:LINE and the reason, and counted (--on-bad-record skip, the default: one
stranger's issue must not stop an organisation's nightly corpus), or refuses the feed
(--on-bad-record fail). Ordinary records come nowhere near (docs/security.md).

Incremental: when the current store was indexed under the same settings (section
tokens, redaction, chunk policy, cce-knowledge version), the chunks of every record
whose feed line is unchanged are copied from it and only the changed lines are
rendered; the store is the same, byte for byte, as a full index's. Its chunk map
(ROOT/.cce/knowledge/reuse/<snapshot>.map) says where each record's chunks are. A
changed setting, a store without a map (pulled, or older) or a changed or corrupt one
gives a full index, and a `note: full index: …` line on stderr says why. --full
renders every record.

The feed is mapped, not read into memory, and the rendered text streams to a spool
in the knowledge directory: memory does not grow with the feed.

Nothing is written unless every step succeeds: a bad line, a manifest mismatch, a
write error or a kill leaves the previous store and `current` untouched.

The derived search index (ROOT/.cce/knowledge/search/) is built from the new store
under the same lock, so the first search needs no build; its time is reported on
stderr. It reuses what the previous build analysed for every record whose chunks are
unchanged (a kept file it cannot use is named in a `note:`), and its memory follows a
batch of records, not the corpus. --no-search-index skips it (a builder that only
publishes: push never sends it; the first search on this root builds it). Progress
goes to stderr too: a bar on a terminal, a line every few seconds otherwise;
-q/--quiet silences both.

With an embedding provider configured (knowledge.semantic in .cce/config, or
CCE_EMBED_MODEL), the chunks that have no vector yet are then sent to it for
`--ranking hybrid` (docs/semantic.md). A provider that is down or refuses is a
warning, never a failed index: `cce knowledge embed` finishes the job.

exit status: 0 indexed, 1 refused or failed, 2 usage error"""


def register_knowledge(sub: Any) -> None:
    p = sub.add_parser(
        "index",
        help="index a cce.knowledge/v1 feed into the local knowledge store",
        description=DESCRIPTION,
    )
    p.add_argument("feed", metavar="FEED", help="the cce.knowledge/v1 NDJSON feed file")
    add_dir(p)
    add_quiet(p)
    p.add_argument(
        "--manifest",
        metavar="PATH",
        help="verify the feed against its cce.feed-manifest/v1 sidecar",
    )
    p.add_argument(
        "--redaction",
        choices=("extended", "reference"),
        default=None,
        help="extended (the default: more secret shapes, and hidden text removed) or "
        "reference (the reference engine's exact rules, hidden text kept); default: "
        "knowledge.redaction in .cce/config",
    )
    p.add_argument(
        "--chunk-policy",
        metavar="FILE",
        help="chunk the records its rules select by a cce.chunk-policy/v1 policy; "
        "default: knowledge.chunk_policy in .cce/config (relative to --dir)",
    )
    p.add_argument(
        "--max-record-bytes",
        type=int,
        metavar="N",
        help="refuse a record (feed line) longer than N bytes; parsing one takes up to "
        "~300x its size in memory when it is all markup, ~36x for prose (default 8388608 = "
        "8 MiB)",
    )
    p.add_argument(
        "--on-bad-record",
        choices=("skip", "fail"),
        default="skip",
        help="a record whose chunks would cost past its bounds (chunks, breadcrumb bytes, "
        "store bytes, in proportion to its size): skip (the default) leaves it out with a "
        "warning naming FILE:LINE and a count, so one hostile issue cannot stop a nightly "
        "build; fail refuses the feed",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="render every record, even when the current store could give the unchanged "
        "ones' chunks",
    )
    p.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="worker processes (default: the number of available CPUs)",
    )
    p.add_argument(
        "--no-search-index",
        action="store_true",
        help="leave the derived search index to the first search on this root: for a "
        "builder that only publishes (push never sends it), the step then costs the "
        "store's render only, in time, memory and disk",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cce_knowledge.store.ingest import index_to_root

    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.max_record_bytes is not None and args.max_record_bytes < 1:
        raise UsageError("--max-record-bytes must be at least 1")
    from cce_knowledge.config.settings import load_settings
    from cce_knowledge.retrieval.search_index import build_step

    settings = load_settings(args.dir)
    policy = _chunk_policy(args.chunk_policy, args.dir, settings.knowledge.chunk_policy)

    def note(text: str) -> None:
        print(f"note: {text}", file=sys.stderr)

    try:
        out = index_to_root(
            args.feed,
            root=args.dir,
            settings=settings,
            manifest=args.manifest,
            jobs=args.jobs,
            redaction=args.redaction,
            max_record_bytes=args.max_record_bytes,
            after_save=None
            if args.no_search_index
            else lambda snap: build_step(args.dir, snap, note),
            chunk_policy=policy,
            on_bad_record=args.on_bad_record,
            incremental=not args.full,
            on_note=note,
        )
    except ContractError as e:
        hint = _not_a_feed_hint(args.feed, e.message)
        if hint is None:
            raise
        raise ContractError(f"{e.message} — {hint}") from None
    lines = [f"Indexed knowledge from {args.feed}", "  schema    : cce.knowledge/v1"]
    if args.manifest is not None:
        lines.append(f"  manifest  : verified ({args.manifest}) \u2014 {out.records} records")
    lines += [
        f"  records   : {out.records}",
        f"  chunks    : {out.chunks}",
        *([f"  left out  : {len(out.refused)} (past their cost bounds)"] if out.refused else []),
        *([f"  policy    : {policy.origin}"] if policy is not None else []),
        f"  snapshot  : {out.snapshot}",
        f"  store     : {out.store_display}",
    ]
    print("\n".join(lines))
    for line, reason in out.refused:
        print(f"warning: {args.feed}:{line}: record left out: {reason}", file=sys.stderr)
    report_search_build(out.search)
    if out.records == 0:
        # Valid (the reference accepts it), but rarely meant: an adapter that failed
        # quietly would otherwise replace a working store without a word.
        was = f" (it replaced snapshot {out.previous})" if out.previous else ""
        print(
            f"warning: 0 records: the store for snapshot {out.snapshot} is now empty{was}",
            file=sys.stderr,
        )
    from cce_knowledge.cli.semantic_cmds import embed_step

    embed_step(args.dir, settings)
    return 0


#: Names of documents people index by mistake instead of a feed.
_DOC_SUFFIXES = (".md", ".markdown", ".mdx", ".txt", ".rst", ".adoc")


def _not_a_feed_hint(feed: str, message: str) -> str | None:
    """What to run instead when `feed` is a document, not a cce.knowledge/v1 feed: a
    JSON error on its first line, and a document's name or a first line that no JSON
    text starts like (`# Title`, `---`)."""
    if ":1: " not in message or "invalid cce.knowledge/v1 record" not in message:
        return None
    try:
        with open(feed, "rb") as f:
            first = f.read(256).lstrip()
    except OSError:
        return None
    if not (feed.lower().endswith(_DOC_SUFFIXES) or first[:1] in (b"#", b"-")):
        return None
    return (
        "a feed is NDJSON, one record per line: to index Markdown files, turn their folder "
        "into a feed first (`cce knowledge extract docs --root DIR --out feed.jsonl`, then "
        "`cce knowledge index feed.jsonl`)"
    )


def _chunk_policy(given: str | None, root: str, configured: str | None) -> ChunkPolicy | None:
    """The policy of `--chunk-policy` (as given), else of `knowledge.chunk_policy`
    (relative to the project root), loaded and checked before the feed is read."""
    from cce_knowledge.contract.chunk_policy import load_chunk_policy

    if given:
        return load_chunk_policy(given)
    if configured:
        path = configured if os.path.isabs(configured) else os.path.join(root, configured)
        return load_chunk_policy(path, shown=path)
    return None
