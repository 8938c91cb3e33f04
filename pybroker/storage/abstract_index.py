"""What the offset index and the time index share: a file of fixed-size big-endian entries.

Theory of operation. An index is sparse and only ever grows at the end while its segment is
active, so it is kept as two parallel `array`s in memory (keys searched with `bisect`, no file
reads per lookup) and written append-only to its file with one `os.write` per entry. Kafka
preallocates and mmaps its index files; an append-only file gives the same on-disk bytes
without the trim-on-close step, and a torn last entry is caught by the size check.

Indexes are loaded lazily, on the first lookup or append: a broker opening thousands of
partitions after a clean shutdown reads none of the old segments' indexes until somebody asks.
A file whose size is not a whole number of entries, or whose entries are out of order, raises
`CorruptIndexError`; the segment then rebuilds the index from its log (indexes are derived
data and never trusted over the log).
"""
from __future__ import annotations

import os
import sys
from array import array
from pathlib import Path
from typing import ClassVar

__all__ = ["AbstractIndex", "CorruptIndexError"]

_LITTLE_ENDIAN = sys.byteorder == "little"


class CorruptIndexError(Exception):
    """An index file that cannot be right; the caller rebuilds it from the log."""


class AbstractIndex:
    """Sorted (key, value) entries of one segment, mirrored to an append-only file."""

    entry_size: ClassVar[int]
    key_type: ClassVar[str]
    value_type: ClassVar[str] = "I"

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry_size)
        self._keys: array[int] = array(self.key_type)
        self._values: array[int] = array(self.value_type)
        self._loaded = False
        self._fd: int | None = None

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

    def mark_empty(self) -> None:
        """Forget any entries without reading the file: used right before a rebuild."""
        self._keys = array(self.key_type)
        self._values = array(self.value_type)
        self._loaded = True
        self._close_fd()
        with open(self.path, "wb"):
            pass

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
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
                               0o644)
        os.write(self._fd, self._encode(key, value))
        self._keys.append(key)
        self._values.append(value)

    def _truncate_entries(self, count: int) -> None:
        """Keep the first `count` entries, in memory and on disk."""
        self._ensure_loaded()
        if count >= len(self._keys):
            return
        del self._keys[count:]
        del self._values[count:]
        if self._fd is not None:
            os.ftruncate(self._fd, count * self.entry_size)
        else:
            try:
                os.truncate(self.path, count * self.entry_size)
            except FileNotFoundError:
                pass

    def reset(self) -> None:
        self._truncate_entries(0)

    def flush(self) -> None:
        """fsync; may run in a worker thread while a roll closes the writer on the loop."""
        fd = self._fd
        if fd is None:
            return
        try:
            os.fsync(fd)
        except OSError:
            if self._fd == fd:
                raise  # a real I/O error, not a descriptor closed under us

    def _close_fd(self) -> None:
        # Forget the descriptor before closing it: a `flush` in a worker thread whose fsync
        # fails on it must already see that it was closed under it, not a real I/O error.
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def close_writer(self) -> None:
        """Stop holding a file descriptor once the segment is no longer written to."""
        self._close_fd()

    def close(self) -> None:
        self._close_fd()

    def delete(self) -> None:
        self._close_fd()
        self.path.unlink(missing_ok=True)

    def rename(self, path: Path) -> None:
        try:
            os.rename(self.path, path)
        except FileNotFoundError:
            pass
        self.path = path
