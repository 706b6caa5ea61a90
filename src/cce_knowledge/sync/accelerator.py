"""The native accelerator's Python side: streamed `.cck` → store import for pull,
and the scans push uses (the shrink guard's digests, the store → `.cck` export).

Pull's import handles canonical artifacts only. Every artifact a conforming producer
writes is canonical: each chunk line is exactly `canonical(typed chunk)`, so the strict
verifier's re-serialisation is the identity and the hash of the received body is the
hash it would compute. The C scanner accepts only lines that are canonical by
construction (fixed sorted keys, no whitespace, serde_json's exact string escapes,
plain u64 digits, canonical padded base64); anything else goes back to the strict path
(`cck.strict_stream_store_parts`), which decides every error. Same bytes either way
(tests/sync/test_sync_native.py), arranged so the cost is the work and not its sum:

* the C module (`_cckfast`, see hatch_build.py) renders line ranges with the GIL
  released, so ranges render on threads in parallel — no forked workers, no result
  transfer between processes;
* the manifest checksum is computed on another thread while they render;
* parts are yielded in order as they finish, so the caller writes the store while
  later ranges still render;
* the input may be any buffer (an mmap of the LFS object: no copy into memory).

Whenever the fast path cannot decide alone — no native module, a non-canonical
line, a checksum that does not match — `stream_store_parts` returns None up front or
the iterator raises `NotCanonical` before its last part, and the caller re-runs the
strict path. The writer must therefore treat the stream as provisional until it ends
(atomic_write_parts does: an exception discards the temp file).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from cce_knowledge.core.native import Accelerator
from cce_knowledge.sync.cck import (
    CckManifest,
    ExportSlice,
    _bits_text,
    _digest,
    _line_ranges,
    _store_head,
    _token_str,
    _workers,
    chunk_digest,
    fast_head,
)

#: Bytes of artifact per rendered range (pull, the shrink guard). Small: writing starts
#: after the first MiB, the two threads stay balanced to the end, and recently freed
#: output buffers are reused instead of faulting in fresh memory (measured on 2 cores:
#: rfcs install ~15 ms faster than with 8 MiB, the 100k render 0.38 s against 0.49 s).
RANGE_BYTES = 1 << 20


class NotCanonical(Exception):
    """The fast path cannot decide this artifact; run the strict path."""


#: The `_cckfast` module beside its C source (see core/native.py for when it is used).
CCK = Accelerator(
    "cce_knowledge.sync._cckfast", Path(__file__).with_name("_cckfast.c"), ".cck accelerator"
)


def native() -> ModuleType | None:
    """The `_cckfast` module, or None (not built, disabled with CCE_NATIVE=0, or
    compiled from an older `_cckfast.c` than the one beside it — an editable install
    whose C source changed since `pip install -e .`)."""
    return CCK.get()


def stream_store_parts(
    data: Any, jobs: int | None = None
) -> tuple[CckManifest, Iterator[bytes]] | None:
    """(manifest, store-file parts in order) for a canonical artifact, else None.

    `data` is bytes or an mmap. The iterator raises NotCanonical (before yielding the
    closing part) when the strict path has to decide after all."""
    mod = native()
    head = fast_head(data) if mod is not None else None
    if mod is None or head is None:
        return None
    return head[0], _parts(mod, head[0], data, head[1], jobs)


def _body_digest(m: CckManifest, data: Any, lo: int) -> tuple[threading.Thread, list[str]]:
    """Start the checksum on a thread (hashlib drops the GIL); the list gets the digest."""
    digest: list[str] = []
    t = threading.Thread(
        target=lambda: digest.append(_digest(m, memoryview(data)[lo:])),
        name="cck-checksum",
        daemon=True,
    )
    t.start()
    return t, digest


def chunk_digests(
    data: Any, jobs: int | None = None
) -> tuple[CckManifest, list[tuple[str, bytes]]] | None:
    """`cck.import_chunk_digests` on the native path (the shrink guard's read of the
    remote artifact), or None whenever the strict path has to decide."""
    mod = native()
    head = fast_head(data) if mod is not None else None
    if mod is None or head is None:
        return None
    m, lo = head
    hasher, digest = _body_digest(m, data, lo)
    workers = _workers(jobs)
    ranges = _line_ranges(data, lo, len(data), max(workers, -(-(len(data) - lo) // RANGE_BYTES)))
    scans = _Renders(lambda a, b: mod.tokens(data, a, b), ranges, workers)
    out: list[tuple[str, bytes]] = []
    try:
        for i in range(len(ranges)):
            toks = scans.take(i)
            if toks is None:
                return None
            out += [(_token_str(r), chunk_digest(_token_str(c))) for r, c in toks]
    finally:
        scans.close()
        hasher.join()
    if len(out) != m.chunk_count or digest != [m.checksum]:
        return None
    return m, out


def _parts(
    mod: ModuleType, m: CckManifest, data: Any, lo: int, jobs: int | None
) -> Iterator[bytes]:
    hi = len(data)
    workers = _workers(jobs)
    ranges = _line_ranges(data, lo, hi, max(workers, -(-(hi - lo) // RANGE_BYTES)))
    hasher, digest = _body_digest(m, data, lo)
    renders = _Renders(lambda a, b: mod.render(data, a, b, _bits_text), ranges, workers)
    try:
        yield _store_head(m)
        count = 0
        opener = b'  "chunks": [\n'
        for i in range(len(ranges)):
            got = renders.take(i)  # dropped once written: bounded memory
            if got is None:
                raise NotCanonical
            count += got[0]
            yield opener
            yield got[1]
            opener = b",\n"
            del got
        hasher.join()
        if count != m.chunk_count or digest != [m.checksum]:
            raise NotCanonical
        yield b'  "chunks": []\n}\n' if not ranges else b"\n  ]\n}\n"
    finally:
        renders.close()
        hasher.join()


class _Renders:
    """`mod.render` over ranges on worker threads, results taken in order.

    Plain threads rather than concurrent.futures, whose import (it pulls in logging)
    would cost every pull's cold start more than this class's few lines."""

    def __init__(
        self, fn: Callable[[int, int], Any], ranges: list[tuple[int, int]], workers: int
    ) -> None:
        self._results: list[Any] = [None] * len(ranges)
        self._ready = [threading.Event() for _ in ranges]
        self._next = itertools.count()
        self._stop = False
        # At most this many rendered-but-unwritten ranges: bounds memory when the
        # disk is slower than the renderers.
        self._room = threading.Semaphore(2 * workers + 1)

        def work() -> None:
            while not self._stop:
                # Room first, then an index: every claimed index already holds its
                # room, so the next one the writer waits for can always render.
                if not self._room.acquire(timeout=0.1):
                    continue
                i = next(self._next)  # atomic under the GIL
                if i >= len(ranges):
                    self._room.release()
                    return
                try:
                    self._results[i] = (True, fn(*ranges[i]))
                except BaseException as e:  # re-raised by take() in the caller's thread
                    self._results[i] = (False, e)
                self._ready[i].set()

        self._threads = [
            threading.Thread(target=work, name="cck-render", daemon=True)
            for _ in range(min(workers, len(ranges)))
        ]
        for t in self._threads:
            t.start()

    def take(self, i: int) -> Any:
        self._ready[i].wait()
        ok, value = self._results[i]
        self._results[i] = None
        self._room.release()
        if not ok:
            raise value
        return value

    def close(self) -> None:
        self._stop = True
        for t in self._threads:
            t.join()


def iter_export_slices(
    data: Any, ranges: list[tuple[int, int]], jobs: int | None = None
) -> Iterator[ExportSlice | None] | None:
    """`export_slices` one slice at a time, in order (at most 2 × workers + 1 rendered
    and not yet taken): None when the module is missing; a None item when an object
    is not in the writer's exact layout (the caller then takes the Python paths)."""
    mod = native()
    if mod is None:
        return None
    return _iter_slices(mod, data, ranges, _workers(jobs))


def _iter_slices(
    mod: ModuleType, data: Any, ranges: list[tuple[int, int]], workers: int
) -> Iterator[ExportSlice | None]:
    runs = _Renders(lambda a, b: mod.export(data, a, b), ranges, workers)
    try:
        for i in range(len(ranges)):
            got = runs.take(i)
            if got is None:
                yield None
                return
            lines, toks, phase_a = got
            del got
            pairs = [(_token_str(r), chunk_digest(_token_str(c))) for r, c, _ in toks]
            stamps = [_token_str(u) for _, _, u in toks if u != b"null"]
            del toks
            yield lines, pairs, max(stamps) if stamps else None, phase_a
    finally:
        runs.close()


def export_slices(
    data: Any, ranges: list[tuple[int, int]], jobs: int | None = None
) -> list[ExportSlice] | None:
    """`cck._fast_export_range` over `ranges` on the native path (push: store file ->
    canonical `.cck` lines), or None when the module is missing or any object is not
    in the writer's exact layout (the caller then takes the Python paths)."""
    mod = native()
    if mod is None:
        return None
    runs = _Renders(lambda a, b: mod.export(data, a, b), ranges, _workers(jobs))
    out: list[ExportSlice] = []
    try:
        for i in range(len(ranges)):
            got = runs.take(i)
            if got is None:
                return None
            lines, toks, phase_a = got
            pairs = [(_token_str(r), chunk_digest(_token_str(c))) for r, c, _ in toks]
            stamps = [_token_str(u) for _, _, u in toks if u != b"null"]
            out.append((lines, pairs, max(stamps) if stamps else None, phase_a))
    finally:
        runs.close()
    return out
