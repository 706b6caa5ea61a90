"""The tracker as last seen: every item, comment and timeline link, so records can be
rebuilt from what changed.

An incremental run fetches only items and comments updated since the last run. A new
comment on an old issue, or a merged PR that mentions an issue it does not touch, must
still change that issue's record — so the records are a function of this mirror, and
the mirror is what a run updates. It is kept beside the checkpoint
(`FILE.mirror`, JSON, `cce.extract-github-mirror/v1`), written once per completed run.

Without a checkpoint, `--since` has no mirror and merges into the previous feed
instead (`merge_into_feed`): records of fetched items are rebuilt, every issue's links
are recomputed from the fetched PRs, and comments come from per-issue requests.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cce_knowledge.contract.record import KnowledgeRecord
from cce_knowledge.core.atomic import atomic_write
from cce_knowledge.core.errors import ExtractError
from cce_knowledge.extract.github import (
    SOURCE_ISSUES,
    CommentsPage,
    ItemsPage,
    Mapper,
    number_of,
    record_id,
)
from cce_knowledge.extract.github_refs import referenced_numbers, web_base_of

SCHEMA = "cce.extract-github-mirror/v1"


@dataclass(slots=True)
class Mirror:
    items: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, dict[int, dict[str, Any]]] = field(default_factory=dict)
    timeline: dict[int, list[str]] = field(default_factory=dict)

    def add_items(self, page: ItemsPage) -> None:
        for it in page.items:
            self.items[it["number"]] = it
        self.timeline.update(page.timeline)

    def add_comments(self, page: CommentsPage) -> None:
        for c in page.comments:
            self.comments.setdefault(c["issue"], {})[c["id"]] = c

    def pull_links(self, repo: str, mapper: Mapper | None = None) -> dict[int, set[str]]:
        """Issue number → URLs of the PRs whose bodies mention it (with `mapper`, only
        PRs by authors `--authors` keeps: a stranger's PR attaches nothing)."""
        out: dict[int, set[str]] = {}
        for it in self.items.values():
            url = it.get("html_url")
            if "pull_request" not in it or not url:
                continue
            if mapper is not None and mapper.excluded_author(it):
                continue
            for n in referenced_numbers(it.get("body") or "", repo, web_base_of(url)):
                out.setdefault(n, set()).add(url)
        return out

    def records(self, mapper: Mapper) -> list[KnowledgeRecord]:
        """Every kept item's record, sorted by number."""
        opts = mapper.opts
        pulls = self.pull_links(opts.repo, mapper)
        out = []
        for n in sorted(self.items):
            it = self.items[n]
            if mapper.excluded_author(it):
                mapper.trust.items += 1
                mapper.trust.left_out.append(record_id(opts.repo, n))
            if mapper.dropped(it):
                continue
            links: set[str] = set()
            if "pull_request" not in it:
                links = pulls.get(n, set()) | set(self.timeline.get(n, ()))
            comments = list(self.comments.get(n, {}).values()) if opts.include_comments else []
            out.append(mapper.record(it, links, comments))
        return out

    # -- persistence ----------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        doc = {
            "schema": SCHEMA,
            "items": [self.items[n] for n in sorted(self.items)],
            "comments": [
                self.comments[n][c] for n in sorted(self.comments) for c in sorted(self.comments[n])
            ],
            "timeline": {str(n): self.timeline[n] for n in sorted(self.timeline)},
        }
        return (json.dumps(doc, ensure_ascii=True, separators=(",", ":")) + "\n").encode()

    def save(self, path: Path) -> None:
        atomic_write(path, self.to_bytes())

    @classmethod
    def load(cls, path: Path) -> Mirror:
        try:
            doc = json.loads(path.read_bytes())
        except FileNotFoundError:
            raise ExtractError(
                f"the checkpoint's mirror {path} is missing — rerun with --full"
            ) from None
        except (OSError, ValueError) as e:
            raise ExtractError(f"cannot read {path}: {e} — rerun with --full") from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise ExtractError(f"{path} is not a {SCHEMA} file — rerun with --full")
        m = cls()
        try:
            m.add_items(ItemsPage(list(doc["items"]), {}, None))
            m.add_comments(CommentsPage(list(doc["comments"]), None))
            m.timeline = {int(k): list(v) for k, v in doc["timeline"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ExtractError(f"{path}: corrupt mirror ({e!r}) — rerun with --full") from None
        return m


def merge_into_feed(
    previous: Iterable[KnowledgeRecord], fetched: Mirror, mapper: Mapper
) -> list[KnowledgeRecord]:
    """`--since` without a mirror: rebuild the fetched items' records over the previous
    feed and recompute every issue's links from the PRs fetched this time.

    A fetched PR's old links are withdrawn before its current ones are added, so an
    edited PR body moves its link; links of PRs not fetched stay as they were. (The
    timeline never forgets a reference, so with `--timeline` nothing is withdrawn.)"""
    repo = mapper.opts.repo
    by_id = {r.id: r for r in previous}
    fetched_pulls = {
        it["html_url"] for it in fetched.items.values() if "pull_request" in it and it["html_url"]
    }
    withdrawn = set() if mapper.opts.timeline else fetched_pulls
    for rec in fetched.records(mapper):
        old = by_id.get(rec.id)
        if old is not None and rec.source == SOURCE_ISSUES:
            rec = replace(rec, links=sorted(set(rec.links) | (set(old.links) - withdrawn)))
        by_id[rec.id] = rec
    for n, it in fetched.items.items():
        if mapper.dropped(it):
            by_id.pop(record_id(repo, n), None)
    pulls = fetched.pull_links(repo, mapper)
    for rid, rec in list(by_id.items()):
        n = number_of(rid)
        if rec.source != SOURCE_ISSUES or n in fetched.items:
            continue
        links = (set(rec.links) - withdrawn) | pulls.get(n, set())
        if links != set(rec.links):
            by_id[rid] = replace(rec, links=sorted(links))
    return sorted(by_id.values(), key=lambda r: number_of(r.id))
