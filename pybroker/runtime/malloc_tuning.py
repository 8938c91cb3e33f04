"""glibc's allocator, tuned for the broker's buffers and told when to give memory back.

Elsewhere (musl, macOS) both functions do nothing and say so.
"""
from __future__ import annotations

import ctypes
import os

__all__ = ["tune_malloc", "trim_malloc"]

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def tune_malloc(mmap_threshold: int = 32 << 20, trim_threshold: int = 4 << 20) -> bool:
    """Keep the broker's large buffers in the heap instead of fresh mmaps (glibc only).

    Every Produce frame, receive buffer and record set is a buffer of 256 KB to a few MB.
    Above glibc's mmap threshold (128 KB, raised only when such a block is freed, and not for
    blocks a realloc shrank) each is an mmap, page faults on every page, and an munmap: a
    256 KB receive of a 200-byte request cost ~10 us instead of ~1 us, and the page faults
    were a third of the broker's CPU per produced MB. Raising the threshold to 32 MB removes
    them. The trim threshold (free memory at the top of the heap kept rather than returned)
    is set too, to 4 MB: under load it did as well as 64 MB. What sits free below the top of
    the heap after a burst is given back by `trim_malloc`. The MALLOC_*_ environment
    variables, if set, win. Returns whether both were applied.
    """
    if any(k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        return False
    libc = _libc()
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:  # not glibc: nothing to tune
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, trim_threshold))


def trim_malloc() -> bool:
    """Return the heap's free pages to the system (glibc's malloc_trim(0), which also frees
    whole free pages in the middle of the heap, not only at its top). After a flood of large
    requests, buffers freed while other clients' small allocations sit above them in the heap
    stay resident otherwise. Whether anything was returned."""
    trim = getattr(_libc(), "malloc_trim", None)
    return bool(trim(0)) if trim is not None else False
