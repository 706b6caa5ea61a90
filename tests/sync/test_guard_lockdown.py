"""Issue 35 §9: the first nightly run after lockdown became the default (public
repositories: only collaborators' issues) drops outsiders' records, and the shrink guard
refused without a word about why. Now the extractor's manifest carries what it left out
by author (`left_out`, additive), `index --manifest` keeps it beside the store, and
`push` names those records and the two ways on: `--authors all` or `--force`. Real `cce`
processes: extract from a loopback GitHub, index, push to a real bare cache."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cce_knowledge.action.push_report import PushReport
from tests.helpers.cce_proc import run_cce
from tests.helpers.fake_github import FakeGitHub, Tracker
from tests.helpers.fake_github.server import Item
from tests.helpers.schemas import validator
from tests.helpers.sync import make_bare

pytestmark = pytest.mark.slow

REPO = "acme/widgets"
AUTHORS = {"owner": "OWNER", "member": "MEMBER", "stranger": "NONE", "drive-by": "NONE"}


def _tracker() -> Tracker:
    t = Tracker(visibility="public", associations=dict(AUTHORS))
    for n, login in enumerate(AUTHORS, 1):
        t.add(
            Item(number=n, title=f"Issue by {login}", body=f"Body by {login}.", user=login,
                 updated_at=f"2024-01-0{n}T00:00:00Z")
        )  # fmt: skip
    return t


def _cce(*argv: str, gh: FakeGitHub | None = None) -> tuple[int, str, str]:
    env = dict(os.environ)
    if gh is not None:
        env |= {"GITHUB_API_URL": gh.url, "GITHUB_TOKEN": "ghp_" + "x" * 36}
    p = run_cce(*argv, env=env, timeout=300)
    return p.returncode, p.stdout, p.stderr


def _build(tmp: Path, gh: FakeGitHub, name: str, *authors: str) -> Path:
    """extract (with a manifest) → index --manifest into a fresh producer root."""
    feed, man, root = tmp / f"{name}.jsonl", tmp / f"{name}.manifest.json", tmp / name
    rc, _, err = _cce("knowledge", "extract", "github", "--repo", REPO, "--out", str(feed),
                      "--manifest", str(man), *authors, gh=gh)  # fmt: skip
    assert rc == 0, err
    rc, _, err = _cce("knowledge", "index", str(feed), "--manifest", str(man), "--dir", str(root))
    assert rc == 0, err
    return root


def test_the_guard_says_lockdown_left_the_dropped_records_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CCE_HOME", str(tmp_path / "home"))
    url = make_bare(tmp_path / "cache.git")
    push = ("knowledge", "push", "--corpus", "widgets", "--remote", url)
    with FakeGitHub(_tracker()) as gh:
        # Before the upgrade: every author's issues are published.
        before = _build(tmp_path, gh, "before", "--authors", "all")
        rc, _, err = _cce(*push, "--dir", str(before))
        assert rc == 0, err
        # After: the default on a public repository leaves the strangers' issues out.
        after = _build(tmp_path, gh, "after")
    man = json.loads((tmp_path / "after.manifest.json").read_text())
    assert man["left_out"] == {
        "authors": "collaborators",
        "records": [f"gh:{REPO}#3", f"gh:{REPO}#4"],
    }
    assert not list(validator("cce.feed-manifest/v1").iter_errors(man))
    # `--authors all` left nothing out: that manifest keeps the reference's three keys.
    assert list(json.loads((tmp_path / "before.manifest.json").read_text())) == [
        "schema", "records", "sha256"
    ]  # fmt: skip

    rc, out, err = _cce(*push, "--dir", str(after))
    assert rc == 1 and out == ""
    assert "refusing to push: 2 records live on the remote would be dropped" in err
    assert f"  left out by author : 2 — gh:{REPO}#3, gh:{REPO}#4\n" in err
    assert (
        "All 2 dropped records were left out by the extractor: their authors are outside "
        "`--authors collaborators` (lockdown, the default for a public repository). To keep "
        "them, extract again with `--authors all`; to drop them on purpose, push with --force."
    ) in err

    # The dry run (the Action's guard step) carries it in --json, and the Action says it.
    rc, out, err = _cce(*push, "--dir", str(after), "--dry-run", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["left_out_by_author"] == {
        "authors": "collaborators",
        "records": [f"gh:{REPO}#3", f"gh:{REPO}#4"],
    }
    from cce_knowledge.action.driver import _left_out_why  # (a new name: not at collection)

    why = _left_out_why(PushReport.from_json(out))
    assert f"2 — gh:{REPO}#3, gh:{REPO}#4 were left out by the extractor" in why
    assert "`--authors all` to the `extract` input" in why and "`force: true`" in why

    # Re-indexed without that manifest: the record is gone, and so is the explanation.
    rc, _, err = _cce("knowledge", "index", str(tmp_path / "after.jsonl"), "--dir", str(after))
    assert rc == 0, err
    assert not (after / ".cce" / "knowledge" / "left-out.json").exists()
    rc, _, err = _cce(*push, "--dir", str(after))
    assert rc == 1 and "would be dropped" in err and "left out" not in err

    # --force drops them, as the note said.
    rc, _, err = _cce(*push, "--dir", str(after), "--force")
    assert rc == 0, err
