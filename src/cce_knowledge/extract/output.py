"""Write a feed (and its manifest sidecar) all-or-nothing.

The feed is checked with the contract parser before anything touches disk, so an
adapter can never publish a feed `cce knowledge index` would refuse.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cce_knowledge.contract.manifest import LeftOut, build_manifest
from cce_knowledge.contract.ndjson import parse_feed
from cce_knowledge.contract.record import KnowledgeRecord
from cce_knowledge.core.atomic import atomic_write
from cce_knowledge.core.errors import ExtractError


def self_check(data: bytes, expected: int) -> list[KnowledgeRecord]:
    """Parse our own output with the contract parser; a failure is our bug, said plainly."""
    try:
        parsed = parse_feed(data.decode("utf-8"))
    except Exception as e:  # the contract parser's own error names the line
        raise ExtractError(f"internal error: adapter produced an invalid feed: {e}") from e
    if len(parsed) != expected:
        raise ExtractError(
            f"internal error: adapter produced {len(parsed)} records, expected {expected}"
        )
    return parsed


def manifest_bytes(
    data: bytes, records: list[KnowledgeRecord], left_out: LeftOut | None = None
) -> bytes:
    return build_manifest(data, len(records), left_out)


def write_feed(
    data: bytes,
    records: list[KnowledgeRecord],
    *,
    out: str | None,
    manifest: str | None,
    left_out: LeftOut | None = None,
) -> None:
    """Write `data` to `out` (stdout when None) and the manifest to `manifest`.

    `left_out`: what lockdown left out, carried in the manifest (ours, additive).
    Everything is computed first; the two files are then each replaced atomically.
    """
    parsed = self_check(data, len(records))
    man = manifest_bytes(data, parsed, left_out) if manifest else None
    for target in (out, manifest):
        if target is not None and Path(target).is_dir():
            raise ExtractError(f"cannot write {target}: it is a directory")
    if out is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        atomic_write(out, data)
    if manifest is not None and man is not None:
        atomic_write(manifest, man)
