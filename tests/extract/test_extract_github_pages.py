"""The paged GitHub path: links from PR bodies, repository-wide comments, request
counts, the rate-limit budget — against the loopback fake GitHub."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cce_knowledge.cli.main import main
from cce_knowledge.contract.ndjson import parse_feed
from cce_knowledge.core.errors import RateLimitStop
from cce_knowledge.extract.checkpoint import RunStats, run_github
from cce_knowledge.extract.github import Fetcher, GitHubOptions
from cce_knowledge.extract.github_refs import referenced_numbers
from cce_knowledge.extract.httpclient import GitHubClient
from tests.helpers.fake_github import FakeGitHub, Tracker, make_large_tracker
from tests.helpers.fake_github.server import Item

REPO = "acme/widgets"
WEB = "https://github.com/acme/widgets"


def refs(text: str) -> set[int]:
    return referenced_numbers(text, REPO, WEB)


# -- references in PR bodies ----------------------------------------------------------------


@pytest.mark.parametrize(
    "keyword",
    ["close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved"],
)
def test_every_closing_keyword_in_every_target_form(keyword: str) -> None:
    for kw in (keyword, keyword.upper(), keyword.capitalize()):
        assert refs(f"{kw} #12") == {12}
        assert refs(f"{kw}: #12") == {12}
        assert refs(f"This PR {kw} acme/widgets#12.") == {12}
        assert refs(f"{kw} ACME/Widgets#12") == {12}  # names compare without case
        assert refs(f"{kw} https://github.com/acme/widgets/issues/12") == {12}


def test_plain_mentions_and_lists() -> None:
    assert refs("See #7, and (#8); also #9.") == {7, 8, 9}
    assert refs("- [x] #10\n- [ ] #11") == {10, 11}
    assert refs("http://github.com/acme/widgets/issues/4#issuecomment-1") == {4}
    assert refs("https://github.com/acme/widgets/pull/5") == {5}


def test_non_references() -> None:
    assert refs("#123abc is a colour, abc#12 a slug, &#35; an entity, #0 nothing") == set()
    assert refs("other/repo#12 and https://github.com/other/repo/issues/13") == set()
    assert refs("https://ghe.example.com/acme/widgets/issues/14") == set()  # another host
    assert refs("a/acme/widgets#15 x.acme/widgets#16") == set()
    assert refs("Use `fixes #17` or ``#18 `x` #18`` in a span") == set()
    assert refs("```\nFixes #19\n```\n~~~~ text\nfixes #20\n~~~~\n") == set()
    assert refs("<!-- Fixes #21 -->\nplain") == set()
    assert refs("text\n\n    fixes #22 (indented code)\n\nafter") == set()
    assert refs("```\nunclosed fence fixes #23") == set()


def test_code_does_not_hide_what_follows_it() -> None:
    assert refs("`code` fixes #30") == {30}
    assert refs("```\n#31\n```\nFixes #32") == {32}
    assert refs("<!-- template -->\nCloses #33") == {33}
    assert refs("para\n    continuation fixes #34") == {34}  # not a code block: no blank line


def test_enterprise_web_base() -> None:
    base = "https://ghe.example.com/acme/widgets"
    assert referenced_numbers(
        "fixes https://ghe.example.com/acme/widgets/issues/3", REPO, base
    ) == {3}
    assert referenced_numbers("fixes https://github.com/acme/widgets/issues/3", REPO, base) == set()


@given(st.text(max_size=300))
def test_fenced_text_never_references(text: str) -> None:
    body = "```\n" + text.replace("`", "'").replace("~", "-") + "\n```\n"
    assert refs(body) == set()


@given(st.text(max_size=300), st.integers(1, 10**6))
def test_a_reference_line_is_always_found(text: str, n: int) -> None:
    clean = text.replace("`", "'").replace("~", "-").replace("<!--", "")
    assert n in refs(f"{clean}\n\nFixes #{n}\n")


def pr_tracker() -> Tracker:
    t = Tracker()
    for n in range(1, 9):
        t.add(Item(number=n, title=f"Issue {n}", body=f"Issue {n} body."))
    bodies = {
        20: "Fixes #1",
        21: "closes acme/widgets#2 and other/lib#3",
        22: "Resolved https://github.com/acme/widgets/issues/4",
        23: "Related: #5. Not `#6`, not #7x.\n\n```\nfixes #8\n```\n",
        24: "fixes #20 (a PR) and #999 (no such item)",
    }
    for n, body in bodies.items():
        t.add(Item(number=n, title=f"PR {n}", body=body, is_pr=True, state="closed", merged=True))
    return t


def test_links_from_pr_bodies_end_to_end(tmp_path: Path) -> None:
    t = pr_tracker()
    with FakeGitHub(t) as gh:
        _, data = run(gh, tmp_path)
        assert gh.count("/timeline") == 0 and gh.count() == 1
    links = {int(r.id.rsplit("#")[1]): r.links for r in parse_feed(data.decode())}
    pull = f"{WEB}/pull/"
    assert links[1] == [pull + "20"] and links[2] == [pull + "21"]
    assert links[4] == [pull + "22"] and links[5] == [pull + "23"]
    assert links[3] == links[6] == links[7] == links[8] == []
    assert all(links[p] == [] for p in range(20, 25))  # PR records carry no links


def test_state_open_still_links_merged_prs(tmp_path: Path) -> None:
    """The list is read in every state: merged PRs are closed, and they carry the links."""
    with FakeGitHub(pr_tracker()) as gh:
        _, data = run(gh, tmp_path, state="open")
    recs = parse_feed(data.decode())
    assert {r.id for r in recs} == {f"gh:{REPO}#{n}" for n in range(1, 9)}
    assert recs[0].links == [f"{WEB}/pull/20"]


# -- request counts -------------------------------------------------------------------------


def client_for(
    gh: FakeGitHub, sleeps: list[float] | None = None, max_wait: float = 60
) -> GitHubClient:
    return GitHubClient(
        gh.url,
        None,
        repo=REPO,
        max_wait=max_wait,
        retries=1,
        backoff=0.01,
        sleep=(sleeps if sleeps is not None else []).append,
    )


def run(
    gh: FakeGitHub,
    tmp: Path,
    name: str = "feed.jsonl",
    *,
    checkpoint: str | None = None,
    client: GitHubClient | None = None,
    **opts: object,
) -> tuple[RunStats, bytes]:
    out = tmp / name
    opts.setdefault("authors", "all")  # no visibility request: the request counts below
    with client or client_for(gh) as c:
        stats = run_github(
            Fetcher(c, GitHubOptions(repo=REPO, **opts)),  # type: ignore[arg-type]
            out=str(out),
            checkpoint=checkpoint,
        )
    return stats, out.read_bytes()


@pytest.fixture(scope="module")
def large() -> Tracker:
    return make_large_tracker(issues=600, prs=300, comments=2400, seed=5)


def test_requests_grow_with_pages(large: Tracker, tmp_path: Path) -> None:
    items = len(large.items)
    comments = sum(len(it.comments) for it in large.items.values())
    ck = str(tmp_path / "ck.json")
    with FakeGitHub(large) as gh:
        full, data = run(gh, tmp_path, checkpoint=ck, include_comments=True)
        full_requests = gh.count()
        assert gh.count("/issues?") == -(-items // 100) == 9
        assert gh.count("/issues/comments?") == -(-comments // 100) == 24
        assert full_requests == 33 and gh.count("/timeline") == 0
        # A night's changes: 5 edited items, 12 new comments (on old issues too).
        for n in (3, 50, 51, 400, 899):
            large.touch(n, title=f"{large.items[n].title} (edited)")
        for k in range(12):
            large.comment(1 + 70 * k, "dave", f"Nightly note {k}.")
        gh.reset_counts()
        inc, inc_data = run(gh, tmp_path, checkpoint=ck, include_comments=True)
        assert gh.count() == 2  # one list page, one comments page
        gh.reset_counts()
        _, fresh = run(gh, tmp_path, "fresh.jsonl", include_comments=True)
    assert full.records == len(parse_feed(data.decode())) and inc.mode == "incremental"
    assert inc_data == fresh
    body = {r.id: r.body for r in parse_feed(inc_data.decode())}
    assert "Nightly note 0." in body[f"gh:{REPO}#1"]  # a comment on the very first issue
    print(
        f"\nfull: {full_requests} requests for {items} items + {comments} comments; "
        f"incremental: 2 requests"
    )


def test_output_bytes_do_not_depend_on_concurrency(large: Tracker, tmp_path: Path) -> None:
    with FakeGitHub(large) as gh:
        outs = {
            c: run(gh, tmp_path, f"c{c}.jsonl", include_comments=True, concurrency=c)[1]
            for c in (1, 3, 8)
        }
        timeline = [
            run(gh, tmp_path, f"t{c}.jsonl", timeline=True, concurrency=c, item_concurrency=c)[1]
            for c in (1, 6)
        ]
    assert outs[1] == outs[3] == outs[8]
    assert timeline[0] == timeline[1]


def test_comments_are_grouped_by_issue_in_time_order(tmp_path: Path) -> None:
    t = Tracker()
    t.add(Item(number=1, title="Old issue", body="Body one."))
    t.add(Item(number=2, title="A PR", body="Fixes #1", is_pr=True))
    t.add(Item(number=3, title="Quiet", body="No comments."))
    t.comment(1, "alice", "First on one.")
    t.comment(2, "bob", "Review note on the PR.")
    t.comment(1, "carol", "Second on one.")
    ck = str(tmp_path / "ck.json")
    with FakeGitHub(t) as gh:
        _, data = run(gh, tmp_path, checkpoint=ck, include_comments=True)
        by_id = {r.id: r for r in parse_feed(data.decode())}
        one = by_id[f"gh:{REPO}#1"].body
        assert one.index("First on one.") < one.index("Second on one.")
        assert "Review note" in by_id[f"gh:{REPO}#2"].body
        assert "## Comments" not in by_id[f"gh:{REPO}#3"].body
        # An edited comment does not bump its issue: only the comments page sees it.
        t.edit_comment(1, 0, "First on one, edited.")
        gh.reset_counts()
        _, again = run(gh, tmp_path, checkpoint=ck, include_comments=True)
        assert gh.count("/issues?") == 1 and gh.count("/issues/comments?") == 1
        _, fresh = run(gh, tmp_path, "fresh.jsonl", include_comments=True)
    assert again == fresh and "First on one, edited." in again.decode()


def test_since_without_checkpoint_reads_comments_per_changed_item(tmp_path: Path) -> None:
    t = make_large_tracker(issues=60, prs=30, comments=200, seed=9)
    with FakeGitHub(t) as gh:
        run(gh, tmp_path, include_comments=True)
        t.comment(4, "erin", "New on four.")
        t.touch(30, body="Now fixes #2 as well.")  # a PR: its old links move
        gh.reset_counts()
        out = tmp_path / "feed.jsonl"
        with client_for(gh) as c:
            run_github(
                Fetcher(c, GitHubOptions(repo=REPO, include_comments=True)),
                out=str(out),
                since="2025-01-01T00:00:00Z",
            )
        assert gh.count("/issues?") == 1 and gh.count("/issues/comments?") == 0
        assert gh.count("/comments") <= 2  # the changed items' own comments
        _, fresh = run(gh, tmp_path, "fresh.jsonl", include_comments=True)
    assert out.read_bytes() == fresh


# -- the rate-limit budget ------------------------------------------------------------------


def test_spent_budget_stops_cleanly_and_the_next_run_resumes(
    large: Tracker, tmp_path: Path
) -> None:
    ck = str(tmp_path / "ck.json")
    with FakeGitHub(large) as gh:
        _, want = run(gh, tmp_path, "want.jsonl", include_comments=True)
        total = gh.count()
    with FakeGitHub(large, budget=20, budget_reset_in=3600) as gh:
        with pytest.raises(RateLimitStop, match="stopped cleanly") as err:
            run(gh, tmp_path, checkpoint=ck, include_comments=True)
        assert err.value.exit_code == 3
        assert gh.refused == 0  # the budget was read from the headers, not hit
        assert not (tmp_path / "feed.jsonl").exists()
        first = gh.count()
        doc = json.loads(Path(ck).read_text())
        assert doc["run"]["pages"] == 20 and doc["run"]["stage"] == "comments"
        gh.refill()
        gh.reset_counts()
        stats, got = run(gh, tmp_path, checkpoint=ck, include_comments=True)
    assert stats.mode == "resumed" and got == want
    assert first + gh.count() == total  # no page fetched twice, none lost
    ids = [r.id for r in parse_feed(got.decode())]
    assert len(ids) == len(set(ids))


def test_spent_budget_is_waited_out_within_max_wait(tmp_path: Path) -> None:
    t = make_large_tracker(issues=200, prs=100, comments=0, seed=3)
    with FakeGitHub(t, budget=2, budget_reset_in=5) as gh:
        sleeps: list[float] = []

        def sleep(s: float) -> None:
            sleeps.append(s)
            gh.refill()  # the window resets while we wait

        client = GitHubClient(gh.url, None, repo=REPO, max_wait=60, sleep=sleep)
        _, data = run(gh, tmp_path, client=client, concurrency=1)
        assert gh.refused == 0 and gh.count() == 3
    assert len(sleeps) == 1 and 0 < sleeps[0] <= 7
    assert len(parse_feed(data.decode())) == 300


def test_cli_exit_code_3_when_the_budget_is_spent(
    large: Tracker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out, ck = tmp_path / "feed.jsonl", tmp_path / "ck.json"
    argv = ["knowledge", "extract", "github", "--repo", REPO, "--out", str(out)]
    argv += ["--checkpoint", str(ck), "--max-wait", "10", "--authors", "all"]
    monkeypatch.setenv("CCE_PROGRESS", "lines")
    monkeypatch.setenv("CCE_PROGRESS_INTERVAL", "0")
    with FakeGitHub(large, budget=4) as gh:
        monkeypatch.setenv("GITHUB_API_URL", gh.url)
        assert main(argv) == 3
        err = capsys.readouterr().err
        assert "rate-limit budget is spent" in err and "the next run resumes" in err
        # progress: items so far and the budget the headers reported
        assert "extract: 100 items, " in err and "1 pages, 1 requests, 3 of 4 left in the" in err
        codes = []
        while not codes or codes[-1] == 3:
            gh.refill()  # the next scheduled run, an hour later
            codes.append(main(argv))
        assert codes == [3, 0] and gh.refused == 0  # 9 pages at 4 per window
    assert len(parse_feed(out.read_text())) == len(large.items)


def test_checkpoint_from_before_paged_runs_triggers_one_full_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ck = tmp_path / "ck.json"
    ck.write_text(
        json.dumps(
            {
                "schema": "cce.extract-checkpoint/v1",
                "adapter": "github",
                "options": {"repo": REPO},
                "high_water": "2024-05-01T00:00:00Z",
                "feed_sha256": "0" * 64,
                "run": None,
            }
        )
    )
    with FakeGitHub(pr_tracker()) as gh:
        stats, _ = run(gh, tmp_path, checkpoint=str(ck))
    assert stats.mode == "full"
    assert json.loads(ck.read_text())["layout"] == "pages"


def spans_by_definition(text: str) -> str:
    """CommonMark code spans, the slow obvious way: from each backtick run, look for
    the next run of the same length; blank the span."""
    import re

    out, pos = [], 0
    runs = [(m.start(), m.end()) for m in re.finditer(r"`+", text)]
    k = 0
    while k < len(runs):
        a, b = runs[k]
        close = next((j for j in range(k + 1, len(runs)) if runs[j][1] - runs[j][0] == b - a), None)
        if close is None:
            k += 1
            continue
        out += [text[pos:a], " "]
        pos, k = runs[close][1], close + 1
    return "".join(out) + text[pos:]


@given(st.text(alphabet="`a #1\n", max_size=80))
def test_code_spans_match_their_definition(text: str) -> None:
    from cce_knowledge.extract.github_refs import _without_code_spans

    assert _without_code_spans(text) == spans_by_definition(text)


def test_hostile_bodies_stay_linear() -> None:
    """Backtick runs of every length (a backreference regex takes minutes on this)."""
    import time

    body = "".join("`" * k + "a" for k in range(1, 360))  # 65 kB, GitHub's body limit
    t0 = time.perf_counter()
    assert refs(body + "\nFixes #3\n") == {3}
    assert time.perf_counter() - t0 < 5


def test_lone_surrogates_from_the_api_survive_checkpoint_and_mirror(tmp_path: Path) -> None:
    """JSON may carry "\\ud800"; the feed gets U+FFFD, the state files the exact text."""
    t = Tracker()
    t.add(Item(number=1, title="Odd \ud800 title", body="Body \udfff here."))
    t.add(Item(number=2, title="PR", body="Fixes #1 \ud83d", is_pr=True))
    t.comment(1, "alice", "comment \ud800")
    ck = str(tmp_path / "ck.json")
    with FakeGitHub(t) as gh:
        run(gh, tmp_path, checkpoint=ck, include_comments=True)
        t.comment(1, "bob", "again")
        _, second = run(gh, tmp_path, checkpoint=ck, include_comments=True)
        _, fresh = run(gh, tmp_path, "fresh.jsonl", include_comments=True)
    assert second == fresh
    rec = parse_feed(second.decode())[0]
    assert rec.title == "Odd \ufffd title" and "comment \ufffd" in rec.body
    assert rec.links == [f"{WEB}/pull/2"]


def test_a_link_to_another_origin_is_not_followed(tmp_path: Path) -> None:
    """A hostile or misconfigured API's `Link: rel="next"` must not get the token."""
    from cce_knowledge.core.errors import ExtractError

    t = make_large_tracker(issues=150, prs=0, comments=0, seed=1)
    with FakeGitHub(t) as gh, FakeGitHub(t) as other:
        gh.link_base = other.url  # next/last links name the other server
        client = GitHubClient(gh.url, "tok-123", repo=REPO, retries=0)
        with pytest.raises(ExtractError, match="another origin") as err:
            run(gh, tmp_path, client=client)
        assert other.count() == 0 and "tok-123" not in str(err.value)


@pytest.mark.slow
def test_the_scale_target_fits_in_400_requests(tmp_path: Path) -> None:
    """Issue 17's target: 5,000 issues, 2,500 PRs and 20,000 comments in <= 400
    requests; a night of 50 edited items and 200 new comments in a handful."""
    t = make_large_tracker(issues=5000, prs=2500, comments=20000, seed=42)
    ck = str(tmp_path / "ck.json")
    with FakeGitHub(t, budget=1000) as gh:  # a GITHUB_TOKEN's hour
        full, _ = run(gh, tmp_path, checkpoint=ck, include_comments=True)
        assert gh.count() == 75 + 200 <= 400 and gh.refused == 0
        for n in range(1, 7501, 150):
            t.touch(n, title=f"{t.items[n].title} (edited)")
        for k, n in enumerate(range(7, 7501, 37)[:200]):
            t.comment(n, "nightly", f"Nightly comment {k}.")
        gh.reset_counts()
        inc, _ = run(gh, tmp_path, checkpoint=ck, include_comments=True)
        nightly = gh.count()
    assert full.records == 7500 and inc.mode == "incremental"
    assert nightly <= 8  # 250 changed items: 3 list pages; 200 comments: 2-3 pages


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
_ITEM_KEYS = [
    "title",
    "body",
    "state",
    "state_reason",
    "html_url",
    "updated_at",
    "labels",
    "milestone",
    "comments",
    "pull_request",
]


@given(st.dictionaries(st.sampled_from(_ITEM_KEYS), _json), st.integers(1, 10**6))
@example({"labels": True}, 1)  # a non-list `labels` once raised TypeError
@example({"labels": "bug", "milestone": []}, 2)
def test_any_issue_json_maps_to_a_record_or_is_skipped(fields: dict, number: int) -> None:
    """Hostile API rows: whatever the field types, slimming and mapping never crash,
    and the record is one the contract accepts."""
    from cce_knowledge.extract.feed import feed_bytes
    from cce_knowledge.extract.github import Mapper, slim_item
    from cce_knowledge.extract.output import self_check

    item = slim_item({**fields, "number": number})
    rec = Mapper(GitHubOptions(repo=REPO)).record(item, [], [])
    self_check(feed_bytes([rec]), 1)


@given(st.dictionaries(st.sampled_from(["id", "issue_url", "user", "created_at", "body"]), _json))
def test_any_comment_json_is_kept_or_dropped(fields: dict) -> None:
    from cce_knowledge.extract.github import slim_comment

    c = slim_comment(fields)
    assert c is None or (isinstance(c["id"], int) and isinstance(c["issue"], int))
