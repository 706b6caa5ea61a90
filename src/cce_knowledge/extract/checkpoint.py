"""A GitHub extraction run: plan, fetch pages, write — resumable and incremental.

A run has two stages of pages: the issues list, then (with comments) the
repository-wide issue comments. The checkpoint (`cce.extract-checkpoint/v1`, JSON)
records the options it was made with, the high-water `updated_at` of items and of
comments from the last completed run, the SHA-256 of the feed that run wrote, and —
while a run is in flight — its stage and next page. Fetched pages are appended to
`<checkpoint>.partial`, so an interrupted or rate-limited run resumes where it stopped
instead of refetching everything (appending keeps the cost linear). The tracker as
last seen lives in `<checkpoint>.mirror` (see `github_mirror.py`).

Completed run: mirror, then feed (atomically), then the checkpoint. Replaying pages
into the mirror is idempotent, so a crash before the checkpoint is written only
refetches; a crash between feed and checkpoint leaves a `feed_sha256` that no longer
matches, which the next run refuses (rerun with `--full`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cce_knowledge.contract.manifest import LeftOut
from cce_knowledge.contract.ndjson import parse_feed
from cce_knowledge.contract.record import KnowledgeRecord
from cce_knowledge.core import progress
from cce_knowledge.core.atomic import atomic_write, file_lock
from cce_knowledge.core.errors import ExtractError, RateLimitStop, UsageError
from cce_knowledge.core.hidden_text import Removed
from cce_knowledge.extract.feed import feed_bytes
from cce_knowledge.extract.github import (
    CommentsPage,
    Fetcher,
    GitHubOptions,
    ItemsPage,
    Progress,
    resolve_authors,
)
from cce_knowledge.extract.github_mirror import Mirror, merge_into_feed
from cce_knowledge.extract.output import write_feed

SCHEMA = "cce.extract-checkpoint/v1"
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?")
ITEMS, COMMENTS = "items", "comments"


@dataclass(slots=True)
class RunStats:
    mode: str  # full | incremental | resumed
    since: str | None
    pages: int
    requests: int
    upserts: int  # items fetched and kept
    removals: int  # items fetched and curated out
    comments: int
    records: int
    waited: float
    rate_remaining: int | None
    authors: str = "all"  # the --authors mode the records were built with
    left_items: int = 0  # items by authors outside --authors
    left_comments: int = 0  # comments by authors outside --authors
    hidden: dict[str, Removed] = field(default_factory=dict)  # record id → removed


@dataclass(slots=True)
class InFlight:
    """Where an unfinished run stands: enough to carry on from its next page."""

    since: str | None
    comments_since: str | None
    stage: str  # ITEMS | COMMENTS
    next_url: str | None  # relative to the API base
    pages: int
    partial_bytes: int


@dataclass(slots=True)
class Checkpoint:
    options: dict[str, Any]
    high_water: str | None = None
    comments_high_water: str | None = None
    feed_sha256: str | None = None
    run: InFlight | None = None

    def to_bytes(self) -> bytes:
        doc = {
            "schema": SCHEMA,
            "adapter": "github",
            "layout": "pages",
            "options": self.options,
            "high_water": self.high_water,
            "comments_high_water": self.comments_high_water,
            "feed_sha256": self.feed_sha256,
            "run": asdict(self.run) if self.run else None,
        }
        return (json.dumps(doc, indent=2) + "\n").encode("utf-8")

    @classmethod
    def load(cls, path: Path) -> Checkpoint | None:
        """The checkpoint, or None for one made before runs kept a mirror."""
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ExtractError(f"cannot read checkpoint {path}: {e}") from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise ExtractError(f"{path} is not a {SCHEMA} checkpoint")
        if doc.get("layout") != "pages":
            return None
        try:
            run = doc.get("run")
            return cls(
                options=doc["options"],
                high_water=doc.get("high_water"),
                comments_high_water=doc.get("comments_high_water"),
                feed_sha256=doc.get("feed_sha256"),
                run=InFlight(**run) if run else None,
            )
        except (KeyError, TypeError) as e:
            raise ExtractError(f"{path}: corrupt checkpoint ({e!r}) — rerun with --full") from None


@dataclass(slots=True)
class Paths:
    out: str | None
    manifest: str | None
    checkpoint: Path | None

    @property
    def partial(self) -> Path | None:
        return Path(f"{self.checkpoint}.partial") if self.checkpoint else None

    @property
    def mirror(self) -> Path | None:
        return Path(f"{self.checkpoint}.mirror") if self.checkpoint else None


@dataclass(slots=True)
class Run:
    """One run's typed state, from plan to write."""

    fetcher: Fetcher
    paths: Paths
    say: Progress
    mode: str
    cursor: InFlight
    base: Checkpoint  # what the last completed run left (options always current)
    mirror: Mirror = field(default_factory=Mirror)
    previous: list[KnowledgeRecord] | None = None  # --since without a checkpoint
    items_high: list[str] = field(default_factory=list)
    comments_high: list[str] = field(default_factory=list)
    upserts: int = 0
    removals: int = 0
    comments: int = 0

    @property
    def opts(self) -> GitHubOptions:
        return self.fetcher.opts

    def checkpoint(self, run: InFlight | None, feed_sha: str | None = None) -> None:
        if self.paths.checkpoint is None:
            return
        ck = Checkpoint(
            self.opts.fingerprint(),
            _newest(self.base.high_water, *self.items_high)
            if run is None
            else self.base.high_water,
            _newest(self.base.comments_high_water, *self.comments_high)
            if run is None
            else self.base.comments_high_water,
            feed_sha if run is None else self.base.feed_sha256,
            run,
        )
        atomic_write(self.paths.checkpoint, ck.to_bytes())


def _newest(*stamps: str | None) -> str | None:
    real = [s for s in stamps if s]
    return max(real) if real else None


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- the run ------------------------------------------------------------------------------


def run_github(
    fetcher: Fetcher,
    *,
    out: str | None,
    manifest: str | None = None,
    checkpoint: str | None = None,
    since: str | None = None,
    full: bool = False,
    progress: Progress | None = None,
    warn: Progress | None = None,
) -> RunStats:
    """Extract, merge, write. Nothing is written to `out`/`manifest` unless it all succeeds.

    Without `--authors` (`opts.authors` None) the mode comes from the repository's
    visibility: one request (`resolve_authors`)."""
    _check_args(since, checkpoint, out)
    paths = Paths(out, manifest, Path(checkpoint) if checkpoint else None)
    say = progress or (lambda _m: None)
    with _exclusive(checkpoint):
        if fetcher.opts.authors is None:
            opts = fetcher.opts
            opts.authors = resolve_authors(fetcher.client, opts.repo, say, warn or say)
        run = _plan(fetcher, paths, since, full, say)
        try:
            _start_log(run)
            if run.cursor.stage == ITEMS:
                _fetch_items(run)
            if _pages_of_comments(run):
                _fetch_comments(run)
        except RateLimitStop as e:
            raise RateLimitStop(_stopped(e, run)) from None
        records = _write(run)
    c = fetcher.client
    trust = fetcher.mapper.trust
    return RunStats(
        run.mode,
        run.cursor.since,
        run.cursor.pages,
        c.requests,
        run.upserts,
        run.removals,
        run.comments,
        len(records),
        c.waited,
        c.rate_remaining,
        fetcher.mapper.authors,
        trust.items,
        trust.comments,
        trust.hidden,
    )


def _check_args(since: str | None, checkpoint: str | None, out: str | None) -> None:
    if since is not None and not _ISO.fullmatch(since):
        raise UsageError(
            f"--since must be an ISO-8601 timestamp like 2026-02-01T09:00:00Z, got {since!r}"
        )
    if (since or checkpoint) and out is None:
        raise UsageError("incremental extraction (--since / --checkpoint) needs --out FILE")


def _load_checkpoint(
    paths: Paths, opts: GitHubOptions, full: bool, say: Progress
) -> Checkpoint | None:
    ck_path = paths.checkpoint
    if ck_path is None or full or not ck_path.exists():
        return None
    ck = Checkpoint.load(ck_path)
    if ck is None:
        say(f"checkpoint {ck_path} predates paged runs: one full extraction rebuilds it")
        return None
    now = opts.fingerprint()
    was = dict(ck.options)
    was.setdefault("authors", "all")  # checkpoints from before lockdown kept everyone
    if was.get("authors") != now["authors"] and {**was, "authors": now["authors"]} == now:
        # The mirror holds what the old mode let through (and, before lockdown, no
        # author associations): only a full run rebuilds the records for the new one.
        say(
            f"checkpoint {ck_path} was built with --authors {was['authors']}, this run uses "
            f"--authors {now['authors']}: full refresh"
        )
        return None
    if was != now:
        raise ExtractError(
            f"checkpoint {ck_path} was written for different options "
            f"({json.dumps(ck.options, sort_keys=True)}) — rerun with --full or use "
            "another --checkpoint file"
        )
    return ck


def _plan(fetcher: Fetcher, paths: Paths, since: str | None, full: bool, say: Progress) -> Run:
    """Decide full / incremental / resumed, and load what the run builds on."""
    opts = fetcher.opts
    ck = _load_checkpoint(paths, opts, full, say)
    base = ck or Checkpoint(opts.fingerprint())
    if ck is not None and ck.run is not None and since is None:
        run = Run(fetcher, paths, say, "resumed", ck.run, base)
        if run.cursor.since is not None:  # an interrupted full run starts from nothing
            _load_base(run)
        _replay_partial(run)
        say(
            f"resuming an interrupted run at {run.cursor.stage} page {run.cursor.pages + 1} "
            f"({run.upserts + run.removals} items, {run.comments} comments already fetched)"
        )
        return run
    base.run = None
    items_since = since or base.high_water
    comments_since = since or base.comments_high_water
    mode = "incremental" if items_since else "full"
    if mode == "full":  # nothing to build on: a fresh mirror
        base = Checkpoint(opts.fingerprint())
        comments_since = None
    url = fetcher.list_url(items_since)
    cursor = InFlight(items_since, comments_since, ITEMS, _relative(url, fetcher), 0, 0)
    run = Run(fetcher, paths, say, mode, cursor, base)
    if mode == "incremental":
        _load_base(run)
    return run


def _load_base(run: Run) -> None:
    """The mirror (with a checkpoint) or the previous feed (`--since` alone)."""
    out = Path(run.paths.out) if run.paths.out else None
    if run.paths.mirror is not None:
        _check_feed_unchanged(out, run.base.feed_sha256)
        run.mirror = Mirror.load(run.paths.mirror)
    elif out is not None:
        run.previous = _previous_feed(out)


def _check_feed_unchanged(out: Path | None, expect_sha: str | None) -> None:
    if out is None or expect_sha is None or not out.exists():
        return  # a missing feed is rebuilt from the mirror
    if sha256(out.read_bytes()) != expect_sha:
        raise ExtractError(
            f"{out} changed since the checkpoint was written (sha256 differs) — "
            "rerun with --full to rebuild it"
        )


def _previous_feed(out: Path) -> list[KnowledgeRecord]:

    try:
        raw = out.read_bytes()
    except FileNotFoundError:
        raise UsageError(
            f"an incremental run merges into the previous feed, but {out} does not exist "
            "— run once without --since (or with --full) first"
        ) from None
    try:
        return parse_feed(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ExtractError(f"previous feed {out} is not UTF-8: {e}") from None
    except ExtractError:
        raise
    except Exception as e:
        raise ExtractError(f"previous feed {out}: {e}") from None


# -- the partial log ----------------------------------------------------------------------


def _page_line(page: ItemsPage | CommentsPage) -> bytes:
    if isinstance(page, ItemsPage):
        obj: dict[str, Any] = {
            "k": ITEMS,
            "rows": page.items,
            "t": {str(n): v for n, v in page.timeline.items()},
        }
    else:
        obj = {"k": COMMENTS, "rows": page.comments}
    obj["m"] = page.max_updated
    # ASCII escapes: a lone surrogate from the API (legal JSON) survives the round trip
    return (json.dumps(obj, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")


def _page_from_line(obj: Any) -> ItemsPage | CommentsPage:
    if obj["k"] == ITEMS:
        timeline = {int(n): list(v) for n, v in obj["t"].items()}
        return ItemsPage(list(obj["rows"]), timeline, obj["m"])
    if obj["k"] == COMMENTS:
        return CommentsPage(list(obj["rows"]), obj["m"])
    raise ValueError(f"unknown page kind {obj['k']!r}")


def _replay_partial(run: Run) -> None:
    """Apply the completed pages of the interrupted run (bytes past the recorded length
    were never committed)."""
    path, length = run.paths.partial, run.cursor.partial_bytes
    if path is None:
        return  # a run in flight is only recorded with a checkpoint
    try:
        with open(path, "rb") as f:
            data = f.read(length)
    except FileNotFoundError:
        raise ExtractError(
            f"checkpoint partial log {path} is missing — rerun with --full"
        ) from None
    if len(data) != length:
        raise ExtractError(f"checkpoint partial log {path} is truncated — rerun with --full")
    for n, line in enumerate(data.decode("utf-8").split("\n")[:-1], 1):
        try:
            page = _page_from_line(json.loads(line))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ExtractError(f"{path}: line {n}: corrupt partial log entry: {e}") from None
        _apply(run, page)


def _start_log(run: Run) -> None:
    part = run.paths.partial
    if part is None:
        return
    if run.mode == "resumed":
        os.truncate(part, run.cursor.partial_bytes)
    else:
        atomic_write(part, b"")
    run.checkpoint(run.cursor)


def _commit(run: Run, page: ItemsPage | CommentsPage, nxt: str | None) -> None:
    """Count a fetched page and, with a checkpoint, make it durable before going on."""
    _apply(run, page)
    cur = run.cursor
    cur.pages += 1
    cur.next_url = _relative(nxt, run.fetcher) if nxt else None
    part = run.paths.partial
    if part is not None:
        line = _page_line(page)
        with open(part, "ab") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        cur.partial_bytes += len(line)
        run.checkpoint(cur)


def _apply(run: Run, page: ItemsPage | CommentsPage) -> None:
    if isinstance(page, ItemsPage):
        run.mirror.add_items(page)
        dropped = sum(1 for it in page.items if run.fetcher.mapper.dropped(it))
        run.removals += dropped
        run.upserts += len(page.items) - dropped
        if page.max_updated:
            run.items_high.append(page.max_updated)
    else:
        run.mirror.add_comments(page)
        run.comments += len(page.comments)
        if page.max_updated:
            run.comments_high.append(page.max_updated)


# -- the stages ---------------------------------------------------------------------------


def _fetch_stage(run: Run, parse: Callable[[Any], ItemsPage | CommentsPage]) -> None:
    """Every page of the current stage from the cursor on, each committed in order."""
    f = run.fetcher
    if not run.cursor.next_url:
        return
    unit = "items" if run.cursor.stage == ITEMS else "comments"
    with progress.task("extract" if unit == "items" else "extract: comments", unit=unit) as task:
        for page, nxt in f.walk(f.client.url(run.cursor.next_url), parse):
            _commit(run, page, nxt)
            task.note(_budget_note(run))
            task.advance(len(page.items if isinstance(page, ItemsPage) else page.comments))


def _fetch_items(run: Run) -> None:
    f = run.fetcher
    _fetch_stage(run, f.items_page)
    run.cursor.stage = COMMENTS
    run.cursor.next_url = _relative(f.comments_url(run.cursor.comments_since), f)
    if _pages_of_comments(run):
        run.checkpoint(run.cursor)


def _pages_of_comments(run: Run) -> bool:
    """Comments come from the repository-wide pages, except for `--since` alone, which
    has no mirror holding the older comments of the items it refetches."""
    return run.opts.include_comments and run.previous is None


def _fetch_comments(run: Run) -> None:
    _fetch_stage(run, run.fetcher.comments_page)


def _comments_per_issue(run: Run) -> None:
    """`--since` without a checkpoint: each refetched commented item's own comments."""
    f = run.fetcher
    wanted = [
        n
        for n, it in sorted(run.mirror.items.items())
        if not f.mapper.dropped(it) and it.get("comments") != 0
    ]
    for rows in f.each(f.issue_comments, wanted):
        run.mirror.add_comments(CommentsPage(rows, None))
        run.comments += len(rows)


def _budget_note(run: Run) -> str:
    c = run.fetcher.client
    text = f"{run.cursor.pages} pages, {c.requests} requests"
    if c.rate_remaining is not None:
        text += f", {c.rate_remaining} of {c.rate_limit or '?'} left in the rate-limit window"
    return text


def _write(run: Run) -> list[KnowledgeRecord]:
    """Records from the mirror (or merged into the previous feed), then every file."""
    mapper = run.fetcher.mapper
    if run.previous is not None:
        if run.opts.include_comments:
            _comments_per_issue(run)
        records = merge_into_feed(run.previous, run.mirror, mapper)
    else:
        records = run.mirror.records(mapper)
    data = feed_bytes(records)
    if run.paths.mirror is not None:
        run.mirror.save(run.paths.mirror)
    left = LeftOut(mapper.authors, tuple(mapper.trust.left_out))
    write_feed(data, records, out=run.paths.out, manifest=run.paths.manifest, left_out=left)
    run.checkpoint(None, sha256(data))
    if run.paths.partial is not None:
        run.paths.partial.unlink(missing_ok=True)
    return records


def _stopped(e: RateLimitStop, run: Run) -> str:
    if run.paths.checkpoint is None:
        return (
            f"{e.message} — stopped; nothing was written. Use --checkpoint FILE so a run "
            "stopped by the rate limit resumes where it stopped"
        )
    return (
        f"{e.message} — stopped cleanly after {run.cursor.pages} pages; checkpoint "
        f"{run.paths.checkpoint} saved, the next run resumes with the {run.cursor.stage} "
        "page it had not fetched"
    )


def _relative(url: str, fetcher: Fetcher) -> str:
    base = fetcher.client.base_url
    return url[len(base) :] if url.startswith(base + "/") else url


@contextmanager
def _exclusive(checkpoint: str | None) -> Iterator[None]:
    """One run per checkpoint: a second concurrent run would interleave the partial log."""
    if checkpoint is None:
        yield
        return
    busy = f"another extraction is using checkpoint {checkpoint} — wait for it to finish"
    with file_lock(f"{checkpoint}.lock", busy=busy, timeout=0, error=ExtractError):
        yield
