"""The shrink guard's record diff and its exact report texts (docs/spec/sync.md §4.4–4.5)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from cce_knowledge.engine.redaction.modes import redact_for_display
from cce_knowledge.store.snapshots import KnowledgeStore
from cce_knowledge.sync.cck import chunk_digest

MAX_LISTED = 20


@dataclass(frozen=True)
class RecordDiff:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)


def digests_from_chunks(pairs: Iterable[tuple[str, bytes]]) -> dict[str, bytes]:
    """record_id → SHA-256 over its chunks' digests, in store order.

    A chunk digest covers (u64 LE length, content), so two records compare equal iff
    they have the same sequence of chunk contents. The digest never leaves the
    process (only the added/removed/changed classification matters), so it need not
    match the reference's internal hash.
    """
    hashers: dict[str, hashlib._Hash] = {}
    for rid, d in pairs:
        h = hashers.get(rid)
        if h is None:
            h = hashers[rid] = hashlib.sha256()
        h.update(d)
    return {k: h.digest() for k, h in hashers.items()}


def record_digests(store: KnowledgeStore) -> dict[str, bytes]:
    return digests_from_chunks((c.record_id, chunk_digest(c.content)) for c in store.chunks)


def _byte_sorted(ids: set[str]) -> list[str]:
    return sorted(ids, key=lambda s: s.encode("utf-8"))


def diff_digests(lo: dict[str, bytes], re_: dict[str, bytes]) -> RecordDiff:
    return RecordDiff(
        added=_byte_sorted(set(lo) - set(re_)),
        removed=_byte_sorted(set(re_) - set(lo)),
        changed=_byte_sorted({k for k in lo.keys() & re_.keys() if lo[k] != re_[k]}),
    )


def diff_stores(local: KnowledgeStore, remote: KnowledgeStore) -> RecordDiff:
    return diff_digests(record_digests(local), record_digests(remote))


def format_id_list(ids: list[str]) -> str:
    if not ids:
        return "0"

    # Record ids are addresses, kept raw at rest; shown, they are redacted like MCP does.
    shown = ", ".join(redact_for_display(i) for i in ids[:MAX_LISTED])
    if len(ids) > MAX_LISTED:
        return f"{len(ids)} — {shown} … and {len(ids) - MAX_LISTED} more"
    return f"{len(ids)} — {shown}"


def diff_report(
    corpus_id: str,
    local_snapshot: str,
    remote_snapshot: str,
    local_records: int,
    remote_records: int,
    d: RecordDiff,
) -> str:
    return (
        f"Corpus {corpus_id} — outgoing {local_snapshot} vs remote current {remote_snapshot}\n"
        f"  records : {local_records} local · {remote_records} remote\n"
        f"  added   : {format_id_list(d.added)}\n"
        f"  removed : {format_id_list(d.removed)}\n"
        f"  changed : {format_id_list(d.changed)}\n"
    )


def shrink_refusal(report: str, corpus_id: str, n_removed: int) -> str:
    s = "" if n_removed == 1 else "s"
    return (
        f"{report}refusing to push: {n_removed} record{s} live on the remote would be dropped "
        f"(the `removed` list above). Pass --force to shrink corpus {corpus_id}, or --dry-run to "
        "inspect without pushing."
    )


def left_out_line(left_out: list[str]) -> str:
    """The diff report's line for the removed records lockdown left out ("" for none)."""
    return f"  left out by author : {format_id_list(left_out)}\n" if left_out else ""


def left_out_advice(left_out: list[str], authors: str, n_removed: int) -> str:
    """Why those records drop (the feed's extractor left them out by author: lockdown,
    on by default for public repositories), and the two ways on. "" for none."""
    if not left_out:
        return ""
    n = len(left_out)
    if n_removed == 1:
        some = "The dropped record was"
    elif n == n_removed:
        some = f"All {n} dropped records were"
    else:
        some = f"{n} of the {n_removed} dropped records were"
    return (
        f"{some} left out by the extractor: their authors are outside `--authors {authors}` "
        "(lockdown, the default for a public repository). To keep them, extract again with "
        "`--authors all`; to drop them on purpose, push with --force."
    )


NOTHING_PUSHED = "Nothing pushed (--dry-run).\n"

_DIVERGENT = (
    "corpus {id}@{snap} is already published with DIFFERENT content (remote checksum {remote}, "
    "outgoing {outgoing}). The snapshot id hashes only the feed bytes, so a different "
    "`markdown.max_section_tokens` or redactor version produced divergent `.cck` bytes at the "
    "same content-addressed key."
)


def unverifiable(corpus_id: str, remote_snapshot: str, err: str, dry_run: bool) -> str:
    hint = (
        "there is no diff to report (--dry-run). A real `--force` push (without --dry-run) "
        "would bypass the guard."
        if dry_run
        else "Refusing to replace a corpus the guard cannot read. Pass --force to push without "
        "the guard."
    )
    return (
        f"push guard: could not verify the remote's current snapshot ({corpus_id}@"
        f"{remote_snapshot}) — {err}\n{hint}"
    )


def divergent_error(corpus_id: str, snap: str, remote: str, outgoing: str) -> str:
    body = _DIVERGENT.format(id=corpus_id, snap=snap, remote=remote, outgoing=outgoing)
    return f"push guard: {body} Pass --force to overwrite the published snapshot."


def divergent_dry_run(corpus_id: str, snap: str, remote: str, outgoing: str) -> str:
    body = _DIVERGENT.format(id=corpus_id, snap=snap, remote=remote, outgoing=outgoing)
    return f"Dry-run: {body}\nA real `--force` push would overwrite it.\n{NOTHING_PUSHED}"


def first_publish_dry_run(corpus_id: str, snap: str, records: int, chunks: int) -> str:
    return (
        f"Dry-run: corpus {corpus_id}@{snap} — no remote `current` pointer; this would be the "
        f"first publish ({records} records · {chunks} chunks).\n{NOTHING_PUSHED}"
    )


def unchanged_dry_run(corpus_id: str, snap: str) -> str:
    return (
        f"Dry-run: corpus {corpus_id}@{snap} — the remote `current` already names this snapshot; "
        f"a push would re-publish it unchanged.\n{NOTHING_PUSHED}"
    )
