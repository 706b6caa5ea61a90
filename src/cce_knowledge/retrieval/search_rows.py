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
import contextlib
import dataclasses
import itertools
import json
import mmap
import os
import sys
from collections.abc import Callable, Iterator
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


def _tf_type(peak: int) -> str:
    """The narrowest type of a term-frequency column whose largest value is `peak`."""
    return "uint8" if peak < 256 else "uint16" if peak < 65536 else "int32"


def _blob(strings: list[str]) -> tuple[bytes, bytes]:
    import numpy as np

    enc = [s.encode("utf-8") for s in strings]
    off = np.zeros(len(enc) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in enc], out=off[1:])
    return b"".join(enc), off.tobytes()


#: A section of the file: its name, numpy type, length in items, and its pieces (made
#: as the file is written, so a big section is never whole in memory).
_Planned = tuple[str, str, int, Callable[[], Iterator[Any]]]


def _write_file(
    path: Path, head: dict[str, Any], planned: list[_Planned], *, durable: bool = True
) -> None:
    """Write the file atomically: header, then each section 8-byte aligned. Not
    `durable`: written in place and never synced (a batch file that lives only as long
    as its build)."""
    import numpy as np

    header = dict(head)
    # Offsets depend on the header's length: iterate to the fixed point (it only grows).
    start = 0
    while True:
        at = start
        table: dict[str, list[Any]] = {}
        for name, dt, count, _ in planned:
            size = count * np.dtype(dt).itemsize
            table[name] = [at, size, dt]
            at += size + (-size % 8)
        header["sections"] = table
        hb = json.dumps(header, sort_keys=True).encode()
        body = 16 + len(hb)
        body += -body % 8
        if body == start:
            break
        start = body

    def parts() -> Iterator[bytes | memoryview]:
        yield MAGIC + len(hb).to_bytes(8, "little") + hb + b"\0" * (start - 16 - len(hb))
        for name, dt, count, pieces in planned:
            written = 0
            item = np.dtype(dt).itemsize
            for piece in pieces():
                if isinstance(piece, bytes):  # already this section's bytes
                    written += len(piece) // item
                    yield piece
                    continue
                a = np.ascontiguousarray(piece, dtype=dt)
                written += len(a)
                yield a.data
            if written != count:  # a planning error: never write a file that lies
                raise ValueError(f"rows section {name}: {written} items, {count} planned")
            size = count * np.dtype(dt).itemsize
            if size % 8:
                yield b"\0" * (-size % 8)

    if not durable:
        with open(path, "xb") as f:
            for part in parts():
                f.write(part)
        return
    atomic_write_parts(path, parts(), flush_early=True)


def _head(snapshot: str, key: str, records: int, terms: int) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "key": key,
        "snapshot": snapshot,
        "byteorder": sys.byteorder,
        "records": records,
        "terms": terms,
    }


def _whole(data: Any) -> Callable[[], Iterator[Any]]:
    return lambda: iter([data])


def _text_sections(name: str, strings: list[str]) -> list[_Planned]:
    blob, off = _blob(strings)
    return [
        (name, "uint8", len(blob), _whole(blob)),
        (name + "_off", "int64", len(off) // 8, _whole(off)),
    ]


def write_rows(path: Path, snapshot: str, key: str, rows: Rows, *, durable: bool = True) -> None:
    """Write `rows` atomically (header, then 8-byte aligned sections); see `_write_file`
    for `durable`."""
    import numpy as np

    planned = _text_sections("terms", rows.terms) + _text_sections("rids", rows.record_ids)
    planned.append(("digests", "uint8", len(rows.digests), _whole(rows.digests)))
    for name in _PER_RECORD:
        a = np.asarray(getattr(rows, name))
        planned.append((name, "int32", len(a), _whole(a)))
    for name, kind in _ROWS:
        a = np.asarray(getattr(rows, name))
        dt = _tf_type(int(a.max()) if len(a) else 0) if kind == "f" else "int32"
        planned.append((name, dt, len(a), _whole(a)))
    _write_file(path, _head(snapshot, key, rows.records, len(rows.terms)), planned, durable=durable)


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


def plan_runs(plan: list[int]) -> Iterator[tuple[bool, int, int]]:
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

    for src, lo, hi in plan_runs(plan):
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


# ---------------------------------------------------------------- streaming


#: Rows of one piece when a run is copied into a new file (bounds what is in flight).
COPY_ROWS = 1 << 22

#: A run of records: those lo..hi of source `src`.
Run = tuple[int, int, int]


def _pieces(a: np.ndarray, lo: int, hi: int, tmap: np.ndarray | None) -> Iterator[np.ndarray]:
    for s in range(lo, hi, COPY_ROWS):
        part = a[s : min(hi, s + COPY_ROWS)]
        yield part if tmap is None else tmap[part]


#: Which count family each row column follows (its rows of a run of records).
_FAMILY = {
    "rec_tid": "rec",
    "tf_title": "rec",
    "tf_body": "rec",
    "tf_lead": "rec",
    "title_tid": "title",
    "sec_n": "chunk",
    "sec_len": "chunk",
    "sec_tid": "secrow",
    "sec_tf": "secrow",
}


class _Runs:
    """Runs of records of several sources, and the row spans each run covers."""

    def __init__(self, sources: list[Rows], runs: list[Run]) -> None:
        self.sources = sources
        self.runs = runs
        self._offs = [
            {
                "rec": _offsets(r.rec_n),
                "title": _offsets(r.title_n),
                "chunk": _offsets(r.chunk_n),
                "secrow": _offsets(r.sec_n),
            }
            for r in sources
        ]

    def span(self, src: int, lo: int, hi: int, family: str) -> tuple[int, int]:
        o = self._offs[src]
        if family == "secrow":
            c, d = int(o["chunk"][lo]), int(o["chunk"][hi])
            return int(o["secrow"][c]), int(o["secrow"][d])
        return int(o[family][lo]), int(o[family][hi])

    def columns(self, name: str) -> Iterator[tuple[int, np.ndarray]]:
        """Each run's piece of row column `name`, with its source."""
        for src, lo, hi in self.runs:
            a, b = self.span(src, lo, hi, _FAMILY[name])
            for part in _pieces(getattr(self.sources[src], name), a, b, None):
                yield src, part

    def survey(
        self, maps: list[np.ndarray], n_terms: int
    ) -> tuple[Any, dict[str, int], dict[str, int]]:
        """The terms the taken rows use, each tf column's peak, each row column's length."""
        import numpy as np

        used = np.zeros(n_terms, dtype=bool)
        peaks = dict.fromkeys(("tf_title", "tf_body", "tf_lead", "sec_tf"), 0)
        counts = {
            name: sum(b - a for a, b in (self.span(s, lo, hi, fam) for s, lo, hi in self.runs))
            for name, fam in _FAMILY.items()
        }
        for name in _FAMILY:
            for src, part in self.columns(name):
                if name in peaks and len(part):
                    peaks[name] = max(peaks[name], int(part.max()))
                elif name.endswith("_tid"):
                    # Title and section terms are record terms; marked anyway, so that
                    # rows breaking that rule cannot index out of range.
                    used[maps[src][part]] = True
        return used, peaks, counts

    def taken(self, name: str, final: list[np.ndarray] | None) -> Callable[[], Iterator[Any]]:
        """The pieces of column `name` over the runs (term ids mapped by `final`);
        per-record columns when `name` has no row family."""

        def gen() -> Iterator[Any]:
            for src, lo, hi in self.runs:
                fam = _FAMILY.get(name)
                a, b = (lo, hi) if fam is None else self.span(src, lo, hi, fam)
                tmap = final[src] if final is not None and name.endswith("_tid") else None
                yield from _pieces(getattr(self.sources[src], name), a, b, tmap)

        return gen


def write_runs(
    path: Path,
    snapshot: str,
    key: str,
    sources: list[Rows],
    runs: list[Run],
    record_ids: list[str],
    digests: bytes,
    vocab: Vocabulary | None = None,
    first_ids: list[np.ndarray] | None = None,
) -> None:
    """Write the rows of records taken in `runs` from `sources` (mapped files, say),
    streamed: the vocabulary is the sorted union of the terms the taken records use,
    term ids remapped into it, so the file is the one `write_rows` writes for the same
    records gathered at once (tests check it). Only the vocabulary and one piece of
    rows are in memory at a time.

    `vocab` and `first_ids`: the sources' terms already numbered (`Vocabulary.add`,
    one array per source), so that a source's term list could be let go."""
    import numpy as np

    n = len(record_ids)
    if sum(hi - lo for _, lo, hi in runs) != n or len(digests) != n * DIGEST:
        raise ValueError("runs, record ids and digests do not agree")
    # The union of the sources' vocabularies, narrowed to the terms taken rows use.
    if vocab is None:
        vocab = Vocabulary()
        first_ids = [vocab.add(r.terms) for r in sources]
    elif first_ids is None or len(first_ids) != len(sources):
        raise ValueError("a vocabulary needs each source's term ids")
    union, rank0 = vocab.sorted()
    maps = [rank0[m] for m in first_ids]
    del rank0, first_ids
    taken = _Runs(sources, runs)
    used, peaks, counts = taken.survey(maps, len(union))
    rank = (np.cumsum(used, dtype=np.int64) - 1).astype(np.int32)
    final = [rank[m] for m in maps]
    terms = [union[i] for i in np.flatnonzero(used).tolist()]
    del union, maps, rank, used
    planned = _text_sections("terms", terms) + _text_sections("rids", record_ids)
    planned.append(("digests", "uint8", len(digests), _whole(digests)))
    for name in _PER_RECORD:
        planned.append((name, "int32", n, taken.taken(name, None)))
    for name, kind in _ROWS:
        dt = _tf_type(peaks[name]) if kind == "f" else "int32"
        planned.append((name, dt, counts[name], taken.taken(name, final)))
    _write_file(path, _head(snapshot, key, n, len(terms)), planned)


class Vocabulary:
    """The terms of several sources, numbered in the order they first come."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def add(self, terms: list[str]) -> np.ndarray:
        """The id (int32) of each of `terms`, numbering the new ones."""
        import numpy as np

        ids = self._ids
        return np.fromiter((ids.setdefault(t, len(ids)) for t in terms), np.int32, len(terms))

    def sorted(self) -> tuple[list[str], np.ndarray]:
        """The terms sorted, and the rank of each id among them."""
        import numpy as np

        terms = list(self._ids)
        self._ids = {}
        order = sorted(range(len(terms)), key=terms.__getitem__)
        rank = np.empty(len(terms), dtype=np.int32)
        rank[np.array(order, dtype=np.int64)] = np.arange(len(terms), dtype=np.int32)
        return [terms[i] for i in order], rank


@dataclasses.dataclass(frozen=True, slots=True)
class RowsKeeper:
    """Where a build keeps its rows (`path`), and the batches it gathers beside it."""

    path: Path
    snapshot: str
    key: str

    def batch(self, k: int, rows: Rows) -> tuple[Path, Rows]:
        """Write one batch of gathered rows beside the kept file and map it back (the
        arrays in memory go). The caller removes the file (`drop`)."""
        p = self.path.with_name(f".batch-{os.getpid()}-{k}-{self.path.name}")
        with contextlib.suppress(FileNotFoundError):
            p.unlink()  # a killed build's, whose pid came round again
        try:
            write_rows(p, self.snapshot, self.key, rows, durable=False)
        except BaseException:
            self.drop([p])  # a half-written batch (disk full, a signal) goes now
            raise
        return p, read_rows(p, self.key)

    def keep(
        self,
        sources: list[Rows],
        runs: list[Run],
        record_ids: list[str],
        digests: bytes,
        vocab: Vocabulary | None = None,
        first_ids: list[np.ndarray] | None = None,
    ) -> Rows:
        """Write the build's rows from `runs` of `sources` and map them back."""
        write_runs(
            self.path, self.snapshot, self.key, sources, runs, record_ids, digests, vocab, first_ids
        )
        return read_rows(self.path, self.key)

    @staticmethod
    def drop(paths: list[Path]) -> None:
        for p in paths:
            with contextlib.suppress(OSError):
                p.unlink()
