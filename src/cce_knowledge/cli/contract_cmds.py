"""`cce knowledge validate` and `cce knowledge manifest` (the contract commands).

Light at import: argparse only; the handlers import the contract library.

Lazy imports: each handler imports the library it runs, so `cce --help` and every
other command load only what they use (GitPython, the MCP SDK, tree-sitter, numpy).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from cce_knowledge.action.workflow_commands import annotation, is_github_actions
from cce_knowledge.cli.common import add_dir, add_json
from cce_knowledge.core.atomic import atomic_write
from cce_knowledge.core.errors import CceError
from cce_knowledge.core.jsonout import pretty
from cce_knowledge.core.rustcompat import io_error_text

if TYPE_CHECKING:
    from cce_knowledge.contract.validate import FileReport, Problem

VALIDATE_DESCRIPTION = """\
Check cce.knowledge/v1 feeds, cce.feed-manifest/v1 manifests,
cce.knowledge.ask/v1 suites, cce.chunk-policy/v1 chunk policies and a project's
.cce/config, reporting every bad line (not just the first):

  FILE:LINE: $.path: message (column C)

The rules are exactly those `cce knowledge index` and `cce knowledge ask` apply, so
a file that validates clean is one they accept. A .cce/config is checked against
schemas/cce.config.schema.json, and each unknown key is named with the closest
known one. The kind is detected: a path ending in .cce/config is a config; a name
ending in .manifest.json or a single cce.feed-manifest/v1 object is a manifest; a
first line whose "schema" is cce.knowledge.ask/v1 is a suite; a single
cce.chunk-policy/v1 object is a chunk policy (index --chunk-policy); anything else
is a feed.
Relative paths are resolved against --dir; FILE `-` reads standard input.

A feed record carrying hidden text (HTML comments outside code, Unicode tag
characters, bidi controls, zero-width characters), which `cce knowledge index`
removes by default, is a warning on stderr, with its line and code points:

  warning: FILE:LINE: $.body: hidden text: 1 HTML comment, 3 tag characters (U+E0041, …)

Warnings do not change the exit status.

Under GitHub Actions (GITHUB_ACTIONS=true) each problem is also printed as an
::error annotation, each warning as a ::warning one.

exit status: 0 every file valid, 1 any problem, 2 usage error"""

MANIFEST_DESCRIPTION = """\
Write the cce.feed-manifest/v1 sidecar for a feed: its record count and the
SHA-256 of its raw bytes, as one JSON line

  {"schema":"cce.feed-manifest/v1","records":N,"sha256":"<64 hex>"}

The feed is parsed first, so a malformed feed fails with its line error and no
manifest is written. Without --out the manifest goes to stdout; with --out it is
written atomically. `cce knowledge index FEED --manifest PATH` verifies it.

exit status: 0 written, 1 refused or failed, 2 usage error"""


def register_knowledge(sub: Any) -> None:
    p = sub.add_parser(
        "validate",
        help="check feeds, manifests, ask suites, chunk policies and .cce/config; report every bad line",
        description=VALIDATE_DESCRIPTION,
    )
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="feed, manifest, suite, policy or .cce/config files (- for stdin)",
    )
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text lines (default) or a JSON list of {file,line,column,path,message}",
    )
    add_json(p, "JSON (the same as --format json)")
    p.add_argument(
        "--kind",
        choices=("auto", "feed", "manifest", "suite", "policy", "config"),
        default="auto",
        help="what the files are (default: detect)",
    )
    p.add_argument(
        "--manifest",
        metavar="PATH",
        help="also verify the (single) feed against this cce.feed-manifest/v1 sidecar",
    )
    add_dir(p)
    p.set_defaults(func=run_validate)

    m = sub.add_parser(
        "manifest",
        help="write the cce.feed-manifest/v1 sidecar (record count + sha256) for a feed",
        description=MANIFEST_DESCRIPTION,
    )
    m.add_argument("feed", metavar="FEED", help="the cce.knowledge/v1 NDJSON feed file")
    m.add_argument("--out", metavar="PATH", help="write the manifest here (default: stdout)")
    add_dir(m)
    m.set_defaults(func=run_manifest)


def _check_config(shown: str, raw: bytes) -> list[tuple[int | None, str, str]]:
    from cce_knowledge.config.check import validate_config
    from cce_knowledge.config.schema import SCHEMA_FILE
    from cce_knowledge.config.settings import Settings
    from cce_knowledge.contract.schemas import load_schema

    return validate_config(shown, raw, Settings, load_schema(SCHEMA_FILE))


def run_validate(args: argparse.Namespace) -> int:
    from cce_knowledge.contract.validate import validate_files

    reports = validate_files(
        args.files,
        kind=args.kind,
        manifest=args.manifest,
        base=None if args.dir == "." else args.dir,
        # `-` reads standard input, e.g. `adapter | cce knowledge validate -`.
        stdin=sys.stdin.buffer.read,
        config_check=_check_config,
    )
    as_json = args.json or args.format == "json"
    _print_reports(reports, as_json)
    problems = [p for r in reports for p in r.problems]
    if problems:
        bad = sum(1 for r in reports if not r.ok)
        sys.stdout.flush()
        print(
            f"validate: {len(problems)} problem{'s' if len(problems) != 1 else ''} "
            f"in {bad} of {len(reports)} file{'s' if len(reports) != 1 else ''}",
            file=sys.stderr,
        )
        return 1
    return 0


def _print_reports(reports: list[FileReport], as_json: bool) -> None:
    """Problems on stdout (text lines or one JSON list); warnings (hidden text) on
    stderr; under GitHub Actions each also as an annotation."""
    problems = [p for r in reports for p in r.problems]
    out = sys.stdout
    if as_json:
        out.write(pretty([p.as_json() for p in problems]) + "\n")
    else:
        for r in reports:
            if r.ok:
                out.write(r.summary() + "\n")
            for p in r.problems:
                out.write(p.text() + "\n")
    actions = is_github_actions()
    # The runner reads workflow commands from either stream; keep --json stdout pure.
    ann = sys.stderr if as_json else out
    for p in problems if actions else []:
        ann.write(_annotation("error", p) + "\n")
    for w in (w for r in reports for w in r.warnings):
        print(f"warning: {w.text()}", file=sys.stderr)
        if actions:
            print(_annotation("warning", w), file=sys.stderr)


def _annotation(level: str, p: Problem) -> str:
    return annotation(level, f"{p.path}: {p.message}", file=p.file, line=p.line, col=p.column)


def run_manifest(args: argparse.Namespace) -> int:
    from cce_knowledge.contract.manifest import build_manifest, feed_sha256
    from cce_knowledge.contract.ndjson import check_is_file, parse_feed_located, read_feed

    feed = args.feed if args.dir == "." else os.path.join(args.dir, args.feed)
    check_is_file(feed)
    raw, text = read_feed(feed)
    records = parse_feed_located(text, feed)
    data = build_manifest(raw, len(records))
    if args.out is None:
        sys.stdout.write(data.decode("utf-8"))
        return 0
    out = (
        args.out if args.dir == "." or os.path.isabs(args.out) else os.path.join(args.dir, args.out)
    )
    try:
        atomic_write(out, data)
    except OSError as e:
        raise CceError(f"could not write {out}: {io_error_text(e)}") from None
    print(f"wrote {out}: {len(records)} records, sha256 {feed_sha256(raw)}")
    return 0
