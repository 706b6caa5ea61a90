"""Latency added by `--ranking hybrid` over `default`, and embed throughput.

    python bench/bench_hybrid.py ROOT --suite SUITE.ask.jsonl [--cold-runs 11]
    python bench/bench_hybrid.py ROOT --throughput [--limit N]

ROOT holds an indexed store with `knowledge.semantic` configured and `cce knowledge
embed` done (bench/serve_embeddings.py serves a local model). The provider's time to
embed the query is measured around its one request and taken out, so the figures are
what hybrid itself adds: loading and scanning the vectors, the default ranking's
candidate pool and the fusion.

- warm: one long-lived Searcher (as the MCP server), every suite query once for
  warm-up, then each query timed with both rankings; p50/p95 of default, of hybrid
  minus the provider, and of their per-query difference;
- cold (in-process): a fresh Searcher per query (maps the index and the vectors,
  opens the provider connection), first query only;
- cold (process): `cce knowledge search` in a new interpreter, median/min wall time
  of each ranking (the provider's time included there: a process cannot subtract it);
- `--throughput`: `cce knowledge embed --rebuild` into a copy of ROOT, chunks/s.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


class Timed:
    """Wraps a provider's `embed` to add up the time spent waiting on it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.spent = 0.0

    def embed(self, texts: list[str]) -> list[list[float]]:
        t0 = time.perf_counter()
        try:
            return self.inner.embed(texts)  # type: ignore[no-any-return]
        finally:
            self.spent += time.perf_counter() - t0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def hybrid_once(searcher: Any, q: str) -> tuple[float, float]:
    """(total ms, provider ms) of one hybrid search. The searcher's provider is wrapped
    (created up front on a fresh searcher, connection not yet open) to time its request."""
    from cce_knowledge.semantic.hybrid import HybridRanking
    from cce_knowledge.semantic.provider import Provider

    if searcher._hybrid is None:
        searcher._hybrid = HybridRanking()
    st = searcher._hybrid.state
    if not isinstance(st.provider, Timed):
        cfg = searcher.settings().knowledge.semantic_config()
        st.provider, st.provider_cfg = Timed(Provider(cfg)), cfg
    before = st.provider.spent
    t0 = time.perf_counter()
    searcher.search(q, 8, ranking="hybrid")
    total = time.perf_counter() - t0
    if searcher.last_note:
        raise SystemExit(f"hybrid fell back: {searcher.last_note}")
    return total * 1e3, (st.provider.spent - before) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("root", type=Path)
    ap.add_argument("--suite", action="append", default=[])
    ap.add_argument("--cold-runs", type=int, default=11)
    ap.add_argument("--throughput", action="store_true")
    ap.add_argument(
        "--limit", type=int, default=0, help="throughput: embed only the first N chunks"
    )
    a = ap.parse_args()
    if a.throughput:
        return throughput(a.root, a.limit)

    from cce_knowledge.config.settings import load_settings
    from cce_knowledge.contract.asksuite import parse_suite
    from cce_knowledge.retrieval.searcher import Searcher
    from cce_knowledge.semantic.hybrid import HybridRanking

    settings = load_settings(a.root)

    queries = [c.query for s in a.suite for c in parse_suite(Path(s).read_text()).cases]
    s = Searcher(a.root, settings, hybrid=HybridRanking)
    for q in queries:
        s.search(q, 8, ranking="default")
        hybrid_once(s, q)
    d_ms, h_ms, p_ms, add = [], [], [], []
    for q in queries:
        t0 = time.perf_counter()
        s.search(q, 8, ranking="default")
        d = (time.perf_counter() - t0) * 1e3
        tot, prov = hybrid_once(s, q)
        d_ms.append(d)
        h_ms.append(tot - prov)
        p_ms.append(prov)
        add.append(tot - prov - d)
    print(f"warm, {len(queries)} queries (ms)          p50      p95")
    for name, xs in (
        ("default", d_ms),
        ("hybrid minus provider", h_ms),
        ("added by hybrid (per query)", add),
        ("provider (query embedding)", p_ms),
    ):
        print(f"  {name:<30}{pct(xs, 50):>8.2f}{pct(xs, 95):>9.2f}")

    cold_d, cold_h = [], []
    for q in queries[: a.cold_runs]:
        fresh = Searcher(a.root, settings)
        t0 = time.perf_counter()
        fresh.search(q, 8, ranking="default")
        cold_d.append((time.perf_counter() - t0) * 1e3)
        fresh2 = Searcher(a.root, settings, hybrid=HybridRanking)
        tot, prov = hybrid_once(fresh2, q)
        cold_h.append(tot - prov)
        fresh2.close()
    print(f"cold in-process, {len(cold_d)} fresh searchers (ms)  p50      p95")
    print(f"  {'default':<30}{pct(cold_d, 50):>8.2f}{pct(cold_d, 95):>9.2f}")
    print(f"  {'hybrid minus provider':<30}{pct(cold_h, 50):>8.2f}{pct(cold_h, 95):>9.2f}")

    walls: dict[str, list[float]] = {"default": [], "hybrid": []}
    for i in range(a.cold_runs):
        for rk in walls:
            t0 = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "cce_knowledge", "knowledge", "search", queries[i % len(queries)],
                 "--dir", str(a.root), "--ranking", rk],
                check=True, capture_output=True,
            )  # fmt: skip
            walls[rk].append((time.perf_counter() - t0) * 1e3)
    print(f"cold process, {a.cold_runs} runs (ms, provider included)   median      min")
    for rk, xs in walls.items():
        print(f"  {rk:<30}{statistics.median(xs):>8.1f}{min(xs):>9.1f}")
    return 0


def throughput(root: Path, limit: int) -> int:
    from cce_knowledge.config.settings import load_settings
    from cce_knowledge.semantic.build import embed_root

    cfg = load_settings(root).knowledge.semantic_config()
    if cfg is None:
        raise SystemExit(f"{root}: no knowledge.semantic")
    with tempfile.TemporaryDirectory(prefix="cce-embed-bench-") as tmp:
        copy = Path(tmp) / "root"
        shutil.copytree(root / ".cce", copy / ".cce", ignore=shutil.ignore_patterns("vectors"))
        if limit:
            from cce_knowledge.semantic import build as B

            real = B.chunk_texts
            B.chunk_texts = lambda idx, prefix="": [  # type: ignore[assignment]
                t if i < limit else None for i, t in enumerate(real(idx, prefix))
            ]
        t0 = time.perf_counter()
        rep = embed_root(copy, cfg)
        dt = time.perf_counter() - t0
    print(
        f"embedded {rep.new} chunks in {dt:.1f} s: {rep.new / dt:.2f} chunks/s "
        f"({rep.requests} requests, {cfg.model}, dim {rep.dim})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
