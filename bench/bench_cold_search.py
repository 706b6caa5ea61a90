#!/usr/bin/env python3
"""Cold-process search and the redactor's first-call cost, beside another checkout.

    python bench/bench_cold_search.py ROOT [--peer-src DIR] [--feed FEED.jsonl]
        [--runs N] [--query Q]

ROOT is an indexed root (`cce knowledge index FEED --dir ROOT`). Every figure comes from
fresh processes, run N times; with --peer-src (the `src` directory of another checkout,
e.g. `git worktree add /tmp/before main`, then `/tmp/before/src`), each run of ours is
followed by the same run of the peer's code (PYTHONPATH), so both see the same load:

- `cce knowledge search Q --dir ROOT -k 8`, default and `--ranking reference` rankings:
  wall time of the whole process (median / min);
- the redactor's first call in a process: the time to show the ids of the query's hits
  (`redact_for_display`, as search, ask and MCP do), and the same for one secret-shaped
  id (which must load every rule), measured inside the process after the imports search
  itself has made;
- `python -c pass`: the interpreter's own start;
- with --feed: the extended redaction of every document of the feed in one process
  (CPU seconds, median / min), which `cce knowledge index` does.

Figures are wall-clock on a possibly shared machine: say so when you quote them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

QUERY = "how do closures capture variables"

FIRST_CALL = """
import json, sys, time
import cce_knowledge.cli.main
from cce_knowledge.retrieval import Searcher
hits = Searcher(sys.argv[1]).search(sys.argv[2], 8, ranking="reference")
ids = [h.record_id for h in hits] if sys.argv[3] == "hits" else [sys.argv[3]]
t0 = time.perf_counter()
from cce_knowledge.engine.redaction.modes import redact_for_display
shown = [redact_for_display(i) for i in ids]
print(json.dumps({"ms": (time.perf_counter() - t0) * 1e3}))
"""

REDACT_FEED = """
import json, sys, time
from cce_knowledge.store.ingest import parse_records, render_document
from cce_knowledge.engine.redaction.extended import redact_extended
docs = [render_document(r) for r in parse_records(open(sys.argv[1], "rb").read())]
t0 = time.process_time()
for d in docs:
    redact_extended(d)
print(json.dumps({"s": time.process_time() - t0}))
"""

# A secret-shaped id (made up): the gate lets it through, so every rule loads.
SECRET_ID = "tickets/" + "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwx"


def _env(src: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if "PYTHONPATH" in env else "")
    return env


def _wall(argv: list[str], src: str | None) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, env=_env(src))
    wall = (time.perf_counter() - t0) * 1000
    if r.returncode != 0:
        raise SystemExit(f"command failed: {argv}\n{r.stderr}")
    return wall


def _reported(argv: list[str], src: str | None, key: str) -> float:
    r = subprocess.run(argv, capture_output=True, text=True, env=_env(src))
    if r.returncode != 0:
        raise SystemExit(f"command failed: {argv}\n{r.stderr}")
    return float(json.loads(r.stdout.strip().splitlines()[-1])[key])


def _row(label: str, xs: list[float], unit: str) -> str:
    med, mn = statistics.median(xs), min(xs)
    digits = 2 if unit == "CPU s" else 1
    return f"  {label:<50}{med:10.{digits}f}{mn:10.{digits}f} {unit}"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("root", type=Path, help="an indexed root")
    ap.add_argument("--peer-src", help="the src/ directory of the checkout to compare with")
    ap.add_argument("--feed", type=Path, help="also time redacting this feed's documents")
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--query", default=QUERY)
    a = ap.parse_args()
    root, q = str(a.root), a.query
    py = sys.executable
    search = [py, "-m", "cce_knowledge", "knowledge", "search", q, "--dir", root, "-k", "8"]
    cases: list[tuple[str, str, list[str]]] = [
        ("cold search, default ranking", "wall", search),
        ("cold search, reference ranking", "wall", [*search, "--ranking", "reference"]),
        ("redactor first call: the hits' ids", "ms", [py, "-c", FIRST_CALL, root, q, "hits"]),
        (
            "redactor first call: a secret-shaped id",
            "ms",
            [py, "-c", FIRST_CALL, root, q, SECRET_ID],
        ),
        ("python -c pass", "wall", [py, "-c", "pass"]),
    ]
    if a.feed is not None:
        cases.append(
            ("redact every feed document (CPU)", "s", [py, "-c", REDACT_FEED, str(a.feed)])
        )
    builds: list[tuple[str, str | None]] = [("ours", None)]
    if a.peer_src:
        builds.append(("peer", str(Path(a.peer_src).resolve())))
    got: dict[tuple[str, str], list[float]] = {}
    for _ in range(a.runs):
        for label, kind, argv in cases:
            for name, src in builds:
                v = _wall(argv, src) if kind == "wall" else _reported(argv, src, kind)
                got.setdefault((label, name), []).append(v)
    print(f"root {root}; query {q!r}; {a.runs} runs each, interleaved (median / min)")
    if a.peer_src:
        print(f"peer: PYTHONPATH={builds[1][1]}")
    for label, kind, _ in cases:
        for name, _src in builds:
            unit = "CPU s" if kind == "s" else "ms"
            print(_row(f"{label} [{name}]", got[(label, name)], unit))
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
