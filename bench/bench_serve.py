"""Benchmark: `cce corpus serve` under 64 concurrent clients, with a snapshot swap.

Given an indexed ROOT (e.g. the 100k bench corpus: bench/make_feed.py, then
`cce knowledge index`):
  1. the peer/floor: one warm in-process search's latency (`Searcher.search`, median
     over the queries), in its own process; the target is
     throughput >= 80% of (cores / that latency);
  2. `cce corpus serve --dir ROOT --workers W` on an ephemeral loopback port;
  3. C clients (asyncio, one keep-alive connection each, raw HTTP/1.1) send
     `GET /docs?service=…&q=…` for D seconds or N requests, whichever ends first;
  4. part-way through, the store's `current` is replaced while requests run, and every
     request must still answer 200. Either `cce knowledge index SWAP_FEED --dir ROOT`
     runs then (--swap-feed; at 100k records that index takes minutes and competes
     for the cores with the server), or (--swap-snapshot ID) a snapshot already in
     ROOT, prepared beforehand (e.g. the same feed with 0.1% of its records changed,
     indexed elsewhere and its `<ID>.json` and `search/<ID>-*.idx` linked in), is
     installed the way index and pull install theirs: under the writer lock,
     `current` atomically replaced, the other snapshots' stores pruned.
Printed: requests, failures, throughput, the target, p50/p95/p99 latency, the server's
CPU time per answered request (its overhead beside the search), the server's peak
memory (sum of its processes' VmHWM) and each worker's private memory, and the load
average (the machine may be shared).

Traffic goes to 127.0.0.1 only; the run is bounded by --seconds and --max-requests.

Usage:
  python bench/bench_serve.py ROOT [--swap-feed FEED | --swap-snapshot ID] [--swap-at 0.2] [--clients 64] [--seconds 60]
      [--workers 2] [--max-requests 2000000] [--queries 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

TOKEN = "bench-" + os.urandom(8).hex()


def queries(root: Path, n: int) -> list[str]:
    """Title words of every k-th chunk (deterministic), as service + q."""
    from cce_knowledge.store.snapshots import read_current, store_path
    from cce_knowledge.store.view import open_view

    view = open_view(store_path(root, read_current(root)))
    total = view.chunk_count
    out: list[str] = []
    step = max(1, total // n)
    for i in range(0, total, step):
        words = re.findall(r"[A-Za-z]{4,}", str(view.raw_chunk(i).get("title", "")))
        if words:
            out.append(" ".join(words[:3]))
        if len(out) >= n:
            break
    return out or ["knowledge"]


def target_query(query: str) -> str:
    """`service=` the first word, `q=` the rest: the server searches "service q", which
    is `query` itself, the very search the in-process peer times."""
    service, _, rest = query.partition(" ")
    return urllib.parse.urlencode({"service": service, **({"q": rest} if rest else {})})


def peer_latency(root: Path, qs: list[str]) -> dict[str, float]:
    """One warm search's seconds over the queries (median, mean, and the mean CPU
    time), in a child process (its own memory). Throughput is bounded by the mean:
    cores / mean is what the cores could answer, searching only."""
    code = (
        "import sys,json,time,statistics\n"
        "from cce_knowledge.config.settings import load_settings\n"
        "from cce_knowledge.retrieval.searcher import Searcher\n"
        "root=sys.argv[1]; qs=json.loads(sys.stdin.read())\n"
        "s=Searcher(root, load_settings(root)); s.warm()\n"
        "for q in qs: s.search(q, 10)\n"
        "t=[]; c0=time.process_time()\n"
        "for q in qs:\n"
        "    t0=time.perf_counter(); s.search(q, 10); t.append(time.perf_counter()-t0)\n"
        "cpu=(time.process_time()-c0)/len(qs)\n"
        "print(json.dumps({'median': statistics.median(t), 'mean': statistics.mean(t),"
        " 'cpu': cpu}))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(root)],
        input=json.dumps(qs),
        capture_output=True,
        text=True,
        check=True,
    )
    out: dict[str, float] = json.loads(r.stdout)
    return out


def tree_pids(pid: int) -> list[int]:
    out = [pid]
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return out
    for k in kids:
        out.extend(tree_pids(int(k)))
    return out


def status_kb(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pids: list[int], main_thread: bool = False) -> tuple[float, float]:
    """(utime, stime) of the processes (fields 14 and 15 of /proc/PID/stat), or of their
    main threads only (a worker's event loop; its searches run on other threads)."""
    tick = os.sysconf("SC_CLK_TCK")
    user = system = 0
    for pid in pids:
        stat = f"/proc/{pid}/task/{pid}/stat" if main_thread else f"/proc/{pid}/stat"
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        user += int(fields[11])
        system += int(fields[12])
    return user / tick, system / tick


def install_snapshot(root: Path, snap: str) -> None:
    """What index and pull do once their store is written: `current` replaced under
    the writer lock, then the other snapshots' stores pruned."""
    from cce_knowledge.core.atomic import atomic_write
    from cce_knowledge.store.snapshots import knowledge_dir, prune_other_snapshots, writer_lock

    with writer_lock(root, "bench swap"):
        atomic_write(knowledge_dir(root) / "current", f"{snap}\n".encode())
        prune_other_snapshots(root, snap)


def anon_kb(pid: int) -> int:
    """The process's anonymous memory (heap, interpreter, copied-on-write pages): what
    another worker adds. Its mapped store and index pages are the page cache's, shared
    by every worker (a page only one worker has touched yet counts as its
    Private_Clean, but is no copy)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    return sum(int(ln.split()[1]) for ln in text.splitlines() if ln.startswith("Anonymous:"))


async def client(
    port: int,
    targets: list[bytes],
    stop_at: float,
    budget: list[int],
    lat: list[float],
    fails: list[str],
    slow: list[tuple[float, float]],
) -> None:
    t_zero = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    i = 0
    try:
        while time.monotonic() < stop_at and budget[0] > 0:
            budget[0] -= 1
            target = targets[i % len(targets)]
            i += 1
            t0 = time.perf_counter()
            writer.write(
                b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Authorization: Bearer " + TOKEN.encode() + b"\r\n\r\n"
            )
            head = await reader.readuntil(b"\r\n\r\n")
            m = re.search(rb"content-length: (\d+)", head, re.IGNORECASE)
            body = await reader.readexactly(int(m.group(1)) if m else 0)
            took = time.perf_counter() - t0
            lat.append(took)
            status = head.split(b" ", 2)[1]
            if took > 2.0:
                slow.append((time.monotonic() - t_zero - took, took))
            if status != b"200" or not body.startswith(b'{"docs":['):
                fails.append(
                    f"{status.decode()} sent at t={time.monotonic() - t_zero - took:.0f} s"
                )
    except (OSError, asyncio.IncompleteReadError) as e:
        fails.append(f"{type(e).__name__}: {e}")
    finally:
        writer.close()


async def drive(
    port: int,
    targets: list[bytes],
    clients: int,
    seconds: float,
    max_requests: int,
    slow: list[tuple[float, float]] | None = None,
) -> tuple[list[float], list[str], float]:
    lat: list[float] = []
    fails: list[str] = []
    slow = [] if slow is None else slow
    budget = [max_requests]
    t0 = time.monotonic()
    stop_at = t0 + seconds
    await asyncio.gather(
        *(client(port, targets, stop_at, budget, lat, fails, slow) for _ in range(clients))
    )
    return lat, fails, time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path)
    swap_how = ap.add_mutually_exclusive_group()
    swap_how.add_argument("--swap-feed", type=Path, help="index this feed into ROOT mid-run")
    swap_how.add_argument(
        "--swap-snapshot",
        metavar="ID",
        help="install this snapshot, already in ROOT (store and search index), mid-run",
    )
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--searches", type=int, help="passed to the server (default: its own)")
    ap.add_argument("--max-requests", type=int, default=2_000_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument(
        "--swap-at",
        type=float,
        default=0.2,
        metavar="FRACTION",
        help="start the swap's index this far into the run (default 0.2: a "
        "large feed's index must end before the run does)",
    )
    a = ap.parse_args()
    if a.swap_snapshot:
        from cce_knowledge.store.snapshots import read_current, store_path

        if not store_path(a.root, a.swap_snapshot).is_file():
            ap.error(f"--swap-snapshot: no {store_path(a.root, a.swap_snapshot)}")
        from_snap = read_current(a.root)
        if from_snap == a.swap_snapshot:
            ap.error("--swap-snapshot names the snapshot `current` already names")

    qs = queries(a.root, a.queries)
    peer = peer_latency(a.root, qs)
    single = peer["mean"]
    cores = os.cpu_count() or 1
    target = 0.8 * cores / single
    targets = [b"/docs?" + target_query(q).encode() for q in qs]
    env = {**os.environ, "CCE_CORPUS_TOKEN": TOKEN}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cce_knowledge",
            "corpus",
            "serve",
            "--dir",
            str(a.root),
            "--port",
            "0",
            "--workers",
            str(a.workers),
            *(["--searches", str(a.searches)] if a.searches else []),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"127\.0\.0\.1:(\d+)/docs", line)
    if not m:
        proc.kill()
        print(line, proc.stderr.read() if proc.stderr else "", file=sys.stderr)
        return 1
    port = int(m.group(1))
    time.sleep(2)  # workers up
    asyncio.run(drive(port, targets[:20], 4, 3, 400))  # warm every worker
    swap: dict[str, float] = {}

    def do_swap() -> None:
        time.sleep(a.seconds * a.swap_at)
        t0 = time.monotonic()
        if a.swap_snapshot:
            install_snapshot(a.root, a.swap_snapshot)
            swap["seconds"] = time.monotonic() - t0
            swap["done_at"] = time.monotonic() - run_start[0]
            swap["rc"] = 0
            return
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "cce_knowledge",
                "knowledge",
                "index",
                str(a.swap_feed),
                "--dir",
                str(a.root),
            ],
            capture_output=True,
            text=True,
        )
        swap["seconds"] = time.monotonic() - t0
        swap["done_at"] = time.monotonic() - run_start[0]
        swap["rc"] = r.returncode

    run_start = [time.monotonic()]
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.5):
            peak[0] = max(peak[0], sum(status_kb(p, "VmRSS") for p in tree_pids(proc.pid)))

    threading.Thread(target=sample, daemon=True).start()
    swapper = threading.Thread(target=do_swap) if a.swap_feed or a.swap_snapshot else None
    if swapper:
        swapper.start()
    run_start[0] = time.monotonic()
    load0 = os.getloadavg()[0]
    cpu0 = cpu_seconds(tree_pids(proc.pid))
    loop0 = cpu_seconds(tree_pids(proc.pid), main_thread=True)
    own0 = time.process_time()
    slow: list[tuple[float, float]] = []
    lat, fails, wall = asyncio.run(drive(port, targets, a.clients, a.seconds, a.max_requests, slow))
    cpu1 = cpu_seconds(tree_pids(proc.pid))
    loop1 = cpu_seconds(tree_pids(proc.pid), main_thread=True)
    own = time.process_time() - own0
    load1 = os.getloadavg()[0]
    if swapper:
        swapper.join()
    done.set()
    hwm = sum(status_kb(p, "VmHWM") for p in tree_pids(proc.pid))
    workers = [p for p in tree_pids(proc.pid) if p != proc.pid] or [proc.pid]
    anon = [anon_kb(p) for p in workers]
    parent_anon = anon_kb(proc.pid) if a.workers > 1 else 0
    proc.terminate()
    proc.wait(timeout=30)

    lat.sort()

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3 if lat else float("nan")

    thr = len(lat) / wall
    if a.swap_snapshot:
        swap_text = (
            f"installed prepared snapshot {a.swap_snapshot} over {from_snap} (current "
            f"replaced under the writer lock, old store pruned) at "
            f"t={swap.get('done_at', 0):.1f} s of {wall:.0f} s"
        )
    elif a.swap_feed:
        swap_text = (
            f"index {a.swap_feed.name} rc={swap.get('rc')}, {swap.get('seconds', 0):.1f} s, "
            f"current replaced at t={swap.get('done_at', 0):.1f} s of {wall:.0f} s"
        )
    else:
        swap_text = "none"
    rows = [
        ("requests answered", f"{len(lat)}"),
        ("failed requests", f"{len(fails)}" + (f" ({sorted(set(fails))[:3]})" if fails else "")),
        ("snapshot swap", swap_text),
        (
            "one warm search (in-process)",
            f"mean {peer['mean'] * 1e3:.2f} ms (CPU {peer['cpu'] * 1e3:.2f}), "
            f"median {peer['median'] * 1e3:.2f} ms, {len(qs)} queries",
        ),
        (
            "target: 80% of cores/latency",
            f"{target:.0f} req/s ({cores} cores, mean latency; "
            f"{0.8 * cores / peer['median']:.0f} by the median)",
        ),
        (
            "throughput",
            f"{thr:.0f} req/s = {thr / target * 80:.0f}% of cores/mean latency "
            f"({thr * peer['median'] / cores * 100:.0f}% of cores/median)",
        ),
        ("latency p50 / p95 / p99", f"{pct(0.5):.1f} / {pct(0.95):.1f} / {pct(0.99):.1f} ms"),
        (
            "answers over 2 s (sent at)",
            f"{len(slow)}"
            + (
                ": t="
                + ", ".join(f"{t:.0f}" for t in sorted({round(t) for t, _ in slow})[:12])
                + f" s; slowest {max(d for _, d in slow):.1f} s"
                if slow
                else ""
            ),
        ),
        ("queueing implied (clients/thr)", f"{a.clients / thr * 1e3:.1f} ms" if thr else "-"),
        (
            "server CPU per answer",
            f"{sum(cpu1) - sum(cpu0):.1f} s / {len(lat)} = "
            f"{(sum(cpu1) - sum(cpu0)) / len(lat) * 1e3:.2f} ms (user "
            f"{(cpu1[0] - cpu0[0]) / len(lat) * 1e3:.2f}, system "
            f"{(cpu1[1] - cpu0[1]) / len(lat) * 1e3:.2f}); the event loops' share "
            f"{(sum(loop1) - sum(loop0)) / len(lat) * 1e3:.2f} ms"
            if lat
            else "-",
        ),
        (
            "server's share of the cores",
            f"{(sum(cpu1) - sum(cpu0)) / wall:.2f} of {cores} (the machine is shared); "
            f"all {cores} at this CPU per answer: "
            f"{cores * len(lat) / (sum(cpu1) - sum(cpu0)):.0f} req/s = "
            f"{peer['cpu'] * len(lat) / (sum(cpu1) - sum(cpu0)) * 100:.0f}% of cores / "
            "the search's CPU time"
            if lat and sum(cpu1) > sum(cpu0)
            else "-",
        ),
        ("bench clients' CPU per answer", f"{own / len(lat) * 1e3:.2f} ms" if lat else "-"),
        ("server peak RSS (sum, VmHWM)", f"{max(hwm, peak[0]) / 1024:.0f} MiB"),
        (
            "anonymous memory per worker",
            ", ".join(f"{k / 1024:.0f} MiB" for k in anon)
            + (f" (supervisor {parent_anon / 1024:.0f} MiB)" if a.workers > 1 else ""),
        ),
        ("load average before / after", f"{load0:.1f} / {load1:.1f}"),
    ]
    width = max(len(k) for k, _ in rows)
    print(
        f"cce corpus serve: {a.clients} clients, {a.seconds:g} s, {a.workers} workers"
        + (f" x {a.searches} searches" if a.searches else "")
        + f", {a.root}"
    )
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")
    return 0 if not fails else 1


if __name__ == "__main__":
    raise SystemExit(main())
