"""What pull checks in a verified `.cck` before it installs it (issue 12, item 8).

A checksum proves the artifact is the one its manifest describes, not that it is a
store `cce knowledge index` could have written. The cache is untrusted, so before the
new snapshot file is renamed into place pull also checks:

* the manifest: it names the corpus and snapshot that were asked for, a contract this
  build speaks, and a record count the chunks can carry;
* the rendered store, as it streams to disk: every embedding value is finite (a NaN
  or infinity is written as `null`, which no store reader accepts), chunk ids are
  unique, and the distinct record ids number exactly the manifest's `records`.

The reference engine checks none of this (docs/design.md). A refusal raises before
the rename, so the installed store stays as it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cce_knowledge import KNOWLEDGE_SCHEMA
from cce_knowledge.core.untrusted import shown
from cce_knowledge.sync import keys as K
from cce_knowledge.sync.cck import CckError, CckManifest


def check_manifest(key: str, m: CckManifest, corpus_id: str, requested: str) -> None:
    """Refuse a manifest that does not describe the requested corpus snapshot."""
    if m.contract != KNOWLEDGE_SCHEMA:
        raise CckError(
            f"{key}: the artifact's contract is `{shown(m.contract)}`, this build installs "
            f"`{KNOWLEDGE_SCHEMA}` only — refusing to install it"
        )
    if m.corpus_id != corpus_id:
        raise CckError(
            f"{key}: the artifact's manifest names corpus `{shown(m.corpus_id)}`, not "
            f"`{corpus_id}` — refusing to install another corpus's artifact"
        )
    if not K.is_snapshot_id(m.snapshot) or m.snapshot != requested:
        raise CckError(
            f"{key}: the artifact's manifest names snapshot `{shown(m.snapshot)}`, not "
            f"`{shown(requested)}` — refusing to install it under another name"
        )
    if m.records > m.chunk_count or (m.records == 0) != (m.chunk_count == 0):
        raise CckError(
            f"{key}: the manifest's record count {m.records} does not fit its "
            f"{m.chunk_count} chunks (every record has at least one chunk)"
        )


_CHUNK_ID = b'\n      "chunk_id": '
_RECORD_ID = b'\n      "record_id": '
# An embedding item line holding `null`: serde's text for a NaN or an infinity.
_NULL_ITEM = b"\n        null"


class StoreScan:
    """Checks store bytes part by part as they stream to disk (`checked`)."""

    def __init__(self, key: str, manifest: CckManifest) -> None:
        self.key = key
        self.manifest = manifest
        self.chunk_ids: set[bytes] = set()
        self.record_ids: set[bytes] = set()
        self._carry = b""

    def checked(self, parts: Iterable[bytes]) -> Iterator[bytes]:
        """`parts` unchanged; raises CckError (before the last part is consumed by the
        writer, so nothing is renamed into place) when the store breaks a rule."""
        for part in parts:
            self._scan(part)
            yield part
        self._scan(b"", final=True)
        self._finish()

    def _scan(self, part: bytes, final: bool = False) -> None:
        data = self._carry + bytes(part)
        cut = len(data) if final else data.rfind(b"\n")
        if cut < 0:
            self._carry = data
            return
        # Whole lines only; the last newline stays in the carry so a pattern that
        # starts at a part boundary is still found (and never counted twice).
        region, self._carry = data[: cut + 1], data[cut:]
        if region.find(_NULL_ITEM) >= 0:
            raise CckError(
                f"{self.key}: an embedding holds a non-finite value (NaN or infinity) — "
                "no index writes one and no search can read it; refusing to install"
            )
        self._ids(region, _CHUNK_ID, self.chunk_ids, unique=True)
        self._ids(region, _RECORD_ID, self.record_ids, unique=False)

    def _ids(self, region: bytes, label: bytes, seen: set[bytes], *, unique: bool) -> None:
        pos = region.find(label)
        while pos >= 0:
            start = pos + len(label)
            end = region.find(b"\n", start)
            if end < 0:
                end = len(region)
            value = region[start:end]
            if unique and value in seen:
                raise CckError(
                    f"{self.key}: chunk id {shown(value.decode('utf-8', 'replace'))} "
                    "appears twice — refusing to install"
                )
            seen.add(value)
            pos = region.find(label, end)

    def _finish(self) -> None:
        m = self.manifest
        if len(self.record_ids) != m.records:
            raise CckError(
                f"{self.key}: the manifest says {m.records} records but the chunks carry "
                f"{len(self.record_ids)} distinct record ids — refusing to install"
            )
