"""Benchmark: `cce knowledge extract github` against the scale target on 127.0.0.1.

The tracker (default 5,000 issues, 2,500 PRs whose bodies reference issues, 20,000
comments) is served by the test suite's fake GitHub REST server (real http.server,
real response shapes) in a separate process, so the extractor does not share a GIL
with it. Every scenario runs the real CLI as a subprocess; we report requests made,
requests per record, wall time, peak RSS of the extractor, and the server's
per-request service time.

Scenarios, side by side in one run:
  full, pages                    default: list + repository-wide comments, checkpoint
  full, pages, --concurrency 1   the same, one page at a time
  incremental, nightly           after 50 edited items and 200 new comments
  incremental, no change         re-run with nothing changed
  full, --timeline (peer)        plus one timeline request per issue: the per-item path
  full, --authors all            lockdown off: no visibility request, every author kept
  full, --peer-src build         with --peer-src DIR: the same full run by another checkout's
                                 code (e.g. main before lockdown), for today's figure

The tracker's authors are mixed, as on a public repository: items by MEMBERs and, every
7th, by a stranger (NONE); comments by a MEMBER, a CONTRIBUTOR and a stranger. The
default runs are the lockdown default for a public repository (collaborators), which
costs one `GET /repos/{o}/{r}`.

Usage: python bench/bench_extract.py [--issues 5000 --prs 2500 --comments 20000]
       [--no-timeline-peer] [--peer-src DIR] [--workdir DIR]
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


def serve(conn: Connection, shape: tuple[int, int, int]) -> None:
    from tests.helpers.fake_github import FakeGitHub, make_large_tracker

    issues, prs, comments = shape
    tracker = make_large_tracker(issues, prs, comments, seed=42)
    tracker.associations = {"bob": "CONTRIBUTOR", "carol": "NONE", "stranger": "NONE"}
    for n in range(7, len(tracker.items) + 1, 7):
        tracker.items[n].user = "stranger"
    with FakeGitHub(tracker, budget=10**7) as gh:  # budgets are compared in the report
        conn.send(gh.url)
        while True:
            cmd, arg = conn.recv()
            if cmd == "stop":
                return
            if cmd == "reset":
                gh.reset_counts()
                gh.refill()
                conn.send(None)
            elif cmd == "stats":
                with gh._lock:
                    conn.send((len(gh.requests), list(gh.service_times)))
            elif cmd == "touch":
                edits, comments = arg
                for n in edits:
                    tracker.touch(n, title=f"{tracker.items[n].title} (edited)")
                for k, n in enumerate(comments):
                    tracker.comment(n, "nightly", f"Nightly comment {k}.")
                conn.send(None)


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


#: CPU seconds (user + system) of the last `run_cli`: steadier than wall time under load.
LAST_CPU = [0.0]


def run_cli(argv: list[str], env: dict[str, str]) -> tuple[float, int, int, str]:
    """(wall seconds, peak RSS KiB, exit code, stderr) of one CLI run."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    LAST_CPU[0] = usage.ru_utime + usage.ru_stime
    return time.perf_counter() - t0, int(usage.ru_maxrss), proc.returncode, err


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--issues", type=int, default=5_000)
    ap.add_argument("--prs", type=int, default=2_500)
    ap.add_argument("--comments", type=int, default=20_000)
    ap.add_argument("--edits", type=int, default=50, help="items edited before the nightly run")
    ap.add_argument("--new-comments", type=int, default=200)
    ap.add_argument("--no-timeline-peer", action="store_true", help="skip the per-issue peer")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument(
        "--peer-src", type=Path, help="another checkout's src/ to time the same full run with"
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=0,
        metavar="N",
        help="then N interleaved rounds of the full runs (lockdown, --authors all, peer) "
        "and their median wall times: load on a shared machine drifts",
    )
    args = ap.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-extract-"))
    work.mkdir(parents=True, exist_ok=True)
    parent, child = mp.Pipe()
    shape = (args.issues, args.prs, args.comments)
    server = mp.get_context("fork").Process(target=serve, args=(child, shape), daemon=True)
    t0 = time.perf_counter()
    server.start()
    url = parent.recv()
    items = args.issues + args.prs
    print(
        f"tracker: {args.issues} issues + {args.prs} PRs, {args.comments} comments, served at "
        f"{url} (built in {time.perf_counter() - t0:.1f}s)"
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
    base.append("--include-comments")
    feed, ck = work / "feed.jsonl", work / "ck.json"
    for p in (feed, ck, Path(f"{ck}.mirror")):
        p.unlink(missing_ok=True)

    rows: list[tuple[str, float, int, int, list[float], str, int]] = []

    def scenario(name: str, extra: list[str], run_env: dict[str, str] | None = None) -> str:
        call("reset")
        wall, rss, rc, err = run_cli([*base, *extra], run_env or env)
        if rc != 0:
            raise SystemExit(f"{name} failed ({rc}): {err}")
        n, service = call("stats")
        out = Path(extra[extra.index("--out") + 1])
        digest = hashlib.sha256(out.read_bytes()).hexdigest()[:12]
        records = sum(1 for _ in out.open("rb"))
        rows.append((name, wall, n, rss, service, digest, records))
        return digest

    full = scenario("full, pages", ["--out", str(feed), "--checkpoint", str(ck)])
    seq = scenario(
        "full, pages, --concurrency 1", ["--concurrency", "1", "--out", str(work / "seq.jsonl")]
    )
    numbers = list(range(1, items + 1))
    edits = numbers[:: max(1, items // args.edits)][: args.edits]
    commented = numbers[7 :: max(1, items // args.new_comments)][: args.new_comments]
    call("touch", (edits, commented))
    scenario("incremental, nightly", ["--out", str(feed), "--checkpoint", str(ck)])
    inc = hashlib.sha256(feed.read_bytes()).hexdigest()[:12]
    ref = scenario("full after the night (check)", ["--out", str(work / "ref.jsonl")])
    scenario("incremental, no change", ["--out", str(feed), "--checkpoint", str(ck)])
    scenario("full, --authors all", ["--authors", "all", "--out", str(work / "all.jsonl")])
    if args.peer_src is not None:
        peer_env = {**env, "PYTHONPATH": str(args.peer_src.resolve())}
        scenario("full, --peer-src build", ["--out", str(work / "peer.jsonl")], peer_env)
    if not args.no_timeline_peer:
        scenario("full, --timeline (peer)", ["--timeline", "--out", str(work / "tl.jsonl")])
    medians: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        runs = [("full, lockdown (default)", []), ("full, --authors all", ["--authors", "all"])]
        if args.peer_src is not None:
            runs.append(("full, --peer-src build", []))
        for name, extra in runs:
            call("reset")
            run_env = env
            if name.endswith("build") and args.peer_src is not None:
                run_env = {**env, "PYTHONPATH": str(args.peer_src.resolve())}
            wall, _, rc, err = run_cli([*base, *extra, "--out", str(work / "r.jsonl")], run_env)
            if rc != 0:
                raise SystemExit(f"{name} failed ({rc}): {err}")
            medians.setdefault(name, []).append(wall)
            cpus.setdefault(name, []).append(LAST_CPU[0])
    parent.send(("stop", None))
    server.join(5)

    print(
        f"feed: {rows[0][6]} records, {feed.stat().st_size / 1e6:.1f} MB; nightly: "
        f"{len(edits)} items edited, {len(commented)} new comments"
    )
    print()
    hdr = (
        f"{'scenario':<30} {'wall s':>7} {'requests':>9} {'req/record':>11} {'peak RSS MiB':>13} "
        f"{'svc p50 ms':>11} {'svc p95 ms':>11}  feed sha256"
    )
    print(hdr)
    print("-" * len(hdr))
    for name, wall, n, rss, service, digest, records in rows:
        print(
            f"{name:<30} {wall:>7.2f} {n:>9} {n / max(records, 1):>11.4f} {rss / 1024:>13.1f} "
            f"{pct(service, 50) * 1e3:>11.2f} {pct(service, 95) * 1e3:>11.2f}  {digest}"
        )
    full_row, inc_row = rows[0], rows[2]
    print()
    print(
        f"full run: {full_row[2]} requests for {full_row[6]} records and {args.comments} "
        f"comments (target <= 400); nightly run: {inc_row[2]} requests"
    )
    print(
        "rate limits per hour: GITHUB_TOKEN in Actions 1,000 per repository, a personal or "
        "app token 5,000"
    )
    print(
        f"deterministic: concurrent == sequential full run: {seq == full}; "
        f"incremental == fresh full run after the night: {inc == ref}"
    )
    print(f"mean service time {statistics.fmean(full_row[4]) * 1e3:.2f} ms/request (server side)")
    for name, walls in medians.items():
        shown = ", ".join(f"{w:.2f}" for w in walls)
        print(
            f"{name:<30} median wall {statistics.median(walls):.2f} s over {len(walls)} "
            f"({shown}); median CPU {statistics.median(cpus[name]):.2f} s"
        )
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if (seq == full and inc == ref and full_row[2] <= 400) else 1


if __name__ == "__main__":
    raise SystemExit(main())
