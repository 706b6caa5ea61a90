"""Benchmark: `cce knowledge extract github` against a 10,000-issue tracker on 127.0.0.1.

The tracker is served by the test suite's fake GitHub REST server (real http.server,
real response shapes) in a separate process, so the extractor does not share a GIL
with it. Every scenario runs the real CLI as a subprocess; we report requests made,
wall time, peak RSS of the extractor, and the server's per-request service time.

Scenarios, side by side in one run:
  full (sequential)     --concurrency 1, no checkpoint: what a naive nightly refetch costs
  full (concurrent)     --concurrency 4 (the default), writing a checkpoint
  incremental, 1% edit  re-run with the checkpoint after touching 1% of the issues
  incremental, no edit  re-run with nothing changed
  full, no timeline     --no-timeline: list pages only (the floor for a full run)

Usage: python bench/bench_extract.py [--issues 10000] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the repository root: tests.helpers


def serve(conn: Connection, issues: int) -> None:
    from tests.helpers.fake_github import FakeGitHub, make_tracker

    tracker = make_tracker(issues, seed=42)
    with FakeGitHub(tracker) as gh:
        conn.send(gh.url)
        while True:
            cmd, arg = conn.recv()
            if cmd == "stop":
                return
            if cmd == "reset":
                gh.reset_counts()
                conn.send(None)
            elif cmd == "stats":
                with gh._lock:
                    conn.send((len(gh.requests), list(gh.service_times)))
            elif cmd == "touch":
                for n in arg:
                    tracker.touch(n, title=f"{tracker.items[n].title} (edited)")
                conn.send(None)


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def run_cli(argv: list[str], env: dict[str, str]) -> tuple[float, int, int, str]:
    """(wall seconds, peak RSS KiB, exit code, stderr) of one CLI run."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, int(usage.ru_maxrss), proc.returncode, err


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--issues", type=int, default=10_000)
    ap.add_argument("--touch-percent", type=float, default=1.0)
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-extract-"))
    work.mkdir(parents=True, exist_ok=True)
    parent, child = mp.Pipe()
    server = mp.get_context("fork").Process(target=serve, args=(child, args.issues), daemon=True)
    t0 = time.perf_counter()
    server.start()
    url = parent.recv()
    print(
        f"tracker: {args.issues} items served at {url} (built in {time.perf_counter() - t0:.1f}s)"
    )
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} "
        "(shared with other work: figures were taken under load)"
    )

    def call(cmd: str, arg: Any = None) -> Any:
        parent.send((cmd, arg))
        return parent.recv()

    env = {**os.environ, "GITHUB_API_URL": url}
    env.pop("GITHUB_TOKEN", None)
    cce = [sys.executable, "-m", "cce_knowledge"]
    base = [*cce, "knowledge", "extract", "github", "--repo", "acme/widgets", "-q"]
    feed, ck = work / "feed.jsonl", work / "ck.json"
    for p in (feed, ck):
        p.unlink(missing_ok=True)

    rows: list[tuple[str, float, int, int, list[float], str]] = []

    def scenario(name: str, extra: list[str]) -> str:
        call("reset")
        wall, rss, rc, err = run_cli([*base, *extra], env)
        if rc != 0:
            raise SystemExit(f"{name} failed ({rc}): {err}")
        n, service = call("stats")
        out = extra[extra.index("--out") + 1]
        digest = hashlib.sha256(Path(out).read_bytes()).hexdigest()[:12]
        rows.append((name, wall, n, rss, service, digest))
        return digest

    seq = scenario("full (sequential)", ["--concurrency", "1", "--out", str(work / "seq.jsonl")])
    full = scenario("full (concurrent)", ["--out", str(feed), "--checkpoint", str(ck)])
    touched = list(range(1, args.issues + 1, max(1, round(100 / args.touch_percent))))
    call("touch", touched)
    scenario(
        f"incremental, {args.touch_percent:g}% edited",
        ["--out", str(feed), "--checkpoint", str(ck)],
    )
    inc = hashlib.sha256(feed.read_bytes()).hexdigest()[:12]
    ref = scenario("full after edit (check)", ["--out", str(work / "ref.jsonl")])
    scenario("incremental, no edit", ["--out", str(feed), "--checkpoint", str(ck)])
    scenario("full, --no-timeline", ["--no-timeline", "--out", str(work / "nt.jsonl")])
    parent.send(("stop", None))
    server.join(5)

    records = sum(1 for _ in feed.open("rb"))
    print(
        f"feed: {records} records, {feed.stat().st_size / 1e6:.1f} MB; touched {len(touched)} items"
    )
    print()
    hdr = (
        f"{'scenario':<26} {'wall s':>8} {'requests':>9} {'req/s':>8} {'peak RSS MiB':>13} "
        f"{'svc p50 ms':>11} {'svc p95 ms':>11} {'svc p99 ms':>11}  feed sha256"
    )
    print(hdr)
    print("-" * len(hdr))
    for name, wall, n, rss, service, digest in rows:
        print(
            f"{name:<26} {wall:>8.2f} {n:>9} {n / wall:>8.0f} {rss / 1024:>13.1f} "
            f"{pct(service, 50) * 1e3:>11.2f} {pct(service, 95) * 1e3:>11.2f} "
            f"{pct(service, 99) * 1e3:>11.2f}  {digest}"
        )
    full_row, inc_row = rows[1], rows[2]
    print()
    print(
        f"incremental re-run cost vs full: {inc_row[2] / full_row[2] * 100:.1f}% of the requests, "
        f"{inc_row[1] / full_row[1] * 100:.1f}% of the wall time"
    )
    print(
        f"deterministic: sequential == concurrent full run: {seq == full}; "
        f"incremental == fresh full run after the edit: {inc == ref}"
    )
    print(f"mean service time {statistics.fmean(full_row[4]) * 1e3:.2f} ms/request (server side)")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if (seq == full and inc == ref) else 1


if __name__ == "__main__":
    raise SystemExit(main())
