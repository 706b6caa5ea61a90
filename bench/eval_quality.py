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

- hybrid    — with `--hybrid-root ROOT`: ours fused with an embedding model's
              similarity, through the product's own path (ROOT holds CORPUS's store,
              `knowledge.semantic` configured and `cce knowledge embed` run; the query
              is embedded by the configured provider — see bench/serve_embeddings.py).

A case is a hit@5 when any expected record is in the top 5 records; MRR uses the
first expected record within the top 10 (0 beyond). Every ranking sees the query
verbatim, no floor (min_score 0) so only ordering is measured.

`--chunk-policy FILE` also indexes CORPUS with that cce.chunk-policy/v1 policy and
ranks the policy-chunked store with the default and reference rankings, beside the
same rankings on the reference chunker's store (docs/chunk-policies.md).

`--split` also reports, per suite, the questions that name their record and the
reworded ones. The rule, fixed before any held-out suite was read with hybrid
(docs/ranking.md#hybrid): a question *names* its record when its words include at
least half of the expected record's title words (after analysis; at least one),
otherwise it is *reworded*. `--grid` sweeps the fusion constants: pass development
suites only.
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
    ap.add_argument("--skip-bm25s", action="store_true")
    ap.add_argument("--hybrid-root", metavar="ROOT", help="also measure --ranking hybrid over ROOT")
    ap.add_argument("--split", action="store_true", help="named and reworded questions apart")
    ap.add_argument("--grid", action="store_true", help="sweep the fusion constants (dev only!)")
    ap.add_argument(
        "--chunk-policy", metavar="FILE", help="also rank a store chunked by this policy"
    )
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
    pstore = None
    if a.chunk_policy:
        from cce_knowledge.contract.chunk_policy import load_chunk_policy

        pstore = ingest_feed(raw, 400, policy=load_chunk_policy(a.chunk_policy))
    if a.split:
        titles = {c.record_id: c.title for c in store.chunks}
        split = []
        for name, cs in suites:
            split.append((name, cs))
            for part in ("named", "reworded"):
                sub = [c for c in cs if is_named(c[1], c[2], titles) == (part == "named")]
                if sub:
                    split.append((f"{name} [{part}]", sub))
        suites = split
    print(f"corpus {a.corpus}: {store.records} records, {len(store.chunks)} chunks")
    if pstore is not None:
        print(f"  with --chunk-policy {a.chunk_policy}: {len(pstore.chunks)} chunks")
    for name, cs in suites:
        print(f"  {name}: {len(cs)} questions")
    hybrid = Hybrid(Path(a.hybrid_root), raw) if a.hybrid_root else None
    if a.grid:
        if hybrid is None:
            ap.error("--grid needs --hybrid-root")
        grid(hybrid, suites)
        return 0
    for name, cases in suites:
        print(f"\n== {name}")
        run_suite(a, raw, store, cases, hybrid, pstore)
    return 0


def _single_terms(text: str) -> set[str]:
    from cce_knowledge.retrieval.analyze import analyze, is_pair

    return {t for t in analyze(text) if not is_pair(t)}


def is_named(query: str, expect: list[str], titles: dict[str, str]) -> bool:
    """The question uses the name of (one of) its record(s): it contains at least half of
    the title's words after analysis (and at least one)."""
    q = _single_terms(query)
    for rid in expect:
        t = _single_terms(titles.get(rid, ""))
        if t and len(t & q) >= max(1, (len(t) + 1) // 2):
            return True
    return False


class Hybrid:
    """The product's hybrid ranking over an embedded root, plus cached per-query signals
    for the fusion sweep."""

    def __init__(self, root: Path, raw: bytes) -> None:
        from cce_knowledge.config.settings import load_settings
        from cce_knowledge.retrieval.searcher import Searcher
        from cce_knowledge.semantic.hybrid import HybridRanking
        from cce_knowledge.store.ingest import snapshot_id

        # The bench is an edge: it loads the root's settings and hands the ranking in.
        self.searcher = Searcher(root, load_settings(root), hybrid=HybridRanking)
        idx = self.searcher.index()
        if idx is None or idx.snapshot != snapshot_id(raw):
            raise SystemExit(f"{root}: its store is not this corpus's (index it first)")
        self.idx = idx
        self.root = root
        self.cfg = self.searcher.settings().knowledge.semantic_config()
        self._signals: dict[str, tuple[list[tuple[int, int, float]], object, object]] = {}

    def rank(self, q: str) -> list[str]:
        # One hit per record: the top 10 hits are the top 10 records.
        hits = self.searcher.search(q, 10, ranking="hybrid", min_score=0.0)
        if self.searcher.last_note:
            raise SystemExit(f"hybrid fell back: {self.searcher.last_note}")
        return [h.record_id for h in hits]

    def signals(self, q: str) -> tuple[list[tuple[int, int, float]], object, object]:
        """(lexical candidates, record cosines, nearest chunk per record) for a query."""
        got = self._signals.get(q)
        if got is None:
            import numpy as np

            from cce_knowledge.semantic.hybrid import HybridState, _load, dense_records

            st = self.searcher._hybrid or HybridState()
            self.searcher._hybrid = st
            assert self.cfg is not None and _load(st, self.root, self.idx, self.cfg) is None
            from cce_knowledge.semantic.provider import Provider

            if st.provider is None:
                st.provider, st.provider_cfg = Provider(self.cfg), self.cfg
            qv = np.asarray(st.provider.embed([q])[0], dtype=np.float64)
            cos = st.vf.matrix @ (qv / np.sqrt(qv @ qv)).astype(np.float32)
            rc, ra = dense_records(cos, st.rec_ptr, st.present)
            got = (self.idx.default_ranked(q, 60, 0.0), rc, ra)
            self._signals[q] = got
        return got

    def record_id(self, r: int) -> str:
        return str(self.idx.doc(self.idx.rec_chunk_ptr[r])[1])


def grid(h: Hybrid, suites: list[tuple[str, list[tuple[str, str, list[str]]]]]) -> None:
    """hit@5 / MRR of fusion variants on every suite given (development suites only)."""
    from cce_knowledge.semantic.hybrid import Fusion, fuse

    def ranker(fu: Fusion) -> Callable[[str], list[str]]:
        def rank(q: str) -> list[str]:
            lex, rc, ra = h.signals(q)
            fused = fuse(lex, rc, ra, fu)  # type: ignore[arg-type]
            fused.sort(key=lambda t: (-t[2], t[0]))
            return [h.record_id(r) for r, _c, _s in fused[:10]]

        return rank

    variants = [Fusion(alpha=0.0)]
    for alpha in (0.5, 1.0, 1.5, 2.0, 3.0):
        for tau in (0.3, 0.45, 0.6, 0.8, 1.0, 2.0):
            for pool in (20, 30, 50):
                variants.append(Fusion(lex_pool=pool, dense_pool=pool, alpha=alpha, tau=tau))
    names = [n for n, _ in suites]
    print(f"\n{'variant':<34}" + "".join(f"{n[:22]:>24}" for n in names))
    for fu in variants:
        cells = []
        for _n, cases in suites:
            h5, mrr, _ms = evaluate("grid", ranker(fu), cases, False)
            cells.append(f"{h5:.3f}/{mrr:.3f}")
        label = f"a={fu.alpha} tau={fu.tau} pool={fu.lex_pool}"
        print(f"{label:<34}" + "".join(f"{c:>24}" for c in cells), flush=True)


def run_suite(
    a: argparse.Namespace,
    raw: bytes,
    store: object,
    cases: list[tuple[str, str, list[str]]],
    hybrid: Hybrid | None = None,
    pstore: object = None,
) -> None:
    from cce_knowledge.retrieval.default import build_model, search_model

    rows: list[tuple[str, float, float, float]] = []
    if pstore is not None:
        pmodel = build_model(pstore.chunks)  # type: ignore[attr-defined]
        rows.append(
            (
                "default + policy",
                *evaluate(
                    "default+policy",
                    lambda q: [h.record_id for h in search_model(pmodel, q, 10, 0.0)],
                    cases,
                    a.misses,
                ),
            )
        )
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

    if hybrid is not None:
        rows.append(("hybrid (ours + vectors)", *evaluate("hybrid", hybrid.rank, cases, a.misses)))

    if not a.skip_reference:
        from cce_knowledge.retrieval.search_index import SearchIndex, build_bytes
        from cce_knowledge.retrieval.searcher import Searcher

        fi = SearchIndex(Path("mem"), build_bytes(store), lambda: store)  # type: ignore[arg-type,return-value]
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
        if pstore is not None:
            pfi = SearchIndex(Path("mem"), build_bytes(pstore), lambda: pstore)  # type: ignore[arg-type,return-value]
            rows.append(
                (
                    "reference + policy",
                    *evaluate(
                        "reference+policy",
                        lambda q: [
                            h.record_id for h in pfi.search(q, 30, 0.0, ranking="reference")
                        ],
                        cases,
                        a.misses,
                    ),
                )
            )

    if a.skip_bm25s:
        _print_rows(rows)
        return
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
    _print_rows(rows)


def _print_rows(rows: list[tuple[str, float, float, float]]) -> None:
    print(f"\n{'ranking':<24}{'hit@5':>8}{'MRR@10':>9}{'ms/query':>10}")
    for name, h5, mrr, ms in rows:
        print(f"{name:<24}{h5:>8.3f}{mrr:>9.3f}{ms:>10.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
