"""Benchmark: the Action's driver (`cce action run --dry-run true`) beside its peer, the
same three commands run by hand (validate → index → push --dry-run), on one feed
against a local bare cache. Prints wall-clock medians, the driver's overhead and the
peak RSS of the children.

    python tests/act/bench_action.py rfcs.jsonl [--repeat 3]

(rfcs.jsonl: see bench/README.md for how to build it.)

(Kept beside the act fixtures because it measures the Action; not collected by pytest.)
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _cce(*args: str, env: dict[str, str], cwd: Path | None = None) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "cce_knowledge", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        raise SystemExit(f"cce {' '.join(args)} failed:\n{p.stdout}{p.stderr}")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("feed", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    feed = a.feed.resolve()
    tmp = Path(tempfile.mkdtemp(prefix="cce-bench-action-"))
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CCE_IN_"))}
        env.update(HOME=str(tmp / "home"), CCE_HOME=str(tmp / "cce-home"))
        (tmp / "home").mkdir()
        bare = tmp / "cache.git"
        subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
        remote = bare.as_uri()
        peer_t: list[float] = []
        ours_t: list[float] = []
        for i in range(a.repeat):
            r1, r2 = tmp / f"peer{i}", tmp / f"ours{i}"
            r1.mkdir()
            t0 = time.perf_counter()
            _cce("knowledge", "validate", str(feed), "--format", "json", env=env)
            _cce("knowledge", "index", str(feed), "--dir", str(r1), env=env)
            _cce(
                "knowledge",
                "push",
                "--dry-run",
                "--corpus",
                "bench",
                "--remote",
                remote,
                "--dir",
                str(r1),
                env=env,
            )
            peer_t.append(time.perf_counter() - t0)
            e2 = dict(
                env, GITHUB_OUTPUT=str(tmp / "out"), GITHUB_STEP_SUMMARY=str(tmp / "summary.md")
            )
            t0 = time.perf_counter()
            _cce(
                "action",
                "run",
                "--feed",
                str(feed),
                "--corpus",
                "bench",
                "--remote",
                remote,
                "--dry-run",
                "true",
                "--working-directory",
                str(r2),
                env=e2,
            )
            ours_t.append(time.perf_counter() - t0)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        size = feed.stat().st_size / 1e6
        p, o = statistics.median(peer_t), statistics.median(ours_t)
        print(
            f"feed: {feed.name} ({size:.1f} MB), {a.repeat} runs each, load avg {os.getloadavg()[0]:.1f}"
        )
        print(f"{'':28}{'median s':>10}{'MB/s':>8}")
        print(f"{'peer: validate+index+dry-run':28}{p:>10.2f}{size / p:>8.2f}")
        print(f"{'cce action run --dry-run':28}{o:>10.2f}{size / o:>8.2f}")
        print(
            f"driver overhead: {o - p:+.2f} s ({(o / p - 1) * 100:+.1f} %); peak child RSS {peak:.0f} MB"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
