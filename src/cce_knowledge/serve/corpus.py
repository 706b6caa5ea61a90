"""The snapshot a server answers from, swapped without a restart.

A request takes the current `Served` once and uses only it, so no answer mixes two
snapshots. A poller thread watches `current`; when it names a new snapshot, the new
search index is opened (and warmed) beside the old one, then swapped in. The old
one is dropped by the holder; its mappings go when the last request holding it ends
(reference counting; a garbage collection is run for any cycle left).
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cce_knowledge.core.errors import StoreError
from cce_knowledge.core.rustcompat import io_error_text
from cce_knowledge.retrieval.rankings import configured_min_score, resolve_ranking
from cce_knowledge.retrieval.search_index import open_or_build
from cce_knowledge.store.snapshots import knowledge_dir, loads, read_current, store_path

if TYPE_CHECKING:
    from cce_knowledge.config.settings import Settings
    from cce_knowledge.retrieval.hits import Hit
    from cce_knowledge.retrieval.search_index import SearchIndex
    from cce_knowledge.retrieval.searcher import HybridRanker

log = logging.getLogger("cce_knowledge.serve")

Signature = tuple[str, int, int]


def signature(root: Path) -> Signature | None:
    """(snapshot, size, mtime_ns) of the active store; None before the first pull.
    Raises StoreError for a broken store (a `current` naming a missing snapshot)."""
    if not (knowledge_dir(root) / "current").exists():
        return None
    try:
        snap = read_current(root)
        st = os.stat(store_path(root, snap))
    except OSError as e:
        raise StoreError(
            f"{knowledge_dir(root)}: `current` is unreadable or names a "
            f"missing snapshot ({io_error_text(e)})"
        ) from e
    except UnicodeDecodeError as e:
        raise StoreError(f"{knowledge_dir(root) / 'current'} is not UTF-8") from e
    return (snap, st.st_size, st.st_mtime_ns)


@dataclass
class Served:
    """One snapshot's open search index: what a request answers from."""

    sig: Signature
    index: SearchIndex
    ranking: str
    floor: float
    hybrid_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def snapshot(self) -> str:
        return self.sig[0]


def open_served(root: Path, sig: Signature, settings: Settings) -> Served:
    """Open (or build) the snapshot's index and warm what a first request would wait
    for: the store's mapped view and, under the reference ranking, its sections."""
    snap = sig[0]

    def load() -> object:
        # This snapshot's store, never whatever `current` names by then.
        try:
            return loads(store_path(root, snap).read_bytes())
        except OSError as e:
            raise StoreError(io_error_text(e)) from e
        except (ValueError, UnicodeDecodeError) as e:
            raise StoreError(f"{store_path(root, snap)}: {e}") from e

    idx = open_or_build(root, snap, load)  # type: ignore[arg-type]
    ranking = resolve_ranking(settings, None)
    if idx.n_chunks:
        idx.doc(0)  # maps the store file now: a prune later cannot take it away
    if ranking == "reference":
        idx.reference()
    return Served(sig, idx, ranking, configured_min_score(settings, ranking))


class Corpus:
    """The served snapshot of ROOT and the thread that swaps it."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        settings: Settings,
        *,
        hybrid: HybridRanker | None = None,
        poll_seconds: float = 0.5,
    ) -> None:
        self.root = Path(root)
        self.settings = settings
        self.hybrid = hybrid
        self.poll_seconds = poll_seconds
        self._served: Served | None = None
        self._retired: list[weakref.ref[Served]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_note: str | None = None

    def open(self) -> None:
        """The store as it is at start: absent is fine (empty answers); broken raises
        StoreError (the command refuses to start)."""
        sig = signature(self.root)
        if sig is not None:
            self._served = open_served(self.root, sig, self.settings)

    def release(self) -> None:
        """Let go of the served snapshot (the parent of forked workers holds none)."""
        self._served = None
        gc.collect()

    @property
    def served(self) -> Served | None:
        return self._served

    def poll_once(self) -> None:
        try:
            sig = signature(self.root)
        except StoreError as e:
            log.warning("keeping snapshot %s: %s", self.snapshot, e.message)
            return
        cur = self._served
        if sig is None or (cur is not None and cur.sig == sig):
            self._collect()
            return
        try:
            new = open_served(self.root, sig, self.settings)
        except (StoreError, OSError, ValueError) as e:
            log.warning("keeping snapshot %s: cannot open %s: %s", self.snapshot, sig[0], e)
            return
        self._served = new  # one reference assignment: a request sees old or new
        if cur is not None:
            self._retired.append(weakref.ref(cur))
        log.info("now serving snapshot %s", new.snapshot)
        self._collect()

    def _collect(self) -> None:
        if self._retired:
            gc.collect()
            self._retired = [r for r in self._retired if r() is not None]

    @property
    def snapshot(self) -> str | None:
        s = self._served
        return None if s is None else s.snapshot

    def start(self) -> None:
        def run() -> None:
            while not self._stop.wait(self.poll_seconds):
                self.poll_once()

        self._thread = threading.Thread(target=run, name="cce-serve-poll", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self.hybrid is not None:
            self.hybrid.close()

    def search(self, served: Served, query: str, top_k: int) -> list[Hit]:
        """Hits from `served` only (the caller took it once for its whole request)."""
        if served.ranking == "hybrid" and self.hybrid is not None:
            with served.hybrid_lock:  # one provider connection per snapshot
                hits, note = self.hybrid.search(
                    self.root, served.index, self.settings, query, top_k, served.floor
                )
                if note != self._last_note:
                    # A fallback (provider down, vectors missing) is said when it starts,
                    # not per request; the note names no query.
                    if note is not None:
                        log.warning("%s", note)
                    self._last_note = note
            return hits
        rk = "default" if served.ranking == "hybrid" else served.ranking
        return served.index.search(query, top_k, served.floor, ranking=rk)
