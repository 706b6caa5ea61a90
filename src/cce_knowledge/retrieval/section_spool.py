"""The sections of an index file, written a piece at a time, in memory or on disk.

A big search-index build produces postings a range of terms at a time
(`postings_build.py`), so a section such as `rec_ids` arrives in pieces, interleaved
with the pieces of `rec_w` and `rec_tf`. The spool appends each piece to its section:
in memory (small builds, tests, the loaded-store builder), or in an unlinked temporary
file per section in a given directory (the index's own, so on the disk it is written
to). A spooled section is then read through a read-only map: its pages are the
kernel's to drop, so the finished sections do not count against the build's memory.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from pathlib import Path
from typing import IO

#: What a section is handed out as, and what a piece of one may be.
Section = bytes | memoryview
Piece = bytes | bytearray | memoryview


class SectionSpool:
    """Sections by name, in the order of their first piece (the file's layout)."""

    def __init__(self, directory: Path | None = None) -> None:
        self._dir = directory
        self._mem: dict[str, bytearray] = {}
        self._files: dict[str, IO[bytes]] = {}
        self._names: list[str] = []

    @property
    def directory(self) -> Path | None:
        """Where spooled files go (None: in memory)."""
        return self._dir

    def add(self, name: str, data: Piece) -> None:
        """Append `data` to section `name` (a new name starts a section)."""
        if name not in self._mem and name not in self._files:
            self._names.append(name)
            if self._dir is None:
                self._mem[name] = bytearray()
            else:
                self._files[name] = tempfile.TemporaryFile(dir=self._dir, prefix=".spool-")
        if self._dir is None:
            self._mem[name] += data
        else:
            self._files[name].write(data)

    def sections(self) -> dict[str, Section]:
        """Every section, whole; spooled ones as read-only maps of their files. The
        spool is spent: its files are closed (a map keeps its file's pages)."""
        out: dict[str, Section] = {}
        for name in self._names:
            if name in self._mem:
                out[name] = bytes(self._mem.pop(name))
                continue
            f = self._files.pop(name)
            with f:
                f.flush()
                size = os.fstat(f.fileno()).st_size
                out[name] = (
                    memoryview(mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ))
                    if size
                    else b""
                )
        self._names = []
        return out

    def close(self) -> None:
        """Drop every section not yet taken (a failed build)."""
        for f in self._files.values():
            f.close()
        self._files.clear()
        self._mem.clear()
        self._names = []
