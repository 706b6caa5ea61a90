"""The README quickstart (`examples/quickstart.sh`) runs end to end and does what it says."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

SCRIPT = REPO / "examples" / "quickstart.sh"

STEPS = [
    "install cce-knowledge",
    "put the example docs tree in a git repo",
    "extract the docs tree",
    "validate the feed",
    "index the feed",
    "create the local cache repository",
    "push --dry-run",
    "push: publish the corpus",
    "pull into a fresh consumer directory",
    "status:",
    "ask a question",
    "gate: the example ask suite",
    "doctor",
]


def run_quickstart(out: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["CCE_QUICKSTART_SKIP_INSTALL"] = "1"
    env["PYTHON"] = sys.executable
    # The `cce` installed next to this interpreter, whatever PATH the runner has.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        ["bash", str(SCRIPT), str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def git_out(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


@pytest.mark.slow
def test_quickstart_runs_the_whole_pipeline(tmp_path: Path) -> None:
    out = tmp_path / "qs"
    proc = run_quickstart(out)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    log = proc.stdout

    # Every step is announced, in order.
    headings = re.findall(r"^== (\d+)\. (.*)$", log, flags=re.M)
    assert [int(n) for n, _ in headings] == list(range(1, len(STEPS) + 1))
    for (_, text), want in zip(headings, STEPS, strict=True):
        assert text.startswith(want), (text, want)

    # extract: deterministic feed, equal to the committed example feed and manifest.
    feed = (out / "feed.jsonl").read_bytes()
    assert feed == (REPO / "examples" / "feed.jsonl").read_bytes()
    assert (out / "feed.manifest.json").read_bytes() == (
        REPO / "examples" / "feed.manifest.json"
    ).read_bytes()
    snapshot = hashlib.sha256(feed).hexdigest()[:16]

    # index: the store exists and the example secret was redacted before it was written.
    store = out / "producer" / ".cce" / "knowledge" / f"{snapshot}.json"
    store_bytes = store.read_bytes()
    assert b"s3cr3tK3yF0rD3m0Only" not in store_bytes
    assert b"api_key = [REDACTED:" in store_bytes
    assert "the example api_key in policies/secrets-handling.md is stored as:" in log

    # dry-run published nothing; the push did: artifact, pointer and metadata in the cache.
    assert "this would be the first publish" in log
    names = git_out("--git-dir", str(out / "cache.git"), "ls-tree", "-r", "--name-only", "main")
    prefix = "knowledge/v1/acme-docs/"
    assert f"{prefix}{snapshot}.cck" in names.split("\n")
    assert f"{prefix}current" in names and f"{prefix}corpus.json" in names
    pointer = git_out("--git-dir", str(out / "cache.git"), "show", f"main:{prefix}current")
    assert pointer == f"{snapshot}\n"
    if shutil.which("git-lfs"):
        attrs = git_out("--git-dir", str(out / "cache.git"), "show", "main:.gitattributes")
        assert "*.cck filter=lfs diff=lfs merge=lfs -text" in attrs

    # pull: the consumer's store is byte-identical to the producer's, with a marker.
    consumer = out / "consumer" / ".cce" / "knowledge"
    assert (consumer / f"{snapshot}.json").read_bytes() == store_bytes
    assert (consumer / "current").read_text() == f"{snapshot}\n"
    assert '"corpus_id":"acme-docs"' in (consumer / "synced.json").read_text()

    # status, search, ask gate and doctor all report on the pulled corpus.
    assert "  corpus         : acme-docs (pulled)\n" in log
    assert "  behind remote  : no\n" in log
    search_part = log.split("== 11.")[1].split("== 12.")[0]
    first_hit = next(ln for ln in search_part.split("\n") if ln.startswith(" 1. ["))
    assert "[knowledge] Password hashing policy" in first_hit
    assert "proven   : 10/10" in log
    assert "summary: 1 store checked · 0 failures" in log

    # Idempotent: a second run over the same OUT_DIR succeeds and re-publishes unchanged.
    again = run_quickstart(out)
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-4000:]
    assert "proven   : 10/10" in again.stdout
    assert (
        out / "consumer" / ".cce" / "knowledge" / f"{snapshot}.json"
    ).read_bytes() == store_bytes
