"""Incremental GitHub extraction: checkpoint file + resumable partial log.

The checkpoint (`cce.extract-checkpoint/v1`, JSON) records the options it was made
with, the high-water `updated_at` of the last completed run, the SHA-256 of the feed
that run wrote, and — while a run is in flight — the next page to fetch. Fetched
records are appended page by page to `<checkpoint>.partial`, so an interrupted run
resumes where it stopped instead of refetching everything (appending keeps the cost
linear; rewriting a growing checkpoint per page would be quadratic).

Completed run: feed written atomically first, then the checkpoint; a crash between
the two leaves a checkpoint whose `feed_sha256` no longer matches, which the next
run detects and refuses (rerun with `--full`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cce_knowledge.contract.record import KnowledgeRecord
from cce_knowledge.core.atomic import atomic_write, file_lock
from cce_knowledge.core.errors import ExtractError, UsageError
from cce_knowledge.extract.feed import feed_bytes, record_dict, record_from_dict
from cce_knowledge.extract.github import Fetcher, GitHubOptions, PageResult, Progress, merge
from cce_knowledge.extract.output import write_feed

SCHEMA = "cce.extract-checkpoint/v1"
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?")


@dataclass(slots=True)
class RunStats:
    mode: str  # full | incremental | resumed
    since: str | None
    pages: int
    requests: int
    upserts: int
    removals: int
    records: int
    waited: float


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _load_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ExtractError(f"cannot read checkpoint {path}: {e}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ExtractError(f"{path} is not a {SCHEMA} checkpoint")
    return data


def _read_partial(path: Path, length: int) -> list[PageResult]:
    """The completed pages of an interrupted run (bytes past `length` were never committed)."""
    try:
        with open(path, "rb") as f:
            data = f.read(length)
    except FileNotFoundError:
        raise ExtractError(
            f"checkpoint partial log {path} is missing — rerun with --full"
        ) from None
    if len(data) != length:
        raise ExtractError(f"checkpoint partial log {path} is truncated — rerun with --full")
    pages = []
    for n, line in enumerate(data.decode("utf-8").split("\n")[:-1], 1):
        try:
            obj = json.loads(line)
            pages.append(
                PageResult([record_from_dict(d) for d in obj["u"]], list(obj["d"]), obj.get("m"))
            )
        except (ValueError, KeyError, TypeError) as e:
            raise ExtractError(f"{path}: line {n}: corrupt partial log entry: {e}") from None
    return pages


def _page_line(p: PageResult) -> bytes:
    obj = {"u": [record_dict(r) for r in p.upserts], "d": p.removals, "m": p.max_updated}
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def _relative(url: str, base: str) -> str:
    return url[len(base) :] if url.startswith(base + "/") else url


def _previous_feed(out: Path, expect_sha: str | None) -> list[KnowledgeRecord]:
    from cce_knowledge.contract.ndjson import parse_feed

    try:
        raw = out.read_bytes()
    except FileNotFoundError:
        raise UsageError(
            f"an incremental run merges into the previous feed, but {out} does not exist "
            "— run once without --since (or with --full) first"
        ) from None
    if expect_sha is not None and sha256(raw) != expect_sha:
        raise ExtractError(
            f"{out} changed since the checkpoint was written (sha256 differs) — "
            "rerun with --full to rebuild it"
        )
    try:
        return parse_feed(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ExtractError(f"previous feed {out} is not UTF-8: {e}") from None
    except ExtractError:
        raise
    except Exception as e:
        raise ExtractError(f"previous feed {out}: {e}") from None


@contextmanager
def _exclusive(checkpoint: str | None) -> Iterator[None]:
    """One run per checkpoint: a second concurrent run would interleave the partial log."""
    if checkpoint is None:
        yield
        return
    busy = f"another extraction is using checkpoint {checkpoint} — wait for it to finish"
    with file_lock(f"{checkpoint}.lock", busy=busy, timeout=0, error=ExtractError):
        yield


def run_github(
    fetcher: Fetcher,
    *,
    out: str | None,
    manifest: str | None = None,
    checkpoint: str | None = None,
    since: str | None = None,
    full: bool = False,
    progress: Progress | None = None,
) -> RunStats:
    """Extract, merge, write. Nothing is written to `out`/`manifest` unless it all succeeds."""
    with _exclusive(checkpoint):
        return _run(
            fetcher,
            out=out,
            manifest=manifest,
            checkpoint=checkpoint,
            since=since,
            full=full,
            progress=progress,
        )


def _run(
    fetcher: Fetcher,
    *,
    out: str | None,
    manifest: str | None = None,
    checkpoint: str | None = None,
    since: str | None = None,
    full: bool = False,
    progress: Progress | None = None,
) -> RunStats:
    opts: GitHubOptions = fetcher.opts
    client = fetcher.client
    say = progress or (lambda _m: None)
    if since is not None and not _ISO.fullmatch(since):
        raise UsageError(
            f"--since must be an ISO-8601 timestamp like 2026-02-01T09:00:00Z, got {since!r}"
        )
    if (since or checkpoint) and out is None:
        raise UsageError("incremental extraction (--since / --checkpoint) needs --out FILE")
    ck_path = Path(checkpoint) if checkpoint else None
    part_path = Path(f"{checkpoint}.partial") if checkpoint else None
    ck: dict[str, Any] | None = None
    if ck_path is not None and ck_path.exists() and not full:
        ck = _load_json(ck_path)
        if ck.get("options") != opts.fingerprint():
            raise ExtractError(
                f"checkpoint {ck_path} was written for different options "
                f"({json.dumps(ck.get('options'), sort_keys=True)}) — rerun with --full or use "
                "another --checkpoint file"
            )

    done: list[PageResult] = []
    inflight = ck.get("run") if ck else None
    if inflight and since is None:
        mode = "resumed"
        since = inflight.get("since")
        url: str | None = inflight.get("next_url")
        pages_done = int(inflight.get("pages", 0))
        partial_len = int(inflight.get("partial_bytes", 0))
        assert part_path is not None
        done = _read_partial(part_path, partial_len)
        say(
            f"resuming an interrupted run at page {pages_done + 1} "
            f"({sum(len(p.upserts) for p in done)} items already fetched)"
        )
    else:
        if since is None and ck and not full:
            since = ck.get("high_water")
        mode = "incremental" if since else "full"
        url = fetcher.first_url(since)
        pages_done = 0
        partial_len = 0
    previous: list[KnowledgeRecord] = []
    if since:
        assert out is not None
        previous = _previous_feed(Path(out), ck.get("feed_sha256") if ck else None)

    base_high = ck.get("high_water") if ck and not full else None

    def save_ck(run: dict[str, Any] | None, high: str | None, feed_sha: str | None) -> None:
        if ck_path is None:
            return
        doc = {
            "schema": SCHEMA,
            "adapter": "github",
            "options": opts.fingerprint(),
            "high_water": high,
            "feed_sha256": feed_sha,
            "run": run,
        }
        atomic_write(ck_path, (json.dumps(doc, indent=2) + "\n").encode("utf-8"))

    prev_sha = ck.get("feed_sha256") if ck and not full else None
    if part_path is not None:
        if mode != "resumed":
            atomic_write(part_path, b"")
        else:
            os.truncate(part_path, partial_len)
        save_ck(
            {
                "since": since,
                "next_url": url and _relative(url, client.base_url),
                "pages": pages_done,
                "partial_bytes": partial_len,
            },
            base_high,
            prev_sha,
        )

    for result, nxt in _pages(fetcher, url):
        done.append(result)
        pages_done += 1
        if part_path is not None:
            line = _page_line(result)
            with open(part_path, "ab") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
            partial_len += len(line)
            save_ck(
                {
                    "since": since,
                    "next_url": nxt and _relative(nxt, client.base_url),
                    "pages": pages_done,
                    "partial_bytes": partial_len,
                },
                base_high,
                prev_sha,
            )
        say(
            f"page {pages_done}: {len(result.upserts)} records, {len(result.removals)} removed "
            f"({client.requests} requests)"
        )

    records = merge(previous, done)
    data = feed_bytes(records)
    write_feed(data, records, out=out, manifest=manifest)
    stamps = [s for s in [base_high, *(p.max_updated for p in done)] if s]
    save_ck(None, max(stamps) if stamps else None, sha256(data))
    if part_path is not None:
        part_path.unlink(missing_ok=True)
    return RunStats(
        mode,
        since,
        pages_done,
        client.requests,
        sum(len(p.upserts) for p in done),
        sum(len(p.removals) for p in done),
        len(records),
        client.waited,
    )


def _pages(fetcher: Fetcher, url: str | None) -> Iterator[tuple[PageResult, str | None]]:
    while url:
        result, nxt = fetcher.page(fetcher.client.url(url))
        yield result, nxt
        url = nxt
