"""GitHub issues and pull requests → `cce.knowledge/v1` records.

Source of truth is the paginated issues list (`GET /repos/{o}/{r}/issues`, which also
returns pull requests — they carry a `pull_request` key). For issues, the timeline's
`cross-referenced` events from pull requests become `links`. Records are sorted by
issue number, so the same tracker state always yields the same feed bytes.

Incremental runs (`since`) fetch only items updated at or after a timestamp and merge
them into the previous feed by id; a checkpoint file makes that automatic and lets an
interrupted run resume from the last completed page (see `checkpoint.py`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from cce_knowledge.contract.record import KnowledgeRecord
from cce_knowledge.core.errors import ExtractError, UsageError
from cce_knowledge.extract.feed import dedup, normalise_newlines
from cce_knowledge.extract.httpclient import GitHubClient

SOURCE_ISSUES = "github-issues"
SOURCE_PULLS = "github-pulls"
SCRUBBED = "[SCRUBBED]"
_REPO = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
_STATES = ("open", "closed", "all")


def check_repo(repo: str) -> tuple[str, str]:
    if not _REPO.match(repo) or repo.split("/")[1] in (".", ".."):
        raise UsageError(f"--repo must be OWNER/NAME, got {repo!r}")
    owner, name = repo.split("/")
    return owner, name


def compile_scrub(patterns: Iterable[str]) -> list[re.Pattern[str]]:
    out = []
    for p in patterns:
        try:
            out.append(re.compile(p))
        except re.error as e:
            raise UsageError(f"--scrub {p!r} is not a valid regular expression: {e}") from None
    return out


@dataclass(slots=True)
class GitHubOptions:
    repo: str
    state: str = "all"
    include_comments: bool = False
    keep_not_planned: bool = False
    timeline: bool = True
    scrub: list[str] = field(default_factory=list)
    concurrency: int = 4

    def __post_init__(self) -> None:
        check_repo(self.repo)
        if self.state not in _STATES:
            raise UsageError(f"--state must be one of {', '.join(_STATES)}, got {self.state!r}")
        if self.concurrency < 1:
            raise UsageError("--concurrency must be at least 1")
        compile_scrub(self.scrub)

    def fingerprint(self) -> dict[str, Any]:
        """Options that change the records; a checkpoint is only reused when they match."""
        return {
            "repo": self.repo,
            "state": self.state,
            "include_comments": self.include_comments,
            "keep_not_planned": self.keep_not_planned,
            "timeline": self.timeline,
            "scrub": list(self.scrub),
        }


def record_id(repo: str, number: int) -> str:
    return f"gh:{repo}#{number}"


def number_of(rec_id: str) -> int:
    """The issue number from a `gh:OWNER/NAME#N` id (the feed's sort key)."""
    try:
        return int(rec_id.rsplit("#", 1)[1])
    except (IndexError, ValueError):
        raise ExtractError(f"record id {rec_id!r} is not a gh:OWNER/NAME#N id") from None


def _s(v: Any) -> str | None:
    return v if isinstance(v, str) else None


class Mapper:
    """Turns one issues-list item (+ sub-resources) into a record, or None if curated out."""

    def __init__(self, opts: GitHubOptions) -> None:
        self.opts = opts
        self._scrub = compile_scrub(opts.scrub)

    def scrub(self, text: str) -> str:
        for pat in self._scrub:
            text = pat.sub(SCRUBBED, text)
        return text

    def dropped(self, item: dict[str, Any]) -> bool:
        """Curation: rejected intent (`not_planned`) and items outside `--state`."""
        if not self.opts.keep_not_planned and item.get("state_reason") == "not_planned":
            return True
        return self.opts.state != "all" and item.get("state") != self.opts.state

    def record(
        self, item: dict[str, Any], links: list[str], comments: list[dict[str, Any]]
    ) -> KnowledgeRecord:
        is_pr = "pull_request" in item
        body = normalise_newlines(_s(item.get("body")) or "")
        if comments:
            body = body.rstrip("\n") + "\n\n## Comments\n" + "".join(_comment(c) for c in comments)
        labels = dedup(
            lab["name"]
            for lab in item.get("labels") or []
            if isinstance(lab, dict) and isinstance(lab.get("name"), str)
        )
        milestone = item.get("milestone")
        return KnowledgeRecord(
            id=record_id(self.opts.repo, int(item["number"])),
            title=self.scrub(normalise_newlines(_s(item.get("title")) or "")),
            body=self.scrub(body),
            source=SOURCE_PULLS if is_pr else SOURCE_ISSUES,
            url=_s(item.get("html_url")),
            state=_s(item.get("state")),
            state_reason=_s(item.get("state_reason")),
            updated_at=_s(item.get("updated_at")),
            labels=labels,
            group=_s(milestone.get("title")) if isinstance(milestone, dict) else None,
            links=sorted(set(links)),
        )


def _comment(c: dict[str, Any]) -> str:
    user = c.get("user") or {}
    login = user.get("login") if isinstance(user, dict) else None
    when = _s(c.get("created_at")) or ""
    head = f"@{login}" if login else "(unknown author)"
    text = normalise_newlines(_s(c.get("body")) or "").rstrip("\n")
    return f"\n### {head} — {when}\n\n{text}\n"


def linked_pulls(events: Iterable[Any]) -> list[str]:
    """html_urls of pull requests that cross-referenced the issue."""
    out = []
    for ev in events:
        if not isinstance(ev, dict) or ev.get("event") != "cross-referenced":
            continue
        src = ev.get("source")
        issue = src.get("issue") if isinstance(src, dict) else None
        if isinstance(issue, dict) and "pull_request" in issue:
            url = _s(issue.get("html_url"))
            if url:
                out.append(url)
    return out


@dataclass(slots=True)
class PageResult:
    """What one issues-list page contributed: records to upsert, ids to remove."""

    upserts: list[KnowledgeRecord]
    removals: list[str]
    max_updated: str | None


class Fetcher:
    """Fetches pages and their sub-resources; per-item requests run concurrently."""

    def __init__(self, client: GitHubClient, opts: GitHubOptions) -> None:
        self.client = client
        self.opts = opts
        self.mapper = Mapper(opts)
        owner, name = check_repo(opts.repo)
        self.base = f"/repos/{owner}/{name}"

    def list_params(self, since: str | None) -> dict[str, str]:
        # An incremental run asks for every state: an issue that moved out of `--state`
        # (or became not_planned) must be seen so it can be removed from the feed.
        p = {
            "state": "all" if since else self.opts.state,
            "per_page": "100",
            "sort": "updated",
            "direction": "asc",
        }
        if since:
            p["since"] = since
        return p

    def first_url(self, since: str | None) -> str:
        req = httpx_url(self.client.url(self.base + "/issues"), self.list_params(since))
        return req

    def page(self, url: str) -> tuple[PageResult, str | None]:
        data, nxt = self.client.get_json(url)
        if not isinstance(data, list):
            raise ExtractError(f"GitHub API returned a non-list issues page for {self.opts.repo}")
        items = [it for it in data if isinstance(it, dict) and isinstance(it.get("number"), int)]
        keep = [it for it in items if not self.mapper.dropped(it)]
        removals = [
            record_id(self.opts.repo, it["number"]) for it in items if self.mapper.dropped(it)
        ]
        if self.opts.concurrency > 1 and len(keep) > 1:
            with ThreadPoolExecutor(self.opts.concurrency) as pool:
                upserts = list(pool.map(self._one, keep))
        else:
            upserts = [self._one(it) for it in keep]
        stamps = [u for it in items if (u := _s(it.get("updated_at")))]
        return PageResult(upserts, removals, max(stamps) if stamps else None), nxt

    def _one(self, item: dict[str, Any]) -> KnowledgeRecord:
        n = item["number"]
        links: list[str] = []
        if self.opts.timeline and "pull_request" not in item:
            for page in self.client.paginate(
                f"{self.base}/issues/{n}/timeline", {"per_page": "100"}, missing_ok=True
            ):
                links.extend(linked_pulls(page))
        comments: list[dict[str, Any]] = []
        if self.opts.include_comments and item.get("comments", 1) != 0:
            for page in self.client.paginate(
                f"{self.base}/issues/{n}/comments", {"per_page": "100"}, missing_ok=True
            ):
                comments.extend(c for c in page if isinstance(c, dict))
        return self.mapper.record(item, links, comments)


def httpx_url(url: str, params: dict[str, str]) -> str:
    import httpx

    return str(httpx.URL(url, params=params))


def merge(
    previous: Iterable[KnowledgeRecord], pages: Iterable[PageResult]
) -> list[KnowledgeRecord]:
    """Apply pages in order to the previous records (by id) and sort by number."""
    by_id = {r.id: r for r in previous}
    for p in pages:
        for rid in p.removals:
            by_id.pop(rid, None)
        for r in p.upserts:
            by_id[r.id] = r
    return sorted(by_id.values(), key=lambda r: number_of(r.id))


Progress = Callable[[str], None]
