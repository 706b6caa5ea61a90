"""The default ranking's postings, built from a build's gathered rows a range of terms
at a time.

Postings are rows sorted by (term, owner). Sorting every row of a big corpus at once
holds several arrays of its size in memory (positions, owners, weights and their
temporaries: ~2 GB at 100k issue-sized records). Here the vocabulary is cut into
consecutive term ranges of at most `RANGE_ROWS` rows each. One pass over the rows, a
slice at a time, deals each row (its position and owner) out to its range's bucket (an
unlinked file beside the spooled sections); then each range's rows are sorted by term
(stably: rows come owner by owner, so that is the (term, owner) order), weighted and
appended to their sections in a `SectionSpool`. The rows can be read-only maps of the rows file (search_rows.py): only
one range's arrays are ever in memory. Every weight is computed elementwise with the
same IEEE operations as `default.py`, so the bytes are those of a build that sorts all
rows at once (tests/retrieval/test_postings_build.py checks it with tiny ranges).

Lazy imports: numpy (~0.1-0.2 s), which only a build needs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from cce_knowledge.retrieval.analyze_native import native_module
from cce_knowledge.retrieval.default import (
    BODY_B,
    BODY_WEIGHT,
    K1,
    LEAD_B,
    LEAD_WEIGHT,
    SECTION_B,
    TITLE_B,
    TITLE_WEIGHT,
    field_norm,
    mean_length,
)
from cce_knowledge.retrieval.section_spool import SectionSpool

if TYPE_CHECKING:
    import numpy as np

    from cce_knowledge.retrieval.search_rows import Rows

#: Rows of one term range (a term with more rows is a range of its own). About 60
#: bytes of arrays per row are in flight: ~250 MB.
RANGE_ROWS = 1 << 22
#: Rows of one slice when counting rows or dealing them out to their ranges.
SCAN_ROWS = 1 << 23


def narrow(values: np.ndarray) -> bytes:
    """Offsets and pointers as int32 (their type code goes in the header's `types`
    when they need int64)."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    if len(values) and int(values.max()) >= 2**31:
        return values.astype(np.int64).tobytes()
    return values.astype(np.int32).tobytes()


def _narrowest_unsigned(peak: int) -> type:
    import numpy as np

    return np.uint8 if peak < 256 else np.uint16 if peak < 65536 else np.int32


def _slices(n: int, step: int) -> Iterator[tuple[int, int]]:
    for s in range(0, n, step):
        yield s, min(n, s + step)


def term_counts(tids: np.ndarray, n_terms: int) -> np.ndarray:
    """Rows per term (int64), counted a slice at a time (bincount widens its input)."""
    import numpy as np

    counts = np.zeros(n_terms, dtype=np.int64)
    for s, e in _slices(len(tids), SCAN_ROWS):
        counts += np.bincount(tids[s:e], minlength=n_terms)
    return counts


def _pointers(counts: np.ndarray) -> np.ndarray:
    import numpy as np

    ptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr


def term_ranges(ptr: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive term ranges [a, b) covering the vocabulary, each with at most
    `budget` rows unless one term alone has more."""
    import numpy as np

    out: list[tuple[int, int]] = []
    n_terms = len(ptr) - 1
    a = 0
    while a < n_terms:
        b = int(np.searchsorted(ptr, ptr[a] + budget, side="right")) - 1
        b = min(max(b, a + 1), n_terms)
        out.append((a, b))
        a = b
    return out


class _Buckets:
    """Each term range's rows (positions, owners), ascending, kept in memory or, given
    a directory, in unlinked files per range: one pass over the rows fills them all."""

    def __init__(self, n: int, directory: Path | None, wide: bool) -> None:
        import numpy as np

        # Positions fit in int32 below 2**31 rows: half the bytes to write and read.
        self._pos_type = np.dtype(np.int64 if wide else np.int32)
        self._mem: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(n)]
        self._files: list[tuple[IO[bytes], IO[bytes]]] | None = None
        if directory is not None:
            self._files = [
                (
                    tempfile.TemporaryFile(dir=directory, prefix=".range-"),
                    tempfile.TemporaryFile(dir=directory, prefix=".range-"),
                )
                for _ in range(n)
            ]

    def put(self, k: int, pos: np.ndarray, owner: np.ndarray) -> None:
        import numpy as np

        pos = np.ascontiguousarray(pos, dtype=self._pos_type)
        owner = np.ascontiguousarray(owner, dtype=np.int32)
        if self._files is None:
            self._mem[k].append((pos, owner))
        else:
            fp, fo = self._files[k]
            fp.write(pos.data)
            fo.write(owner.data)

    def take(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Range k's positions and owners (int32); its files are closed."""
        import numpy as np

        if self._files is None:
            parts, self._mem[k] = self._mem[k], []
            if not parts:
                return np.empty(0, dtype=self._pos_type), np.empty(0, dtype=np.int32)
            return np.concatenate([p for p, _ in parts]), np.concatenate([o for _, o in parts])
        got = []
        for f, dt in zip(self._files[k], (self._pos_type, np.dtype(np.int32)), strict=True):
            with f:
                f.seek(0)
                got.append(np.frombuffer(f.read(), dtype=dt))
        return got[0], got[1]

    def close(self) -> None:
        for pair in self._files or ():
            for f in pair:
                f.close()


def _by_range(
    tids: np.ndarray, starts: np.ndarray, ranges: list[tuple[int, int]], directory: Path | None
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """For each term range in turn: its rows' positions and owners, ascending, and the
    order that sorts them by (term, position). One pass over the rows deals them out
    to their ranges (linear: no range scans every row)."""
    import numpy as np

    mod = native_module()

    def term_order(t32: np.ndarray, a: int, b: int) -> np.ndarray:
        if mod is None:
            return np.argsort(t32, kind="stable")
        if a:
            t32 = t32 - a
        # A counting sort, stable.
        return np.frombuffer(mod.term_order(np.ascontiguousarray(t32), b - a), dtype=np.int64)

    if len(ranges) == 1:
        # One range holds every row: owners run 0, 0, 1, 2, 2, ... (no search).
        a, b = ranges[0]
        pos = np.arange(len(tids), dtype=np.int64)
        owner = np.repeat(np.arange(len(starts) - 1, dtype=np.int32), np.diff(starts))
        yield pos, owner, term_order(np.ascontiguousarray(tids, dtype=np.int32), a, b)
        return
    widths = np.array([b - a for a, b in ranges], dtype=np.int64)
    range_of = np.repeat(np.arange(len(ranges), dtype=np.int32), widths)
    buckets = _Buckets(len(ranges), directory, wide=len(tids) >= 2**31)
    try:
        for s, e in _slices(len(tids), SCAN_ROWS):
            which = range_of[tids[s:e]]
            order = term_order(which, 0, len(ranges))  # stable: positions stay ascending
            bounds = _pointers(np.bincount(which, minlength=len(ranges)))
            pos = order + s
            owner = _slice_owners(starts, s, e)[order]
            for k in np.flatnonzero(np.diff(bounds)).tolist():
                lo, hi = int(bounds[k]), int(bounds[k + 1])
                buckets.put(k, pos[lo:hi], owner[lo:hi])
            del which, order, pos, owner
        for k, (a, b) in enumerate(ranges):
            pos, owner = buckets.take(k)
            yield pos, owner, term_order(np.ascontiguousarray(tids[pos], dtype=np.int32), a, b)
    finally:
        buckets.close()


def _slice_owners(starts: np.ndarray, s: int, e: int) -> np.ndarray:
    """The owner (int32) of every row s..e-1: a repeat, no search per row."""
    import numpy as np

    r0 = int(np.searchsorted(starts, s, side="right")) - 1
    r1 = int(np.searchsorted(starts, e - 1, side="right")) - 1
    bounds = np.clip(starts[r0 : r1 + 2], s, e)
    return np.repeat(np.arange(r0, r1 + 1, dtype=np.int32), np.diff(bounds))


def _starts(counts: np.ndarray) -> np.ndarray:
    """Where each owner's rows start (int64, then the end): owners by position."""
    return _pointers(counts.astype("int64", copy=False))


def _postings(
    spool: SectionSpool,
    name: str,
    tids: np.ndarray,
    counts: np.ndarray,
    n_terms: int,
    columns: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]],
    rows_per_term: np.ndarray | None = None,
) -> None:
    """`<name>_ptr`, `<name>_ids`, then one section per entry of `columns` (given the
    sorted rows' positions and owners, their values), a term range at a time.
    `rows_per_term`: `term_counts(tids)` when the caller has it already."""
    import numpy as np

    if rows_per_term is None:
        rows_per_term = term_counts(tids, n_terms)
    ptr = _pointers(rows_per_term)
    del rows_per_term
    spool.add(name + "_ptr", narrow(ptr))
    sections = [name + "_ids", *columns]
    for section in sections:
        spool.add(section, b"")
    starts = _starts(counts)
    ranges = term_ranges(ptr, RANGE_ROWS)
    for pos, owner, order in _by_range(tids, starts, ranges, spool.directory):
        spool.add(name + "_ids", owner[order].data)
        # Values are computed in row order (near-sequential reads of the columns),
        # then put in postings order: elementwise, so the same values.
        for section, values in columns.items():
            spool.add(section, np.ascontiguousarray(values(pos, owner)[order]).data)
        del pos, owner, order


def _field_norms(rows: Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each record's BM25F length norm of title, body and lead (float64)."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    n = len(rows.rec_n)
    lens = [x.tolist() for x in (rows.title_len, rows.body_len, rows.lead_len)]
    avg_t, avg_b, avg_l = (mean_length(x, n) for x in lens)
    return (
        np.array([field_norm(TITLE_B, x, avg_t) for x in lens[0]], dtype=np.float64),
        np.array([field_norm(BODY_B, x, avg_b) for x in lens[1]], dtype=np.float64),
        np.array([field_norm(LEAD_B, x, avg_l) for x in lens[2]], dtype=np.float64),
    )


def record_postings(rows: Rows, n_terms: int, spool: SectionSpool) -> None:
    """`term_df`, the record postings (`rec_ptr`, `rec_ids`, `rec_w`, `rec_tf`) and the
    title postings (`tit_ptr`, `tit_ids`)."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    # Document frequencies: a query computes idf(n, df) for its few terms.
    # (a record row per (record, term): the same counts give the record postings' ptr)
    df = term_counts(rows.rec_tid, n_terms)
    spool.add("term_df", df.astype(np.int32).tobytes())
    norm_t, norm_b, norm_l = _field_norms(rows)

    def saturated(pos: np.ndarray, owner: np.ndarray) -> np.ndarray:
        # BM25F saturation with the same IEEE operations, in the same order, as
        # default.saturate (numpy adds and divides exactly like Python floats).
        tfp = rows.tf_title[pos].astype(np.int32) * TITLE_WEIGHT
        tfp /= norm_t[owner]
        part = rows.tf_body[pos].astype(np.int32) * BODY_WEIGHT
        part /= norm_b[owner]
        tfp += part
        part = rows.tf_lead[pos].astype(np.int32) * LEAD_WEIGHT
        part /= norm_l[owner]
        tfp += part
        part = tfp + K1
        tfp /= part
        return tfp.astype(np.float32)

    tf_type = _narrowest_unsigned(int(rows.tf_body.max()) if len(rows.tf_body) else 0)
    _postings(
        spool,
        "rec",
        rows.rec_tid,
        rows.rec_n,
        n_terms,
        {
            "rec_w": saturated,
            "rec_tf": lambda pos, _owner: rows.tf_body[pos].astype(tf_type),
        },
        rows_per_term=df,
    )
    del df
    _postings(spool, "tit", rows.title_tid, rows.title_n, n_terms, {})


def section_postings(rows: Rows, n_terms: int, spool: SectionSpool) -> None:
    """The section postings (`sec_ptr`, `sec_ids`, `sec_w`: each section's tf saturated
    against its own length) and every section's length norm (`sec_norm`)."""
    # Lazy: numpy costs ~0.1-0.2 s; only a build needs it.
    import numpy as np

    c_len = rows.sec_len.tolist()
    n_docs = len(c_len)
    avg_c = sum(c_len) / n_docs if n_docs else 0.0
    norm_c = np.array([field_norm(SECTION_B, x, avg_c) for x in c_len], dtype=np.float64)
    del c_len

    def weight(pos: np.ndarray, owner: np.ndarray) -> np.ndarray:
        tf = rows.sec_tf[pos].astype(np.int32)
        return (tf / (tf + K1 * norm_c[owner])).astype(np.float32)

    _postings(spool, "sec", rows.sec_tid, rows.sec_n, n_terms, {"sec_w": weight})
    spool.add("sec_norm", norm_c.tobytes())
