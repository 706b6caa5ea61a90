"""The search index's gathered rows, kept beside it so the next build analyses only
the records whose chunks changed.

Building the search index is one analysis pass over every live chunk (most of the
build), then numpy turning the gathered rows into postings. The rows of a record depend
only on its chunks' bytes, so each build also writes them, with a digest of each
record's chunks, to

    <root>/.cce/knowledge/search/<snapshot>-<key>.rows

and the next build (an incremental `index`, a `pull` that refreshes a corpus) copies the
rows of every record whose digest is unchanged and analyses only the others. The result
is the same file, byte for byte, as a build from scratch (tests check this on random
edits). The file is derived, never pushed, safe to delete (the next build is then a full
one), and checked before use: a damaged or foreign file is ignored.

Term ids in the rows are ranks in the build's sorted vocabulary. The vocabulary of a
build is exactly the set of terms in its record rows (a section's terms are its
record's body terms, title terms are rows of their own), so a spliced build drops the
terms no kept record uses and is again the sorted vocabulary of its records.

Lazy imports: numpy (~0.1-0.2 s), which only a build needs.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import json
import mmap
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cce_knowledge.core.atomic import atomic_write_parts

if TYPE_CHECKING:
    import numpy as np

MAGIC = b"CCESRW01"
FORMAT = 1
#: Bytes of one record's digest (blake2b of its live chunks' members before the
#: embedding: the embedding is derived from the content, so it adds nothing).
DIGEST = 16
#: A header longer than this is not ours.
MAX_HEADER = 1 << 20

#: Per-record columns, then row columns, as (name, kind): "n" counts (int32),
#: "t" term ids (int32), "f" term frequencies (narrowest unsigned type that holds them).
_PER_RECORD = ("rec_n", "title_n", "title_len", "body_len", "lead_len", "chunk_n")
_ROWS = (
    ("rec_tid", "t"),
    ("tf_title", "f"),
    ("tf_body", "f"),
    ("tf_lead", "f"),
    ("title_tid", "t"),
    ("sec_n", "n"),
    ("sec_len", "n"),
    ("sec_tid", "t"),
    ("sec_tf", "f"),
)
_DTYPES = ("int32", "int64", "uint8", "uint16")


@dataclasses.dataclass(slots=True)
class Rows:
    """One build's gathered rows (records in document order), term ids ranked in
    `terms` (sorted). Arrays are numpy; a loaded file's are read-only maps."""

    terms: list[str]
    record_ids: list[str]
    digests: bytes
    # Per record: row counts, field lengths in analysed terms, section count.
    rec_n: np.ndarray
    title_n: np.ndarray
    title_len: np.ndarray
    body_len: np.ndarray
    lead_len: np.ndarray
    chunk_n: np.ndarray
    # Record rows: (term, tf in title, body, lead), `rec_n[r]` of them for record r.
    rec_tid: np.ndarray
    tf_title: np.ndarray
    tf_body: np.ndarray
    tf_lead: np.ndarray
    # Each record's distinct title terms, `title_n[r]` of them.
    title_tid: np.ndarray
    # Per section (document order): row count (0 for a record's only section), length.
    sec_n: np.ndarray
    sec_len: np.ndarray
    # Section rows: (term, tf).
    sec_tid: np.ndarray
    sec_tf: np.ndarray

    @property
    def records(self) -> int:
        return len(self.record_ids)


def rows_path(index_file: Path) -> Path:
    """Where the rows of the index at `index_file` live (`<snapshot>-<key>.rows`)."""
    return index_file.with_name(index_file.name.removesuffix(".idx") + ".rows")


# ---------------------------------------------------------------- the file


def _narrowest(a: np.ndarray) -> np.ndarray:
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    peak = int(a.max()) if len(a) else 0
    dt = np.uint8 if peak < 256 else np.uint16 if peak < 65536 else np.int32
    return a.astype(dt, copy=False)


def _blob(strings: list[str]) -> tuple[bytes, bytes]:
    import numpy as np

    enc = [s.encode("utf-8") for s in strings]
    off = np.zeros(len(enc) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in enc], out=off[1:])
    return b"".join(enc), off.tobytes()


def write_rows(path: Path, snapshot: str, key: str, rows: Rows) -> None:
    """Write `rows` atomically (header, then 8-byte aligned sections)."""
    import numpy as np

    sections: dict[str, tuple[str, bytes]] = {}
    blob, off = _blob(rows.terms)
    sections["terms"] = ("uint8", blob)
    sections["terms_off"] = ("int64", off)
    blob, off = _blob(rows.record_ids)
    sections["rids"] = ("uint8", blob)
    sections["rids_off"] = ("int64", off)
    sections["digests"] = ("uint8", rows.digests)
    for name in _PER_RECORD:
        sections[name] = ("int32", np.asarray(getattr(rows, name)).astype(np.int32).tobytes())
    for name, kind in _ROWS:
        a = np.asarray(getattr(rows, name))
        a = _narrowest(a) if kind == "f" else a.astype(np.int32, copy=False)
        sections[name] = (str(a.dtype), a.tobytes())
    header: dict[str, Any] = {
        "format": FORMAT,
        "key": key,
        "snapshot": snapshot,
        "byteorder": sys.byteorder,
        "records": rows.records,
        "terms": len(rows.terms),
        "sections": {},
    }
    # Offsets depend on the header's length: iterate to the fixed point (it only grows).
    start = 0
    while True:
        at = start
        table: dict[str, list[Any]] = {}
        for name, (dt, data) in sections.items():
            table[name] = [at, len(data), dt]
            at += len(data) + (-len(data) % 8)
        header["sections"] = table
        hb = json.dumps(header, sort_keys=True).encode()
        body = 16 + len(hb)
        body += -body % 8
        if body == start:
            break
        start = body
    parts = [MAGIC + len(hb).to_bytes(8, "little") + hb + b"\0" * (start - 16 - len(hb))]
    for _, data in sections.values():
        parts.append(data)
        if len(data) % 8:
            parts.append(b"\0" * (-len(data) % 8))
    atomic_write_parts(path, parts)


class RowsError(ValueError):
    """A rows file that is not one this build can use (the build is then a full one)."""


def _strings(blob: np.ndarray, off: np.ndarray, what: str, *, ascii_only: bool) -> list[str]:
    import numpy as np

    if len(off) == 0 or off[0] != 0 or int(off[-1]) != len(blob) or np.any(np.diff(off) < 0):
        raise RowsError(f"bad {what} offsets")
    raw = bytes(blob)
    try:
        text = raw.decode("ascii" if ascii_only else "utf-8")
    except UnicodeDecodeError as e:
        raise RowsError(f"bad {what}") from e
    if ascii_only:  # one byte per character: slice the text itself
        bounds = off.tolist()
        out = [text[a:b] for a, b in itertools.pairwise(bounds)]
        # The merge of two vocabularies bisects them: they must be strictly sorted.
        if any(a >= b for a, b in itertools.pairwise(out)):
            raise RowsError(f"{what} not sorted")
        return out
    bounds = off.tolist()
    try:
        return [raw[a:b].decode("utf-8") for a, b in itertools.pairwise(bounds)]
    except UnicodeDecodeError as e:
        raise RowsError(f"bad {what}") from e


def _header(data: mmap.mmap, size: int, key: str) -> tuple[dict[str, Any], int]:
    """The file's JSON header (checked: ours, this key, this byte order) and its end."""
    if data[:8] != MAGIC:
        raise RowsError("not a rows file")
    hlen = int.from_bytes(data[8:16], "little")
    if hlen > min(MAX_HEADER, size - 16):
        raise RowsError("bad header length")
    try:
        header = json.loads(data[16 : 16 + hlen])
    except ValueError as e:
        raise RowsError("bad header") from e
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("key") != key:
        raise RowsError("another format")
    if header.get("byteorder") != sys.byteorder:
        raise RowsError("another byte order")
    if not all(isinstance(header.get(k), int) for k in ("records", "terms")):
        raise RowsError("bad header")
    if not isinstance(header.get("sections"), dict):
        raise RowsError("bad header")
    return header, 16 + hlen


def _section(view: memoryview, table: dict[str, Any], name: str, body: int) -> np.ndarray:
    """Section `name` as a read-only array over the mapped file, its bounds checked."""
    import numpy as np

    ent = table.get(name)
    if (
        not isinstance(ent, list)
        or len(ent) != 3
        or not all(isinstance(x, int) for x in ent[:2])
        or ent[2] not in _DTYPES
    ):
        raise RowsError(f"bad section {name}")
    at, length, dt = ent
    item = np.dtype(dt).itemsize
    if at < body or at % 8 or length < 0 or length % item or at + length > len(view):
        raise RowsError(f"bad section {name}")
    return np.frombuffer(view, dtype=dt, count=length // item, offset=at)


def read_rows(path: Path, key: str) -> Rows:
    """The rows at `path`, checked: layout, counts that add up, term ids in range.
    Raises RowsError (or OSError) for a file this build cannot use."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 16:
            raise RowsError("too short")
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    header, body = _header(data, size, key)
    n, n_terms, table = header["records"], header["terms"], header["sections"]
    view = memoryview(data)
    names = ["terms", "terms_off", "rids", "rids_off", "digests", *_PER_RECORD]
    names += [r for r, _ in _ROWS]
    a = {name: _section(view, table, name, body) for name in names}
    terms = _strings(a["terms"], a["terms_off"], "terms", ascii_only=True)
    rids = _strings(a["rids"], a["rids_off"], "record ids", ascii_only=False)
    if len(terms) != n_terms or len(rids) != n or len(a["digests"]) != n * DIGEST:
        raise RowsError("counts do not add up")
    _check_counts(a, n, n_terms)
    return Rows(
        terms=terms,
        record_ids=rids,
        digests=a["digests"].tobytes(),
        **{name: a[name] for name in _PER_RECORD},
        **{name: a[name] for name, _ in _ROWS},
    )


def _check_counts(a: dict[str, Any], n: int, n_terms: int) -> None:
    """Every count non-negative, every row family as long as its counts say, every
    term id a vocabulary rank."""
    for name in (*_PER_RECORD, "sec_n", "sec_len"):
        if len(a[name]) and int(a[name].min()) < 0:
            raise RowsError(f"negative {name}")
    if any(len(a[name]) != n for name in _PER_RECORD):
        raise RowsError("per-record columns differ in length")

    def total(name: str) -> int:
        return int(a[name].sum(dtype="int64"))

    want = {
        "rec_tid": total("rec_n"),
        "tf_title": total("rec_n"),
        "tf_body": total("rec_n"),
        "tf_lead": total("rec_n"),
        "title_tid": total("title_n"),
        "sec_n": total("chunk_n"),
        "sec_len": total("chunk_n"),
        "sec_tid": total("sec_n"),
        "sec_tf": total("sec_n"),
    }
    for name, size in want.items():
        if len(a[name]) != size:
            raise RowsError(f"{name} does not match its counts")
    for name in ("rec_tid", "title_tid", "sec_tid"):
        t = a[name]
        if len(t) and (int(t.min()) < 0 or int(t.max()) >= n_terms):
            raise RowsError(f"{name} out of range")


# ---------------------------------------------------------------- splicing


def reuse_plan(prev: Rows, record_ids: list[str], digests: bytes, sections: list[int]) -> list[int]:
    """For each record of the new build, the index of the previous build's record with
    the same id, digest and section count (its rows are reused), or -1 (analysed)."""
    old = {rid: k for k, rid in enumerate(prev.record_ids)}
    pd = prev.digests
    counts = prev.chunk_n.tolist()
    plan = []
    for r, rid in enumerate(record_ids):
        k = old.get(rid, -1)
        if k >= 0 and (
            counts[k] != sections[r]
            or pd[k * DIGEST : (k + 1) * DIGEST] != digests[r * DIGEST : (r + 1) * DIGEST]
        ):
            k = -1
        plan.append(k)
    return plan


def _runs(plan: list[int]) -> Iterator[tuple[bool, int, int]]:
    """The plan as runs (from_previous, lo, hi): previous records lo..hi in a row, or
    fresh records lo..hi (numbered in the order they were analysed)."""
    fresh = 0
    r = 0
    while r < len(plan):
        k = plan[r]
        if k < 0:
            lo = fresh
            while r < len(plan) and plan[r] < 0:
                r += 1
                fresh += 1
            yield False, lo, fresh
        else:
            lo = k
            hi = k + 1
            r += 1
            while r < len(plan) and plan[r] == hi:
                r += 1
                hi += 1
            yield True, lo, hi


def _offsets(counts: np.ndarray) -> np.ndarray:
    import numpy as np

    off = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    return off


def _vocab_maps(
    prev: list[str], fresh: list[str]
) -> tuple[list[str], np.ndarray | None, np.ndarray]:
    """The union of two sorted vocabularies, and where each one's terms sit in it (None
    for the previous one when the union adds nothing to it: its ids stay)."""
    import numpy as np

    new = [t for t in fresh if not _has(prev, t)]
    union = sorted(prev + new)  # two sorted runs: timsort merges them in one pass
    # A previous term moves up by the number of new terms sorted before it.
    ins = np.array(sorted(bisect.bisect_left(prev, t) for t in new), dtype=np.int64)
    idx = np.arange(len(prev), dtype=np.int64)
    prev_map = None if not new else (idx + np.searchsorted(ins, idx, side="right")).astype(np.int32)
    fresh_map = np.array([bisect.bisect_left(union, t) for t in fresh], dtype=np.int32)
    return union, prev_map, fresh_map


def _has(sorted_terms: list[str], t: str) -> bool:
    k = bisect.bisect_left(sorted_terms, t)
    return k < len(sorted_terms) and sorted_terms[k] == t


def splice(prev: Rows, plan: list[int], fresh: Rows, record_ids: list[str], digests: bytes) -> Rows:
    """The rows of the new build: each record's from `prev` (plan[r] >= 0) or, in order,
    from `fresh` (the records analysed now); the vocabulary merged and narrowed to the
    terms the records use, so the result equals a build from scratch."""
    import numpy as np

    union, prev_map, fresh_map = _vocab_maps(prev.terms, fresh.terms)
    srcs: dict[bool, tuple[Rows, np.ndarray | None]] = {
        True: (prev, prev_map),
        False: (fresh, fresh_map),
    }
    off = {
        src: {
            "rec": _offsets(r.rec_n),
            "title": _offsets(r.title_n),
            "chunk": _offsets(r.chunk_n),
            "secrow": _offsets(r.sec_n),
        }
        for src, (r, _) in srcs.items()
    }
    pieces: dict[str, list[np.ndarray]] = {n: [] for n in (*_PER_RECORD, *(r for r, _ in _ROWS))}

    def ids(tmap: np.ndarray | None, a: np.ndarray) -> np.ndarray:
        return a if tmap is None else tmap[a]

    for src, lo, hi in _runs(plan):
        r, tmap = srcs[src]
        o = off[src]
        for name in _PER_RECORD:
            pieces[name].append(getattr(r, name)[lo:hi])
        a, b = int(o["rec"][lo]), int(o["rec"][hi])
        pieces["rec_tid"].append(ids(tmap, r.rec_tid[a:b]))
        for name in ("tf_title", "tf_body", "tf_lead"):
            pieces[name].append(getattr(r, name)[a:b])
        a, b = int(o["title"][lo]), int(o["title"][hi])
        pieces["title_tid"].append(ids(tmap, r.title_tid[a:b]))
        c, d = int(o["chunk"][lo]), int(o["chunk"][hi])
        pieces["sec_n"].append(r.sec_n[c:d])
        pieces["sec_len"].append(r.sec_len[c:d])
        a, b = int(o["secrow"][c]), int(o["secrow"][d])
        pieces["sec_tid"].append(ids(tmap, r.sec_tid[a:b]))
        pieces["sec_tf"].append(r.sec_tf[a:b])
    out: dict[str, np.ndarray] = {}
    for name, parts in pieces.items():
        out[name] = (
            np.concatenate([p.astype(np.int32, copy=False) for p in parts])
            if parts
            else np.zeros(0, np.int32)
        )
        pieces[name] = []
    # Narrow the vocabulary to the terms the record rows use (see the module's note).
    used = np.bincount(out["rec_tid"], minlength=len(union)) > 0
    # Title and section terms are record terms; counted anyway, so that rows that
    # break that rule (a damaged file that passed the checks) cannot index out of range.
    for name in ("title_tid", "sec_tid"):
        used[out[name]] = True
    if bool(used.all()):
        return Rows(terms=union, record_ids=record_ids, digests=digests, **out)
    rank = (np.cumsum(used, dtype=np.int64) - 1).astype(np.int32)
    for name in ("rec_tid", "title_tid", "sec_tid"):
        out[name] = rank[out[name]]
    terms = [union[i] for i in np.flatnonzero(used).tolist()]
    return Rows(terms=terms, record_ids=record_ids, digests=digests, **out)
