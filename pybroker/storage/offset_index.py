"""The offset index (`.index`): offset -> file position of a batch, sparse, 8-byte entries.

Each entry is (offset relative to the segment's base offset: u32, byte position of a batch in
the `.log`: u32), big-endian as in Kafka. An entry is added about every `index.interval.bytes`
of appended data, so finding an offset is a binary search here plus a short forward scan of
batch headers in the log. We index each batch by its base offset (Kafka uses the last offset):
either satisfies "entry offset <= target implies the batch at that position starts at or
before the target", and the base offset makes a lookup for a batch's own first offset land on
the batch itself.
"""
from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from pathlib import Path

from pybroker.storage.abstract_index import AbstractIndex, CorruptIndexError

__all__ = ["OffsetIndex", "OffsetPosition"]

_ENTRY = struct.Struct(">II")

OffsetPosition = tuple[int, int]  # (absolute offset, file position)


class OffsetIndex(AbstractIndex):
    entry_size = 8
    key_type = "I"

    def __init__(self, path: Path, base_offset: int, max_index_size: int = 10485760, *,
                 directory: Path | None = None) -> None:
        super().__init__(path, base_offset, max_index_size, directory=directory)

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        return self._u32_pairs(data)

    def _encode(self, key: int, value: int) -> bytes:
        return _ENTRY.pack(key, value)

    def _check_entries(self, keys: array[int], values: array[int]) -> None:
        super()._check_entries(keys, values)
        if values and values[-1] < values[0]:
            raise CorruptIndexError(f"{self.path}: positions out of order")

    def lookup(self, offset: int) -> OffsetPosition:
        """The last entry at or before `offset`, or (base offset, 0) when there is none."""
        self._ensure_loaded()
        relative = offset - self.base_offset
        if relative < 0 or not self._keys:
            return self.base_offset, 0
        i = bisect_right(self._keys, min(relative, 0xFFFFFFFF)) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._keys[i], self._values[i]

    def append(self, offset: int, position: int) -> None:
        """Index the batch starting at `offset` / `position`; entries must strictly increase."""
        self._ensure_loaded()
        relative = offset - self.base_offset
        if self._keys and (relative <= self._keys[-1] or position <= self._values[-1]):
            return
        self._append_entry(relative, position)

    def last_entry(self) -> OffsetPosition:
        self._ensure_loaded()
        if not self._keys:
            return self.base_offset, 0
        return self.base_offset + self._keys[-1], self._values[-1]

    def truncate_to(self, offset: int) -> None:
        """Drop every entry for `offset` or later (the batches there are being removed)."""
        self._ensure_loaded()
        relative = offset - self.base_offset
        self._truncate_entries(0 if relative <= 0 else
                               bisect_right(self._keys, relative - 1))

    def check_positions(self, log_size: int) -> None:
        """CorruptIndexError if an entry points past the end of the log (a torn log tail)."""
        self._ensure_loaded()
        if self._values and self._values[-1] >= max(log_size, 1):
            raise CorruptIndexError(
                f"{self.path}: last entry points at {self._values[-1]}, log has {log_size}")
