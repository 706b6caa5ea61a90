#!/usr/bin/env python3
"""How `index` grows with the corpus: full and incremental time, memory and disk per size.

    python bench/bench_scale.py --source rfcs.jsonl --work /tmp/scale --sizes 100000,300000

For each size it generates an issue-sized feed (`make_feed.py --max-sections 2`), then:

- full index into a fresh root (wall time, peak anonymous memory of all processes, peak
  disk of the root plus the unlinked spools the processes hold; bench/memwatch.py);
- for each change rate (default 0.1% and 1%): the feed with that share of records
  changed, spread evenly over it, indexed incrementally into the root of the run before,
  beside a full index of the same feed into a fresh root (the peer), and the two stores
  compared byte for byte;
- the store and search-index sizes, and the cold (a new `cce` process) and warm (the
  same query again in one process) search latency.

`--baseline-src DIR` runs the same steps with another checkout's `src/` first on
PYTHONPATH (before/after in one run). Prints one JSON object per size; `--plot PNG`
draws the log-log figure of docs/engine.md from those lines (matplotlib, a dev extra).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from memwatch import du, watch

HERE = Path(__file__).resolve().parent
QUERY = "lifetime elision in trait objects"


def make_feed(source: Path, records: int, out: Path) -> None:
    if out.exists():
        return
    subprocess.run(
        [
            *(sys.executable, str(HERE / "make_feed.py"), "--source", str(source)),
            *("--records", str(records), "--max-sections", "2", "--out", str(out)),
        ],
        check=True,
    )


def edit_feed(feed: Path, rate: float, out: Path, night: int = 1) -> int:
    """Copy `feed` with every (1/rate)-th record's body changed (one line appended);
    the other lines stay byte for byte. Returns the number changed."""
    with open(feed, "rb") as f:
        n = sum(1 for _ in f)
    step = max(1, round(1 / rate))
    changed = 0
    with open(feed, "rb") as f, open(out, "wb") as w:
        for k, line in enumerate(f):
            if k % step == step // 2:
                rec = json.loads(line)
                rec["body"] += f"\n\nEdited on night {night}: the fix landed in {k}.\n"
                line = (json.dumps(rec, ensure_ascii=False) + "\n").encode()
                changed += 1
            w.write(line)
    assert changed <= n
    return changed


def index(feed: Path, root: Path, env: dict[str, str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "cce_knowledge", "knowledge", "index", "-q", str(feed)]
    w = watch([*cmd, "--dir", str(root)], [str(root)], env=env)
    if w.returncode != 0:
        raise SystemExit(f"index failed ({w.returncode}): {feed}")
    return {
        "seconds": round(w.seconds, 1),
        "peak_anon_mb": round(w.peak_anon / 2**20),
        "peak_disk_mb": round(w.peak_disk / 2**20),
        "load": round(os.getloadavg()[0], 1),
    }


def store_file(root: Path) -> Path:
    k = root / ".cce" / "knowledge"
    return k / ((k / "current").read_text().strip() + ".json")


def search_latency(root: Path, env: dict[str, str]) -> dict[str, float]:
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "cce_knowledge", "knowledge", "search", QUERY, "--dir", str(root)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    cold = time.perf_counter() - t0
    code = (
        "import sys,time\n"
        "from cce_knowledge.cli.main import main\n"
        "import io,contextlib\n"
        "a=['knowledge','search',sys.argv[1],'--dir',sys.argv[2]]\n"
        "with contextlib.redirect_stdout(io.StringIO()): main(a)\n"
        "t=time.perf_counter()\n"
        "with contextlib.redirect_stdout(io.StringIO()): main(a)\n"
        "print(time.perf_counter()-t)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, QUERY, str(root)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return {"cold_s": round(cold, 3), "warm_s": round(float(out.stdout.split()[-1]), 4)}


#: Renders the outgoing `.cck` as `push` does (spooled beside the store, mapped) and
#: prints its size: the artifact's size and the export's time and memory, with no
#: cache repository to fill.
EXPORT = (
    "import sys\n"
    "from cce_knowledge.sync.push import _outgoing\n"
    "n = len(_outgoing(sys.argv[1], 'bench').data)\n"
    "open(sys.argv[2], 'w').write(str(n))\n"
)


def cck_export(root: Path, env: dict[str, str]) -> dict[str, Any]:
    out = root / "cck-size"
    w = watch([sys.executable, "-c", EXPORT, str(root), str(out)], [str(root)], env=env)
    if w.returncode != 0:
        raise SystemExit(f"export failed ({w.returncode}): {root}")
    size = int(out.read_text())
    out.unlink()
    return {
        "cck_mb": round(size / 2**20),
        "export_seconds": round(w.seconds, 1),
        "export_peak_anon_mb": round(w.peak_anon / 2**20),
    }


def run_size(args: argparse.Namespace, n: int, env: dict[str, str], tag: str) -> dict[str, Any]:
    work = Path(args.work)
    feed = work / f"f{n}.jsonl"
    make_feed(Path(args.source), n, feed)
    root = work / f"{tag}-{n}"
    shutil.rmtree(root, ignore_errors=True)
    out: dict[str, Any] = {"tag": tag, "records": n, "feed_mb": round(feed.stat().st_size / 2**20)}
    out["full"] = index(feed, root, env)
    print(json.dumps({"tag": tag, "records": n, "step": "full", **out["full"]}), flush=True)
    store = store_file(root)
    out["store_mb"] = round(store.stat().st_size / 2**20)
    search = store.parent / "search"
    rows = sum(p.stat().st_size for p in search.glob("*.rows"))
    out["search_index_mb"] = round((du(str(search)) - rows) / 2**20)
    # The rows kept for the next build (retrieval/search_rows.py), derived like the index.
    out["search_rows_mb"] = round(rows / 2**20)
    out["search"] = search_latency(root, env)
    out["cck"] = cck_export(root, env)
    for rate in args.rates:
        edited = work / f"f{n}-{rate}.jsonl"
        changed = edit_feed(feed, rate, edited)
        inc = index(edited, root, env)
        print(json.dumps({"tag": tag, "records": n, "step": f"inc {rate}", **inc}), flush=True)
        if args.no_peer:
            # The peer is the full index of this size above (the same feed but for the
            # changed records); byte identity is left to the property tests.
            peer, same = out["full"], None
        else:
            peer_root = work / f"{tag}-{n}-peer"
            shutil.rmtree(peer_root, ignore_errors=True)
            peer = index(edited, peer_root, env)
            same = store_file(root).read_bytes() == store_file(peer_root).read_bytes()
            shutil.rmtree(peer_root, ignore_errors=True)
        out[f"changed_{rate}"] = {
            "records": changed,
            "incremental": inc,
            "full": peer,
            "ratio": round(inc["seconds"] / peer["seconds"], 3),
            "identical": same,
        }
        # Back to the feed the next rate starts from.
        if rate != args.rates[-1]:
            index(feed, root, env)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return out


def plot(lines: list[dict[str, Any]], png: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    after = [x for x in lines if x["tag"] == "after"] or lines
    xs = [x["records"] for x in after]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(xs, [x["full"]["seconds"] for x in after], "o-", label="full index (s)")
    for key in sorted({k for x in after for k in x if k.startswith("changed_")}):
        have = [x for x in after if key in x]
        share = float(key.removeprefix("changed_")) * 100
        ax.loglog(
            [x["records"] for x in have],
            [x[key]["incremental"]["seconds"] for x in have],
            "s--",
            label=f"incremental index, {share:g}% changed (s)",
        )
    ax.loglog(xs, [x["full"]["peak_anon_mb"] / 1024 for x in after], "^-", label="peak anon (GB)")
    ax.loglog(xs, [x["full"]["peak_disk_mb"] / 1024 for x in after], "v-", label="peak disk (GB)")
    if all("cck" in x for x in after):
        ax.loglog(xs, [x["cck"]["cck_mb"] / 1024 for x in after], "d:", label=".cck (GB)")
    ax.set_title("bench_scale.py: cost against corpus size")
    ax.set_xlabel("records")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", help="rfcs.jsonl (bench/README.md)")
    ap.add_argument("--work", help="directory for feeds and roots (gigabytes)")
    ap.add_argument("--sizes", default="100000,300000")
    ap.add_argument("--rates", default="0.001,0.01")
    ap.add_argument("--baseline-src", help="another checkout's src/ to run first")
    ap.add_argument("--keep", action="store_true", help="keep the roots")
    ap.add_argument(
        "--no-peer",
        action="store_true",
        help="compare each incremental run with the size's first full index instead of a"
        " full index of the edited feed (one full index per size: hours less at 300k+)",
    )
    ap.add_argument("--plot", metavar="PNG", help="plot JSON lines read from stdin")
    args = ap.parse_args()
    if args.plot:
        lines = [json.loads(x) for x in sys.stdin if x.strip()]
        plot([x for x in lines if "step" not in x], args.plot)
        return 0
    args.rates = [float(r) for r in args.rates.split(",") if r]
    Path(args.work).mkdir(parents=True, exist_ok=True)
    runs = [("after", dict(os.environ))]
    if args.baseline_src:
        env = dict(os.environ, PYTHONPATH=args.baseline_src)
        runs.insert(0, ("before", env))
    for n in [int(s) for s in args.sizes.split(",")]:
        for tag, env in runs:
            print(json.dumps(run_size(args, n, env, tag)), flush=True)
    # Lines with a "step" are progress; the last line per size and tag is its summary.
    return 0


if __name__ == "__main__":
    sys.exit(main())
