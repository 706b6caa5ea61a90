"""Give freed heap memory back to the system between the phases of a long build.

glibc's allocator keeps memory freed by a finished phase (a batch's term tables, the
many small arrays of a gathering pass) in its heap for reuse; after a few batches the
process holds hundreds of MB it no longer uses, counted as its anonymous memory.
`malloc_trim(0)` returns the free pages. Elsewhere (musl, macOS) it is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        fn = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def release_freed_memory() -> None:
    """Return the heap's free pages to the system (glibc); nothing elsewhere."""
    fn = _trim()
    if fn is not None:
        fn(0)
