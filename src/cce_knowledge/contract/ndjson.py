"""TEMPORARY stand-in: the exact serde_json-compatible parser replaces this module.

API (stable): parse_feed(text) -> list[KnowledgeRecord], raising ContractError with
`line {N}: invalid cce.knowledge/v1 record: {message}`.
"""

from __future__ import annotations

import json

from cce_knowledge.contract.record import KnowledgeRecord
from cce_knowledge.errors import ContractError
from cce_knowledge.rustcompat import rs_is_blank

_FIELDS = ("id", "title", "body", "source", "url", "state", "state_reason", "updated_at",
           "labels", "group", "links", "extra")


def parse_feed(text: str) -> list[KnowledgeRecord]:
    out: list[KnowledgeRecord] = []
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    for n, line in enumerate(parts, 1):
        if line.endswith("\r"):
            line = line[:-1]
        if rs_is_blank(line):
            continue
        try:
            obj = json.loads(line)
            rec = KnowledgeRecord(**{k: v for k, v in obj.items() if k in _FIELDS})
            rec.labels = rec.labels or []
            rec.links = rec.links or []
        except Exception as e:  # noqa: BLE001 - placeholder
            raise ContractError(f"line {n}: invalid cce.knowledge/v1 record: {e}") from e
        out.append(rec)
    return out
