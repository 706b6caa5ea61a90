"""A corpus published to a real bare cache and pulled into a consumer root, all through
real `cce` processes (what a user's first pull leaves behind)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.cce_proc import run_cce
from tests.helpers.sync import feed, make_bare


@dataclass(frozen=True)
class Pulled:
    url: str
    producer: Path
    consumer: Path


def cce(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """A `cce` process with the test's environment (its CCE_HOME and fake HOME)."""
    return run_cce(*argv, cwd=cwd, timeout=300)


def publish(tmp: Path, url: str, corpus: str, records: list[str], name: str = "producer") -> Path:
    """Index `records` into a producer root and push them as `corpus` to `url`."""
    prod = tmp / f"{name}-{corpus}"
    prod.mkdir(parents=True, exist_ok=True)
    (tmp / f"{corpus}.jsonl").write_bytes(feed(records))
    for argv in (
        ("knowledge", "index", str(tmp / f"{corpus}.jsonl"), "--dir", str(prod), "-q"),
        ("knowledge", "push", "--corpus", corpus, "--remote", url, "--dir", str(prod), "-q"),
    ):
        p = cce(*argv)
        assert p.returncode == 0, p.stderr
    return prod


def publish_and_pull(tmp: Path, corpus: str = "acme", cache: str = "cache.git") -> Pulled:
    """A fresh bare cache holding `corpus`, pulled once with --corpus and --remote."""
    url = make_bare(tmp / cache)
    prod = publish(tmp, url, corpus, ["r1", "r2"])
    cons = tmp / "consumer"
    cons.mkdir(exist_ok=True)
    p = cce("knowledge", "pull", "--corpus", corpus, "--remote", url, "--dir", str(cons))
    assert p.returncode == 0, p.stderr
    return Pulled(url, prod, cons)
