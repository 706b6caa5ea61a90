"""`.cce/knowledge/left-out.json` (ours): the records the feed's extractor left out by
author, as its manifest's `left_out` said, for the snapshot `index` built from that feed.

`push` reads it so that a shrink guard refusing to drop records can say when they are
ones lockdown left out (issue 35 §9). Keyed by snapshot: a record for another snapshot
(the store was re-indexed from a feed without a manifest) means nothing. Read bounded,
as untrusted as any file under .cce/knowledge; the reference never reads it.
"""

from __future__ import annotations

import json
import os

from cce_knowledge.contract.manifest import LeftOut, left_out_of
from cce_knowledge.core.atomic import atomic_write
from cce_knowledge.core.untrusted import open_regular
from cce_knowledge.store.snapshots import knowledge_dir

LEFT_OUT_NAME = "left-out.json"
#: A million ids of a few dozen bytes each: anything larger is not ours.
MAX_BYTES = 64 << 20


def record_left_out(root: str | os.PathLike[str], snapshot: str, left: LeftOut | None) -> None:
    """Record `left` for `snapshot` (call under the writer lock), or remove a stale one."""
    path = knowledge_dir(root) / LEFT_OUT_NAME
    if left is None or not left.records:
        path.unlink(missing_ok=True)
        return
    doc = {"snapshot": snapshot, **left.to_json()}
    atomic_write(path, json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode())


def read_left_out(root: str | os.PathLike[str], snapshot: str) -> LeftOut | None:
    """What was left out of the feed `snapshot` was built from; None when unknown."""
    try:
        with open_regular(knowledge_dir(root) / LEFT_OUT_NAME) as f:
            raw = f.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            return None
        doc = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("snapshot") != snapshot:
        return None
    return left_out_of(doc)
