"""What the offset index and the time index share: a file of fixed-size big-endian entries.

Theory of operation. An index is sparse and only ever grows at the end while its segment is
active, so it is kept as two parallel `array`s in memory (keys searched with `bisect`, no file
reads per lookup). The file is written append-only, but not per entry and through no
descriptor kept open: entries not yet in the file are appended (open, one write, close) when
the segment rolls, is flushed (then fsynced) or closes. A broker with 50,000 partitions thus
holds no index descriptors at all. What the file may lack after a crash is only what lies past
the recovery point, which loading re-validates and re-indexes from the log anyway. Kafka
preallocates and mmaps its index files (dirty pages that are written back when the kernel
likes); an append-only file gives the same on-disk bytes without the trim-on-close step, and
a torn last entry is caught by the size check.

Indexes are loaded lazily, on the first lookup or append: a broker opening thousands of
partitions after a clean shutdown reads none of the old segments' indexes until somebody asks.
A file whose size is not a whole number of entries, or whose entries are out of order, raises
`CorruptIndexError`; the segment then rebuilds the index from its log (indexes are derived
data and never trusted over the log).
"""
from __future__ import annotations

import os
import sys
import threading
from array import array
from pathlib import Path
from typing import ClassVar

__all__ = ["AbstractIndex", "CorruptIndexError"]

_LITTLE_ENDIAN = sys.byteorder == "little"
# Serialises file writes, truncations and renames of every index: `flush` writes from a worker
# thread while the event loop may roll, truncate or rename. One lock for all (held for one
# short write) rather than one per index: a broker may have 100,000 indexes.
_FILE_LOCK = threading.Lock()


class CorruptIndexError(Exception):
    """An index file that cannot be right; the caller rebuilds it from the log."""


class AbstractIndex:
    """Sorted (key, value) entries of one segment, mirrored to an append-only file."""

    entry_size: ClassVar[int]
    key_type: ClassVar[str]
    value_type: ClassVar[str] = "I"

    def __init__(self, path: Path, base_offset: int, max_index_size: int, *,
                 directory: Path | None = None) -> None:
        """`directory`: the segment's Path object (`path`'s parent), shared rather than one
        per file (a broker holds 100,000 indexes; a Path costs ~300 bytes, a name ~70)."""
        self._dir = directory if directory is not None else path.parent
        self._name = path.name
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry_size)
        self._keys: array[int] = array(self.key_type)
        self._values: array[int] = array(self.value_type)
        self._loaded = False
        self._written = 0  # entries that are in the file
        self._dirty = False  # the file changed since it was last fsynced
        # Counts the writers' turns under _FILE_LOCK: a fsync done outside the lock clears
        # `_dirty` only if no write or truncation came in between (`write_pending`).
        self._changes = 0
        self._deleted = False

    @property
    def path(self) -> Path:
        return self._dir / self._name

    # -- loading -----------------------------------------------------------------------------
    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        if len(data) % self.entry_size:
            raise CorruptIndexError(
                f"{self.path}: size {len(data)} is not a multiple of {self.entry_size}")
        keys, values = self._decode(data)
        self._check_entries(keys, values)
        self._keys, self._values = keys, values
        self._written = len(keys)
        self._loaded = True

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        raise NotImplementedError

    def _encode(self, key: int, value: int) -> bytes:
        raise NotImplementedError

    def _check_entries(self, keys: array[int], values: array[int]) -> None:
        """Kafka checks only the last entry at load; we also check the first against the base."""
        if keys and (keys[-1] < keys[0]):
            raise CorruptIndexError(f"{self.path}: entries out of order")

    @staticmethod
    def _u32_pairs(data: bytes) -> tuple[array[int], array[int]]:
        words = array("I")
        words.frombytes(data)
        if _LITTLE_ENDIAN:
            words.byteswap()
        return words[0::2], words[1::2]

    def load(self) -> None:
        """Load now (raising CorruptIndexError) rather than on first use."""
        self._ensure_loaded()

    def mark_new(self) -> None:
        """A new segment's index: empty, its file created by the first write (creating files
        is what makes creating thousands of partitions slow; most never get an entry)."""
        self._loaded = True

    def mark_empty(self) -> None:
        """Forget any entries without reading the file: used right before a rebuild."""
        self._keys = array(self.key_type)
        self._values = array(self.value_type)
        self._loaded = True
        with _FILE_LOCK:
            try:  # emptied, not created: the first entry creates it (see `mark_new`)
                os.truncate(self.path, 0)
            except FileNotFoundError:
                pass
            self._written = 0
            self._dirty = True
            self._changes += 1

    # -- state -------------------------------------------------------------------------------
    @property
    def entries(self) -> int:
        self._ensure_loaded()
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry_size

    # -- writing -----------------------------------------------------------------------------
    def _append_entry(self, key: int, value: int) -> None:
        self._ensure_loaded()
        if len(self._keys) >= self.max_entries:
            raise CorruptIndexError(f"{self.path}: index is full ({self.max_entries} entries)")
        self._keys.append(key)
        self._values.append(value)

    def _truncate_entries(self, count: int) -> None:
        """Keep the first `count` entries, in memory and on disk."""
        self._ensure_loaded()
        if count >= len(self._keys):
            return
        del self._keys[count:]
        del self._values[count:]
        with _FILE_LOCK:
            if self._written > count:
                try:
                    os.truncate(self.path, count * self.entry_size)
                except FileNotFoundError:
                    pass
                self._written = count
                self._dirty = True
                self._changes += 1

    def reset(self) -> None:
        self._truncate_entries(0)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry for `offset` or later: each index keys on offsets differently,
        and the segment truncates all of its indexes alike."""
        raise NotImplementedError

    def write_pending(self, *, sync: bool = False) -> None:
        """Append the entries the file lacks (and fsync it, with `sync`, if it changed).

        Safe from a worker thread while the event loop appends entries: it writes those
        present when it starts. A file renamed or deleted meanwhile is not recreated. The
        fsync runs outside `_FILE_LOCK`: it may take seconds (a busy or failing disk), and
        the event loop takes that lock to roll, truncate or rename any index of the broker.
        """
        if not self._loaded:
            return
        with _FILE_LOCK:
            keys, values = self._keys, self._values
            n, written = len(keys), self._written
            if n == written and not (sync and self._dirty):
                return
            if self._deleted:
                return
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                             0o644)
            except FileNotFoundError:
                return  # the partition directory is gone (deleted)
            try:
                if n > written:
                    encode = self._encode
                    os.write(fd, b"".join(encode(keys[i], values[i])
                                          for i in range(written, n)))
                    self._written = n
                    self._dirty = True
            except BaseException:
                os.close(fd)
                raise
            changes = self._changes = self._changes + 1
        try:
            if sync:
                os.fsync(fd)  # whatever the file holds now, renamed or truncated meanwhile
                with _FILE_LOCK:
                    if self._changes == changes:  # nothing written or truncated since
                        self._dirty = False
        finally:
            os.close(fd)

    def flush(self) -> None:
        """Write what the file lacks and fsync it (a worker thread's job)."""
        self.write_pending(sync=True)

    def close_writer(self) -> None:
        """Write what the file lacks once the segment is no longer written to."""
        self.write_pending()

    def close(self) -> None:
        self.write_pending()

    def delete(self) -> None:
        with _FILE_LOCK:
            self.path.unlink(missing_ok=True)
            self._deleted = True

    def rename(self, path: Path) -> None:
        with _FILE_LOCK:
            try:
                os.rename(self.path, path)
            except FileNotFoundError:
                pass
            self._dir, self._name = path.parent, path.name
