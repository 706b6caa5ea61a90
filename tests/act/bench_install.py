"""Benchmark: the Action's install (cold, and warm from the cache) and the act wall time
of the all-in-one Action beside its peer, the composed pipeline
(workflows/composed-pipeline.yml: setup → index → custom step → guard → push), each a
first publish to a fresh local bare cache, offline (the act tests' wheelhouse and
stand-ins).

    python tests/act/bench_install.py [--repeat 2]

Cold: an empty actions/cache and tool cache, so setup creates the venv and installs the
hashed lock and the package. Warm: the venv restored from the cache stand-in, as on a
fresh GitHub runner (the tool cache is emptied between runs). Prints per-run figures and
medians. (Kept beside the act fixtures because it measures the Action; not collected
by pytest.)
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.action import test_action_act as A  # noqa: E402
from tests.helpers import wheelhouse  # noqa: E402

#: act's step lines, e.g. `✅  Success - Main Restore the cached venv [1.52s]`.
_STEP = re.compile(
    r"Success - Main (Compute the install's cache key|Restore the cached venv|"
    r"Install cce-knowledge \(pinned, hashed\)|Save the venv to the cache) \[([^\]]+)\]"
)


def _go_duration(text: str) -> float:
    """Seconds in a Go duration string (`1m2.5s`, `850ms`, `12.3µs`)."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    return sum(float(v) * units[u] for v, u in re.findall(r"([0-9.]+)(ms|us|µs|ns|h|m|s)", text))


def _action_copy(root: Path, lock: str) -> Path:
    dst = root / "cce-knowledge"
    shutil.copytree(
        REPO,
        dst,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "__pycache__", "*.so", ".*_cache", ".hypothesis", "build", "dist"
        ),
    )
    (dst / "requirements" / "runtime.txt").write_text(lock, encoding="utf-8")
    return dst


def _one(
    root: Path, action: Path, wheels: Path, cache: Path, kind: str, n: int
) -> tuple[float, float]:
    tmp = root / f"{kind}-{n}"
    tmp.mkdir()
    h = A.Harness(tmp, action, wheels, cache)
    if kind == "all-in-one":
        h.make_repo([A.ACT_DIR / "workflows" / "build.yml"])
        inputs = {"feed": "../fixtures/feed-v1.jsonl", "corpus": A.CORPUS, "remote": h.remote}
        started = time.monotonic()
        run = h.act("build.yml", inputs)
    else:
        h.make_repo([h.shipped("composed-pipeline.yml")])
        started = time.monotonic()
        run = h.act("composed-pipeline.yml", {})
    wall = time.monotonic() - started
    if run.rc != 0:
        raise SystemExit(f"{kind} run failed:\n{run.log[-4000:]}")
    install = sum(_go_duration(d) for _, d in _STEP.findall(run.log))
    return wall, install


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cce-bench-install-"))
    try:
        wheels = root / "wheels"
        lock = wheelhouse.build(REPO / "requirements" / "runtime.txt", wheels)
        action = _action_copy(root, lock)
        rows: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for n in range(args.repeat):
            for kind in ("all-in-one", "composed"):
                cache = root / f"cache-{kind}-{n}"
                cache.mkdir()
                cold = _one(root, action, wheels, cache, kind, 2 * n)
                shutil.rmtree(cache / "act" / "tool_cache", ignore_errors=True)  # a fresh runner
                warm = _one(root, action, wheels, cache, kind, 2 * n + 1)
                rows.setdefault((kind, "cold"), []).append(cold)
                rows.setdefault((kind, "warm"), []).append(warm)
                print(
                    f"run {n + 1} {kind:10s} cold: act {cold[0]:6.1f} s, install {cold[1]:5.1f} s"
                    f" | warm: act {warm[0]:6.1f} s, install {warm[1]:5.1f} s",
                    flush=True,
                )
        print("\nmedians (s)            act wall   install (key+restore+install+save)")
        for (kind, mode), vals in sorted(rows.items()):
            wall = statistics.median(v[0] for v in vals)
            inst = statistics.median(v[1] for v in vals)
            print(f"  {kind:10s} {mode:5s}   {wall:8.1f}   {inst:8.1f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
