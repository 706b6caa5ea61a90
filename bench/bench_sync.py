#!/usr/bin/env python3
"""Benchmark: `cce knowledge push` / `pull` against a local bare cache, beside a plain `git clone`.

For each corpus (an NDJSON feed to index, or an already-indexed root) this measures,
each operation in its own process (wall time + that process's peak RSS):

* push (first publish into an empty bare repo, LFS on) and an unchanged re-push
  (the shrink guard downloads and verifies the remote artifact first);
* the peer: a plain `git clone` of the cache with LFS smudging on (what a developer
  would do by hand to get the same bytes), and without LFS download;
* pull + install into a fresh root with a fresh working clone (cold), the same with
  `CCE_LFS_IN_PLACE=0` (the LFS object fetched by `git lfs fetch`, as for a network
  remote, instead of read in place from the local remote), and again with the working
  clone already present (warm);
* a second pull of the unchanged remote into the same root (up to date: nothing fetched,
  nothing rewritten), beside its peer `cce sync pull --all`, with the number of files
  under `.cce/knowledge/` each rewrote (with `--baseline`, the baseline's second pull too);
* `.cck` artifact size beside the native store size;
* optionally (`--baseline SRC`) the same push / cold pull run from another source tree
  (e.g. an older commit's `src/`, via PYTHONPATH), so before/after share one run.

The peer, precisely: `git clone` of the bare cache over file:// with the LFS filters on,
i.e. all commits plus a checkout of HEAD with every `*.cck` in it smudged (here one
artifact, so the same bytes pull downloads), no cce work. Our pull does a no-checkout
clone, reads the one artifact (the local remote's LFS object in place, or `git lfs
fetch` of that key), verifies it and installs the store (rendered on threads by the
native accelerator when built, streamed to an fsync'd file, hashed as written, marker,
`current`). Every step starts after an untimed `sync`.

Target (issue #4): cold pull + install <= 1.2x the plain LFS clone.

Usage:
  python bench/bench_sync.py --feed rfcs=rfcs.jsonl \\
      --root big100k=ROOT100K --runs 3 [--baseline OLD_CHECKOUT/src]

rfcs.jsonl is built by bench/build_rfcs_feed.py and big100k.jsonl by bench/make_feed.py
(see bench/README.md); ROOT100K is a directory where `cce knowledge index big100k.jsonl
--dir ROOT100K` has run (indexing 1.5 GB takes minutes, so it is passed ready-made).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

LFS_ENV = {
    "GIT_CONFIG_COUNT": "4",
    "GIT_CONFIG_KEY_0": "filter.lfs.clean",
    "GIT_CONFIG_VALUE_0": "git-lfs clean -- %f",
    "GIT_CONFIG_KEY_1": "filter.lfs.smudge",
    "GIT_CONFIG_VALUE_1": "git-lfs smudge -- %f",
    "GIT_CONFIG_KEY_2": "filter.lfs.process",
    "GIT_CONFIG_VALUE_2": "git-lfs filter-process",
    "GIT_CONFIG_KEY_3": "filter.lfs.required",
    "GIT_CONFIG_VALUE_3": "true",
}


def run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of one child process; raises on failure.

    Dirty pages of earlier steps are flushed first (untimed), so no step pays for the
    writeback of the one before it."""
    os.sync()
    full_env = {**os.environ, **(env or {})}
    for k in ("CCE_SYNC_TOKEN", "GITHUB_TOKEN"):
        full_env.pop(k, None)
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode() if p.stderr else ""
    if p.returncode != 0:
        raise SystemExit(f"benchmark step failed: {' '.join(cmd)}\n{err}")
    return dt, ru.ru_maxrss / 1024


def cce(*args: str) -> list[str]:
    return [sys.executable, "-m", "cce_knowledge", *args]


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def mtimes(root: Path) -> dict[str, int]:
    """Every file under `root/.cce/knowledge/` and its mtime (ns)."""
    kd = root / ".cce" / "knowledge"
    return {str(f.relative_to(kd)): f.stat().st_mtime_ns for f in kd.rglob("*") if f.is_file()}


def rewritten(root: Path, step: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """`run(step)`, and how many files under the root's knowledge dir it (re)wrote."""
    before = mtimes(root)
    t, mem = run(step, env)
    after = mtimes(root)
    return t, mem, sum(1 for k, v in after.items() if before.get(k) != v)


def fmt(samples: list[tuple[float, float]]) -> str:
    ts = sorted(s[0] for s in samples)
    mem = max(s[1] for s in samples)
    p95 = ts[min(len(ts) - 1, round(0.95 * (len(ts) - 1)))]
    return (
        f"median {statistics.median(ts):8.3f}s  min {ts[0]:8.3f}s  p95 {p95:8.3f}s  "
        f"peak RSS {mem:7.1f} MiB"
    )


def bench_corpus(name: str, root: Path, work: Path, runs: int, baseline: str | None) -> None:
    kdir = root / ".cce" / "knowledge"
    snap = (kdir / "current").read_text().strip()
    store_size = (kdir / f"{snap}.json").stat().st_size
    print(f"\n== corpus {name}: root {root} (snapshot {snap}, store {store_size / 2**20:.1f} MiB)")

    push_first: list[tuple[float, float]] = []
    push_again: list[tuple[float, float]] = []
    clone_lfs: list[tuple[float, float]] = []
    clone_plain: list[tuple[float, float]] = []
    pull_cold: list[tuple[float, float]] = []
    pull_lfs: list[tuple[float, float]] = []
    py_start: list[tuple[float, float]] = []
    pull_warm: list[tuple[float, float]] = []
    base_push: list[tuple[float, float]] = []
    base_pull: list[tuple[float, float]] = []
    pull_again: list[tuple[float, float]] = []
    all_again: list[tuple[float, float]] = []
    base_again: list[tuple[float, float]] = []
    wrote: dict[str, int] = {}
    base_env = {"PYTHONPATH": baseline} if baseline else {}
    cck_size = 0
    print(f"  start: {load()}")
    for i in range(runs):
        run_dir = work / f"{name}-{i}"
        bare = run_dir / "cache.git"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
        url = bare.resolve().as_uri()
        home_push = {"CCE_HOME": str(run_dir / "home-push")}
        push_first.append(
            run(
                cce("knowledge", "push", "--corpus", name, "--remote", url, "--dir", str(root)),
                home_push,
            )
        )
        push_again.append(
            run(
                cce("knowledge", "push", "--corpus", name, "--remote", url, "--dir", str(root)),
                home_push,
            )
        )
        # The peer: a plain clone of the same cache, with and without LFS download.
        clone_lfs.append(run(["git", "clone", "-q", url, str(run_dir / "clone-lfs")], LFS_ENV))
        clone_plain.append(
            run(
                ["git", "clone", "-q", url, str(run_dir / "clone-plain")],
                {"GIT_LFS_SKIP_SMUDGE": "1"},
            )
        )
        # The floor any Python CLI pays before its first line of work.
        py_start.append(run([sys.executable, "-c", "pass"]))
        cck = run_dir / "clone-lfs" / "knowledge" / "v1" / name / f"{snap}.cck"
        cck_size = cck.stat().st_size
        consumer = run_dir / "consumer"
        home_pull = {"CCE_HOME": str(run_dir / "home-pull")}
        pull_cold.append(
            run(
                cce("knowledge", "pull", "--corpus", name, "--remote", url, "--dir", str(consumer)),
                home_pull,
            )
        )
        # The same cold pull with the LFS object fetched by `git lfs fetch` into the
        # working clone, as for a network remote (no in-place read of the local store).
        pull_lfs.append(
            run(
                cce(
                    "knowledge", "pull", "--corpus", name, "--remote", url,
                    "--dir", str(run_dir / "consumer-lfs"),
                ),
                {"CCE_HOME": str(run_dir / "home-pull-lfs"), "CCE_LFS_IN_PLACE": "0"},
            )
        )  # fmt: skip
        pull_warm.append(
            run(
                cce(
                    "knowledge",
                    "pull",
                    "--corpus",
                    name,
                    "--remote",
                    url,
                    "--dir",
                    str(consumer),
                    "--force",
                ),
                home_pull,
            )
        )
        # Nothing changed on the remote: a second pull (and its peer, `sync pull --all`).
        again = cce("knowledge", "pull", "--corpus", name, "--remote", url, "--dir", str(consumer))
        t, mem, n = rewritten(consumer, again, home_pull)
        pull_again.append((t, mem))
        wrote["pull"] = n
        every = cce("sync", "pull", "--all", "--into", str(consumer), "--remote", url)
        t, mem, n = rewritten(consumer, every, home_pull)
        all_again.append((t, mem))
        wrote["pull --all"] = n
        # filecmp streams: holding two stores here would inflate every later child's
        # peak RSS (a forked child inherits the parent's resident pages until exec).
        same = filecmp.cmp(
            consumer / ".cce/knowledge" / f"{snap}.json", kdir / f"{snap}.json", shallow=False
        )
        if not same:
            raise SystemExit("pulled store differs from the producer's store")
        if baseline:
            bare2 = run_dir / "cache-baseline.git"
            subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare2)], check=True)
            url2 = bare2.resolve().as_uri()
            home = {"CCE_HOME": str(run_dir / "home-base-push"), **base_env}
            base_push.append(
                run(
                    cce(
                        "knowledge", "push", "--corpus", name, "--remote", url2, "--dir", str(root)
                    ),
                    home,
                )
            )
            home = {"CCE_HOME": str(run_dir / "home-base-pull"), **base_env}
            dest = run_dir / "consumer-baseline"
            base_pull.append(
                run(
                    cce(
                        "knowledge", "pull", "--corpus", name, "--remote", url2, "--dir", str(dest)
                    ),
                    home,
                )
            )
            again = cce("knowledge", "pull", "--corpus", name, "--remote", url2, "--dir", str(dest))
            t, mem, n = rewritten(dest, again, home)
            base_again.append((t, mem))
            wrote["baseline pull"] = n
            if not filecmp.cmp(
                dest / ".cce/knowledge" / f"{snap}.json",
                consumer / ".cce/knowledge" / f"{snap}.json",
                shallow=False,
            ):
                raise SystemExit("baseline and current pulls installed different bytes")
        if i < runs - 1:
            shutil.rmtree(run_dir, ignore_errors=True)
    print(f"  push (first publish)    {fmt(push_first)}")
    print(f"  push (unchanged again)  {fmt(push_again)}")
    print(f"  git clone (LFS smudge)  {fmt(clone_lfs)}   <- peer")
    print(f"  git clone (no LFS dl)   {fmt(clone_plain)}")
    print(f"  python -c pass          {fmt(py_start)}")
    print(f"  pull+install (cold)     {fmt(pull_cold)}")
    print(f"  pull (cold, lfs fetch)  {fmt(pull_lfs)}")
    print(f"  pull+install (warm)     {fmt(pull_warm)}")
    print(f"  pull again (unchanged)  {fmt(pull_again)}  rewrote {wrote['pull']} files")
    print(
        f"  sync pull --all again   {fmt(all_again)}  rewrote {wrote['pull --all']} files   <- peer"
    )
    clone_med = statistics.median(t for t, _ in clone_lfs)
    ratio = statistics.median(t for t, _ in pull_cold) / clone_med
    if baseline:
        print(f"  push (baseline src)     {fmt(base_push)}")
        print(f"  pull+install (baseline) {fmt(base_pull)}")
        print(
            f"  pull again (baseline)   {fmt(base_again)}  rewrote {wrote['baseline pull']} files"
        )
        base_ratio = statistics.median(t for t, _ in base_pull) / clone_med
        print(f"  ratio baseline cold pull / LFS clone: {base_ratio:.2f}x")
    print(f"  ratio cold pull / LFS clone: {ratio:.2f}x  (target <= 1.2x)")
    lfs_ratio = statistics.median(t for t, _ in pull_lfs) / clone_med
    print(f"  ratio cold pull via git lfs fetch / LFS clone: {lfs_ratio:.2f}x")
    print(f"  end: {load()}")
    mb = store_size / 2**20
    print(
        f"  artifact {cck_size / 2**20:.1f} MiB (.cck) vs store {mb:.1f} MiB ({cck_size / store_size:.2f}x)"
    )
    print(
        f"  push throughput: {store_size / statistics.median(t for t, _ in push_first) / 2**20:.1f} MiB store/s; "
        f"pull: {store_size / statistics.median(t for t, _ in pull_cold) / 2**20:.1f} MiB store/s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--feed",
        action="append",
        default=[],
        metavar="NAME=FEED.jsonl",
        help="a feed to index first",
    )
    ap.add_argument(
        "--root", action="append", default=[], metavar="NAME=ROOT", help="an already-indexed root"
    )
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", metavar="DIR", help="scratch directory (default: a temp dir)")
    ap.add_argument(
        "--baseline",
        metavar="SRC",
        help="also push/pull with this source tree on PYTHONPATH (e.g. an older commit's src/)",
    )
    args = ap.parse_args()
    if not args.feed and not args.root:
        ap.error("give at least one --feed or --root")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench-sync-"))
    work.mkdir(parents=True, exist_ok=True)
    print(
        f"bench_sync: {os.cpu_count()} CPUs (shared with other work — figures taken under load), runs={args.runs}"
    )
    # Byte-compile the package first, as an installed wheel is: otherwise (e.g. with
    # PYTHONDONTWRITEBYTECODE set) every cold process would pay for compiling it.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(SRC)], check=True)
    try:
        from cce_knowledge.sync.accelerator import native

        accel = "native accelerator built" if native() else "NO native accelerator (pure Python)"
    except ImportError:
        accel = "accelerator unknown"
    print(accel)
    git_v = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    lfs_v = subprocess.run(["git", "lfs", "version"], capture_output=True, text=True).stdout.strip()
    print(f"{git_v}; {lfs_v}")
    corpora: list[tuple[str, Path]] = []
    for spec in args.feed:
        name, _, feed = spec.partition("=")
        root = work / f"root-{name}"
        t, mem = run(cce("knowledge", "index", feed, "--dir", str(root)))
        print(f"indexed {feed} in {t:.2f}s (peak RSS {mem:.0f} MiB)")
        corpora.append((name, root))
    for spec in args.root:
        name, _, root = spec.partition("=")
        corpora.append((name, Path(root)))
    for name, root in corpora:
        bench_corpus(name, root, work, args.runs, args.baseline)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
