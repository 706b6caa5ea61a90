#!/usr/bin/env python3
"""Benchmark: what signing adds to `cce knowledge push` and verifying adds to `pull`.

One corpus (an NDJSON feed, indexed once), a fresh local bare cache (file://, LFS on)
per push. In one run, alternating so load drifts hit both sides alike:

* push unsigned vs push with `--sign-key` (an ed25519 key made here);
* pull (cold: fresh root, fresh working clone) of the signed corpus without allowed
  signers vs with `--allowed-signers`;

each in its own `cce` process (wall time, median of --runs). Process start and git
dominate those numbers and the machine's load makes them noisy, so the run also times
in process the exact work signing and verifying add: the artifact's sha256 plus the
statement's signature (push), and the sha256 plus the signature check (pull).

Usage:
  python bench/bench_signing.py --feed rfcs.jsonl --runs 5

rfcs.jsonl is built by bench/build_rfcs_feed.py (bench/README.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CCE_SIGNING_KEY", "CCE_SYNC_TOKEN")}
    env["PYTHONPATH"] = str(SRC)
    env["CCE_HOME"] = str(home)
    return env


def _cce(home: Path, *argv: str) -> float:
    subprocess.run(["sync"], check=False)
    t = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "cce_knowledge", *argv, "-q"],
        env=_env(home),
        capture_output=True,
        text=True,
        check=False,
    )
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"cce {' '.join(argv)} failed: {p.stderr}")
    return dt


def _bare(path: Path) -> str:
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True)
    return path.resolve().as_uri()


def _in_process(root: Path, key: Path, allowed: Path, runs: int) -> tuple[float, float, int]:
    """(sign seconds, verify seconds, artifact bytes): the added work alone."""
    sys.path.insert(0, str(SRC))
    from cce_knowledge.sync import allowed_signers as AS
    from cce_knowledge.sync.push import _outgoing
    from cce_knowledge.sync.signing import (
        SigningKey,
        check_signed,
        sha256_of,
        sign_statement,
    )
    from cce_knowledge.sync.sshsig import load_private_key_file
    from cce_knowledge.sync.statement import Statement

    out = _outgoing(root, "bench")
    sk = SigningKey(load_private_key_file(key), str(key))
    signers = AS.load(allowed)
    signs, verifies = [], []
    for _ in range(runs):
        t = time.perf_counter()
        st = Statement("bench", out.manifest.snapshot, sha256_of(out.data),
                       out.manifest.checksum, len(out.data), "2026-01-01T00:00:00Z", 1)  # fmt: skip
        st_bytes, sig = sign_statement(sk, st)
        signs.append(time.perf_counter() - t)
        t = time.perf_counter()
        check_signed(signers, st_bytes, sig, "bench")
        assert sha256_of(out.data) == st.cck_sha256
        verifies.append(time.perf_counter() - t)
    return statistics.median(signs), statistics.median(verifies), len(out.data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--feed", required=True, type=Path, help="NDJSON feed (e.g. rfcs.jsonl)")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-signing-"))
    try:
        home = tmp / "home"
        root = tmp / "root"
        _cce(home, "knowledge", "index", str(args.feed), "--dir", str(root))
        key = tmp / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        kt, b64 = (tmp / "id_ed25519.pub").read_text().split()[:2]
        allowed = tmp / "allowed_signers"
        allowed.write_text(f'bench@example.com namespaces="cce-knowledge" {kt} {b64}\n')

        push_u, push_s, pull_u, pull_s = [], [], [], []
        for i in range(args.runs):
            for signed, bucket in ((False, push_u), (True, push_s)):
                url = _bare(tmp / f"cache-{i}-{int(signed)}.git")
                extra = ["--sign-key", str(key)] if signed else []
                bucket.append(_cce(tmp / f"h-{i}-{int(signed)}", "knowledge", "push",
                                   "--corpus", "bench", "--remote", url, "--dir", str(root), *extra))  # fmt: skip
            url = (tmp / f"cache-{i}-1.git").resolve().as_uri()
            for verify, bucket in ((False, pull_u), (True, pull_s)):
                dest = tmp / f"c-{i}-{int(verify)}"
                extra = ["--allowed-signers", str(allowed)] if verify else []
                bucket.append(_cce(tmp / f"hp-{i}-{int(verify)}", "knowledge", "pull",
                                   "--corpus", "bench", "--remote", url, "--dir", str(dest), *extra))  # fmt: skip
                shutil.rmtree(dest)
        sign_s, verify_s, size = _in_process(root, key, allowed, max(args.runs, 5))
        med = statistics.median
        print(f"corpus: {args.feed.name} · artifact {size / 2**20:.1f} MiB · {args.runs} runs · "
              f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}")  # fmt: skip
        print(f"{'':34}{'unsigned':>10}{'signed':>10}{'added':>10}")
        print(f"{'push (first publish), wall':34}{med(push_u):>9.3f}s{med(push_s):>9.3f}s"
              f"{med(push_s) - med(push_u):>+9.3f}s")  # fmt: skip
        print(f"{'pull (cold), wall':34}{med(pull_u):>9.3f}s{med(pull_s):>9.3f}s"
              f"{med(pull_s) - med(pull_u):>+9.3f}s")  # fmt: skip
        print(f"{'sign: sha256 + SSHSIG, in process':34}{'':>10}{'':>10}{sign_s * 1000:>+8.1f}ms")
        print(
            f"{'verify: sha256 + check, in process':34}{'':>10}{'':>10}{verify_s * 1000:>+8.1f}ms"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
