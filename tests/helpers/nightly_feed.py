"""A small nightly feed: issue-like records, some of them edited on a later night."""

from __future__ import annotations

import json
from pathlib import Path


def write_feed(path: Path, n: int, changed: frozenset[int] = frozenset()) -> None:
    """`n` issue-like records; those in `changed` carry an edited body."""
    lines = []
    for i in range(n):
        edit = " Edited: the rule now also covers service accounts." if i in changed else ""
        body = (
            f"## Why\n\nDecision {i}: requests to service {i % 17} are retried with "
            f"backoff after failure number {i % 5}.{edit}\n\n## Rule\n\nRecord {i} keeps "
            "its own words so that each record chunks on its own."
        )
        rec = {
            "id": f"gh:acme/shop#{1000 + i}",
            "title": f"Decision {i} about service {i % 17}",
            "body": body,
            "source": "github-issues",
            "url": f"https://github.com/acme/shop/issues/{1000 + i}",
            "state": "closed",
            "updated_at": "2026-02-11T09:00:00Z",
        }
        lines.append(json.dumps(rec, sort_keys=True))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
