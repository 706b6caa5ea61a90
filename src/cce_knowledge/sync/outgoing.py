"""The outgoing `.cck` of a push, built straight from the local store file.

Loading a large store as a model (hundreds of MB of pretty JSON, 256 floats per
chunk) dominates a push. The store file has a fixed layout (our writer and the
reference's), so we cut it into chunk objects at the structural separators — a raw
newline never occurs inside a JSON string — and let forked workers parse, validate
(with the store's own chunk loader), and export each slice. Anything that does not
match the layout falls back to the model path, which owns the error messages.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from cce_knowledge.core.errors import StoreError, SyncError
from cce_knowledge.core.jsonout import canonical
from cce_knowledge.core.rustcompat import is_u64
from cce_knowledge.store import snapshots as S
from cce_knowledge.sync import cck

_OPEN = b'\n  "chunks": [\n'
_SEP = b"\n    },\n    {\n"
_CLOSE = b"\n    }\n  ]\n}\n"
_EMPTY = b'\n  "chunks": []\n}\n'
_SEGMENTS: list[bytes] = []
_NO_MANIFEST = cck.CckManifest("", 0, "", "", None, 0, "")


@dataclass(frozen=True)
class Outgoing:
    manifest: cck.CckManifest
    #: the `.cck` bytes: in memory, or mapped from an unlinked spool (a big push)
    data: cck.Artifact
    #: (record_id, chunk content digest) in store order, for the shrink guard
    chunks: list[tuple[str, bytes]]
    #: a chunk without persisted embeddings: export must be refused (after id checks)
    phase_a: bool = False

    @property
    def checksum(self) -> str:
        return self.manifest.checksum


class _Layout(Exception):
    """The file is not in the canonical store layout: use the model path."""


def _slice(bounds: tuple[int, int]) -> tuple[bytes, list[tuple[str, bytes]], str | None, bool]:
    lo, hi = bounds
    lines: list[str] = []
    pairs: list[tuple[str, bytes]] = []
    newest: str | None = None
    for seg in _SEGMENTS[lo:hi]:
        try:
            c = S._chunk_from_obj(json.loads(b"{\n" + seg + b"\n}"))
        except (ValueError, UnicodeDecodeError) as e:
            raise _Layout(str(e)) from e
        if not c.embedding:
            return b"", [], None, True
        lines.append(canonical(cck._chunk_obj(c, cck.encode_embedding(c.embedding))))
        pairs.append((c.record_id, cck.chunk_digest(c.content)))
        if c.updated_at is not None and (newest is None or c.updated_at > newest):
            newest = c.updated_at
    return cck._body(lines), pairs, newest, False


def _split(data: bytes) -> tuple[dict[str, object], list[bytes]]:
    i = data.find(_OPEN)
    if i < 0:
        j = data.find(_EMPTY)
        if j < 0 or j + len(_EMPTY) != len(data):
            raise _Layout("no chunks array")
        return _head(data[:j]), []
    if not data.endswith(_CLOSE):
        raise _Layout("unexpected tail")
    body = data[i + len(_OPEN) : len(data) - len(_CLOSE)]
    if not body.startswith(b"    {\n"):
        raise _Layout("unexpected chunk opening")
    return _head(data[:i]), body[len(b"    {\n") :].split(_SEP)


def _head(text: bytes) -> dict[str, object]:
    if not text.endswith(b","):
        raise _Layout("unexpected head")
    try:
        head = json.loads(text[:-1] + b"\n}")
    except ValueError as e:
        raise _Layout(str(e)) from e
    if (
        not isinstance(head, dict)
        or set(head) != {"schema", "snapshot", "records"}
        or not isinstance(head["schema"], str)
        or not isinstance(head["snapshot"], str)
        or not is_u64(head["records"])
    ):
        raise _Layout("unexpected head fields")
    return head


def _fast(data: bytes, corpus_id: str, jobs: int | None) -> Outgoing:
    global _SEGMENTS
    head, segments = _split(data)
    _SEGMENTS = segments
    try:
        parts = cck._run_slices([""] + [""] * len(segments), _shifted, jobs)
    finally:
        _SEGMENTS = []
    if any(phase_a for *_, phase_a in parts):
        return Outgoing(_NO_MANIFEST, b"", [], phase_a=True)
    newest = [n for _, _, n, _ in parts if n is not None]
    m = cck.CckManifest(
        checksum="",
        chunk_count=len(segments),
        contract=str(head["schema"]),
        corpus_id=corpus_id,
        data_as_of=max(newest) if newest else None,
        records=int(head["records"]),  # type: ignore[call-overload]
        snapshot=str(head["snapshot"]),
    )
    body = b"".join(b for b, _, _, _ in parts)
    digest = cck._digest(m, body)
    sealed = cck.CckManifest(**{**m.as_dict(), "checksum": digest})
    out = (canonical(sealed.as_dict()) + "\n").encode("utf-8") + body
    return Outgoing(sealed, out, [p for _, ps, _, _ in parts for p in ps])


def _shifted(bounds: tuple[int, int]) -> tuple[bytes, list[tuple[str, bytes]], str | None, bool]:
    # _run_slices counts from 1 (piece 0 is a manifest there); segments count from 0.
    return _slice((bounds[0] - 1, bounds[1] - 1))


def load_local_store(root: str | os.PathLike[str]) -> S.KnowledgeStore:
    try:
        return S.load_current(root)
    except StoreError as e:
        raise SyncError(
            f"no local knowledge store under {S.display_dir(root)} (`current` missing) — run "
            "`cce knowledge index <feed.jsonl>` first"
        ) from e


def outgoing_from_store(
    root: str | os.PathLike[str], corpus_id: str, jobs: int | None = None
) -> Outgoing:
    """The `.cck` for the active local store. Raises SyncError (no store / Phase-A)."""
    try:
        snap = S.read_current(root)
        data = S.store_path(root, snap).read_bytes()
        return _fast(data, corpus_id, jobs)
    except (_Layout, OSError, UnicodeDecodeError):
        pass
    store = load_local_store(root)  # the authoritative loader and its error
    try:
        art = cck.export_cck(store, corpus_id)
    except SyncError:
        return Outgoing(_NO_MANIFEST, b"", [], phase_a=True)
    return Outgoing(
        art.manifest, art.data, [(c.record_id, cck.chunk_digest(c.content)) for c in store.chunks]
    )
