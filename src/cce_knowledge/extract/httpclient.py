"""A small GitHub REST client: auth, pagination, rate limits, bounded retries.

Rate limits are respected, not hit: every response's `X-RateLimit-Remaining` /
`X-RateLimit-Reset` is remembered, and once the budget is spent the next request
waits for the reset instead of drawing a 403. `Retry-After` (secondary limits, 429)
and an unexpected primary-limit 403 are waited out too, and 5xx / transport failures
back off exponentially — all against one shared budget (`max_wait` seconds). A
rate-limit wait that would exceed it raises `RateLimitStop` (the caller saves its
checkpoint and exits 3); other failures raise `ExtractError`. The token is sent only
in the Authorization header and scrubbed from every message we produce.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from cce_knowledge.core.errors import ExtractError, RateLimitStop
from cce_knowledge.core.untrusted import shown

DEFAULT_API = "https://api.github.com"
API_VERSION = "2022-11-28"
#: Rate-limit answers in a row for one request that ask for (next to) no wait: a
#: `Retry-After: 0` on every 429 never spends --max-wait, so it is counted here.
MAX_QUICK_RETRIES = 5
QUICK_WAIT_S = 1.0
_LINK = re.compile(r'<([^>]+)>\s*;\s*rel="?([a-z]+)"?')


def links(header: str | None) -> dict[str, str]:
    """The targets of an RFC 8288 Link header by relation (`next`, `last`, ...)."""
    out: dict[str, str] = {}
    for part in (header or "").split(","):
        m = _LINK.search(part)
        if m:
            out.setdefault(m.group(2), m.group(1))
    return out


def next_link(header: str | None) -> str | None:
    """The `rel="next"` target of an RFC 8288 Link header, if any."""
    return links(header).get("next")


class GitHubClient:
    """Synchronous and thread-safe (httpx.Client is); counts requests and waits."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        repo: str,
        max_wait: float = 300.0,
        retries: int = 4,
        backoff: float = 1.0,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "cce-knowledge-extract",
        }
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.base_url = base_url.rstrip("/")
        self.repo = repo
        self._token = token
        self._client = httpx.Client(headers=headers, timeout=timeout, follow_redirects=True)
        self._max_wait = max_wait
        self._retries = retries
        self._backoff = backoff
        self._sleep = sleep
        self._clock = clock
        self._lock = threading.Lock()
        self._budget_lock = threading.Lock()  # one thread waits for a reset; the rest queue
        self.requests = 0
        self.waited = 0.0
        self.rate_remaining: int | None = None  # from the newest X-RateLimit-* headers
        self.rate_limit: int | None = None
        self.rate_reset: float | None = None

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def url(self, path: str) -> str:
        """An API path, or an absolute URL (a `Link` target) that must stay on the API's
        origin: the token goes only where it was given for."""
        if not path.startswith(("http://", "https://")):
            return self.base_url + path
        if _origin(path) != _origin(self.base_url):
            raise ExtractError(
                self.scrub(
                    f"GitHub API for {self.repo} pointed at another origin "
                    f"({_origin(path)}, not {_origin(self.base_url)}) — refusing to follow it"
                )
            )
        return path

    def scrub(self, text: str) -> str:
        """Remove the token from text that might be shown to a user."""
        if self._token:
            text = text.replace(self._token, "***")
        return text

    # -- requests ---------------------------------------------------------------------

    def get(
        self, path: str, params: dict[str, str] | None = None, *, missing_ok: bool = False
    ) -> httpx.Response | None:
        """GET with retries; `None` for a 404/410 when `missing_ok` (a deleted sub-resource)."""
        url = self.url(path)
        attempt = 0
        quick = 0  # rate-limit answers asking for less than QUICK_WAIT_S, in a row
        while True:
            self._spend_budget()
            with self._lock:
                self.requests += 1
            try:
                resp = self._client.get(url, params=params)
            except httpx.TransportError as e:
                attempt += 1
                if attempt > self._retries:
                    raise ExtractError(
                        self.scrub(
                            f"cannot reach the GitHub API at {self.base_url} for {self.repo}: "
                            f"{type(e).__name__}: {e}"
                        )
                    ) from None
                self._wait(self._backoff * 2 ** (attempt - 1), "network error")
                continue
            self._note_budget(resp)
            status = resp.status_code
            if status < 300:
                return resp
            if status in (404, 410) and missing_ok:
                return None
            wait = self._rate_limit_wait(resp)
            if wait is not None:
                quick = quick + 1 if wait < QUICK_WAIT_S else 0
                if quick > MAX_QUICK_RETRIES:
                    raise RateLimitStop(
                        f"GitHub API for {self.repo}: rate limited ({status}) {quick} times "
                        f"in a row with a wait of {wait:g}s — stopping instead of retrying at once"
                    )
                self._wait(wait, f"rate limited ({status})", stop=True)
                with self._lock:
                    self.rate_remaining = None  # waited for it; the next response says
                continue
            if status >= 500:
                attempt += 1
                if attempt > self._retries:
                    raise ExtractError(
                        self.scrub(
                            f"GitHub API error for {self.repo}: {status} {_message(resp)} "
                            f"(gave up after {self._retries} retries)"
                        )
                    )
                self._wait(self._backoff * 2 ** (attempt - 1), f"server error {status}")
                continue
            raise self._error(resp)

    def get_json(
        self, path: str, params: dict[str, str] | None = None, *, missing_ok: bool = False
    ) -> tuple[Any, str | None]:
        """The decoded body and the next-page URL."""
        data, rels = self.get_page(path, params, missing_ok=missing_ok)
        return data, rels.get("next")

    def get_page(
        self, path: str, params: dict[str, str] | None = None, *, missing_ok: bool = False
    ) -> tuple[Any, dict[str, str]]:
        """The decoded body and the Link header's targets by relation."""
        resp = self.get(path, params, missing_ok=missing_ok)
        if resp is None:
            return None, {}
        try:
            data = resp.json()
        except (ValueError, RecursionError) as e:
            # RecursionError: arrays nested past the interpreter's limit (json recurses).
            why = "nested too deeply" if isinstance(e, RecursionError) else str(e)
            raise ExtractError(
                f"GitHub API returned invalid JSON for {self.repo} at "
                f"{shown(resp.request.url.path)}: {why}"
            ) from None
        return data, links(resp.headers.get("link"))

    def paginate(
        self, path: str, params: dict[str, str] | None = None, *, missing_ok: bool = False
    ) -> Iterator[list[Any]]:
        """Every page of a list endpoint, following `Link: rel="next"` (never to a page
        already read: a link back would loop forever)."""
        url: str | None = path
        first = True
        seen = PageGuard(self.repo)
        while url:
            data, nxt = self.get_json(url, params if first else None, missing_ok=missing_ok)
            first = False
            if data is None:
                return
            if not isinstance(data, list):
                raise ExtractError(
                    f"GitHub API returned a non-list page for {self.repo} at {shown(url)}"
                )
            yield data
            url = seen.next(url, nxt)

    # -- rate limits and errors -------------------------------------------------------

    def _note_budget(self, resp: httpx.Response) -> None:
        h = resp.headers
        try:
            remaining = int(h["x-ratelimit-remaining"])
            reset = float(h["x-ratelimit-reset"])
        except (KeyError, ValueError):
            return
        with self._lock:
            # Within one window a late answer must not give back budget that requests
            # sent since have spent; a new window (another reset time) starts afresh.
            if self.rate_remaining is not None and reset == self.rate_reset:
                remaining = min(remaining, self.rate_remaining)
            self.rate_remaining = remaining
            self.rate_reset = reset
            if h.get("x-ratelimit-limit", "").isdigit():
                self.rate_limit = int(h["x-ratelimit-limit"])

    def _spend_budget(self) -> None:
        """Before a request: once the known budget is spent, wait for the reset (or stop).

        The count goes down locally between responses, so concurrent requests do not
        all spend the last unit of the budget."""
        with self._budget_lock:
            with self._lock:
                remaining, reset = self.rate_remaining, self.rate_reset
                if remaining is not None and remaining > 0:
                    self.rate_remaining = remaining - 1
                    return
            if remaining is None or reset is None:
                return
            wait = reset - self._clock() + 1.0
            if wait > 0:
                self._wait(wait, "the rate-limit budget is spent", stop=True)
            with self._lock:
                self.rate_remaining = None  # unknown until the next response says

    def _rate_limit_wait(self, resp: httpx.Response) -> float | None:
        if resp.status_code not in (403, 429):
            return None
        h = resp.headers
        ra = h.get("retry-after")
        if ra is not None:
            try:
                return max(0.0, float(ra))
            except ValueError:
                return 60.0
        if h.get("x-ratelimit-remaining") == "0" and h.get("x-ratelimit-reset"):
            try:
                return max(0.0, float(h["x-ratelimit-reset"]) - self._clock()) + 1.0
            except ValueError:
                return 60.0
        if resp.status_code == 429:
            return 60.0
        if "secondary rate limit" in _message(resp).lower():
            return 60.0  # GitHub's advice when no header says how long
        return None

    def _wait(self, seconds: float, why: str, *, stop: bool = False) -> None:
        """Sleep `seconds` out of the --max-wait budget; beyond it, fail — or, for a rate
        limit (`stop`), raise `RateLimitStop` so the run ends cleanly and resumes later."""
        with self._lock:
            if self.waited + seconds > self._max_wait:
                text = (
                    f"GitHub API for {self.repo}: {why}; waiting {seconds:.0f}s more would "
                    f"exceed the --max-wait budget of {self._max_wait:.0f}s (already waited "
                    f"{self.waited:.0f}s)"
                )
                if stop:
                    raise RateLimitStop(text)
                raise ExtractError(text + " — rerun later or raise --max-wait")
            self.waited += seconds
        self._sleep(seconds)

    def _error(self, resp: httpx.Response) -> ExtractError:
        status, msg = resp.status_code, _message(resp)
        if status == 401:
            text = (
                f"GitHub rejected the token for {self.repo} (401 {msg}) — check "
                "GITHUB_TOKEN or the variable named by --token-env"
            )
        elif status == 404:
            text = (
                f"GitHub repository {self.repo} not found (404 {msg}) — it does not exist, "
                "or it is private and the token cannot read it"
            )
        elif status == 403:
            text = (
                f"GitHub refused access to {self.repo} (403 {msg}) — the token lacks "
                "permission to read issues"
            )
        else:
            text = f"GitHub API error for {self.repo}: {status} {msg} at {resp.request.url.path}"
        return ExtractError(self.scrub(text))


class PageGuard:
    """The pages one walk has read: a `next` link to one of them is a loop (an API
    answering the same page forever), refused with an ExtractError."""

    def __init__(self, repo: str) -> None:
        self.repo = repo
        self._seen: set[str] = set()

    def next(self, url: str, nxt: str | None) -> str | None:
        self._seen.add(url)
        if nxt is not None and nxt in self._seen:
            raise ExtractError(
                f"GitHub API for {self.repo} links back to a page already read "
                f"({shown(nxt[:300])}) — stopping instead of looping"
            )
        return nxt


def _origin(url: str) -> str:
    u = httpx.URL(url)
    return f"{u.scheme}://{u.host}:{u.port or (443 if u.scheme == 'https' else 80)}"


def _message(resp: httpx.Response) -> str:
    try:
        data = resp.json()
        msg = data.get("message") if isinstance(data, dict) else None
    except (ValueError, RecursionError):
        msg = None
    text = str(msg) if msg else (resp.reason_phrase or "")
    return text[:200]
