"""`cce knowledge ask`: prove a corpus answers a suite of questions (docs/spec/core.md §8).

The suite (`cce.knowledge.ask/v1`) is parsed by `contract.asksuite`; this module runs
each case through the same retrieval the CLI and MCP serve, scores it, and renders the
human or `cce.knowledge.ask.report/v1` JSON report.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cce_knowledge.contract.asksuite import ASK_REPORT_SCHEMA_ID, parse_suite, read_suite
from cce_knowledge.core import progress
from cce_knowledge.core.errors import CceError, StoreError
from cce_knowledge.core.jsonout import pretty
from cce_knowledge.core.rustcompat import format6, io_error_text
from cce_knowledge.core.untrusted import shown
from cce_knowledge.engine.redaction.modes import redact_for_display
from cce_knowledge.retrieval import (
    check_ranking,
    configured_min_score,
    default_min_score,
    resolve_ranking,
    search_knowledge,
)
from cce_knowledge.retrieval.default import build_model, search_model
from cce_knowledge.retrieval.rankings import hybrid_fallback_note
from cce_knowledge.retrieval.searcher import HybridRanker, Searcher
from cce_knowledge.store.snapshots import (
    display_dir,
    knowledge_dir,
    load_current,
    no_store_message,
    store_present,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from cce_knowledge.config.settings import Settings
    from cce_knowledge.retrieval.hits import Hit

F64_EPSILON = 2.220446049250313e-16
REPORT_SCHEMA = ASK_REPORT_SCHEMA_ID
SUITE_SCHEMA = "cce.knowledge.ask/v1"


@dataclass(frozen=True, slots=True)
class CaseResult:
    id: str
    k: int
    expected: int
    first_hit_rank: int | None
    precision: float
    recall: float
    mrr: float
    f1: float
    proven: bool
    #: Ours, in the human report only: the case's `kind`, and the record ids ranked
    #: first (up to `_SHOWN_TOP`), which say what ranked instead of a missed id.
    kind: str | None = None
    top: tuple[str, ...] = ()


#: Record ids listed under a case that is not proven.
_SHOWN_TOP = 3


@dataclass(frozen=True, slots=True)
class AskReport:
    corpus: str
    min_score: float
    ranking: str
    cases: list[CaseResult]
    precision: float
    recall: float
    mrr: float
    f1: float
    proven: int
    #: Why `hybrid` ranked as `default` (stderr only: the JSON report is unchanged).
    notes: tuple[str, ...] = ()
    #: Ours, in the human report only: what the questions ran against — the suite's
    #: own feed (no --dir) or an installed store (--dir). The two can disagree, and a
    #: `corpus` path alone does not say which one was asked.
    source: str = ""

    @property
    def queries(self) -> int:
        return len(self.cases)

    @property
    def passed(self) -> bool:
        return self.queries > 0 and self.proven == self.queries


def score_case(
    case_id: str, k: int, expect: list[str], hits: list[Hit], kind: str | None = None
) -> CaseResult:
    considered = hits[:k]
    wanted = set(expect)
    relevant = sum(1 for h in considered if h.record_id in wanted)
    first: int | None = None
    for pos, h in enumerate(considered, start=1):
        if h.record_id in wanted:
            first = pos
            break
    got = {h.record_id for h in considered}
    anchors = sum(1 for e in expect if e in got)
    precision = relevant / k
    recall = anchors / len(expect)
    mrr = 1.0 / first if first is not None else 0.0
    f1 = 2.0 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return CaseResult(
        id=case_id,
        k=k,
        expected=len(expect),
        first_hit_rank=first,
        precision=precision,
        recall=recall,
        mrr=mrr,
        f1=f1,
        proven=abs(recall - 1.0) < F64_EPSILON,
        kind=kind,
        top=tuple(dict.fromkeys(h.record_id for h in considered))[:_SHOWN_TOP],
    )


def _mean(xs: list[float]) -> float:
    s = 0.0
    for x in xs:
        s += x
    return s / len(xs) if xs else 0.0


def resolve_corpus_path(suite_path: str, corpus: str) -> str:
    """`dirname(suite) / corpus` (an absolute corpus replaces it; a bare suite name keeps corpus)."""
    return os.path.join(os.path.dirname(suite_path), corpus)


def run_ask(
    suite_path: str,
    *,
    root: str | None = None,
    settings: Settings | None = None,
    min_score: float | None = None,
    ranking: str | None = None,
    hybrid: Callable[[], HybridRanker] | None = None,
) -> AskReport:
    """Run a suite against the store under `root` (with its `settings`, loaded by the
    caller), or against the suite's own feed when `root` is None."""
    suite = parse_suite(read_suite(suite_path))
    rk = check_ranking(ranking) if ranking is not None else resolve_ranking(settings, None)
    notes: list[str] = []

    if root is not None:
        if not store_present(root):
            if not (knowledge_dir(root) / "current").exists():
                raise StoreError(no_store_message(root))
            try:
                load_current(root)
            except StoreError as e:
                raise CceError(f"could not load knowledge store under {root}: {e}") from e
        searcher = Searcher(root, settings, hybrid=hybrid)
        try:
            searcher.index()
        except StoreError as e:
            raise CceError(f"could not load knowledge store under {root}: {e}") from e
        label = display_dir(root)
        source = f"the store installed under {label} (--dir)"
        if min_score is None:
            min_score = configured_min_score(settings, rk)

        def run(query: str, k: int, floor: float) -> list[Hit]:
            hits = searcher.search(query, k, ranking=rk, min_score=floor)
            if searcher.last_note and searcher.last_note not in notes:
                notes.append(searcher.last_note)
            return hits
    else:
        if suite.corpus is None:
            raise CceError(
                "suite has no `corpus` header; pass --dir <root> to run against an installed store"
            )
        feed_path = resolve_corpus_path(suite_path, suite.corpus)
        try:
            raw = Path(feed_path).read_bytes()
        except OSError as e:
            raise CceError(f"could not read corpus feed {feed_path}: {io_error_text(e)}") from e
        # Lazy: the indexer (tree-sitter, process pools) adds ~20 ms to every `ask --dir`.
        from cce_knowledge.store.ingest import ingest_feed

        store = ingest_feed(raw, 400)
        label = suite.corpus
        source = (
            f"the suite's `corpus` feed {feed_path}, indexed in memory — not an installed "
            "store (pass --dir ROOT for that)"
        )
        if min_score is None:
            min_score = default_min_score(rk)
        model = None
        if rk == "hybrid":
            notes.append(
                hybrid_fallback_note("it needs an installed store with vectors: pass --dir")
            )
        if rk in ("default", "hybrid"):
            model = build_model(store.chunks)

        def run(query: str, k: int, floor: float) -> list[Hit]:
            if model is not None:
                return search_model(model, query, k, floor)
            return search_knowledge(store, query, k, floor, ranking=rk)

    floor = float(min_score)

    with progress.task("ask", total=len(suite.cases), unit="cases") as bar:
        results = [
            score_case(c.id, c.k, list(c.expect), run(c.query, c.k, floor), c.kind)
            for c in bar.wrap(suite.cases)
        ]
    return AskReport(
        corpus=label,
        min_score=floor,
        ranking=rk,
        cases=results,
        precision=_mean([r.precision for r in results]),
        recall=_mean([r.recall for r in results]),
        mrr=_mean([r.mrr for r in results]),
        f1=_mean([r.f1 for r in results]),
        proven=sum(1 for r in results if r.proven),
        notes=tuple(notes),
        source=source,
    )


def _clip(s: str, width: int) -> str:
    return s if len(s) <= width else s[: width - 1] + "…"


def render_human(rep: AskReport) -> str:
    """The table of cases; under each case not proven, what ranked first instead; a
    line per `kind` when cases carry one. P@k is left out when every case expects one
    id: it is then 1/k or 0, which the rank column already says — except under the
    reference ranking, whose report keeps the reference engine's table as it is
    (docs/spec/core.md §13)."""
    with_p = rep.ranking == "reference" or any(c.expected > 1 for c in rep.cases)
    p_head = f"{'P@k':>7}" if with_p else ""
    lines = [
        f"CCE knowledge-ask — answers vs the curated corpus ({SUITE_SCHEMA})",
        f"  corpus   : {rep.corpus}",
        *([f"  source   : {rep.source}"] if rep.source else []),
        f"  min_score: {format6(rep.min_score)}",
        f"  proven   : {rep.proven}/{rep.queries}",
        "",
        f"  {'query':<28}{p_head}{'recall':>10}{'MRR':>10}{'rank':>8}  proven",
    ]
    for c in rep.cases:
        lines += _case_lines(c, with_p)
    p_mean = f"{format6(rep.precision):>7}" if with_p else ""
    lines.append(f"  {'mean':<28}{p_mean}{format6(rep.recall):>10}{format6(rep.mrr):>10}")
    lines += _kind_lines(rep.cases)
    return "\n".join(lines) + "\n"


def _case_lines(c: CaseResult, with_p: bool) -> list[str]:
    """One case's row, and under a case not proven what ranked first instead."""
    rank = str(c.first_hit_rank) if c.first_hit_rank is not None else "-"
    p_col = f"{format6(c.precision):>7}" if with_p else ""
    out = [
        f"  {shown(_clip(c.id, 28)):<28}{p_col}{format6(c.recall):>10}"
        f"{format6(c.mrr):>10}{rank:>8}  {'yes' if c.proven else 'NO'}"
    ]
    if not c.proven:
        ranked = ", ".join(f"{n}. {shown(redact_for_display(r))}" for n, r in enumerate(c.top, 1))
        out.append(f"      ranked instead: {ranked or 'nothing above min_score'}")
    return out


def _kind_lines(cases: list[CaseResult]) -> list[str]:
    """A line per `kind`, in first-seen order, when cases carry one."""
    kinds = list(dict.fromkeys(c.kind for c in cases if c.kind is not None))
    if not kinds:
        return []
    lines = ["", "  by kind:"]
    for kind in kinds:
        cs = [c for c in cases if c.kind == kind]
        lines.append(
            f"    {shown(kind)}: {sum(c.proven for c in cs)}/{len(cs)} proven, "
            f"recall {format6(_mean([c.recall for c in cs]))}, "
            f"MRR {format6(_mean([c.mrr for c in cs]))}"
        )
    rest = sum(1 for c in cases if c.kind is None)
    if rest:
        lines.append(f"    (no kind): {rest} cases")
    return lines


def report_json(rep: AskReport) -> str:
    return pretty(report_data(rep), sort_keys=True) + "\n"


def report_data(rep: AskReport) -> dict[str, object]:
    """The `cce.knowledge.ask.report/v1` document."""
    return {
        "cases": [
            {
                "expected": c.expected,
                "f1": format6(c.f1),
                "first_hit_rank": c.first_hit_rank,
                "id": c.id,
                "k": c.k,
                "mrr": format6(c.mrr),
                "precision_at_k": format6(c.precision),
                "proven": c.proven,
                "recall": format6(c.recall),
            }
            for c in rep.cases
        ],
        "corpus": rep.corpus,
        "f1": format6(rep.f1),
        "min_score": format6(rep.min_score),
        "mrr": format6(rep.mrr),
        "precision_at_k": format6(rep.precision),
        "proven": rep.proven,
        "queries": rep.queries,
        "recall": format6(rep.recall),
        "schema": REPORT_SCHEMA,
    }


def regression_message(rep: AskReport) -> str:
    return f"knowledge-ask regression: {rep.proven}/{rep.queries} queries proven from the corpus"
