"""`cce knowledge search` and `cce knowledge ask` (argparse only; the library loads in the handler).

Lazy imports: each handler imports the library it runs, so `cce --help` and every
other command load only what they use (GitPython, the MCP SDK, tree-sitter, numpy).
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING, Any

from cce_knowledge.cli.common import add_dir, add_json, add_quiet, hybrid_ranking
from cce_knowledge.cli.report import Report, emit
from cce_knowledge.core.untrusted import shown

if TYPE_CHECKING:
    from cce_knowledge.retrieval.cite import CitedLines
    from cce_knowledge.retrieval.hits import Hit
    from cce_knowledge.retrieval.snippet import Query

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


def register_knowledge(sub: Any) -> None:
    sp = sub.add_parser(
        "search",
        help="search the knowledge store for the why behind code",
        description=(
            "Search the installed knowledge store (built by `cce knowledge index` or\n"
            "`cce knowledge pull`). Each hit prints a provenance header, a citation\n"
            "`record_id:start-end` and the few lines of its section that best match the\n"
            "query, each with its line number (--full: the whole section). On a terminal\n"
            "the query's words are highlighted, unless NO_COLOR is set; piped output is\n"
            "plain text. `cce knowledge show CITATION` prints a hit's section.\n"
            "not_planned/wontfix records never surface."
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
    sp.add_argument(
        "--full",
        action="store_true",
        help="print each hit's whole section instead of the few lines that best match",
    )
    add_json(
        sp,
        "hits as a JSON array (each with its `snippet` lines and the whole section as `content`)",
    )
    sp.set_defaults(func=cmd_search)

    shp = sub.add_parser(
        "show",
        help="print the stored section a search hit cites, or a whole record",
        description=(
            "Print the exact stored section a citation names: `record_id:start-end` as\n"
            "`cce knowledge search` prints it, or a hit's chunk id (`#chunk_id`, as MCP's\n"
            "expand_chunk takes). A bare RECORD_ID prints the whole record, and a range\n"
            "that is not one section's (`record_id:12-40`) those lines, section by section\n"
            "with line numbers. Control characters in the stored text are shown escaped.\n"
            "A citation the store does not hold is an error naming the closest record."
        ),
        epilog="exit status: 0 printed, 1 no such section (or no store), 2 usage error",
    )
    shp.add_argument(
        "citation",
        metavar="CITATION",
        help="`record_id:start-end` (a section, or a range across sections), a record id, "
        "or a chunk id",
    )
    add_dir(shp)
    add_json(shp, "the section and its facets (record_id, chunk_id, lines, content…) as JSON")
    shp.set_defaults(func=cmd_show)

    ap = sub.add_parser(
        "ask",
        help="prove a corpus answers a suite of questions (cce.knowledge.ask/v1)",
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
    from cce_knowledge.retrieval import resolve_ranking
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
    from cce_knowledge.retrieval.analyze import query_terms
    from cce_knowledge.retrieval.snippet import Query

    # The lines under each hit are chosen by the query's rarest words in the corpus.
    query = Query(args.query, searcher.idfs(query_terms(args.query)))
    emit(
        args,
        Report(
            lambda: _search_text(hits, query, full=args.full, paint=_Paint.for_stream(sys.stdout)),
            lambda: _search_data(hits, query),
            sort_keys=False,
        ),
    )
    return 0


def _search_data(hits: list[Hit], query: Query) -> list[dict[str, Any]]:
    """`search --json`: each hit with its snippet and its whole section."""
    from cce_knowledge.retrieval.snippet import best_lines

    return [
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
            "snippet": [
                {"line": ln.number, "text": ln.text}
                for ln in best_lines(h.content, h.start_line, query)
            ],
            "content": h.content,
        }
        for h in hits
    ]


def _search_text(hits: list[Hit], query: Query, *, full: bool, paint: _Paint) -> str:
    """Each hit's header and citation, then the lines of its section that answer (all
    of them with --full); stored text escaped, the query's words painted on a tty."""
    from cce_knowledge.retrieval import hit_header
    from cce_knowledge.retrieval.snippet import best_lines, section_lines

    if not hits:
        return "No matching knowledge found — try broader or different terms.\n"
    out: list[str] = []
    for n, h in enumerate(hits):
        if n:
            out.append("\n")
        out.append(hit_header(h) + "\n")
        out.append(f"    {shown(h.citation())}  {shown(h.name)}\n")
        lines = (
            section_lines(h.content, h.start_line)
            if full
            else best_lines(h.content, h.start_line, query)
        )
        width = len(str(max((ln.number for ln in lines), default=0)))
        for ln in lines:
            text = _snippet_text(ln.text, query, paint, clip_at=None if full else _WIDTH)
            out.append(f"    {ln.number:>{width}}: {text}\n")
    return "".join(out)


#: Characters of one snippet line shown (a docs paragraph can be one long line).
_WIDTH = 200


class _Paint:
    """Highlighting for a terminal: ripgrep's match colour (bold red), only when the
    stream is a terminal and NO_COLOR is unset (https://no-color.org) — never escape
    codes in a pipe or a file."""

    def __init__(self, on: bool) -> None:
        self.on = on

    @classmethod
    def for_stream(cls, stream: Any) -> _Paint:
        import os

        try:
            tty = bool(stream.isatty())
        except (AttributeError, ValueError):
            tty = False
        return cls(tty and not os.environ.get("NO_COLOR"))

    def match(self, text: str) -> str:
        return f"\x1b[1;31m{text}\x1b[0m" if self.on else text


def _snippet_text(text: str, query: Any, paint: _Paint, clip_at: int | None) -> str:
    """One stored line fit to print: tabs expanded, cut to `clip_at` characters around
    its first match, every control character escaped (stored text is untrusted), and
    the query's words painted."""
    from cce_knowledge.retrieval.snippet import clip

    text = text.expandtabs(4)
    spans = query.spans(text)
    head = tail = ""
    if clip_at is not None:
        cut, start, end = clip(text, spans, clip_at)
        head = "…" if start > 0 else ""
        tail = "…" if end < len(text) else ""
        spans = [
            (max(a, start) - start, min(b, end) - start) for a, b in spans if a < end and b > start
        ]
        text = cut
    parts: list[str] = [head]
    pos = 0
    for a, b in spans:
        parts.append(shown(text[pos:a]))
        parts.append(paint.match(text[a:b]))  # a word: [A-Za-z0-9_] only, nothing to escape
        pos = b
    parts.append(shown(text[pos:]))
    parts.append(tail)
    return "".join(parts)


def cmd_show(args: argparse.Namespace) -> int:
    from cce_knowledge.retrieval.cite import CitedLines, find_cited

    found = find_cited(args.dir, args.citation)
    if isinstance(found, CitedLines):
        emit(args, Report(lambda: _record_text(found), found.as_json, sort_keys=False))
        return 0
    # The stored text as it is, line for line, with control characters escaped (a tab
    # is layout, not a control sequence: kept).
    text = "".join(_shown_line(ln) + "\n" for ln in found.content.split("\n"))
    emit(args, Report(lambda: text, found.as_json, sort_keys=False))
    return 0


def _shown_line(line: str) -> str:
    return "\t".join(shown(p) for p in line.split("\t"))


def _record_text(cited: CitedLines) -> str:
    """A record (or a range of its lines) section by section: each section's citation
    and breadcrumb, then its lines numbered as `search` numbers them."""
    from cce_knowledge.retrieval.cite import section_lines_of

    parts = section_lines_of(cited)
    width = len(str(max((n for _, lines in parts for n, _ in lines), default=0)))
    out: list[str] = []
    for k, (sec, lines) in enumerate(parts):
        if k:
            out.append("\n")
        out.append(f"{shown(sec.citation())}  {shown(sec.name)}\n")
        out.extend(f"{n:>{width}}: {_shown_line(t)}\n" for n, t in lines)
    return "".join(out)


def cmd_ask(args: argparse.Namespace) -> int:
    from cce_knowledge.config.settings import load_settings
    from cce_knowledge.retrieval.ask import regression_message, render_human, report_data, run_ask

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
    emit(args, Report(lambda: render_human(rep), lambda: report_data(rep)))
    if not rep.passed:
        sys.stdout.flush()
        print(f"error: {regression_message(rep)}", file=sys.stderr)
        return 1
    return 0
