"""`cce knowledge search` and `cce knowledge ask` (argparse only; the library loads in the handler).

Lazy imports: each handler imports the library it runs, so `cce --help` and every
other command load only what they use (GitPython, the MCP SDK, tree-sitter, numpy).
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from cce_knowledge.cli.common import add_dir, add_json, add_quiet, hybrid_ranking
from cce_knowledge.core.jsonout import pretty

_RANKINGS = ("default", "reference", "hybrid")


def _positive_int(v: str) -> int:
    try:
        n = int(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid positive integer: {v!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {v!r}")
    return n


def _finite_float(v: str) -> float:

    try:
        x = float(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {v!r}") from None
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"must be finite: {v!r}")
    return x


def _add_ranking(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ranking",
        choices=_RANKINGS,
        default=None,
        help="default (record-level BM25F, ours), reference (the reference engine's "
        "ranking, byte-exact) or hybrid (default, fused with an embedding model's "
        "similarity when the words match weakly — only then is the provider asked; needs "
        "knowledge.semantic and `cce knowledge embed`, else a note on stderr and the "
        "default's results); default: knowledge.ranking in .cce/config, else default",
    )


def register_knowledge(sub: Any, formatter_class: type[argparse.HelpFormatter]) -> None:
    sp = sub.add_parser(
        "search",
        help="search the knowledge store for the why behind code",
        formatter_class=formatter_class,
        description=(
            "Search the installed knowledge store (built by `cce knowledge index` or\n"
            "`cce knowledge pull`). Each hit prints a provenance header and a citation\n"
            "`record_id:start-end`. not_planned/wontfix records never surface."
        ),
    )
    sp.add_argument("query", metavar="QUERY", help="what you want to know (plain words)")
    add_dir(sp)
    sp.add_argument(
        "-k",
        "--top-k",
        type=_positive_int,
        default=8,
        metavar="N",
        help="number of hits (default: 8)",
    )
    _add_ranking(sp)
    sp.add_argument(
        "--min-score",
        type=_finite_float,
        default=None,
        metavar="X",
        help="drop hits scoring below X (default: 0.05 for the default and hybrid "
        "rankings; knowledge.min_score, 0.30, for the reference ranking)",
    )
    add_json(sp, "hits as a JSON array")
    sp.set_defaults(func=cmd_search)

    ap = sub.add_parser(
        "ask",
        help="prove a corpus answers a suite of questions (cce.knowledge.ask/v1)",
        formatter_class=formatter_class,
        description=(
            "Run a cce.knowledge.ask/v1 suite: each question must surface its expected\n"
            "record ids in its top k.\n\n"
            "Which corpus answers (the report's `source` line says it):\n"
            "  without --dir  the feed named by the suite's `corpus` header, indexed in\n"
            "                 memory — NOT the store in the current directory;\n"
            "  with --dir     the store installed under ROOT/.cce/knowledge (what search,\n"
            "                 MCP and a pull use).\n\n"
            "Exit 0 when every question is proven, 1 otherwise (usable as a CI gate)."
        ),
    )
    ap.add_argument("suite", metavar="SUITE", help="path to the suite (NDJSON)")
    ap.add_argument(
        "--dir",
        default=None,
        metavar="ROOT",
        help="run against the store installed under ROOT/.cce/knowledge instead of the "
        "suite's `corpus` feed (`--dir .` for the current directory's store)",
    )
    add_json(ap, "the cce.knowledge.ask.report/v1 JSON report")
    ap.add_argument(
        "--min-score",
        type=_finite_float,
        default=None,
        metavar="X",
        help="score floor (default: --dir's knowledge.min_score or 0.30 for the "
        "reference ranking; 0.05 for the default and hybrid rankings)",
    )
    _add_ranking(ap)
    add_quiet(ap)
    ap.set_defaults(func=cmd_ask)


def cmd_search(args: argparse.Namespace) -> int:
    from cce_knowledge.config.settings import load_settings
    from cce_knowledge.retrieval import hit_header, resolve_ranking
    from cce_knowledge.retrieval.searcher import Searcher

    settings = load_settings(args.dir)
    ranking = resolve_ranking(settings, args.ranking)
    searcher = Searcher(args.dir, settings, hybrid=hybrid_ranking)
    try:
        hits = searcher.search(args.query, args.top_k, ranking=ranking, min_score=args.min_score)
    finally:
        searcher.close()
    if searcher.last_note:
        print(f"note: {searcher.last_note}", file=sys.stderr)
    out = sys.stdout
    if args.json:
        doc = [
            {
                "rank": h.rank,
                "record_id": h.display_id(),
                "chunk_id": h.chunk_id,
                "score": h.score,
                "title": h.title,
                "breadcrumb": h.name,
                "kind": h.kind,
                "lines": [h.start_line, h.end_line],
                "url": h.url,
                "state": h.state,
                "updated_at": h.updated_at,
                "content": h.content,
            }
            for h in hits
        ]
        out.write(pretty(doc) + "\n")
        return 0
    if not hits:
        out.write("No matching knowledge found — try broader or different terms.\n")
        return 0
    for h in hits:
        out.write(hit_header(h) + "\n")
        out.write(f"    {h.citation()}  {h.name}\n")
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    from cce_knowledge.config.settings import load_settings
    from cce_knowledge.retrieval.ask import regression_message, render_human, report_json, run_ask

    settings = None if args.dir is None else load_settings(args.dir)
    rep = run_ask(
        args.suite,
        root=args.dir,
        settings=settings,
        min_score=args.min_score,
        ranking=args.ranking,
        hybrid=hybrid_ranking,
    )
    for note in rep.notes:
        print(f"note: {note}", file=sys.stderr)
    sys.stdout.write(report_json(rep) if args.json else render_human(rep))
    if not rep.passed:
        sys.stdout.flush()
        print(f"error: {regression_message(rep)}", file=sys.stderr)
        return 1
    return 0
