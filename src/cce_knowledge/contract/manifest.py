"""The `cce.feed-manifest/v1` sidecar (docs/spec/core.md §9).

A producer states how many records its feed carries and the SHA-256 of the feed's
raw bytes; `index --manifest` refuses a feed that does not match. Reading is
tolerant (unknown keys ignored, `schema` not compared) so a foreign producer's
manifest maps on by carrying the two fields.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

from cce_knowledge.contract.jsonparse import (
    FieldReader,
    ScanError,
    Scanner,
    format_path,
    scan_struct,
)
from cce_knowledge.contract.ndjson import read_text_file
from cce_knowledge.core.errors import ContractError
from cce_knowledge.core.rustcompat import ascii_lower, rs_trim, rust_debug_str

FEED_MANIFEST_SCHEMA_ID = "cce.feed-manifest/v1"

#: Declaration order of the reference struct: records, sha256, schema.
MANIFEST_FIELDS: tuple[tuple[str, FieldReader, bool], ...] = (
    ("records", Scanner.u64_field, True),
    ("sha256", Scanner.str_field, True),
    ("schema", Scanner.opt_str_field, False),
)
_HEX = frozenset("0123456789abcdef")
_USIZE_MAX = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class FeedManifest:
    records: int
    sha256: str
    schema: str | None = None


@dataclass(frozen=True, slots=True)
class ManifestParseError:
    """Where a manifest document is malformed (for `validate`)."""

    line: int
    column: int
    path: str
    message: str

    @property
    def serde_text(self) -> str:
        return f"{self.message} at line {self.line} column {self.column}"


def feed_sha256(raw: bytes) -> str:
    """Full lowercase-hex SHA-256 of the feed's raw bytes."""
    return hashlib.sha256(raw).hexdigest()


def scan_manifest(text: str) -> FeedManifest | ManifestParseError:
    try:
        f = scan_struct(text.encode("utf-8", "surrogatepass"), "FeedManifest", MANIFEST_FIELDS)
    except ScanError as e:
        return ManifestParseError(e.line, e.column, format_path(e.path), e.message)
    return FeedManifest(records=f["records"], sha256=f["sha256"], schema=f.get("schema"))


def parse_manifest(text: str) -> FeedManifest:
    """Parse a manifest document: `invalid cce.feed-manifest/v1 manifest: {serde error}`."""
    r = scan_manifest(text)
    if isinstance(r, ManifestParseError):
        raise ContractError(f"invalid {FEED_MANIFEST_SCHEMA_ID} manifest: {r.serde_text}")
    return r


def read_manifest(path: str | os.PathLike[str]) -> FeedManifest:
    """Read and parse a sidecar: `could not read feed manifest {path}: {io}`."""
    _, text = read_text_file(path, "feed manifest ")
    return parse_manifest(text)


def digest_problem(manifest: FeedManifest) -> str | None:
    """Verification step 1, which needs no feed: is `sha256` 64 hex digits (after a
    RUST_WS trim, case-insensitively)?"""
    declared = ascii_lower(rs_trim(manifest.sha256))
    if len(declared.encode("utf-8")) != 64 or any(c not in _HEX for c in declared):
        return "feed manifest sha256 is not a 64-char hex digest: " + rust_debug_str(
            manifest.sha256
        )
    return None


def verify_problem(
    manifest: FeedManifest, raw: bytes, actual_records: int, sha256: str | None = None
) -> str | None:
    """The first mismatch between a manifest and a parsed feed, or None.

    Order as the reference: digest shape, then record count (the friendliest
    truncation message), then the checksum.
    """
    shape = digest_problem(manifest)
    if shape is not None:
        return shape
    declared = ascii_lower(rs_trim(manifest.sha256))
    if actual_records < manifest.records:
        return (
            f"feed does not match its manifest: manifest declares {manifest.records} "
            f"record(s), feed has {actual_records} — the feed is truncated or incomplete"
        )
    if actual_records > manifest.records:
        # Ours: the reference says "truncated" here too, which sends the reader the
        # wrong way — a feed that grew needs a new manifest, not a re-download.
        return (
            f"feed does not match its manifest: manifest declares {manifest.records} "
            f"record(s), feed has {actual_records} — the feed has more records than its "
            "manifest; if the feed is the one you meant, regenerate the manifest "
            "(`cce knowledge manifest FEED --out MANIFEST`)"
        )
    actual = feed_sha256(raw) if sha256 is None else sha256
    if actual != declared:
        return (
            "feed does not match its manifest checksum (truncated, corrupt, or misdirected "
            f"feed): manifest sha256 {declared}, feed sha256 {actual}"
        )
    return None


def verify_manifest(
    manifest: FeedManifest, raw: bytes, actual_records: int, sha256: str | None = None
) -> None:
    """Raise `ContractError` on any mismatch; nothing may be written after a failure."""
    problem = verify_problem(manifest, raw, actual_records, sha256)
    if problem is not None:
        raise ContractError(problem)


@dataclass(frozen=True, slots=True)
class LeftOut:
    """Ours, additive: the records an extractor left out by author (lockdown,
    `--authors`), which a manifest may carry as `left_out` so that a later shrink guard
    can say why records dropped. The reference ignores the key."""

    authors: str
    records: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"authors": self.authors, "records": list(self.records)}


#: Bounds on `left_out` as read (a manifest is untrusted input): past them it is ignored.
MAX_LEFT_OUT = 1_000_000
_MAX_ID_CHARS = 4096
_MAX_AUTHORS_CHARS = 64


def left_out_of(doc: object) -> LeftOut | None:
    """A manifest's `left_out` (or the same object on its own), None when absent or
    malformed: it only explains, so a bad one is never an error."""
    lo = doc.get("left_out", doc) if isinstance(doc, dict) else None
    if not isinstance(lo, dict):
        return None
    authors, ids = lo.get("authors"), lo.get("records")
    if not isinstance(authors, str) or not 0 < len(authors) <= _MAX_AUTHORS_CHARS:
        return None
    if not isinstance(ids, list) or len(ids) > MAX_LEFT_OUT:
        return None
    if not all(isinstance(i, str) and 0 < len(i) <= _MAX_ID_CHARS for i in ids):
        return None
    return LeftOut(authors, tuple(ids))


def read_left_out(text: str) -> LeftOut | None:
    """`left_out_of` a manifest's text (None for one that is not a JSON object)."""
    try:
        return left_out_of(json.loads(text))
    except (ValueError, RecursionError):
        return None


def build_manifest(raw: bytes, records: int, left_out: LeftOut | None = None) -> bytes:
    """The sidecar bytes we emit: one compact line, fixed key order, trailing newline
    (the layout of the bench corpus' `rfcs.manifest.json`). `left_out` (ours) is
    written only when it names a record, so every other manifest keeps its bytes."""
    if not 0 <= records <= _USIZE_MAX:
        raise ContractError(f"record count out of range: {records}")
    extra = ""
    if left_out is not None and left_out.records:
        extra = ',"left_out":' + json.dumps(
            left_out.to_json(), ensure_ascii=False, separators=(",", ":")
        )
    return (
        f'{{"schema":"{FEED_MANIFEST_SCHEMA_ID}","records":{records},'
        f'"sha256":"{feed_sha256(raw)}"{extra}}}\n'
    ).encode()
