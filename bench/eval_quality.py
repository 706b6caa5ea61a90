"""Retrieval quality on an ask suite: hit@5 and MRR@10 for our rankings and for bm25s.

    python bench/eval_quality.py CORPUS.jsonl SUITE.ask.jsonl [SUITE2.ask.jsonl …] [--misses]

CORPUS is a cce.knowledge/v1 feed (e.g. rfcs.jsonl, built as bench/README.md says); SUITE is a
cce.knowledge.ask/v1 suite whose `expect` lists record ids (e.g.
examples/rfcs-dev-suite.ask.jsonl and the held-out examples/rfcs-holdout.ask.jsonl and
examples/rfcs-holdout2.ask.jsonl; several suites are also reported combined). Rankings compared side by side in one run:

- default   — ours (record-level BM25F, analysis in retrieval/analyze.py);
- reference — the reference engine's hybrid ranking (byte-exact port);
- bm25s     — the bm25s package over whole records (title + body), English
              stopwords, no stemming: the "plain BM25" peer.

A case is a hit@5 when any expected record is in the top 5 records; MRR uses the
first expected record within the top 10 (0 beyond). Every ranking sees the query
verbatim, no floor (min_score 0) so only ordering is measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path


def _records(hits_record_ids: list[str], limit: int) -> list[str]:
    """Distinct record ids in rank order (a record counts once)."""
    out: list[str] = []
    for r in hits_record_ids:
        if r not in out:
            out.append(r)
        if len(out) >= limit:
            break
    return out


def evaluate(
    name: str,
    rank: Callable[[str], list[str]],
    cases: list[tuple[str, str, list[str]]],
    misses: bool,
) -> tuple[float, float, float]:
    hits = 0
    rr = 0.0
    t0 = time.perf_counter()
    for cid, q, expect in cases:
        recs = _records(rank(q), 10)
        first = next((i for i, r in enumerate(recs, 1) if r in expect), None)
        if first is not None and first <= 5:
            hits += 1
        if first is not None:
            rr += 1.0 / first
        if misses and (first is None or first > 1):
            print(f"  [{name}] {cid}: first={first} top={recs[:3]}", file=sys.stderr)
    n = len(cases)
    return hits / n, rr / n, (time.perf_counter() - t0) / n * 1000


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("corpus")
    ap.add_argument("suite", nargs="+")
    ap.add_argument("--misses", action="store_true", help="list cases not ranked first")
    ap.add_argument("--skip-reference", action="store_true")
    a = ap.parse_args()

    from cce_knowledge.contract.asksuite import parse_suite
    from cce_knowledge.store.ingest import ingest_feed

    raw = Path(a.corpus).read_bytes()
    suites: list[tuple[str, list[tuple[str, str, list[str]]]]] = []
    for path in a.suite:
        suite = parse_suite(Path(path).read_text(encoding="utf-8"))
        suites.append((Path(path).name, [(c.id, c.query, list(c.expect)) for c in suite.cases]))
    if len(suites) > 1:
        suites.append(("combined", [c for _, cs in suites for c in cs]))
    store = ingest_feed(raw, 400)
    print(f"corpus {a.corpus}: {store.records} records, {len(store.chunks)} chunks")
    for name, cs in suites:
        print(f"  {name}: {len(cs)} questions")
    for name, cases in suites:
        print(f"\n== {name}")
        run_suite(a, raw, store, cases)
    return 0


def run_suite(
    a: argparse.Namespace, raw: bytes, store: object, cases: list[tuple[str, str, list[str]]]
) -> None:
    from cce_knowledge.retrieval.default import build_model, search_model

    rows: list[tuple[str, float, float, float]] = []
    model = build_model(store.chunks)  # type: ignore[attr-defined]
    rows.append(
        (
            "default (ours)",
            *evaluate(
                "default",
                lambda q: [h.record_id for h in search_model(model, q, 10, 0.0)],
                cases,
                a.misses,
            ),
        )
    )

    if not a.skip_reference:
        from cce_knowledge.retrieval.search_index import FastIndex, build_bytes
        from cce_knowledge.retrieval.searcher import Searcher

        fi = FastIndex(Path("mem"), build_bytes(store), lambda: store)  # type: ignore[arg-type,return-value]
        # k = 30 sections so ten distinct records are almost always present.
        rows.append(
            (
                "reference",
                *evaluate(
                    "reference",
                    lambda q: [h.record_id for h in fi.search(q, 30, 0.0, ranking="reference")],
                    cases,
                    a.misses,
                ),
            )
        )
        _ = Searcher

    import bm25s

    recs = [json.loads(line) for line in raw.decode("utf-8").split("\n") if line.strip()]
    ids = [r["id"] for r in recs]
    texts = [r["title"] + "\n" + r["body"] for r in recs]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)

    def bm(q: str) -> list[str]:
        res, _scores = retriever.retrieve(
            bm25s.tokenize([q], stopwords="en", show_progress=False), k=10, show_progress=False
        )
        return [ids[int(i)] for i in res[0]]

    rows.append(("bm25s (whole records)", *evaluate("bm25s", bm, cases, a.misses)))

    print(f"\n{'ranking':<24}{'hit@5':>8}{'MRR@10':>9}{'ms/query':>10}")
    for name, h5, mrr, ms in rows:
        print(f"{name:<24}{h5:>8.3f}{mrr:>9.3f}{ms:>10.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
