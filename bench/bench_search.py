"""Search speed, side by side with bm25s, on one or more corpora.

    python bench/bench_search.py CORPUS.jsonl [CORPUS.jsonl ...]
        [--root CORPUS=ROOT] [--suite SUITE.ask.jsonl] [--cold-runs N] [--work DIR]

For each corpus (a cce.knowledge/v1 feed):

- our store: ROOT given with --root (an already indexed root, reused), else the feed
  is indexed into DIR/<name>/ (DIR defaults to a temp dir);
- our derived search index: built from the store in a fresh process (timed, peak
  RSS) — what `cce knowledge index`/`pull` do after writing the store;
- bm25s: whole records (title + body), English stopwords, built and saved in a fresh
  process (timed, peak RSS), loaded with mmap for the cold runs (its fastest start).

Printed figures:
- index build: our search index vs bm25s (wall, peak RSS, size);
- cold process wall time (median / min of N runs) and peak RSS:
  `cce knowledge search Q --dir ROOT` (both rankings) vs a `python -c` that loads
  the saved bm25s index and answers one query;
- warm in-process latency p50 / p95 over the suite's questions (both rankings, bm25s);
- sizes: store file, our search index, the saved bm25s index;
- with --suite on a corpus whose records the suite names: hit@5 / MRR@10 for both
  rankings and bm25s (bench/eval_quality.py's measure).

The machine may be shared: figures are wall-clock and include any contention.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_QUERIES = [
    "how do closures capture variables",
    "why are struct fields private by default",
    "what happens when a panic crosses an extern C boundary",
    "lazily initialised global values",
    "cargo workspace shared lock file",
]


def _dir_size(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def _timed_process(argv: list[str], runs: int) -> tuple[float, float, int]:
    """(median ms, min ms, peak RSS KiB) of `argv` run `runs` times from cold-ish start."""
    walls: list[float] = []
    peak = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        r = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], capture_output=True, text=True)
        walls.append((time.perf_counter() - t0) * 1000)
        if r.returncode != 0:
            raise SystemExit(f"command failed: {argv}\n{r.stderr}")
        try:
            peak = max(peak, int(r.stderr.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            pass
    return statistics.median(walls), min(walls), peak


def _index_root(feed: Path, root: Path) -> None:
    from cce_knowledge.store.ingest import default_workers, index_feed
    from cce_knowledge.store.snapshots import save_store_bytes

    res, data = index_feed(feed.read_bytes(), 400, workers=default_workers())
    save_store_bytes(root, res.snapshot, data)


BM25S_BUILD = (
    "import sys, json, bm25s\n"
    "ids, texts = [], []\n"
    "for line in open(sys.argv[1], encoding='utf-8'):\n"
    "    if line.strip():\n"
    "        r = json.loads(line); ids.append(r['id']); texts.append(r['title'] + '\\n' + r['body'])\n"
    "retriever = bm25s.BM25()\n"
    "retriever.index(bm25s.tokenize(texts, stopwords='en', show_progress=False), show_progress=False)\n"
    "retriever.save(sys.argv[2])\n"
    "open(sys.argv[2] + '/ids.json', 'w').write(json.dumps(ids))\n"
)
OUR_BUILD = (
    "import sys\n"
    "from cce_knowledge.retrieval.search_index import build_search_index\n"
    "build_search_index(sys.argv[1])\n"
)


BM25S_COLD = (
    "import sys, json, bm25s\n"
    "d = sys.argv[1]\n"
    "r = bm25s.BM25.load(d, mmap=True)\n"
    "ids = json.load(open(d + '/ids.json'))\n"
    "res, sc = r.retrieve(bm25s.tokenize([sys.argv[2]], stopwords='en', show_progress=False), k=8, show_progress=False)\n"
    "for i, s in zip(res[0], sc[0]): print(ids[int(i)], float(s))\n"
)


def bench_corpus(
    feed: Path,
    root: Path | None,
    work: Path,
    queries: list[str],
    cold_runs: int,
    suite: Path | None,
) -> None:
    name = feed.stem
    print(f"\n=== {feed} ===")
    if root is None:
        root = work / name
        if not (root / ".cce" / "knowledge" / "current").exists():
            t0 = time.perf_counter()
            _index_root(feed, root)
            print(f"indexed into {root} in {time.perf_counter() - t0:.1f} s")
    from cce_knowledge.retrieval import Searcher
    from cce_knowledge.retrieval.search_index import index_path
    from cce_knowledge.store.snapshots import read_current, store_path

    snap = read_current(root)
    build_s, _, build_peak = _timed_process([sys.executable, "-c", OUR_BUILD, str(root)], 1)
    idx_file = index_path(root, snap)
    s = Searcher(root)

    bdir = work / f"{name}.bm25s"
    bdir.mkdir(parents=True, exist_ok=True)
    bm_s, _, bm_peak = _timed_process([sys.executable, "-c", BM25S_BUILD, str(feed), str(bdir)], 1)
    print("\nindex build from the feed's records, fresh process (wall / peak RSS):")
    print(
        f"  {'cce search index (from store)':<30}{build_s / 1000:9.1f} s{build_peak / 1024:9.1f} MiB"
    )
    print(f"  {'bm25s build + save':<30}{bm_s / 1000:9.1f} s{bm_peak / 1024:9.1f} MiB")

    cce = shutil.which("cce") or "cce"
    q0 = queries[0]
    print(f"\ncold process, one query ({cold_runs} runs; median / min / peak RSS):")
    rows = [
        ("cce search (default)", [cce, "knowledge", "search", q0, "--dir", str(root), "-k", "8"]),
        (
            "cce search (reference)",
            [
                cce,
                "knowledge",
                "search",
                q0,
                "--dir",
                str(root),
                "-k",
                "8",
                "--ranking",
                "reference",
            ],
        ),
        ("bm25s load + query", [sys.executable, "-c", BM25S_COLD, str(bdir), q0]),
        ("python -c pass", [sys.executable, "-c", "pass"]),
    ]
    for label, argv in rows:
        med, mn, peak = _timed_process(argv, cold_runs)
        print(f"  {label:<26}{med:9.1f} ms{mn:9.1f} ms{peak / 1024:9.1f} MiB")

    import bm25s

    retr = bm25s.BM25.load(str(bdir), mmap=False)
    print(f"\nwarm in-process latency over {len(queries)} queries (p50 / p95 / max):")
    for label, fn in (
        ("cce default", lambda q: s.search(q, 8, ranking="default")),
        ("cce reference", lambda q: s.search(q, 8, ranking="reference")),
        (
            "bm25s",
            lambda q: retr.retrieve(
                bm25s.tokenize([q], stopwords="en", show_progress=False), k=8, show_progress=False
            ),
        ),
    ):
        lat: list[float] = []
        reps = 3 if label != "cce reference" else 1
        for _ in range(reps):
            for q in queries:
                t0 = time.perf_counter()
                fn(q)
                lat.append((time.perf_counter() - t0) * 1000)
        print(f"  {label:<26}{_pct(lat, 0.5):9.2f} ms{_pct(lat, 0.95):9.2f} ms{max(lat):9.2f} ms")

    print("\nsizes:")
    print(f"  store file                {_mb(store_path(root, snap).stat().st_size):>12}")
    print(f"  cce search index          {_mb(idx_file.stat().st_size):>12}")
    print(f"  bm25s saved index         {_mb(_dir_size(bdir)):>12}")

    if suite is not None:
        from cce_knowledge.contract.asksuite import parse_suite
        from eval_quality import evaluate

        ss = parse_suite(suite.read_text(encoding="utf-8"))
        cases = [(c.id, c.query, list(c.expect)) for c in ss.cases]
        ids = json.loads((bdir / "ids.json").read_text())

        def bm(q: str) -> list[str]:
            res, _ = retr.retrieve(
                bm25s.tokenize([q], stopwords="en", show_progress=False), k=10, show_progress=False
            )
            return [ids[int(i)] for i in res[0]]

        print(f"\nquality on {suite.name} ({len(cases)} questions): hit@5 / MRR@10")
        for label, fn in (
            (
                "cce default",
                lambda q: [h.record_id for h in s.search(q, 10, ranking="default", min_score=0.0)],
            ),
            (
                "cce reference",
                lambda q: [
                    h.record_id for h in s.search(q, 30, ranking="reference", min_score=0.0)
                ],
            ),
            ("bm25s", bm),
        ):
            h5, mrr, _ = evaluate(label, fn, cases, False)
            print(f"  {label:<26}{h5:9.3f}{mrr:9.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("corpora", nargs="+", type=Path)
    ap.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="CORPUS=ROOT",
        help="reuse an indexed root for a corpus",
    )
    ap.add_argument("--suite", type=Path, help="ask suite for latency queries and quality")
    ap.add_argument(
        "--quality-on",
        action="append",
        default=[],
        metavar="CORPUS",
        help="corpora to measure quality on (default: the first)",
    )
    ap.add_argument("--cold-runs", type=int, default=7)
    ap.add_argument("--work", type=Path, default=None)
    a = ap.parse_args()
    sys.path.insert(0, str(HERE))
    roots = dict(r.split("=", 1) for r in a.root)
    work = a.work or Path(tempfile.mkdtemp(prefix="cce-bench-"))
    queries = DEFAULT_QUERIES
    if a.suite:
        queries = [
            json.loads(line)["query"]
            for line in a.suite.read_text().splitlines()
            if '"query"' in line
        ]
    quality = {str(p) for p in a.quality_on} or {str(a.corpora[0])}
    print(
        f"cce bench_search — python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
        f"load avg {os.getloadavg()[0]:.2f} (shared machine: figures include contention)"
    )
    for feed in a.corpora:
        root = Path(roots[str(feed)]) if str(feed) in roots else None
        bench_corpus(
            feed, root, work, queries, a.cold_runs, a.suite if str(feed) in quality else None
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
