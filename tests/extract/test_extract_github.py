"""GitHub adapter against a real local HTTP server speaking GitHub REST shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cce_knowledge.cli.main import main
from cce_knowledge.contract.ndjson import parse_feed
from cce_knowledge.core.errors import ExtractError
from cce_knowledge.extract.checkpoint import run_github
from cce_knowledge.extract.github import Fetcher, GitHubOptions, linked_pulls
from cce_knowledge.extract.httpclient import GitHubClient, next_link
from tests.helpers.fake_github import FakeGitHub, Tracker, make_tracker
from tests.helpers.fake_github.server import Item
from tests.helpers.schemas import assert_feed_valid

REPO = "acme/widgets"
TOKEN = "ghp_TestToken0123456789abcdefABCDEF012345"


def run_cli(
    monkeypatch: pytest.MonkeyPatch, gh: FakeGitHub, *args: str, token: str | None = TOKEN
) -> int:
    monkeypatch.setenv("GITHUB_API_URL", gh.url)
    if token is None:
        monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    else:
        monkeypatch.setenv("GITHUB_TOKEN", token)
    return main(["knowledge", "extract", "github", "--repo", REPO, *args])


def extract(
    gh: FakeGitHub,
    tmp: Path,
    name: str = "feed.jsonl",
    *,
    sleeps: list[float] | None = None,
    checkpoint: str | None = None,
    since: str | None = None,
    max_wait: float = 60,
    retries: int = 2,
    **opts: object,
) -> tuple[bytes, object, GitHubClient]:
    out = tmp / name
    slept = sleeps if sleeps is not None else []
    client = GitHubClient(
        gh.url,
        TOKEN,
        repo=REPO,
        max_wait=max_wait,
        retries=retries,
        backoff=0.01,
        sleep=slept.append,
    )
    opts.setdefault("authors", "all")  # no visibility request: the request counts below
    with client:
        stats = run_github(
            Fetcher(client, GitHubOptions(repo=REPO, **opts)),  # type: ignore[arg-type]
            out=str(out),
            checkpoint=checkpoint,
            since=since,
        )
    return out.read_bytes(), stats, client


@pytest.fixture
def tracker() -> Tracker:
    return make_tracker(230, seed=11)


@pytest.mark.parametrize("mode", ["timeline", "body_refs"])
def test_mapping_follows_the_tracker(mode: str, tmp_path: Path) -> None:
    """--timeline sees the cross-references wherever they were made; the default sees
    those written in PR bodies — here the same ones."""
    tracker = make_tracker(230, seed=11, body_refs=mode == "body_refs")
    with FakeGitHub(tracker, token=TOKEN) as gh:
        data, _, _ = extract(gh, tmp_path, include_comments=True, timeline=mode == "timeline")
    assert_feed_valid(data)
    recs = parse_feed(data.decode())
    by_n = {int(r.id.rsplit("#", 1)[1]): r for r in recs}
    assert [int(r.id.rsplit("#", 1)[1]) for r in recs] == sorted(by_n)  # sorted by number
    for n, it in tracker.items.items():
        if it.state_reason == "not_planned":
            assert n not in by_n
            continue
        r = by_n[n]
        assert r.id == f"gh:{REPO}#{n}"
        assert r.source == ("github-pulls" if it.is_pr else "github-issues")
        assert r.title == it.title and r.state == it.state
        assert r.updated_at == it.updated_at
        assert r.labels == it.labels and r.group == it.milestone
        assert r.url == f"https://github.com/{REPO}/{'pull' if it.is_pr else 'issues'}/{n}"
        want_links = (
            []
            if it.is_pr
            else sorted({f"https://github.com/{REPO}/pull/{p}" for p in it.linked_prs})
        )
        assert r.links == want_links  # cross-references from plain issues are not links
        assert "\r" not in r.body
        base = (it.body or "").replace("\r\n", "\n")
        assert r.body.startswith(base.rstrip("\n"))
        assert ("## Comments" in r.body) == bool(it.comments)
        for login, at, text in it.comments:
            assert f"### @{login} — {at}\n\n{text}" in r.body
    assert any(it.body is None for it in tracker.items.values())
    assert any(it.linked_issues for it in tracker.items.values())
    assert any(it.linked_prs for it in tracker.items.values())


def test_two_runs_give_identical_bytes(tracker: Tracker, tmp_path: Path) -> None:
    with FakeGitHub(tracker) as gh:
        a, _, _ = extract(gh, tmp_path, "a.jsonl", concurrency=1)
        b, _, _ = extract(gh, tmp_path, "b.jsonl", concurrency=6)
    assert a == b
    assert a.endswith(b"\n") and b"\r\n" not in a
    first = json.loads(a.split(b"\n", 1)[0])
    assert list(first)[:4] == ["id", "title", "body", "source"]


def test_keep_not_planned_state_filter_and_scrub(tracker: Tracker, tmp_path: Path) -> None:
    with FakeGitHub(tracker) as gh:
        kept, _, _ = extract(gh, tmp_path, "k.jsonl", keep_not_planned=True, state="open")
        scrubbed, _, _ = extract(gh, tmp_path, "s.jsonl", scrub=[r"caf[eé]", r"rule \d+"])
    recs = parse_feed(kept.decode())
    assert recs and all(r.state == "open" for r in recs)
    assert len(recs) == sum(1 for it in tracker.items.values() if it.state == "open")
    text = scrubbed.decode()
    assert "café" not in text and "[SCRUBBED]" in text
    assert all("rule" not in r.title or "[SCRUBBED]" in r.title for r in parse_feed(text))


def test_incremental_run_fetches_less_and_matches_a_full_run(tmp_path: Path) -> None:
    tracker = make_tracker(230, seed=11, body_refs=True)
    ck = str(tmp_path / "ck.json")
    with FakeGitHub(tracker) as gh:
        extract(gh, tmp_path, "inc.jsonl", checkpoint=ck, include_comments=True)
        full_requests = gh.count()
        # Edits after the first run: a retitle, a not_planned close, a PR body that now
        # references an old issue it does not touch, a comment on an old issue, and a
        # brand-new issue.
        tracker.touch(3, title="Retitled three")
        victim = next(
            n
            for n, it in tracker.items.items()
            if not it.is_pr and it.state_reason != "not_planned"
        )
        tracker.touch(victim, state="closed", state_reason="not_planned")
        pr = next(n for n, it in tracker.items.items() if it.is_pr)
        issue = next(
            n
            for n, it in tracker.items.items()
            if not it.is_pr
            and it.state_reason != "not_planned"
            and n not in (victim, 3)
            and not it.linked_prs
        )
        tracker.touch(pr, body=f"{tracker.items[pr].body}\nAlso fixes #{issue}.\n")
        tracker.comment(5, "carol", "A late thought on an old issue.")
        tracker.add(Item(number=999, title="New decision", body="## Why\n\nNew."))
        tracker.touch(999)
        gh.reset_counts()
        inc_bytes, stats, _ = extract(
            gh, tmp_path, "inc.jsonl", checkpoint=ck, include_comments=True
        )
        inc_requests = gh.count()
        full_bytes, _, _ = extract(gh, tmp_path, "full.jsonl", include_comments=True)
    assert stats.mode == "incremental" and stats.since is not None  # type: ignore[attr-defined]
    n_comments = sum(len(it.comments) for it in tracker.items.values()) - 1  # less carol's
    assert full_requests == 3 + -(-n_comments // 100)  # list pages + comment pages
    assert inc_requests == 2  # one list page, one comments page
    assert inc_bytes == full_bytes
    by_id = {r.id: r for r in parse_feed(inc_bytes.decode())}
    assert f"gh:{REPO}#{victim}" not in by_id and by_id[f"gh:{REPO}#3"].title == "Retitled three"
    assert f"gh:{REPO}#999" in by_id
    assert f"https://github.com/{REPO}/pull/{pr}" in by_id[f"gh:{REPO}#{issue}"].links
    assert "### @carol — " in by_id[f"gh:{REPO}#5"].body
    ck_doc = json.loads(Path(ck).read_text())
    assert ck_doc["run"] is None and ck_doc["high_water"] >= "2025-01-01"


def test_since_flag_merges_into_previous_feed(tracker: Tracker, tmp_path: Path) -> None:
    with FakeGitHub(tracker) as gh:
        extract(gh, tmp_path, "feed.jsonl")
        tracker.touch(10, body="Rewritten body")
        gh.reset_counts()
        merged, stats, _ = extract(gh, tmp_path, "feed.jsonl", since="2025-01-01T00:00:00Z")
        assert gh.count("/issues?") == 1
        full, _, _ = extract(gh, tmp_path, "full.jsonl")
    assert merged == full and stats.upserts + stats.removals == 1  # type: ignore[attr-defined]


def test_interrupted_run_resumes_from_checkpoint(tracker: Tracker, tmp_path: Path) -> None:
    ck = str(tmp_path / "ck.json")
    with FakeGitHub(tracker) as ref:
        want, _, _ = extract(ref, tmp_path, "want.jsonl", include_comments=True)
        full_requests = ref.count()
    # The server dies for good after the first page: the run fails, writes no feed.
    with FakeGitHub(tracker, fail_from=2) as gh:
        with pytest.raises(ExtractError, match="500"):
            extract(gh, tmp_path, "feed.jsonl", checkpoint=ck, retries=1, include_comments=True)
        assert not (tmp_path / "feed.jsonl").exists()
    doc = json.loads(Path(ck).read_text())
    assert doc["run"]["pages"] == 1 and doc["run"]["next_url"].startswith("/repos/")
    with FakeGitHub(tracker) as gh:
        got, stats, _ = extract(gh, tmp_path, "feed.jsonl", checkpoint=ck, include_comments=True)
        resumed = gh.count()
    assert stats.mode == "resumed"  # type: ignore[attr-defined]
    assert got == want
    assert resumed == full_requests - 1  # the completed page was not refetched
    assert not Path(ck + ".partial").exists()


def test_checkpoint_refuses_other_options_and_edited_feed(tracker: Tracker, tmp_path: Path) -> None:
    ck = str(tmp_path / "ck.json")
    with FakeGitHub(tracker) as gh:
        extract(gh, tmp_path, "feed.jsonl", checkpoint=ck)
        with pytest.raises(ExtractError, match="different options"):
            extract(gh, tmp_path, "feed.jsonl", checkpoint=ck, include_comments=True)
        (tmp_path / "feed.jsonl").write_bytes(b"")
        with pytest.raises(ExtractError, match="changed since the checkpoint"):
            extract(gh, tmp_path, "feed.jsonl", checkpoint=ck)


def test_secondary_rate_limit_honours_retry_after(tracker: Tracker, tmp_path: Path) -> None:
    sleeps: list[float] = []
    with FakeGitHub(tracker, rate_limit_on={2}, retry_after="7") as gh:
        with_limit, _, client = extract(gh, tmp_path, "a.jsonl", sleeps=sleeps)
        assert gh.count() == len(gh.requests)
    with FakeGitHub(tracker) as gh:
        plain, _, _ = extract(gh, tmp_path, "b.jsonl")
    assert sleeps == [7.0] and client.waited == 7.0
    assert with_limit == plain


def test_primary_rate_limit_waits_until_reset(tracker: Tracker, tmp_path: Path) -> None:
    sleeps: list[float] = []
    with FakeGitHub(tracker, primary_limit_on={1}) as gh:
        extract(gh, tmp_path, sleeps=sleeps)
    assert len(sleeps) == 1 and 0.0 < sleeps[0] <= 3.0


def test_rate_limit_wait_is_bounded(tracker: Tracker, tmp_path: Path) -> None:
    with FakeGitHub(tracker, rate_limit_on={1}, retry_after="3600") as gh:
        with pytest.raises(ExtractError, match="max-wait"):
            extract(gh, tmp_path, max_wait=30)
    assert not (tmp_path / "feed.jsonl").exists()


def test_bad_token_is_a_clear_error_that_never_echoes_it(
    tracker: Tracker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "feed.jsonl"
    out.write_bytes(b"previous\n")
    with FakeGitHub(tracker, token="the-right-token") as gh:
        rc = run_cli(monkeypatch, gh, "--out", str(out), "--manifest", str(tmp_path / "m.json"))
        assert gh.auth_headers == [f"Bearer {TOKEN}"]
    err = capsys.readouterr().err
    assert rc == 1
    assert "GitHub rejected the token for acme/widgets (401 Bad credentials)" in err
    assert TOKEN not in err
    assert out.read_bytes() == b"previous\n" and not (tmp_path / "m.json").exists()


def test_unknown_repo_is_404_naming_it(
    tracker: Tracker, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeGitHub(tracker) as gh:
        monkeypatch.setenv("GITHUB_API_URL", gh.url)
        rc = main(["knowledge", "extract", "github", "--repo", "acme/nope"])
    assert rc == 1
    assert "acme/nope not found (404" in capsys.readouterr().err


def test_cli_writes_feed_and_manifest_that_index(
    tracker: Tracker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import hashlib

    out, man = tmp_path / "feed.jsonl", tmp_path / "feed.manifest.json"
    with FakeGitHub(tracker) as gh:
        assert (
            run_cli(
                monkeypatch, gh, "--out", str(out), "--manifest", str(man), "--include-comments"
            )
            == 0
        )
    err = capsys.readouterr().err
    assert TOKEN not in err and "records" in err
    m = json.loads(man.read_text())
    raw = out.read_bytes()
    assert m["sha256"] == hashlib.sha256(raw).hexdigest()
    assert m["records"] == len(parse_feed(raw.decode()))
    root = tmp_path / "proj"
    root.mkdir()
    assert main(["knowledge", "index", str(out), "--dir", str(root), "--manifest", str(man)]) == 0
    assert "manifest  : verified" in capsys.readouterr().out


def test_usage_errors(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["knowledge", "extract", "github", "--repo", "not-a-repo"]) == 2
    assert main(["knowledge", "extract", "github", "--repo", REPO, "--scrub", "("]) == 2
    assert main(["knowledge", "extract", "github", "--repo", REPO, "--since", "2024-01-01"]) == 2
    assert (
        main(
            [
                "knowledge",
                "extract",
                "github",
                "--repo",
                REPO,
                "--since",
                "yesterday",
                "--out",
                "x.jsonl",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "OWNER/NAME" in err and "regular expression" in err and "--out" in err
    assert "ISO-8601" in err


def test_link_header_and_timeline_parsing() -> None:
    h = (
        '<https://api.github.com/repositories/1/issues?page=1>; rel="prev", '
        '<https://api.github.com/repositories/1/issues?page=3>; rel="next", '
        '<https://api.github.com/repositories/1/issues?page=9>; rel="last"'
    )
    assert next_link(h) == "https://api.github.com/repositories/1/issues?page=3"
    assert next_link('<https://x/issues?page=1>; rel="first"') is None
    assert next_link(None) is None
    events = [
        {"event": "labeled"},
        {
            "event": "cross-referenced",
            "source": {
                "type": "issue",
                "issue": {"html_url": "https://github.com/a/b/pull/4", "pull_request": {}},
            },
        },
        {
            "event": "cross-referenced",
            "source": {"type": "issue", "issue": {"html_url": "https://github.com/a/b/issues/5"}},
        },
        {"event": "cross-referenced", "source": None},
    ]
    assert linked_pulls(events) == ["https://github.com/a/b/pull/4"]


def test_transient_5xx_is_retried_with_backoff(tracker: Tracker, tmp_path: Path) -> None:
    sleeps: list[float] = []
    with FakeGitHub(tracker, fail_on={1, 2, 5}, fail_status=502) as gh:
        got, _, _ = extract(gh, tmp_path, "a.jsonl", sleeps=sleeps, concurrency=1)
    with FakeGitHub(tracker) as gh:
        want, _, _ = extract(gh, tmp_path, "b.jsonl")
    assert got == want
    assert sleeps == [0.01, 0.02, 0.01]  # exponential per request, reset after success


def test_long_timeline_is_paginated(tmp_path: Path) -> None:
    t = Tracker()
    t.add(Item(number=1, title="Big decision", body="b"))
    for n in range(2, 153):
        t.add(Item(number=n, title=f"PR {n}", body="", is_pr=True))
    t.items[1].linked_prs = list(range(2, 153))
    with FakeGitHub(t) as gh:
        data, _, _ = extract(gh, tmp_path, timeline=True)
        assert gh.count("/issues/1/timeline") == 2
    rec = next(r for r in parse_feed(data.decode()) if r.id == f"gh:{REPO}#1")
    assert rec.links == sorted(f"https://github.com/{REPO}/pull/{n}" for n in range(2, 153))


def test_token_env_names_the_variable(
    tracker: Tracker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_TOKEN", "src-token-123")
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    with FakeGitHub(tracker, token="src-token-123") as gh:
        monkeypatch.setenv("GITHUB_API_URL", gh.url)
        rc = main(
            [
                "knowledge",
                "extract",
                "github",
                "--repo",
                REPO,
                "--token-env",
                "SOURCE_TOKEN",
                "--out",
                str(tmp_path / "f.jsonl"),
                "-q",
                "--no-timeline",  # the default now; still accepted
            ]
        )
        assert set(gh.auth_headers) == {"Bearer src-token-123"}
        assert gh.count("/timeline") == 0
    assert rc == 0 and (tmp_path / "f.jsonl").stat().st_size > 0


def test_one_run_per_checkpoint(tracker: Tracker, tmp_path: Path) -> None:
    import fcntl
    import os

    ck = str(tmp_path / "ck.json")
    fd = os.open(ck + ".lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with FakeGitHub(tracker) as gh, pytest.raises(ExtractError, match="another extraction"):
            extract(gh, tmp_path, checkpoint=ck)
        assert gh.count() == 0
    finally:
        os.close(fd)


# sha256 of the feeds version 2.0.0 (timeline on by default) wrote for make_tracker(230, seed=11)
V2_0_0_FEED = "7a4746928190546047909c8b748fd4695b10315defe0ea768957bfa196678951"
V2_0_0_FEED_WITH_COMMENTS = "5e6d767e0a9254f86125d8d2ed8e346dfa7c5557a0d71ab91c56c60f44b482db"


@pytest.mark.parametrize("comments", [False, True])
def test_fixture_bytes_differ_from_2_0_0_only_in_links_from_the_timeline(
    tracker: Tracker, tmp_path: Path, comments: bool
) -> None:
    """--timeline writes what 2.0.0 wrote, byte for byte; the paged default differs in
    `links` alone (this tracker's cross-references exist only in the timeline)."""
    import hashlib

    with FakeGitHub(tracker) as gh:
        timeline, _, _ = extract(gh, tmp_path, "t.jsonl", timeline=True, include_comments=comments)
        paged, _, _ = extract(gh, tmp_path, "p.jsonl", include_comments=comments)
    want = V2_0_0_FEED_WITH_COMMENTS if comments else V2_0_0_FEED
    assert hashlib.sha256(timeline).hexdigest() == want
    old = [json.loads(line) for line in timeline.splitlines()]
    new = [json.loads(line) for line in paged.splitlines()]
    assert [{k: v for k, v in r.items() if k != "links"} for r in old] == [
        {k: v for k, v in r.items() if k != "links"} for r in new
    ]
    assert sum(o != n for o, n in zip(old, new, strict=True)) == 50
