"""Open files bounded by design: a descriptor cache for segment logs, and one sync per log dir.

Theory of operation. A broker may host far more partitions than it may hold descriptors
(`ulimit -n`), so no part of storage keeps a file open because it exists:

- a segment's `.log` descriptor comes from a `FileCache`, which keeps at most `capacity` of
  them open and closes the least recently used one to open another. Busy partitions stay
  open; idle ones cost no descriptor. Closing never loses data (writes are in the page
  cache; durability is fsync's job, which opens its own descriptor, see below);
- index files hold no descriptor at all: an index lives in memory and its file is written
  (opened, appended, closed) when the segment rolls, is flushed, or closes
  (`abstract_index`);
- loading walks partitions with a private cache per worker, so recovery after a crash holds a
  few files per worker at a time, whatever the number of partitions.

A cache is owned by one thread at a time: the thread that uses `LogSegment.fd` (the event
loop at run time, the loading worker while a log loads). A descriptor it returns stays valid
until that thread asks the same cache for another one, so callers use it at once and never
across an await. Other threads never take descriptors from a shared cache: `LogSegment.flush`
(worker thread) opens the file for its fsync, and the cleaner writes with a private cache.

fsync per file made closing or recovering 10,000 partitions take seconds; `sync_filesystem`
is one `syncfs(2)` for the file system of a log dir, after which every file written before it
is durable, so checkpoints that record "fsynced up to here" are written once per log dir.

Small files that are rewritten whole (checkpoints, producer-state snapshots, the metadata and
producer-id files) are replaced by `write_atomically`, the one temp-file-and-rename here.
"""
from __future__ import annotations

import ctypes
import errno
import logging
import os
import resource
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Literal, Protocol

__all__ = ["FileCache", "CachedFile", "sync_filesystem", "can_sync_filesystem", "fsync_file",
           "fsync_directory", "write_atomically", "TMP_SUFFIX",
           "cache_capacity_for_limit", "MIN_CAPACITY"]

log = logging.getLogger(__name__)

TMP_SUFFIX = ".tmp"  # a file `write_atomically` had not renamed yet (see there)

# Below this a cache could close a descriptor its caller is still holding within one
# operation (a read walks one segment; a roll touches two).
MIN_CAPACITY = 8


class CachedFile(Protocol):
    """What the cache needs of a segment: the path, and a slot for the descriptor."""

    _fd: int | None

    def _cached_path(self) -> Path: ...


def cache_capacity_for_limit(limit: int | None = None) -> int:
    """Half of the soft RLIMIT_NOFILE: the other half is for sockets, checkpoints, snapshots
    and whatever else the process opens."""
    if limit is None:
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if limit == resource.RLIM_INFINITY:
            limit = 1 << 20
    return max(MIN_CAPACITY, limit // 2)


class FileCache:
    """At most `capacity` segment descriptors open; the least recently used closed first."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = max(MIN_CAPACITY, capacity if capacity is not None
                            else cache_capacity_for_limit())
        self._open: OrderedDict[CachedFile, None] = OrderedDict()
        self._lock = threading.Lock()
        self.opens = 0  # descriptors opened so far (tests and the bench look)

    def __len__(self) -> int:
        return len(self._open)

    def get(self, owner: CachedFile) -> int:
        """The owner's descriptor, opened (read-write, appending) if it has none."""
        fd = owner._fd
        if fd is not None:
            try:
                self._open.move_to_end(owner)
            except KeyError:  # registered elsewhere (a private cache that handed it over)
                pass
            return fd
        with self._lock:
            self._evict_to(self.capacity - 1)
            try:
                fd = os.open(owner._cached_path(), os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
            except OSError as exc:
                # Out of descriptors all the same (sockets use the other half of the limit):
                # give back half of ours and try once more rather than fail the request.
                if exc.errno not in (errno.EMFILE, errno.ENFILE) or not self._open:
                    raise
                log.warning("out of file descriptors (%s); closing %d cached segment files",
                            os.strerror(exc.errno), (len(self._open) + 1) // 2)
                self._evict_to(len(self._open) // 2)
                fd = os.open(owner._cached_path(), os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
            owner._fd = fd
            self._open[owner] = None
            self.opens += 1
        return fd

    def _evict_to(self, size: int) -> None:
        """Close least recently used descriptors until at most `size` stay (lock held)."""
        while len(self._open) > max(size, 0):
            victim, _ = self._open.popitem(last=False)
            victim_fd, victim._fd = victim._fd, None
            if victim_fd is not None:
                os.close(victim_fd)

    def close(self, owner: CachedFile) -> None:
        """Close the owner's descriptor, if it has one, and forget it."""
        with self._lock:
            self._open.pop(owner, None)
            fd, owner._fd = owner._fd, None
        if fd is not None:
            os.close(fd)

    def close_all(self) -> None:
        with self._lock:
            owners = list(self._open)
            self._open.clear()
        for owner in owners:
            fd, owner._fd = owner._fd, None
            if fd is not None:
                os.close(fd)


# libc's syncfs(2), looked up once: None until then, False where there is none.
_syncfs: Callable[[int], int] | Literal[False] | None = None


def _libc_syncfs() -> Callable[[int], int] | Literal[False]:
    global _syncfs
    if _syncfs is None:
        try:
            func = ctypes.CDLL(None, use_errno=True).syncfs
            func.argtypes = [ctypes.c_int]
            func.restype = ctypes.c_int
            _syncfs = func
        except (OSError, AttributeError):  # not Linux/glibc
            _syncfs = False
    return _syncfs


def can_sync_filesystem() -> bool:
    return bool(_libc_syncfs())


def sync_filesystem(path: Path) -> bool:
    """syncfs(2) the file system holding `path`: everything written there so far is durable.

    False where syncfs is unavailable; the caller then fsyncs file by file. OSError if the
    file system reports a writeback error (data may be lost: do not record it as durable).
    """
    func = _libc_syncfs()
    if not func:
        return False
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if func(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs {path}: {os.strerror(err)}")
    finally:
        os.close(fd)
    return True


def fsync_file(path: Path) -> bool:
    """fsync one file through a descriptor of its own (any descriptor of a file flushes its
    data), so a worker thread never uses one a cache may close; False if the file is gone."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def fsync_directory(path: Path) -> None:
    """Make renames and creations in `path` durable (a no-op where directories cannot be
    opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes | str, *, sync: bool = True) -> None:
    """Replace `path` by a file holding `data` (text as UTF-8), so that a crash leaves the old
    content or the new, never a mix: written to `<name>.tmp`, fsynced, renamed over `path`,
    then the directory fsynced. Without that last fsync the rename itself may not survive a
    power loss, and the caller would have acted on a file the disk then forgets (a lost
    leader-epoch entry answers OffsetForLeaderEpoch wrongly); Kafka's
    `Utils.atomicMoveWithFallback` flushes the parent directory likewise.

    `sync=False` fsyncs nothing: for callers that sync the whole file system once after many
    writes (syncfs covers the data, the rename and the directory), and for files loading can
    do without (a producer-state snapshot at a roll). It is still atomic against a crash of
    the process. A `.tmp` left by a crash midway is removed by the log loader in a partition
    directory, and overwritten by the next write anywhere else.
    """
    tmp = path.with_name(path.name + TMP_SUFFIX)
    with open(tmp, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync:
        fsync_directory(path.parent)
