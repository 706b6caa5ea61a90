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
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from cce_knowledge.core.errors import CceError

_seq = itertools.count()


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `path` atomically (all or nothing)."""
    atomic_write_parts(path, (data,))


def atomic_write_parts(
    path: str | os.PathLike[str],
    parts: Iterable[bytes | memoryview],
    *,
    flush_early: bool = False,
) -> None:
    """`atomic_write` of the concatenation of `parts`, without joining them in memory.

    `flush_early` starts writeback while later parts are still being produced (an
    fdatasync on a helper thread per FLUSH_STEP bytes), so the closing fsync of a
    large file waits for the tail only, not for the whole file."""
    dest = Path(path)
    tmp = dest.parent / f".{dest.name}.tmp.{os.getpid()}.{next(_seq)}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        flusher: threading.Thread | None = None
        try:
            unflushed = 0
            for data in parts:
                view = memoryview(data)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                unflushed += len(data)
                if flush_early and unflushed >= FLUSH_STEP and not (flusher and flusher.is_alive()):
                    flusher = threading.Thread(target=_quiet_fdatasync, args=(fd,), daemon=True)
                    flusher.start()
                    unflushed = 0
            if flusher is not None:
                flusher.join()
            os.fsync(fd)
        finally:
            if flusher is not None:
                flusher.join()
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, stat.S_IMODE(os.stat(dest).st_mode))
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(dest.parent)


def create_if_absent(path: str | os.PathLike[str], data: bytes) -> bool:
    """Create `path` holding `data` only if nothing (not even a dangling symlink) is
    there; True when this call created it. Atomic: the bytes go to a temp file that is
    hard-linked to `path`, and a link never follows or replaces what is already there."""
    dest = Path(path)
    tmp = dest.parent / f".{dest.name}.tmp.{os.getpid()}.{next(_seq)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, dest, follow_symlinks=False)
        except FileExistsError:
            return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    _fsync_dir(dest.parent)
    return True


#: Bytes written between early writeback kicks (see atomic_write_parts).
FLUSH_STEP = 16 << 20


def _quiet_fdatasync(fd: int) -> None:
    # Only an early start: the closing fsync reports any error. (No fdatasync on macOS.)
    with contextlib.suppress(OSError):
        getattr(os, "fdatasync", os.fsync)(fd)


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
def file_lock(
    path: str | os.PathLike[str],
    *,
    busy: str,
    timeout: float | None = None,
    error: type[CceError] = LockBusy,
    on_wait: Callable[[str], None] | None = None,
    what: str = "",
) -> Iterator[None]:
    """Hold an exclusive advisory lock (flock) on `path` for the block.

    `timeout=None` waits as long as it takes; otherwise a lock still held after
    `timeout` seconds (0: at once) raises `error(busy)`. The lock dies with the
    process, so a killed writer never leaves a stale lock behind. When the lock is
    busy, `on_wait` (if given) hears once whom we are waiting for; the holder's pid
    and `what` are kept in the lock file for that message.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not _try_flock(fd):
            if on_wait is not None and timeout != 0:
                holder = _holder(fd)
                on_wait(f"waiting for {holder or 'another writer'} to finish ({os.fspath(path)})")
            if timeout is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            else:
                deadline = time.monotonic() + timeout
                while not _try_flock(fd):
                    if time.monotonic() >= deadline:
                        raise error(busy) from None
                    time.sleep(0.05)
        if what:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{what} (pid {os.getpid()})\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise
        return False
    return True


def _holder(fd: int) -> str:
    """Who holds the lock, as its holder wrote it ("knowledge index (pid 42)"); "" if unknown."""
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""
    # Only our own one-line note; anything else in the file is not shown.
    return text if _HOLDER.fullmatch(text) else ""


_HOLDER = re.compile(r"[a-z -]{1,60} \(pid [0-9]{1,10}\)")

#: Lock files this thread holds through `dir_lock` (a nested writer re-enters).
_held = threading.local()


@contextlib.contextmanager
def dir_lock(
    directory: str | os.PathLike[str],
    *,
    what: str,
    wait: bool = True,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Hold an exclusive advisory lock on `directory/.lock` for the block.

    Two writers on one root never interleave; with `wait=False` a busy lock is an
    error naming `what` instead of a wait. Re-entrant within a thread (pull --all
    holds the root while the pull it runs takes it again). The new holder removes
    the temp files of writers that died mid-write (see `remove_dead_temps`).
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    lock = d / ".lock"
    key = os.path.realpath(lock)
    held: set[str] = _held.__dict__.setdefault("paths", set())
    if key in held:
        yield
        return
    busy = f"another {what} is running on {d} — wait for it to finish"
    with file_lock(lock, busy=busy, timeout=None if wait else 0, on_wait=on_wait, what=what):
        held.add(key)
        try:
            remove_dead_temps(d)
            yield
        finally:
            held.discard(key)


_TEMP_NAME = re.compile(r"\..+\.tmp\.([0-9]{1,10})\.[0-9]+")


def remove_dead_temps(directory: str | os.PathLike[str]) -> list[str]:
    """Delete `atomic_write` temp files in `directory` whose writer process is gone.

    A writer killed mid-write leaves its `.{name}.tmp.{pid}.{seq}` behind (tens of MB
    for a store); call this holding the directory's writer lock. A live pid's file is
    never touched. Returns the names removed."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    removed = []
    for name in names:
        m = _TEMP_NAME.fullmatch(name)
        if m is None or _alive(int(m.group(1))):
            continue
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(directory, name))
            removed.append(name)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True
