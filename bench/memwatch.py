#!/usr/bin/env python3
"""Run a command and report its wall time, peak anonymous memory and peak disk.

    python bench/memwatch.py --disk ROOT -- cce knowledge index feed.jsonl --dir ROOT

Anonymous memory is Pss_Anon + Pss_Shmem from /proc/<pid>/smaps_rollup, summed over
the command and every process it started (forked workers share pages: Pss splits them,
so the sum counts each page once). File-backed mapped pages are left out: the kernel
can drop them. Peak disk is the size of the files under each `--disk` path plus the
files the processes hold open but have unlinked (temporary spools), sampled with the
memory. Linux only. `bench_scale.py` uses `watch` from here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class Watched:
    seconds: float
    peak_anon: int  # bytes
    peak_disk: int  # bytes
    returncode: int


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields follow the last ")".
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def _tree(pid: int) -> list[int]:
    kids = _children()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, ()))
    return out


def _anon(pid: int) -> int:
    total = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith((b"Pss_Anon:", b"Pss_Shmem:")):
                    total += int(line.split()[1]) * 1024
    except OSError:
        pass
    return total


def _unlinked_open(pid: int) -> dict[tuple[int, int], int]:
    out: dict[tuple[int, int], int] = {}
    d = f"/proc/{pid}/fd"
    try:
        names = os.listdir(d)
    except OSError:
        return out
    for n in names:
        try:
            target = os.readlink(f"{d}/{n}")
            if not target.endswith(" (deleted)"):
                continue
            st = os.stat(f"{d}/{n}")
        except OSError:
            continue
        out[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    return out


def du(path: str) -> int:
    total = 0
    for base, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(base, f)).st_blocks * 512
            except OSError:
                pass
    return total


def watch(
    cmd: Sequence[str],
    disk: Sequence[str] = (),
    interval: float = 0.2,
    env: dict[str, str] | None = None,
    quiet: bool = True,
) -> Watched:
    """Run `cmd`, sampling its process tree every `interval` seconds."""
    t0 = time.perf_counter()
    out = subprocess.DEVNULL if quiet else None
    proc = subprocess.Popen(list(cmd), env=env, stdout=out, stderr=out)
    peak_anon = peak_disk = 0
    disk_every, n = 5, 0
    while proc.poll() is None:
        pids = _tree(proc.pid)
        peak_anon = max(peak_anon, sum(_anon(p) for p in pids))
        if n % disk_every == 0:
            spools: dict[tuple[int, int], int] = {}
            for p in pids:
                spools.update(_unlinked_open(p))
            peak_disk = max(peak_disk, sum(du(d) for d in disk) + sum(spools.values()))
        n += 1
        time.sleep(interval)
    seconds = time.perf_counter() - t0
    peak_disk = max(peak_disk, sum(du(d) for d in disk))
    return Watched(seconds, peak_anon, peak_disk, proc.returncode)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--disk", action="append", default=[], help="a path whose size counts")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    w = watch(cmd, a.disk, quiet=False)
    print(
        json.dumps(
            {
                "seconds": round(w.seconds, 1),
                "peak_anon_mb": round(w.peak_anon / 2**20),
                "peak_disk_mb": round(w.peak_disk / 2**20),
                "rc": w.returncode,
                "load": os.getloadavg()[0],
            }
        ),
        file=sys.stderr,
    )
    return w.returncode


if __name__ == "__main__":
    sys.exit(main())
