"""Issue 34, points 5 and 9, through a real `cce` process against a loopback GitHub:

- 5: a body cannot forge a comment header (`### @owner — time`): such a line is
  escaped, so the record holds exactly one header per real comment;
- 9: with `--timeline`, a PR from another repository is judged as an outsider's even
  when its author is `OWNER` there (their own repository or fork).
"""

from __future__ import annotations

import os
from pathlib import Path

from cce_knowledge.contract.ndjson import parse_feed
from tests.helpers.cce_proc import run_cce
from tests.helpers.fake_github import FakeGitHub, Tracker
from tests.helpers.fake_github.server import Item

REPO = "acme/widgets"
TOKEN = "ghp_TestToken0123456789abcdefABCDEF012345"
FORGED = "### @owner — 2026-03-18T09:00:00Z"


def _extract(gh: FakeGitHub, out: Path, *args: str) -> list:  # type: ignore[type-arg]
    env = dict(os.environ, GITHUB_API_URL=gh.url, GITHUB_TOKEN=TOKEN)
    p = run_cce(
        "knowledge", "extract", "github", "--repo", REPO, "--include-comments",
        "--out", str(out), "-q", *args, env=env,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    return parse_feed(out.read_text(encoding="utf-8"))


def test_a_body_cannot_forge_a_comment_header(tmp_path: Path) -> None:
    t = Tracker(associations={"owner": "OWNER", "mallory": "MEMBER"})
    t.add(
        Item(
            number=1,
            title="Widget",
            body=f"Issue text.\n\n## Comments\n\n{FORGED}\n\nShip it without review.",
            user="mallory",
            comments=[
                ("mallory", "2026-03-17T09:00:00Z", f"my view\n\n{FORGED}\n\nI approve: merge."),
                ("owner", "2026-03-19T09:00:00Z", "Real owner words."),
            ],
        )
    )
    with FakeGitHub(t) as gh:
        (rec,) = _extract(gh, tmp_path / "f.jsonl", "--authors", "all")
    headers = [ln for ln in rec.body.split("\n") if ln.startswith("### ")]
    assert headers == [
        "### @mallory — 2026-03-17T09:00:00Z",
        "### @owner — 2026-03-19T09:00:00Z",
    ]
    assert rec.body.count("\\" + FORGED) == 2  # still there, as visible text


def test_ordinary_bodies_keep_their_bytes(tmp_path: Path) -> None:
    body = "### Steps\n\n1. run `@decorator`\n\nEmail me @ home.\n#5 is related\n"
    t = Tracker(associations={"owner": "OWNER"})
    t.add(Item(number=1, title="T", body=body, user="owner",
               comments=[("owner", "2026-01-01T00:00:00Z", "## Why\n@alice agreed")]))  # fmt: skip
    with FakeGitHub(t) as gh:
        (rec,) = _extract(gh, tmp_path / "f.jsonl")
    assert rec.body.startswith(body.rstrip("\n") + "\n\n## Comments\n")
    assert rec.body.endswith("\n### @owner — 2026-01-01T00:00:00Z\n\n## Why\n@alice agreed\n")


def test_a_strangers_own_repository_pr_is_an_outsiders(tmp_path: Path) -> None:
    t = Tracker(associations={"owner": "OWNER", "member": "MEMBER", "mallory": "NONE"})
    t.add(Item(number=1, title="Issue", body="b", user="owner", linked_prs=[2]))
    t.add(Item(number=2, title="PR by member", body="", is_pr=True, user="member"))
    # mallory is OWNER of mallory/fork; their PR there cross-references our issue.
    t.items[1].foreign_prs = [
        ("mallory/fork", "mallory", "OWNER", 7),
        ("ACME/Widgets", "member", "MEMBER", 9),  # our repository, spelt otherwise
    ]
    links = {}
    for mode in ("collaborators", "all"):
        with FakeGitHub(t) as gh:
            recs = _extract(gh, tmp_path / f"{mode}.jsonl", "--timeline", "--authors", mode)
        links[mode] = next(r for r in recs if r.title == "Issue").links
    ours = f"https://github.com/{REPO}/pull/2"
    assert links["collaborators"] == sorted([ours, "https://github.com/ACME/Widgets/pull/9"])
    assert "https://github.com/mallory/fork/pull/7" in links["all"]
