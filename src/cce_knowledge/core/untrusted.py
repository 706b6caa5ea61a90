"""Text that came from somewhere we do not trust (a cache repository, a remote), made
safe to print: control characters become visible escapes, so a value can never move
the cursor, recolour a terminal, or start a new line of log output."""

from __future__ import annotations

import errno
import os
import re
import stat
from typing import BinaryIO

# C0 and C1 controls, DEL, the line/paragraph separators and the bidi overrides and
# isolates (they reorder what a reader sees without changing the bytes).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    cp = ord(m.group())
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}"


def shown(text: str) -> str:
    """`text` with every control character escaped (`\\x1b`, `\\n`, `\\u202e`)."""
    return _UNSAFE.sub(_escape, text)


class NotRegularFile(OSError):
    """A path that should hold a file's bytes is a FIFO, device, socket, directory or
    symlink: opening it could hang or read something else entirely."""


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
)


def file_kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """Open `path` for reading only if it is a regular file, never following a final
    symlink and never blocking on a FIFO (O_NONBLOCK, then checked with fstat on the
    open descriptor, so a swap between check and open cannot slip through)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise NotRegularFile(errno.ELOOP, "not a regular file (a symbolic link)") from e
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(errno.EINVAL, f"not a regular file ({file_kind(mode)})")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a regular file (see `open_regular`); OSError otherwise."""
    with open_regular(path) as f:
        return f.read()
