"""Atomic file writes and a per-directory writer lock.

A reader never sees a half-written file: bytes go to a temp file in the same
directory (`.{name}.tmp.{pid}.{seq}`, a name that never looks like a snapshot),
are fsynced, take the destination's permission bits, and are renamed over it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from cce_knowledge.errors import CceError

_seq = itertools.count()


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `path` atomically (all or nothing)."""
    atomic_write_parts(path, (data,))


def atomic_write_parts(path: str | os.PathLike[str], parts: Iterable[bytes]) -> None:
    """`atomic_write` of the concatenation of `parts`, without joining them in memory."""
    dest = Path(path)
    tmp = dest.parent / f".{dest.name}.tmp.{os.getpid()}.{next(_seq)}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            for data in parts:
                view = memoryview(data)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, stat.S_IMODE(os.stat(dest).st_mode))
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(dest.parent)


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class LockBusy(CceError):
    pass


@contextlib.contextmanager
def dir_lock(directory: str | os.PathLike[str], *, what: str, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive advisory lock on `directory/.lock` for the block.

    Two writers on one root never interleave; with `wait=False` a busy lock is an
    error naming `what` instead of a wait.
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    fd = os.open(d / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        flags = fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB)
        try:
            fcntl.flock(fd, flags)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise LockBusy(f"another {what} is running on {d} — wait for it to finish") from e
            raise
        yield
    finally:
        os.close(fd)
