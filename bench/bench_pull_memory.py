#!/usr/bin/env python3
"""Benchmark: peak memory of `cce knowledge pull` on a large artifact, good and damaged,
and of `cce knowledge index` on one huge record (issue 12, item 9).

Builds, from a real feed (rfcs.jsonl, see bench/README.md), a `.cck` of about `--mb` MB
by repeating the indexed corpus's chunks under new chunk and record ids (a valid
artifact with a valid checksum), and a damaged twin with one byte flipped near its end
(the fast path reads it all, then the checksum fails and the strict verifier decides).
Both are published in a local bare cache the way push stores them (LFS pointer in git,
object under `lfs/objects/`), and each run is its own process, measured for wall time
and peak RSS:

* pull of the good artifact, native accelerator and `CCE_NATIVE=0`;
* pull of the damaged artifact (exit 1), native and `CCE_NATIVE=0`;
* the peer, in the same run: `sha256sum` of the artifact (a streamed read of the same
  bytes, the floor any verifier pays) — and the budget, artifact size + 300 MB;
* `--baseline SRC`: the damaged pulls again from another source tree (PYTHONPATH), so
  before/after share one run;
* index of a feed holding one record of each `--record-mb` size (the default limit
  refuses records over 8 MiB; `--max-record-bytes` lifts it for the measurement).

Usage:
  python bench/bench_pull_memory.py --feed rfcs.jsonl --mb 300 [--baseline OLD/src]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
sys.path.insert(0, str(SRC))

from cce_knowledge.core.jsonout import canonical  # noqa: E402
from cce_knowledge.store.snapshots import loads  # noqa: E402
from cce_knowledge.sync.cck import export_cck  # noqa: E402

IDENT = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
         "GIT_COMMITTER_EMAIL": "b@b"}  # fmt: skip


def run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int, str]:
    """(seconds, peak RSS MiB, exit code, stderr tail) of one child process."""
    wrapper = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "dt = time.perf_counter() - t\n"
        "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(dt, ru.ru_maxrss, p.returncode)\n"
        "sys.stderr.write(p.stderr[-300:])\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", wrapper, *cmd],
        capture_output=True,
        text=True,
        env={**os.environ, **IDENT, **(env or {})},
    )
    dt, kb, rc = p.stdout.split()
    return float(dt), int(kb) / 1024, int(rc), p.stderr.strip().split("\n")[-1]


def cce(*args: str) -> list[str]:
    return [sys.executable, "-m", "cce_knowledge", *args]


def _suffix_ids(line: bytes, k: int) -> bytes:
    tag = f"~{k}".encode()
    line = re.sub(rb'^(\{"chunk_id":"[^"\\]*)', lambda m: m.group(1) + tag, line, count=1)
    return re.sub(rb'("record_id":"[^"\\]*)', lambda m: m.group(1) + tag, line, count=1)


def build_artifact(store_bytes: bytes, corpus: str, mb: int, out: Path) -> tuple[str, int]:
    """A valid `.cck` of about `mb` MB; returns (snapshot, records)."""
    art = export_cck(loads(store_bytes), corpus).data
    head, _, body = art.partition(b"\n")
    lines = body.split(b"\n")[:-1]
    copies = max(1, (mb << 20) // len(body))
    manifest = json.loads(head)
    h = hashlib.sha256()
    records: set[bytes] = set()
    n = 0
    with tempfile.TemporaryFile() as tmp:
        for k in range(copies):
            for line in lines:
                new = _suffix_ids(line, k) + b"\n"
                records.add(re.search(rb'"record_id":"([^"\\]*)"', new).group(1))  # type: ignore[union-attr]
                tmp.write(new)
                n += 1
        manifest.update(chunk_count=n, records=len(records), checksum="")
        h.update((canonical(manifest) + "\n").encode())
        tmp.seek(0)
        while block := tmp.read(8 << 20):
            h.update(block)
        manifest["checksum"] = h.hexdigest()
        tmp.seek(0)
        with out.open("wb") as f:
            f.write((canonical(manifest) + "\n").encode())
            while block := tmp.read(8 << 20):
                f.write(block)
    return manifest["snapshot"], len(records)


def publish(bare: Path, work: Path, corpus: str, snapshot: str, artifact: Path) -> None:
    """Store `artifact` in the bare cache as push does: pointer in git, object in lfs/."""
    sha = hashlib.sha256()
    with artifact.open("rb") as f:
        while block := f.read(8 << 20):
            sha.update(block)
    oid, size = sha.hexdigest(), artifact.stat().st_size
    obj = bare / "lfs" / "objects" / oid[:2] / oid[2:4] / oid
    obj.parent.mkdir(parents=True, exist_ok=True)
    os.link(artifact, obj)
    key = work / "knowledge" / "v1" / corpus
    key.mkdir(parents=True, exist_ok=True)
    (key / f"{snapshot}.cck").write_text(
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n"
    )
    (key / "current").write_text(f"{snapshot}\n")
    env = {**os.environ, **IDENT}
    subprocess.run(["git", "-C", str(work), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(work), "commit", "-qm", corpus], check=True, env=env)
    subprocess.run(["git", "-C", str(work), "push", "-q", "origin", "HEAD:refs/heads/main"],
                   check=True, env=env)  # fmt: skip


def row(label: str, dt: float, mem: float, rc: int, budget: float | None, note: str = "") -> None:
    verdict = "" if budget is None else ("  within budget" if mem <= budget else "  OVER budget")
    print(f"  {label:<44} {dt:7.2f} s  peak RSS {mem:8.1f} MiB  exit {rc}{verdict}{note}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--feed", required=True, type=Path, help="a cce.knowledge/v1 feed (rfcs.jsonl)")
    ap.add_argument("--mb", type=int, default=300, help="artifact size to build (MB)")
    ap.add_argument("--baseline", help="another source tree's src/ for the damaged pulls")
    ap.add_argument("--record-mb", type=int, nargs="*", default=[4, 16, 50],
                    help="huge-record sizes to index (MB)")  # fmt: skip
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pull-mem-") as tmp:
        w = Path(tmp)
        dt, mem, rc, err = run(cce("knowledge", "index", str(args.feed), "--dir", str(w / "src")))
        assert rc == 0, err
        snap_file = next((w / "src" / ".cce" / "knowledge").glob("????????????????.json"))
        store_bytes = snap_file.read_bytes()
        good, bad = w / "good.cck", w / "bad.cck"
        snapshot, records = build_artifact(store_bytes, "big", args.mb, good)
        build_artifact(store_bytes, "bad", args.mb, bad)
        with bad.open("r+b") as f:  # one flipped byte inside the last chunk's content
            data = bad.read_bytes()
            at = data.rindex(b'"content":"') + 20
            f.seek(at)
            f.write(bytes([data[at] ^ 0x01]))
            del data
        size_mb = good.stat().st_size / (1 << 20)
        budget = size_mb + 300
        bare = w / "cache.git"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
        subprocess.run(["git", "clone", "-q", str(bare), str(w / "work")], check=True,
                       capture_output=True)  # fmt: skip
        publish(bare, w / "work", "big", snapshot, good)
        publish(bare, w / "work", "bad", snapshot, bad)
        url = bare.as_uri()
        print(f"artifact: {size_mb:.1f} MiB, {records} records; budget (artifact + 300 MB): "
              f"{budget:.1f} MiB")  # fmt: skip
        dt, mem, rc, _ = run(["sha256sum", str(good)])
        row("peer: sha256sum of the artifact", dt, mem, rc, None)
        runs = [("pull good (native)", "big", {}), ("pull good (CCE_NATIVE=0)", "big",
                {"CCE_NATIVE": "0"}), ("pull damaged (native)", "bad", {}),
                ("pull damaged (CCE_NATIVE=0)", "bad", {"CCE_NATIVE": "0"})]  # fmt: skip
        if args.baseline:
            base = {"PYTHONPATH": args.baseline}
            runs += [("baseline: pull damaged (native if built)", "bad", base),
                     ("baseline: pull damaged (CCE_NATIVE=0)", "bad", {**base, "CCE_NATIVE": "0"})]  # fmt: skip
        for i, (label, corpus, env) in enumerate(runs):
            dest = w / f"dest{i}"
            dt, mem, rc, err = run(
                cce("knowledge", "pull", "--corpus", corpus, "--remote", url, "--dir", str(dest)),
                env={"CCE_HOME": str(w / f"home{i}"), **env},
            )
            note = "" if rc == 0 else f"  ({err[:90]})"
            row(label, dt, mem, rc, budget, note)
        print("\nindex of one huge record (+ one small record):")
        para = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 20 + "\n\n"
        for mb in args.record_mb:
            parts, size, i = [], 0, 0
            while size < mb << 20:
                s = f"## Section {i}\n\n" + para * 3
                parts.append(s)
                size += len(s)
                i += 1
            feed = w / f"rec{mb}.jsonl"
            recs = [{"id": "big", "title": "Big", "body": "".join(parts), "source": "b"},
                    {"id": "small", "title": "Small", "body": "hello", "source": "b"}]  # fmt: skip
            feed.write_text("".join(json.dumps(r) + "\n" for r in recs))
            del parts
            dt, mem, rc, err = run(cce("knowledge", "index", str(feed), "--dir", str(w / f"r{mb}")))
            row(f"index, one {mb} MiB record (default limit)", dt, mem, rc, None,
                "" if rc == 0 else f"  ({err[:100]})")  # fmt: skip


if __name__ == "__main__":
    main()
