"""A real `http.server` on 127.0.0.1 serving an in-memory issue tracker.

Response shapes follow GitHub's REST docs: the issue object (a pull request is an
issue with a `pull_request` key), `Link` pagination with `rel="next"`/`"last"`, the
timeline's `cross-referenced` event with `source.issue`, issue comments (per issue and
repository-wide, with `since`/`sort`/`direction`), the `Bad credentials` 401,
`Not Found` 404, and the secondary-rate-limit 403 with `Retry-After`. A request
budget (`budget=N`) is enforced through the primary rate-limit headers: every answer
carries `X-RateLimit-Remaining`, and once it is spent the server answers 403 with
`X-RateLimit-Remaining: 0` until `refill()`. Every request is recorded so tests can
count them.

`GET /repos/{o}/{r}` answers the repository object with `private`/`visibility` from
`Tracker.visibility` (None: 404, as for a token that cannot read it). Every issue and
comment carries the `author_association` of its author's login (`Tracker.associations`,
default MEMBER).
"""

from __future__ import annotations

import bisect
import calendar
import json
import random
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

DOCS = "https://docs.github.com/rest"
SECONDARY = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try "
    "again. If you reach out to GitHub Support for help, please include the request ID."
)


@dataclass
class Item:
    number: int
    title: str
    body: str | None
    state: str = "open"
    state_reason: str | None = None
    is_pr: bool = False
    labels: list[str] = field(default_factory=list)
    milestone: str | None = None
    created_at: str = "2024-01-01T00:00:00Z"
    updated_at: str = "2024-01-01T00:00:00Z"
    user: str = "octocat"
    linked_prs: list[int] = field(default_factory=list)  # PRs that cross-reference it
    linked_issues: list[int] = field(default_factory=list)  # plain issues referencing it
    # (login, created_at, body) or (login, created_at, body, updated_at, id)
    comments: list[tuple[str, ...]] = field(default_factory=list)
    merged: bool = False
    #: pull requests in other repositories that cross-reference it:
    #: (owner/name, author login, author_association there, number)
    foreign_prs: list[tuple[str, str, str, int]] = field(default_factory=list)


@dataclass
class Tracker:
    owner: str = "acme"
    name: str = "widgets"
    items: dict[int, Item] = field(default_factory=dict)
    clock: int = 0  # seconds after 2025-01-01 handed out by `touch`
    visibility: str | None = "public"  # public | private | internal | None (404)
    #: login → author_association (OWNER, MEMBER, COLLABORATOR, CONTRIBUTOR,
    #: FIRST_TIME_CONTRIBUTOR, FIRST_TIMER, MANNEQUIN, NONE); others are MEMBER
    associations: dict[str, str] = field(default_factory=dict)

    def association(self, login: str) -> str:
        return self.associations.get(login, "MEMBER")

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def add(self, item: Item) -> Item:
        self.items[item.number] = item
        return item

    def touch(self, number: int, **changes: Any) -> None:
        """Edit an item the way GitHub does: any change bumps `updated_at`."""
        it = self.items[number]
        for k, v in changes.items():
            setattr(it, k, v)
        self.clock += 1
        it.updated_at = _stamp(1735689600 + self.clock)

    def comment(self, number: int, login: str, body: str) -> None:
        """A new comment, as GitHub adds one: it also bumps the issue's `updated_at`."""
        self.clock += 1
        at = _stamp(1735689600 + self.clock)
        it = self.items[number]
        cid = number * 100 + len(it.comments) + 1
        it.comments.append((login, at, body, at, str(cid)))
        it.updated_at = at

    def edit_comment(self, number: int, index: int, body: str) -> None:
        """Edit a comment: its `updated_at` moves, the issue's does not (as on GitHub)."""
        self.clock += 1
        it = self.items[number]
        login, created, _old, *_ = it.comments[index]
        cid = number * 100 + index + 1
        it.comments[index] = (login, created, body, _stamp(1735689600 + self.clock), str(cid))


def _updated(row: tuple[Item, int, tuple[str, ...]]) -> str:
    c = row[2]
    return c[3] if len(c) > 3 else c[1]


def _stamp(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


REFERENCE_FORMS = (
    "Fixes #{n}",
    "closes {repo}#{n}",
    "Resolves https://github.com/{repo}/issues/{n}",
    "Related to #{n}.",
)


def make_tracker(
    n: int,
    *,
    seed: int = 7,
    owner: str = "acme",
    name: str = "widgets",
    comments: bool = True,
    body_refs: bool = False,
) -> Tracker:
    """A deterministic tracker: ~20% PRs, labels, milestones, cross-references,
    some `not_planned`, some null bodies, CRLF bodies and non-ASCII text.

    The cross-references are timeline-only (as if made in PR comments) unless
    `body_refs`, which also writes each one into the referencing PR's body."""
    rng = random.Random(seed)
    t = Tracker(owner, name)
    labels = ["bug", "policy", "auth", "checkout", "docs", "perf", "ux"]
    milestones = [None, "Checkout", "Payments v2", "Q3 hardening"]
    base = 1704067200  # 2024-01-01
    for n_ in range(1, n + 1):
        is_pr = rng.random() < 0.2
        created = base + n_ * 600
        updated = created + rng.randrange(0, 30 * 86400)
        state = "closed" if rng.random() < 0.5 else "open"
        reason = None
        if state == "closed" and not is_pr:
            reason = "not_planned" if rng.random() < 0.15 else "completed"
        body: str | None
        r = rng.random()
        if r < 0.05:
            body = None
        elif r < 0.1:
            body = f"Windows line endings\r\n\r\n## Why\r\nBecause of rule {n_}.\r\n"
        else:
            body = (
                f"## Context\n\nItem {n_} — naïve café policy for checkout retries.\n\n"
                f"## Decision\n\nRetry at most {rng.randrange(1, 9)} times.\n"
            )
        it = Item(
            number=n_,
            title=f"{'Fix' if is_pr else 'Decide'} checkout rule {n_}",
            body=body,
            state=state,
            state_reason=reason,
            is_pr=is_pr,
            labels=sorted(rng.sample(labels, rng.randrange(0, 3)), key=lambda s: s),
            milestone=rng.choice(milestones),
            created_at=_stamp(created),
            updated_at=_stamp(updated),
            user=rng.choice(["octocat", "hubot", "mona"]),
            merged=is_pr and state == "closed",
        )
        if comments and rng.random() < 0.3:
            it.comments = [
                (rng.choice(["alice", "bob"]), _stamp(created + 60 * k), f"Comment {k} on {n_}.")
                for k in range(1, rng.randrange(2, 4))
            ]
        t.add(it)
    numbers = sorted(t.items)
    prs = [k for k in numbers if t.items[k].is_pr]
    issues = [k for k in numbers if not t.items[k].is_pr]
    for k in issues:
        if prs and rng.random() < 0.3:
            t.items[k].linked_prs = sorted(set(rng.sample(prs, min(len(prs), rng.randrange(1, 3)))))
        if len(issues) > 1 and rng.random() < 0.1:
            t.items[k].linked_issues = [rng.choice(issues)]
    if body_refs:
        write_refs_into_bodies(t)
    return t


def write_refs_into_bodies(t: Tracker) -> None:
    """Each PR that cross-references an issue says so in its body, in one of the forms."""
    for k in sorted(t.items):
        for j, p in enumerate(t.items[k].linked_prs):
            pr = t.items[p]
            form = REFERENCE_FORMS[(k + j) % len(REFERENCE_FORMS)]
            line = form.format(n=k, repo=t.full_name)
            pr.body = f"{pr.body.rstrip()}\n\n{line}\n" if pr.body else f"{line}\n"


def make_large_tracker(
    issues: int = 5000, prs: int = 2500, comments: int = 20000, *, seed: int = 42
) -> Tracker:
    """The scale target: `issues` issues and `prs` PRs (every PR's body references one
    or two earlier issues), and `comments` comments spread over them."""
    rng = random.Random(seed)
    t = Tracker()
    total = issues + prs
    every = total / prs if prs else total + 1
    pr_numbers = {round(every * (i + 1)) for i in range(prs)} if prs else set()
    base = 1704067200
    for n in range(1, total + 1):
        created = base + n * 300
        is_pr = n in pr_numbers
        state = "closed" if rng.random() < 0.6 else "open"
        t.add(
            Item(
                number=n,
                title=f"{'Fix' if is_pr else 'Decide'} {rng.choice(['retry', 'cache', 'auth', 'export'])} rule {n}",
                body=f"## Context\n\nItem {n}: why the {rng.choice(['queue', 'ledger', 'cart'])} "
                f"behaves this way.\n\n## Decision\n\nKeep at most {rng.randrange(1, 9)} retries.\n",
                state=state,
                state_reason=None if is_pr or state == "open" else "completed",
                is_pr=is_pr,
                labels=sorted(rng.sample(["bug", "policy", "auth", "perf"], rng.randrange(0, 3))),
                created_at=_stamp(created),
                updated_at=_stamp(created + rng.randrange(0, 90 * 86400)),
                merged=is_pr and state == "closed",
            )
        )
    issue_numbers = [n for n in sorted(t.items) if not t.items[n].is_pr]
    for p in sorted(pr_numbers):
        earlier = [
            k for k in issue_numbers[: max(1, p * issues // total)] if k < p
        ] or issue_numbers[:1]
        for k in sorted(set(rng.sample(earlier, min(len(earlier), rng.randrange(1, 3))))):
            t.items[k].linked_prs.append(p)
    write_refs_into_bodies(t)
    numbers = sorted(t.items)
    for c in range(comments):
        it = t.items[rng.choice(numbers)]
        at = _stamp(
            calendar.timegm(time.strptime(it.created_at, "%Y-%m-%dT%H:%M:%SZ"))
            + 60 * (c % 1000 + 1)
        )
        it.comments.append(
            (rng.choice(["alice", "bob", "carol"]), at, f"Comment {c} on {it.number}.")
        )
    for it in t.items.values():  # an issue's comments are in time order, as on GitHub
        it.comments.sort(key=lambda x: x[1])
    return t


class FakeGitHub:
    """`with FakeGitHub(tracker) as gh:` → `gh.url` is the API base URL."""

    def __init__(
        self,
        tracker: Tracker,
        *,
        token: str | None = None,
        rate_limit_on: set[int] | None = None,
        retry_after: str = "1",
        primary_limit_on: set[int] | None = None,
        fail_from: int | None = None,
        fail_status: int = 500,
        fail_on: set[int] | None = None,
        budget: int = 5000,
        budget_reset_in: int = 3600,
    ) -> None:
        self.tracker = tracker
        self.budget = budget  # requests allowed per window (X-RateLimit-Limit)
        self.remaining = budget
        self.budget_reset_in = budget_reset_in
        self.reset_at = int(time.time()) + budget_reset_in
        self.refused = 0  # requests answered 403 because the budget was spent
        self.link_base: str | None = None  # another origin for Link targets (hostile)
        # Hostile paging: "retry-after-0" (every request a 429 asking for no wait),
        # "next-self" (issue pages link `next` to themselves), "huge-last" (`last` says
        # page 200,000,000), "deep-json" (the second issues page is 100,000 `[`).
        self.hostile: str | None = None
        self._comment_cache: tuple[Any, tuple[list[str], list[Any]]] | None = None
        self.token = token
        self.rate_limit_on = set(rate_limit_on or ())  # 1-based request numbers → 403
        self.retry_after = retry_after
        self.primary_limit_on = set(primary_limit_on or ())
        self.fail_from = fail_from  # every request from this number on fails
        self.fail_status = fail_status
        self.fail_on = set(fail_on or ())  # 1-based request numbers that fail once
        self.requests: list[str] = []
        self.auth_headers: list[str | None] = []
        self.service_times: list[float] = []  # seconds spent answering each request
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_port}"

    def __enter__(self) -> FakeGitHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def count(self, fragment: str = "") -> int:
        with self._lock:
            return sum(1 for r in self.requests if fragment in r)

    def refill(self) -> None:
        """The rate-limit window resets: the full budget is available again."""
        with self._lock:
            self.remaining = self.budget
            self.reset_at = int(time.time()) + self.budget_reset_in

    def reset_counts(self) -> None:
        with self._lock:
            self.requests.clear()
            self.auth_headers.clear()
            self.service_times.clear()

    # -- shapes -------------------------------------------------------------------------

    def user(self, login: str) -> dict[str, Any]:
        return {
            "login": login,
            "id": sum(map(ord, login)),
            "node_id": f"U_{login}",
            "avatar_url": f"https://avatars.githubusercontent.com/{login}",
            "url": f"{self.url}/users/{login}",
            "html_url": f"https://github.com/{login}",
            "type": "User",
            "site_admin": False,
        }

    def issue(self, it: Item) -> dict[str, Any]:
        t = self.tracker
        api = f"{self.url}/repos/{t.full_name}"
        kind = "pull" if it.is_pr else "issues"
        d: dict[str, Any] = {
            "id": 1000000 + it.number,
            "node_id": f"I_kwDO{it.number:08d}",
            "url": f"{api}/issues/{it.number}",
            "repository_url": api,
            "labels_url": f"{api}/issues/{it.number}/labels{{/name}}",
            "comments_url": f"{api}/issues/{it.number}/comments",
            "events_url": f"{api}/issues/{it.number}/events",
            "html_url": f"https://github.com/{t.full_name}/{kind}/{it.number}",
            "number": it.number,
            "state": it.state,
            "state_reason": None if it.is_pr else it.state_reason,
            "title": it.title,
            "body": it.body,
            "user": self.user(it.user),
            "labels": [
                {
                    "id": sum(map(ord, n)),
                    "node_id": f"LA_{n}",
                    "url": f"{api}/labels/{n}",
                    "name": n,
                    "description": None,
                    "color": "f29513",
                    "default": False,
                }
                for n in it.labels
            ],
            "assignee": None,
            "assignees": [],
            "milestone": None
            if it.milestone is None
            else {
                "url": f"{api}/milestones/1",
                "html_url": f"https://github.com/{t.full_name}/milestone/1",
                "id": 1,
                "number": 1,
                "state": "open",
                "title": it.milestone,
                "description": None,
                "creator": self.user("octocat"),
                "open_issues": 1,
                "closed_issues": 0,
                "created_at": "2024-01-01T00:00:00Z",
                "updated_at": "2024-01-01T00:00:00Z",
                "closed_at": None,
                "due_on": None,
            },
            "locked": False,
            "active_lock_reason": None,
            "comments": len(it.comments),
            "closed_at": it.updated_at if it.state == "closed" else None,
            "created_at": it.created_at,
            "updated_at": it.updated_at,
            "closed_by": None,
            "author_association": t.association(it.user),
            "timeline_url": f"{api}/issues/{it.number}/timeline",
            "performed_via_github_app": None,
            "reactions": {
                "url": f"{api}/issues/{it.number}/reactions",
                "total_count": 0,
                "+1": 0,
                "-1": 0,
                "laugh": 0,
                "hooray": 0,
                "confused": 0,
                "heart": 0,
                "rocket": 0,
                "eyes": 0,
            },
        }
        if it.is_pr:
            d["draft"] = False
            d["pull_request"] = {
                "url": f"{api}/pulls/{it.number}",
                "html_url": f"https://github.com/{t.full_name}/pull/{it.number}",
                "diff_url": f"https://github.com/{t.full_name}/pull/{it.number}.diff",
                "patch_url": f"https://github.com/{t.full_name}/pull/{it.number}.patch",
                "merged_at": it.updated_at if it.merged else None,
            }
        return d

    def timeline(self, it: Item) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for lab in it.labels:
            events.append(
                {
                    "id": 1,
                    "node_id": "LE_1",
                    "url": f"{self.url}/events/1",
                    "actor": self.user(it.user),
                    "event": "labeled",
                    "commit_id": None,
                    "commit_url": None,
                    "created_at": it.created_at,
                    "label": {"name": lab, "color": "f29513"},
                    "performed_via_github_app": None,
                }
            )
        for src in [*it.linked_prs, *it.linked_issues]:
            other = self.tracker.items[src]
            events.append(
                {
                    "actor": self.user(other.user),
                    "created_at": other.created_at,
                    "updated_at": other.created_at,
                    "event": "cross-referenced",
                    "source": {"type": "issue", "issue": self.issue(other)},
                }
            )
        for full, login, assoc, number in it.foreign_prs:
            api = f"{self.url}/repos/{full}"
            html = f"https://github.com/{full}/pull/{number}"
            issue = {
                "id": 5000000 + number,
                "url": f"{api}/issues/{number}",
                "repository_url": api,
                "html_url": html,
                "number": number,
                "state": "open",
                "title": f"PR {number} in {full}",
                "user": self.user(login),
                "author_association": assoc,  # its author's association with *that* repo
                "pull_request": {"url": f"{api}/pulls/{number}", "html_url": html},
            }
            events.append(
                {
                    "actor": self.user(login),
                    "created_at": it.created_at,
                    "updated_at": it.created_at,
                    "event": "cross-referenced",
                    "source": {"type": "issue", "issue": issue},
                }
            )
        return events

    def comment_rows(self, it: Item) -> list[tuple[Item, int, tuple[str, ...]]]:
        return [(it, k, c) for k, c in enumerate(it.comments, 1)]

    def comment(self, row: tuple[Item, int, tuple[str, ...]]) -> dict[str, Any]:
        it, k, c = row
        login, at, body = c[0], c[1], c[2]
        updated = c[3] if len(c) > 3 else at
        cid = int(c[4]) if len(c) > 4 else it.number * 100 + k
        api = f"{self.url}/repos/{self.tracker.full_name}"
        return {
            "id": cid,
            "node_id": f"IC_{cid}",
            "url": f"{api}/issues/comments/{cid}",
            "html_url": f"https://github.com/{self.tracker.full_name}/issues/{it.number}#issuecomment-{cid}",
            "body": body,
            "user": self.user(login),
            "created_at": at,
            "updated_at": updated,
            "issue_url": f"{api}/issues/{it.number}",
            "author_association": self.tracker.association(login),
            "performed_via_github_app": None,
        }

    def comments(self, it: Item) -> list[dict[str, Any]]:
        return [self.comment(r) for r in self.comment_rows(it)]

    # -- HTTP ---------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Keep-alive with headers and body in one segment: without these, Nagle +
            # delayed ACK add ~40 ms to every request.
            disable_nagle_algorithm = True
            wbufsize = 1 << 16

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                t0 = time.perf_counter()
                with fake._lock:
                    fake.requests.append(self.path)
                    fake.auth_headers.append(self.headers.get("Authorization"))
                    n = len(fake.requests)
                    spent = fake.remaining <= 0
                    if spent:
                        fake.refused += 1
                    else:
                        fake.remaining -= 1
                    budget = {
                        "X-RateLimit-Limit": str(fake.budget),
                        "X-RateLimit-Remaining": str(max(fake.remaining, 0)),
                        "X-RateLimit-Reset": str(fake.reset_at),
                        "X-RateLimit-Used": str(fake.budget - max(fake.remaining, 0)),
                        "X-RateLimit-Resource": "core",
                    }
                if spent:
                    status, body, headers = fake.spent(budget)
                else:
                    status, body, headers = fake.route(self.path, self.headers, n, budget)
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(raw)))
                self.send_header("X-GitHub-Media-Type", "github.v3; format=json")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)
                with fake._lock:
                    fake.service_times.append(time.perf_counter() - t0)

        return Handler

    def spent(self, rl: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
        """GitHub's answer once the primary budget is spent."""
        return (
            403,
            {
                "message": "API rate limit exceeded for user ID 1. If you reach out to GitHub "
                "Support for help, please include the request ID.",
                "documentation_url": DOCS + "/overview/rate-limits-for-the-rest-api",
                "status": "403",
            },
            rl,
        )

    def route(
        self, path: str, headers: Any, n: int, rl: dict[str, str]
    ) -> tuple[int, Any, dict[str, str]]:
        if self.token is not None:
            auth = headers.get("Authorization") or ""
            if auth not in (f"Bearer {self.token}", f"token {self.token}"):
                return (
                    401,
                    {"message": "Bad credentials", "documentation_url": DOCS, "status": "401"},
                    {},
                )
        if self.hostile == "retry-after-0":
            return 429, {"message": SECONDARY, "status": "429"}, {**rl, "Retry-After": "0"}
        if n in self.rate_limit_on:
            return (
                403,
                {"message": SECONDARY, "documentation_url": DOCS + "/rate-limits", "status": "403"},
                {**rl, "Retry-After": self.retry_after},
            )
        if n in self.primary_limit_on:
            return (
                403,
                {
                    "message": "API rate limit exceeded for user ID 1.",
                    "documentation_url": DOCS,
                    "status": "403",
                },
                {
                    **rl,
                    "X-RateLimit-Remaining": "0",
                    "X-RateLimit-Reset": str(int(time.time()) + 1),
                },
            )
        if n in self.fail_on or (self.fail_from is not None and n >= self.fail_from):
            return self.fail_status, {"message": "Server Error"}, rl
        parts = urlsplit(path)
        q = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        seg = parts.path.strip("/").split("/")
        t = self.tracker
        if len(seg) < 3 or seg[0] != "repos" or f"{seg[1]}/{seg[2]}" != t.full_name:
            return 404, {"message": "Not Found", "documentation_url": DOCS, "status": "404"}, rl
        if seg[3:] == []:
            return self._repository(rl)
        if seg[3:] == ["issues"]:
            return self._issues(parts.path, q, rl)
        if seg[3:] == ["issues", "comments"]:
            return self._all_comments(parts.path, q, rl)
        if len(seg) == 6 and seg[3] == "issues" and seg[4].isdigit():
            it = t.items.get(int(seg[4]))
            if it is None:
                return 404, {"message": "Not Found", "documentation_url": DOCS}, rl
            if seg[5] == "timeline":
                return self._page(parts.path, q, self.timeline(it), rl)
            if seg[5] == "comments":
                return self._page(parts.path, q, self.comments(it), rl)
        return 404, {"message": "Not Found", "documentation_url": DOCS, "status": "404"}, rl

    def _repository(self, rl: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
        """`GET /repos/{o}/{r}` (the fields lockdown reads, and a few around them)."""
        t = self.tracker
        if t.visibility is None:
            return 404, {"message": "Not Found", "documentation_url": DOCS, "status": "404"}, rl
        return (
            200,
            {
                "id": 1296269,
                "node_id": "R_kgDOB",
                "name": t.name,
                "full_name": t.full_name,
                "owner": self.user(t.owner),
                "private": t.visibility != "public",
                "visibility": t.visibility,
                "html_url": f"https://github.com/{t.full_name}",
                "url": f"{self.url}/repos/{t.full_name}",
                "has_issues": True,
                "open_issues_count": sum(1 for i in t.items.values() if i.state == "open"),
                "default_branch": "main",
            },
            rl,
        )

    def _issues(
        self, path: str, q: dict[str, str], rl: dict[str, str]
    ) -> tuple[int, Any, dict[str, str]]:
        items = list(self.tracker.items.values())
        state = q.get("state", "open")
        if state != "all":
            items = [i for i in items if i.state == state]
        if "since" in q:
            items = [i for i in items if i.updated_at >= q["since"]]
        key = (
            (lambda i: (i.updated_at, i.number))
            if q.get("sort") == "updated"
            else (lambda i: (i.created_at, i.number))
        )
        items.sort(key=key, reverse=q.get("direction", "desc") == "desc")
        return self._page(path, q, items, rl, render=self.issue)

    def _all_comments(
        self, path: str, q: dict[str, str], rl: dict[str, str]
    ) -> tuple[int, Any, dict[str, str]]:
        """`GET /repos/{o}/{r}/issues/comments`: every issue's and PR's comments."""
        by_updated = q.get("sort") == "updated"
        keys, out = self._comments_sorted(by_updated)
        if "since" in q:
            if by_updated:
                out = out[bisect.bisect_left(keys, q["since"]) :]
            else:
                out = [r for r in out if _updated(r) >= q["since"]]
        if q.get("direction", "asc") == "desc":
            out.reverse()
        return self._page(path, q, out, rl, render=self.comment)

    def _comments_sorted(self, by_updated: bool) -> tuple[list[str], list[Any]]:
        """Every comment row with its sort key, sorted; cached until the tracker changes
        (re-sorting 20,000 comments per page would make the fake the bottleneck)."""
        t = self.tracker
        sig = (by_updated, t.clock, len(t.items), sum(len(it.comments) for it in t.items.values()))
        with self._lock:
            if self._comment_cache is not None and self._comment_cache[0] == sig:
                return self._comment_cache[1]
        rows = [r for it in t.items.values() for r in self.comment_rows(it)]
        keyed = [(_updated(r) if by_updated else r[2][1], r, r[0].number, r[1]) for r in rows]
        keyed.sort(key=lambda k: (k[0], k[2], k[3]))
        result = ([k[0] for k in keyed], [k[1] for k in keyed])
        with self._lock:
            self._comment_cache = (sig, result)
        return result

    def _page(
        self, path: str, q: dict[str, str], rows: list[Any], rl: dict[str, str], render: Any = None
    ) -> tuple[int, Any, dict[str, str]]:
        per = min(int(q.get("per_page", "30")), 100)
        page = int(q.get("page", "1"))
        last = max(1, -(-len(rows) // per))
        chunk = rows[(page - 1) * per : page * per]
        if render is not None:  # only the served page is rendered
            chunk = [render(r) for r in chunk]
        headers = dict(rl)
        links = []

        def link(p: int, rel: str) -> str:
            return f'<{self.link_base or self.url}{path}?{urlencode({**q, "page": str(p)})}>; rel="{rel}"'

        if page > 1:
            links += [link(page - 1, "prev"), link(1, "first")]
        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        if path.endswith("/issues") and self.hostile in ("next-self", "huge-last", "deep-json"):
            if self.hostile == "deep-json" and page == 2:
                return 200, b"[" * 100_000, headers
            links = [link(page, "next") if self.hostile == "next-self" else link(page + 1, "next")]
            if self.hostile == "huge-last":
                links.append(link(200_000_000, "last"))
        if links:
            headers["Link"] = ", ".join(links)
        return 200, chunk, headers
