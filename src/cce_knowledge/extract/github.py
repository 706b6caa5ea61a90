"""GitHub issues and pull requests → `cce.knowledge/v1` records.

The default path reads by pages, so requests grow with pages, not with issues:

- the issues list (`GET /repos/{o}/{r}/issues?state=all`), which returns pull requests
  too (they carry a `pull_request` key) with their bodies;
- with comments, the repository-wide `GET /repos/{o}/{r}/issues/comments`, joined to
  their issue by `issue_url`;
- `links` derived locally: a PR whose body mentions an issue of this repository links
  that issue to the PR (see `github_refs.py`).

The per-issue timeline (`cross-referenced` events, which also see references made in
PR comments and other repositories) is opt-in. Records are sorted by issue number, so
the same tracker state always yields the same feed bytes. Incremental runs and the
mirror they keep are in `github_mirror.py` and `checkpoint.py`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from cce_knowledge.contract.record import KnowledgeRecord
from cce_knowledge.core.errors import ExtractError, RateLimitStop, UsageError
from cce_knowledge.core.hidden_text import Removed, sanitize
from cce_knowledge.extract.feed import normalise_newlines, sanitize_record
from cce_knowledge.extract.httpclient import GitHubClient, PageGuard

SOURCE_ISSUES = "github-issues"
SOURCE_PULLS = "github-pulls"
SCRUBBED = "[SCRUBBED]"
_REPO = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
_STATES = ("open", "closed", "all")
_ISSUE_URL = re.compile(r"/issues/(\d+)$")
T = TypeVar("T")

#: `--authors`: whose items and comments a record may carry (GitHub's
#: `author_association`). `all` is the behaviour before lockdown.
AUTHOR_MODES = ("collaborators", "contributors", "all")
_TRUSTED: dict[str, frozenset[str]] = {
    "collaborators": frozenset({"OWNER", "MEMBER", "COLLABORATOR"}),
    "contributors": frozenset({"OWNER", "MEMBER", "COLLABORATOR", "CONTRIBUTOR"}),
}


def author_trusted(mode: str, association: str | None) -> bool:
    """Whether `--authors mode` keeps text by an author of this association (a missing
    association is a stranger's: `NONE`)."""
    trusted = _TRUSTED.get(mode)
    return trusted is None or (association or "NONE") in trusted


def default_authors(private: bool | None) -> str:
    """`--authors` when none is given: strangers' text stays out of a public corpus."""
    return "collaborators" if private is False else "all"


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
    timeline: bool = False
    scrub: list[str] = field(default_factory=list)
    concurrency: int = 4  # independent pages in flight
    item_concurrency: int = 1  # per-issue timeline requests in flight
    #: `--authors`; None: decided by the repository's visibility (`resolve_authors`)
    authors: str | None = None

    def __post_init__(self) -> None:
        check_repo(self.repo)
        if self.authors is not None and self.authors not in AUTHOR_MODES:
            raise UsageError(
                f"--authors must be one of {', '.join(AUTHOR_MODES)}, got {self.authors!r}"
            )
        if self.state not in _STATES:
            raise UsageError(f"--state must be one of {', '.join(_STATES)}, got {self.state!r}")
        if self.concurrency < 1 or self.item_concurrency < 1:
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
            "authors": self.authors or "all",
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


def _label_names(item: dict[str, Any]) -> list[str]:
    """The names of an item's labels, in order; anything not shaped like one is skipped
    (the API's JSON is untrusted: `labels` may be missing, null or not a list)."""
    labels = item.get("labels")
    return [
        lab["name"]
        for lab in (labels if isinstance(labels, list) else [])
        if isinstance(lab, dict) and isinstance(lab.get("name"), str)
    ]


def slim_item(item: dict[str, Any]) -> dict[str, Any]:
    """The fields of an issues-list item that records are made from (same shapes)."""
    milestone = item.get("milestone")
    d: dict[str, Any] = {
        "number": item["number"],
        "title": _s(item.get("title")),
        "body": _s(item.get("body")),
        "state": _s(item.get("state")),
        "state_reason": _s(item.get("state_reason")),
        "html_url": _s(item.get("html_url")),
        "updated_at": _s(item.get("updated_at")),
        "labels": [{"name": name} for name in _label_names(item)],
        "milestone": {"title": _s(milestone.get("title"))} if isinstance(milestone, dict) else None,
        "comments": item.get("comments") if isinstance(item.get("comments"), int) else None,
        "author_association": _s(item.get("author_association")),
    }
    if "pull_request" in item:
        d["pull_request"] = {}
    return d


def slim_comment(c: Any) -> dict[str, Any] | None:
    """An issue comment as kept: id, the issue number (from `issue_url`), author, times,
    body. None for a row that is not a comment of a numbered issue."""
    if not isinstance(c, dict) or not isinstance(c.get("id"), int):
        return None
    m = _ISSUE_URL.search(_s(c.get("issue_url")) or "")
    if m is None:
        return None
    user = c.get("user")
    return {
        "id": c["id"],
        "issue": int(m.group(1)),
        "login": _s(user.get("login")) if isinstance(user, dict) else None,
        "created_at": _s(c.get("created_at")),
        "updated_at": _s(c.get("updated_at")),
        "body": _s(c.get("body")),
        "author_association": _s(c.get("author_association")),
    }


def comment_order(c: dict[str, Any]) -> tuple[str, int]:
    """Oldest first, as the per-issue comments endpoint lists them."""
    return (c.get("created_at") or "", c["id"])


@dataclass(slots=True)
class TrustCounts:
    """What lockdown and hidden-text removal left out of the records of one build."""

    items: int = 0  # items by authors outside --authors
    comments: int = 0  # comments by authors outside --authors
    hidden: dict[str, Removed] = field(default_factory=dict)  # record id → removed
    #: ids of the items left out by author, in number order (the manifest's `left_out`)
    left_out: list[str] = field(default_factory=list)


class Mapper:
    """Turns one (slim) issues-list item + comments + links into a record, or says it is
    curated out."""

    def __init__(self, opts: GitHubOptions) -> None:
        self.opts = opts
        self._scrub = compile_scrub(opts.scrub)
        self.trust = TrustCounts()

    @property
    def authors(self) -> str:
        return self.opts.authors or "all"

    def excluded_author(self, row: dict[str, Any]) -> bool:
        return not author_trusted(self.authors, row.get("author_association"))

    def scrub(self, text: str) -> str:
        for pat in self._scrub:
            text = pat.sub(SCRUBBED, text)
        return text

    def dropped(self, item: dict[str, Any]) -> bool:
        """Curation: rejected intent (`not_planned`) and items outside `--state`."""
        if not self.opts.keep_not_planned and item.get("state_reason") == "not_planned":
            return True
        if self.opts.state != "all" and item.get("state") != self.opts.state:
            return True
        return self.excluded_author(item)

    def record(
        self, item: dict[str, Any], links: Iterable[str], comments: list[dict[str, Any]]
    ) -> KnowledgeRecord:
        is_pr = "pull_request" in item
        rid = record_id(self.opts.repo, int(item["number"]))
        removed = Removed()
        # Each text is sanitized as GitHub renders it, on its own (an unclosed comment
        # in one comment hides nothing of the next); the record again as a whole below.
        body = _defuse(sanitize(normalise_newlines(_s(item.get("body")) or ""), removed))
        kept = [c for c in comments if not self.excluded_author(c)]
        self.trust.comments += len(comments) - len(kept)
        if kept:
            ordered = sorted(kept, key=comment_order)
            body = body.rstrip("\n") + "\n\n## Comments\n"
            body += "".join(_comment(c, removed) for c in ordered)
        labels = list(dict.fromkeys(_label_names(item)))  # first-seen order
        milestone = item.get("milestone")
        rec, more = sanitize_record(self._record(item, rid, body, is_pr, labels, milestone, links))
        removed.add(more)
        if removed:
            self.trust.hidden[rid] = removed
        return rec

    def _record(
        self,
        item: dict[str, Any],
        rid: str,
        body: str,
        is_pr: bool,
        labels: list[str],
        milestone: Any,
        links: Iterable[str],
    ) -> KnowledgeRecord:
        return KnowledgeRecord(
            id=rid,
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


def _comment(c: dict[str, Any], removed: Removed) -> str:
    login = c.get("login")
    when = c.get("created_at") or ""
    head = f"@{login}" if login else "(unknown author)"
    text = _defuse(sanitize(normalise_newlines(c.get("body") or ""), removed)).rstrip("\n")
    return f"\n### {head} — {when}\n\n{text}\n"


#: A line of a body that would read as a comment's header (`### @login — time`): an
#: ATX heading whose text starts as the adapter's attribution does.
_FORGED_HEADER = re.compile(r"^( {0,3})(#{1,6}[ \t]+(?:@|\(unknown author\)))", re.MULTILINE)


def _defuse(text: str) -> str:
    """`text` with every line that could forge a comment header escaped (`\\###`, which
    Markdown shows as the text `###`): only the adapter writes headings of that shape,
    so a body cannot pass for a comment by someone else. Other text is untouched."""
    return _FORGED_HEADER.sub(r"\1\\\2", text) if "@" in text or "(unknown" in text else text


def linked_pulls(events: Iterable[Any], authors: str = "all", repo_api: str = "") -> list[str]:
    """html_urls of pull requests that cross-referenced the issue (with `authors`, only
    those whose author `--authors` keeps: a stranger's PR attaches nothing).

    `author_association` is relative to the PR's own repository: a stranger is `OWNER`
    of a fork or of a repository of their own. So a PR from any repository but
    `repo_api` (this repository's API path, `/repos/OWNER/NAME`, which the path of the
    PR's `repository_url` must end with; compared case-insensitively, as GitHub compares
    names) is judged as an outsider's."""
    here = repo_api.rstrip("/").casefold()
    out = []
    for ev in events:
        if not isinstance(ev, dict) or ev.get("event") != "cross-referenced":
            continue
        src = ev.get("source")
        issue = src.get("issue") if isinstance(src, dict) else None
        if isinstance(issue, dict) and "pull_request" in issue:
            there = urlsplit(_s(issue.get("repository_url")) or "").path.rstrip("/").casefold()
            same = bool(here) and (there == here or there.endswith(here))
            assoc = _s(issue.get("author_association")) if same else None
            if not author_trusted(authors, assoc):
                continue
            url = _s(issue.get("html_url"))
            if url:
                out.append(url)
    return out


@dataclass(slots=True)
class ItemsPage:
    """One issues-list page: slim items, and their timeline links when asked for."""

    items: list[dict[str, Any]]
    timeline: dict[int, list[str]]
    max_updated: str | None


@dataclass(slots=True)
class CommentsPage:
    comments: list[dict[str, Any]]
    max_updated: str | None


def _max_updated(rows: Iterable[dict[str, Any]]) -> str | None:
    stamps = [u for r in rows if isinstance(u := r.get("updated_at"), str)]
    return max(stamps) if stamps else None


#: Pages read concurrently from one `rel="last"` (100 items each): a real tracker's
#: larger lists go on one `next` at a time.
MAX_PLANNED_PAGES = 1000


def _with_page(url: str, page: int) -> str:
    parts = urlsplit(url)
    q = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "page"]
    return urlunsplit(parts._replace(query=urlencode([*q, ("page", str(page))])))


def _page_number(url: str | None) -> int | None:
    if not url:
        return None
    for k, v in parse_qsl(urlsplit(url).query):
        if k == "page" and v.isdigit():
            return int(v)
    return None


class Fetcher:
    """Reads list pages (independent pages concurrently) and per-issue sub-resources."""

    def __init__(self, client: GitHubClient, opts: GitHubOptions) -> None:
        self.client = client
        self.opts = opts
        self.mapper = Mapper(opts)
        owner, name = check_repo(opts.repo)
        self.base = f"/repos/{owner}/{name}"

    # -- first pages ----------------------------------------------------------------------

    def list_url(self, since: str | None) -> str:
        # Always every state: merged (closed) PRs carry the references that become
        # links, and an incremental run must see items that left `--state`.
        p = {"state": "all", "per_page": "100", "sort": "updated", "direction": "asc"}
        if since:
            p["since"] = since
        return self.client.url(f"{self.base}/issues?{urlencode(p)}")

    def comments_url(self, since: str | None) -> str:
        p = {"sort": "updated", "direction": "asc", "per_page": "100"}
        if since:
            p["since"] = since
        return self.client.url(f"{self.base}/issues/comments?{urlencode(p)}")

    # -- pages ----------------------------------------------------------------------------

    def items_page(self, data: Any) -> ItemsPage:
        if not isinstance(data, list):
            raise ExtractError(f"GitHub API returned a non-list issues page for {self.opts.repo}")
        items = [
            slim_item(it)
            for it in data
            if isinstance(it, dict) and isinstance(it.get("number"), int)
        ]
        timeline: dict[int, list[str]] = {}
        if self.opts.timeline:
            issues = [
                it["number"]
                for it in items
                if "pull_request" not in it and not self.mapper.dropped(it)
            ]
            for n, found in zip(issues, self.each(self.timeline_links, issues), strict=True):
                timeline[n] = found
        return ItemsPage(items, timeline, _max_updated(items))

    def comments_page(self, data: Any) -> CommentsPage:
        if not isinstance(data, list):
            raise ExtractError(
                f"GitHub API returned a non-list issue-comments page for {self.opts.repo}"
            )
        rows = [c for c in map(slim_comment, data) if c is not None]
        return CommentsPage(rows, _max_updated(rows))

    def walk(self, url: str, parse: Callable[[Any], T]) -> Iterator[tuple[T, str | None]]:
        """Every page from `url` on, in order, each with the URL of the page after it.

        Once the first page's `Link: rel="last"` names a numbered last page, the pages
        in between are independent and `concurrency` of them are fetched at a time;
        otherwise (cursor pagination) `rel="next"` is followed one page at a time."""
        seen = PageGuard(self.opts.repo)
        data, rels = self.client.get_page(url)
        nxt = seen.next(url, rels.get("next"))
        yield parse(data), nxt
        first, last = _page_number(nxt), _page_number(rels.get("last"))
        if nxt and first is not None and last is not None and self.opts.concurrency > 1:
            # `last` is the API's word: plan at most MAX_PLANNED_PAGES from it (never
            # 2e8 URLs up front); pages past them are followed by `next` below.
            last = min(last, first + MAX_PLANNED_PAGES - 1)
            urls = [_with_page(nxt, k) for k in range(first, last + 1)]
            for i, (data, rels) in enumerate(self.each(self.client.get_page, urls, pages=True)):
                nxt = urls[i + 1] if i + 1 < len(urls) else rels.get("next")
                nxt = seen.next(urls[i], nxt)
                if data == []:
                    nxt = None  # an empty page is the end, whatever `last` claimed
                yield parse(data), nxt
                if nxt is None:
                    return
        while nxt:  # sequential, or pages that appeared after `last` was read
            data, rels = self.client.get_page(nxt)
            nxt = None if data == [] else seen.next(nxt, rels.get("next"))
            yield parse(data), nxt

    def each(self, fn: Callable[[Any], T], args: list[Any], *, pages: bool = False) -> Iterator[T]:
        """fn over args in order, at most the configured number in flight; a failure
        stops new requests at once (a spent rate-limit budget must not be hammered)."""
        width = self.opts.concurrency if pages else self.opts.item_concurrency
        if width <= 1 or len(args) <= 1:
            yield from (fn(a) for a in args)
            return
        pool = ThreadPoolExecutor(width)
        try:
            window: list[Future[T]] = []
            todo = iter(args)
            for a in todo:
                window.append(pool.submit(fn, a))
                if len(window) >= width:
                    break
            while window:
                result = window.pop(0).result()
                for a in todo:
                    window.append(pool.submit(fn, a))
                    break
                yield result
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    # -- per-issue requests ---------------------------------------------------------------

    def timeline_links(self, n: int) -> list[str]:
        links: list[str] = []
        for page in self.client.paginate(
            f"{self.base}/issues/{n}/timeline", {"per_page": "100"}, missing_ok=True
        ):
            links.extend(linked_pulls(page, self.mapper.authors, self.base))
        return links

    def issue_comments(self, n: int) -> list[dict[str, Any]]:
        """One issue's comments (the `--since` path without a checkpoint's mirror)."""
        rows: list[dict[str, Any]] = []
        for page in self.client.paginate(
            f"{self.base}/issues/{n}/comments", {"per_page": "100"}, missing_ok=True
        ):
            rows.extend(c for c in map(slim_comment, page) if c is not None)
        return rows


Progress = Callable[[str], None]


def resolve_authors(client: GitHubClient, repo: str, say: Progress, warn: Progress) -> str:
    """`--authors` from the repository's visibility: one `GET /repos/{o}/{r}`.

    Public → `collaborators`; private or internal → `all`; unreadable → `all` with a
    warning (the token may lack metadata access; the run goes on as before lockdown)."""
    owner, name = check_repo(repo)
    why = ""
    data: Any = None
    try:
        data, _ = client.get_json(f"/repos/{owner}/{name}", missing_ok=True)
    except RateLimitStop:
        raise
    except ExtractError as e:
        if "(401 " in e.message:
            raise  # a rejected token fails every request: say so now, not later
        why = f" ({e.message})"
    private: bool | None = None
    if isinstance(data, dict):
        if isinstance(data.get("private"), bool):
            private = data["private"]
        elif data.get("visibility") in ("public", "private", "internal"):
            private = data["visibility"] != "public"
    mode = default_authors(private)
    if private is None:
        warn(
            f"cannot read whether {repo} is public{why or ' (not found or no access)'}: "
            "keeping every author's text (--authors all); pass --authors collaborators "
            "to keep strangers' issues and comments out"
        )
    else:
        kind = "private" if private else "public"
        say(f"{repo} is {kind}: --authors {mode} (pass --authors to choose)")
    return mode
