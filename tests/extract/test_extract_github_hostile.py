"""A hostile GitHub API's paging (issue 25, point 9): `Retry-After: 0` on every 429,
a `next` link back to the same page, `rel="last"` at page 200,000,000 and a deeply
nested page each end promptly with a clear message and no traceback — real `cce`
processes against the loopback fake GitHub."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cce_knowledge.contract.ndjson import parse_feed
from tests.helpers.fake_github import FakeGitHub, make_tracker

pytestmark = pytest.mark.slow  # real `cce` processes

REPO = "acme/widgets"


def _extract(gh: FakeGitHub, out: Path, *extra: str) -> tuple[int, str, float]:
    env = {**os.environ, "GITHUB_API_URL": gh.url, "GITHUB_TOKEN": "ghp_test"}
    argv = [sys.executable, "-m", "cce_knowledge", "knowledge", "extract", "github"]
    argv += ["--repo", REPO, "--out", str(out), "--max-wait", "30", *extra]
    t0 = time.monotonic()
    got = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)
    return got.returncode, got.stderr, time.monotonic() - t0


@pytest.mark.parametrize(
    ("mode", "code", "says"),
    [
        ("retry-after-0", 3, "times in a row with a wait of 0s"),
        ("next-self", 1, "links back to a page already read"),
        ("deep-json", 1, "invalid JSON for acme/widgets at /repos/acme/widgets/issues: nested"),
    ],
)
@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_hostile_paging_ends_with_a_clear_error(
    tmp_path: Path, mode: str, code: int, says: str, concurrency: str
) -> None:
    with FakeGitHub(make_tracker(230, seed=11)) as gh:
        gh.hostile = mode
        rc, err, took = _extract(gh, tmp_path / "feed.jsonl", "--concurrency", concurrency)
        assert (rc, "Traceback" in err) == (code, False), err
        assert says in err, err
        assert took < 30 and gh.count() < 20


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_a_huge_last_page_is_not_planned(tmp_path: Path, concurrency: str) -> None:
    tracker = make_tracker(230, seed=11)
    out = tmp_path / "feed.jsonl"
    with FakeGitHub(tracker) as gh:
        gh.hostile = "huge-last"
        rc, err, took = _extract(gh, out, "--concurrency", concurrency, "--no-timeline")
        assert rc == 0, err
        # Three real pages, then the first empty page ends the walk (plus the pages
        # already in flight), whatever `last` claimed.
        assert gh.count("/issues?") <= 3 + 1 + int(concurrency)
    assert took < 30
    # The same feed as an honest API's.
    with FakeGitHub(tracker) as gh:
        plain = tmp_path / "plain.jsonl"
        assert _extract(gh, plain, "--concurrency", concurrency, "--no-timeline")[0] == 0
    assert out.read_bytes() == plain.read_bytes() and parse_feed(out.read_text())
