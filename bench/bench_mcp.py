"""Benchmark: warm `context_search` latency through `cce mcp` (stdio, official SDK client).

For each corpus feed given on the command line:
  1. index it into a work root (`cce knowledge index`, reused when already current);
  2. the peer/floor: in-process `Searcher.search` on the same queries, in its own
     process (so its peak RSS is its own);
  3. `cce mcp --dir ROOT` as a subprocess driven by `mcp.client.stdio` — one cold
     call (loads the store and the derived index), then the timed warm calls.
Printed side by side: p50/p95/p99 and mean latency, throughput, cold-call time and
peak RSS of each process. The MCP figure includes JSON-RPC framing, pipe I/O and the
blend rendering; the difference to the peer is the protocol's cost.

Queries are derived deterministically from the corpus (title words of every n-th
record) plus a few fixed questions, so runs are comparable.

Usage:
  python bench/bench_mcp.py CORPUS.jsonl [CORPUS.jsonl ...] [--queries 200]
      [--repeat 3] [--ranking default|reference] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FIXED = [
    "why was this decision made",
    "error handling",
    "backwards compatibility",
    "memory safety",
    "async await",
]


def percentile(xs: list[float], p: float) -> float:
    s = sorted(xs)
    if not s:
        return float("nan")
    k = (len(s) - 1) * p
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def derive_queries(feed: Path, n: int) -> list[str]:
    titles: list[str] = []
    with feed.open("rb") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                t = json.loads(line).get("title", "")
            except ValueError:
                continue
            if isinstance(t, str):
                titles.append(t)
    step = max(1, len(titles) // max(1, n - len(FIXED)))
    out = list(FIXED)
    for t in titles[::step]:
        words = re.findall(r"[A-Za-z][A-Za-z0-9_]+", t)[:4]
        if words:
            out.append(" ".join(words).lower())
        if len(out) >= n:
            break
    return out


def cce(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "cce_knowledge", *args], check=True, capture_output=True)


def ensure_index(feed: Path, root: Path) -> tuple[str, float | None]:
    """Index `feed` into `root` unless its snapshot is already current."""
    h = hashlib.sha256()
    with feed.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    snap = h.hexdigest()[:16]
    cur = root / ".cce" / "knowledge" / "current"
    if cur.exists() and cur.read_text().strip() == snap:
        return snap, None
    t0 = time.perf_counter()
    cce("knowledge", "index", str(feed), "--dir", str(root))
    return snap, time.perf_counter() - t0


def peak_rss_mb(pid: int | None = None) -> float:
    if pid is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().split("\n"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def child_pids() -> list[int]:
    pids: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            pids += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass
    return pids


# ---------------------------------------------------------------- the peer (in-process)


def run_peer(root: Path, queries: list[str], repeat: int, ranking: str | None) -> dict[str, Any]:
    from cce_knowledge.retrieval.searcher import Searcher

    s = Searcher(root)
    t0 = time.perf_counter()
    s.search(queries[0], 8, ranking=ranking)
    cold = time.perf_counter() - t0
    lat: list[float] = []
    for _ in range(repeat):
        for q in queries:
            t = time.perf_counter()
            s.search(q, 8, ranking=ranking)
            lat.append(time.perf_counter() - t)
    return {"cold_s": cold, "lat": lat, "rss_mb": peak_rss_mb()}


# ---------------------------------------------------------------- through MCP


def run_mcp(root: Path, queries: list[str], repeat: int, ranking: str | None) -> dict[str, Any]:
    import anyio
    from mcp.client import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    result: dict[str, Any] = {}

    async def main() -> None:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "cce_knowledge", "mcp", "--dir", str(root)]
        )
        extra = {"ranking": ranking} if ranking else {}
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
                t0 = time.perf_counter()
                await s.initialize()
                result["init_s"] = time.perf_counter() - t0
                server = max(child_pids(), default=None)
                t0 = time.perf_counter()
                await s.call_tool("context_search", {"query": queries[0], **extra})
                result["cold_s"] = time.perf_counter() - t0
                lat: list[float] = []
                answered = 0
                for _ in range(repeat):
                    for q in queries:
                        t = time.perf_counter()
                        res = await s.call_tool("context_search", {"query": q, **extra})
                        lat.append(time.perf_counter() - t)
                        if res.content and res.content[0].text.startswith(" 1. ["):
                            answered += 1
                result["lat"] = lat
                result["answered"] = answered / max(1, len(lat))
                result["rss_mb"] = peak_rss_mb(server) if server else float("nan")

    anyio.run(main)
    return result


def summarize(name: str, r: dict[str, Any]) -> str:
    lat = [x * 1000 for x in r["lat"]]
    qps = len(lat) / (sum(lat) / 1000) if lat else 0.0
    return (
        f"  {name:<24}{percentile(lat, 0.5):>8.2f}{percentile(lat, 0.95):>8.2f}"
        f"{percentile(lat, 0.99):>8.2f}{statistics.fmean(lat):>8.2f}{qps:>9.0f}"
        f"{r['cold_s'] * 1000:>10.0f}{r['rss_mb']:>9.0f}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("corpora", nargs="+", type=Path, help="cce.knowledge/v1 feeds")
    ap.add_argument("--queries", type=int, default=200, help="distinct queries (default 200)")
    ap.add_argument("--repeat", type=int, default=3, help="passes over the queries (default 3)")
    ap.add_argument("--ranking", choices=["default", "reference"], default=None,
                    help="ranking to request (default: the root's knowledge.ranking)")  # fmt: skip
    ap.add_argument("--workdir", type=Path, default=None, help="keep indexed roots here")
    ap.add_argument("--_peer", nargs=2, metavar=("ROOT", "QUERIES"), help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args._peer:
        root, qfile = Path(args._peer[0]), Path(args._peer[1])
        r = run_peer(root, json.loads(qfile.read_text()), args.repeat, args.ranking)
        print(json.dumps(r))
        return 0

    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"bench_mcp — warm context_search, top_k 8, ranking {args.ranking or 'root default'}")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start "
          "(shared with other work: figures are under load)")  # fmt: skip
    for feed in args.corpora:
        root = work / re.sub(r"[^A-Za-z0-9_.-]", "_", feed.stem)
        root.mkdir(parents=True, exist_ok=True)
        snap, index_s = ensure_index(feed, root)
        queries = derive_queries(feed, args.queries)
        qfile = work / f"{root.name}.queries.json"
        qfile.write_text(json.dumps(queries))
        peer_cmd = [sys.executable, __file__, str(feed), "--repeat", str(args.repeat),
                    "--_peer", str(root), str(qfile)]  # fmt: skip
        if args.ranking:
            peer_cmd += ["--ranking", args.ranking]
        proc = subprocess.run(peer_cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(
                f"peer run failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}", file=sys.stderr
            )
            return 1
        peer = json.loads(proc.stdout)
        mcp = run_mcp(root, queries, args.repeat, args.ranking)
        size_mb = feed.stat().st_size / 1e6
        print(f"\ncorpus {feed} ({size_mb:.1f} MB, snapshot {snap})")
        print(f"  index: {'reused' if index_s is None else f'{index_s:.1f} s'}; "
              f"{len(queries)} queries × {args.repeat} passes = {len(mcp['lat'])} timed calls; "
              f"MCP initialize {mcp['init_s'] * 1000:.0f} ms; "
              f"{mcp['answered'] * 100:.0f}% of calls returned hits")  # fmt: skip
        print(f"  {'':<24}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}{'mean':>8}{'q/s':>9}"
              f"{'cold ms':>10}{'RSS MB':>9}")  # fmt: skip
        print(summarize("in-process Searcher", peer))
        print(summarize("MCP stdio context_search", mcp))
        overhead = percentile(mcp["lat"], 0.5) - percentile(peer["lat"], 0.5)
        print(f"  protocol + rendering overhead at p50: {overhead * 1000:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
