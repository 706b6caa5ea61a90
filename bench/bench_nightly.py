#!/usr/bin/env python3
"""Benchmark: a corpus that grows night after night, published in parts (issue 32).

From a real feed (rfcs.jsonl, see bench/README.md) it generates an issue-sized corpus
(`make_feed.py --max-sections 2`), indexes it, and publishes it night after night, each
night changing 0.1% of the records (scattered across the feed), to three caches side by
side in one run:

* **today**: a local bare cache over file://, `knowledge.sync.parts: never` — the whole
  `.cck` in git-LFS every night (the reference's layout; the peer);
* **parts**: a local bare cache over file://, `parts: auto` (above 32 MiB: parts only);
* **parts over HTTP**: a bare cache behind a loopback git smart-HTTP server (`git
  http-backend` as CGI; it counts the bytes it serves). git-LFS has no server here, so
  the `today` layout is measured over file:// only.

Printed: `.cck` size; bytes each nightly push adds to the cache (growth of the bare
repository on disk, LFS store included) against the `.cck`; a consumer's refresh (the
same CCE_HOME as the night before): wall time, and over HTTP the bytes downloaded,
against a full pull; the first full pull, today's layout against parts; the largest
object in each cache (git blob or LFS object); peak anonymous memory (Pss_Anon +
Pss_Shmem summed over the process tree, sampled every 0.1 s) of push and pull; the
cache's growth night by night.

Usage:
  python bench/bench_nightly.py --source rfcs.jsonl --records 100000 --nights 2 \\
      --work /tmp/nightly
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
CCE = [sys.executable, "-m", "cce_knowledge"]
ENV_BASE = {k: v for k, v in os.environ.items() if not k.startswith(("CCE_", "GIT_"))}
ENV_BASE["PYTHONPATH"] = str(HERE.parent / "src")


# ------------------------------------------------------------------ measuring


def _tree(root: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def _anon_kib(pids: list[int]) -> int:
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith(("Pss_Anon:", "Pss_Shmem:")):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


def run(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, float]:
    """(seconds, peak anonymous MiB over the process tree); raises on failure."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = 0
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(p.communicate()[1]), daemon=True)
    reader.start()
    while reader.is_alive():
        peak = max(peak, _anon_kib(_tree(p.pid)))
        reader.join(0.1)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {(out[0] if out else b'').decode()[-800:]}")
    return dt, peak / 1024


def du(path: Path) -> int:
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def largest_object(bare: Path) -> int:
    out = subprocess.run(
        ["git", "-C", str(bare), "cat-file", "--batch-all-objects", "--batch-check=%(objectsize)"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    lfs = [p.stat().st_size for p in (bare / "lfs" / "objects").rglob("*") if p.is_file()]
    return max([int(x) for x in out] + lfs + [0])


# ------------------------------------------------------------------ loopback git HTTP


class Served:
    bytes_out = 0
    lock = threading.Lock()


def serve_git(project_root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                buf = bytearray()
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return bytes(buf)
                    buf += self.rfile.read(size)
                    self.rfile.readline()
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def _serve(self) -> None:
            body = self._body()
            path, _, query = self.path.partition("?")
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": str(project_root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": urllib.parse.unquote(path),
                "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_USER": "bench",
                "REMOTE_ADDR": "127.0.0.1",
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            }
            proc = subprocess.run(
                ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
            )
            head, sep, payload = proc.stdout.partition(b"\r\n\r\n")
            if not sep:
                head, _, payload = proc.stdout.partition(b"\n\n")
            status, headers = 200, []
            for line in head.decode("latin-1").splitlines():
                k, _, v = line.partition(":")
                if k.lower() == "status":
                    status = int(v.strip().split()[0])
                elif k:
                    headers.append((k, v.strip()))
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            with Served.lock:
                Served.bytes_out += len(payload)

        do_GET = _serve
        do_POST = _serve

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


# ------------------------------------------------------------------ the corpus


def edit_night(src: Path, dst: Path, night: int) -> int:
    """Copy the feed, changing 0.1% of the records (scattered, deterministic)."""
    n = 0
    with open(src, "rb") as f, open(dst, "wb") as g:
        for i, line in enumerate(f):
            if (i * 7919 + night * 104729) % 1000 == 0:
                rec = json.loads(line)
                rec["body"] = rec.get("body", "") + f"\n\nNight {night}: a comment was added."
                line = json.dumps(rec, ensure_ascii=False).encode() + b"\n"
                n += 1
            g.write(line)
    return n


def bare(path: Path) -> str:
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True)
    return path.as_uri()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", required=True, type=Path)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--nights", type=int, default=7)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--no-http", action="store_true")
    a = ap.parse_args()
    w = a.work
    shutil.rmtree(w, ignore_errors=True)
    w.mkdir(parents=True)
    feed = w / "feed-0.jsonl"
    subprocess.run(
        [sys.executable, str(HERE / "make_feed.py"), "--source", str(a.source),
         "--records", str(a.records), "--max-sections", "2", "--out", str(feed)],
        check=True,
    )  # fmt: skip
    print(f"load average at start: {os.getloadavg()[0]:.2f} (2 cores, shared)")
    caches = {"today": w / "today.git", "parts": w / "parts.git", "http": w / "srv" / "http.git"}
    urls = {k: bare(p) for k, p in caches.items() if k != "http" or not a.no_http}
    srv = None
    if not a.no_http:
        srv, base = serve_git(w / "srv")
        urls["http"] = f"{base}/http.git"
    modes = {"today": "never", "parts": "auto", "http": "auto"}
    roots = {}
    for k in urls:
        roots[k] = w / f"prod-{k}"
        (roots[k] / ".cce").mkdir(parents=True)
        (roots[k] / ".cce" / "config").write_text(
            f"knowledge:\n  sync:\n    corpus_id: big\n    parts: {modes[k]}\n"
        )

    def env(home: str) -> dict[str, str]:
        return {**ENV_BASE, "CCE_HOME": str(w / home)}

    def cce(*args: str, home: str) -> tuple[float, float]:
        return run([*CCE, *args], env(home))

    # Index once; every producer root gets the same store.
    t_index, m_index = cce("knowledge", "index", str(feed), "--dir", str(roots["today"]), home="h")
    for k in urls:
        if k != "today":
            shutil.copytree(roots["today"] / ".cce" / "knowledge", roots[k] / ".cce" / "knowledge",
                            dirs_exist_ok=True)  # fmt: skip
    cck_size = 0
    print(f"index: {t_index:.0f} s, peak anon {m_index:.0f} MiB")
    rows: list[str] = []
    growth: dict[str, list[int]] = {k: [] for k in urls}
    for night in range(a.nights + 1):
        if night:
            nf = w / f"feed-{night}.jsonl"
            changed = edit_night(w / f"feed-{night - 1}.jsonl", nf, night)
            (w / f"feed-{night - 1}.jsonl").unlink()
            t, m = cce("knowledge", "index", str(nf), "--dir", str(roots["today"]), home="h")
            print(f"night {night}: {changed} records changed; index {t:.0f} s, {m:.0f} MiB")
            for k in urls:
                if k != "today":
                    shutil.rmtree(roots[k] / ".cce" / "knowledge")
                    shutil.copytree(roots["today"] / ".cce" / "knowledge",
                                    roots[k] / ".cce" / "knowledge")  # fmt: skip
        for k, url in urls.items():
            before = du(caches[k])
            t, m = cce("knowledge", "push", "--remote", url, "--dir", str(roots[k]),
                       home=f"home-push-{k}")  # fmt: skip
            added = du(caches[k]) - before
            growth[k].append(du(caches[k]))
            if not cck_size:
                out = subprocess.run(
                    [*CCE, "sync", "list", "--remote", urls["today"], "--json"],
                    env=env("h"), capture_output=True, text=True, check=True,
                ).stdout  # fmt: skip
                cck_size = json.loads(out)["knowledge"][0]["bytes"]
                print(f".cck size: {cck_size / 1e6:.1f} MB")
            rows.append(
                f"night {night} push  {k:6}: {t:7.1f} s  peak anon {m:6.0f} MiB  "
                f"cache +{added / 1e6:9.2f} MB = {100 * added / cck_size:6.2f}% of the .cck"
            )
            print(rows[-1], flush=True)
        # Consumers: a refresh with the home kept from the night before, and a full pull.
        for k, url in urls.items():
            served = Served.bytes_out
            cons = w / f"cons-{k}"
            cons.mkdir(exist_ok=True)
            t, m = cce("knowledge", "pull", "--remote", url, "--dir", str(cons), home=f"home-c-{k}")
            got = Served.bytes_out - served
            kind = "first pull" if night == 0 else "refresh"
            line = f"night {night} {kind:10} {k:6}: {t:7.1f} s  peak anon {m:6.0f} MiB"
            if k == "http":
                line += f"  downloaded {got / 1e6:9.2f} MB = {100 * got / cck_size:6.2f}%"
            print(line, flush=True)
            if night == 1:
                (w / f"full-{k}").mkdir(exist_ok=True)
                served = Served.bytes_out
                tf, mf = cce("knowledge", "pull", "--remote", url, "--dir", str(w / f"full-{k}"),
                             home=f"home-full-{k}")  # fmt: skip
                got = Served.bytes_out - served
                print(f"night 1 full pull  {k:6}: {tf:7.1f} s  peak anon {mf:6.0f} MiB"
                      + (f"  downloaded {got / 1e6:.2f} MB" if k == "http" else "")
                      + f"  (refresh/full: {100 * t / tf:.0f}%)", flush=True)  # fmt: skip
                shutil.rmtree(w / f"full-{k}", ignore_errors=True)
                shutil.rmtree(w / f"home-full-{k}", ignore_errors=True)
    print("cache size night by night (MB):")
    for k, sizes in growth.items():
        print(f"  {k:6}: " + " ".join(f"{s / 1e6:.0f}" for s in sizes))
    for k, p in caches.items():
        if k in urls:
            print(f"largest object in the {k} cache: {largest_object(p) / 1e6:.2f} MB")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    if srv is not None:
        srv.shutdown()


if __name__ == "__main__":
    main()
