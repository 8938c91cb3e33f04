"""The time index (`.timeindex`): timestamp -> offset, sparse, 12-byte entries.

Each entry is (largest timestamp seen so far in the segment: i64, offset relative to the base
offset: u32), big-endian as in Kafka, appended next to an offset-index entry and only when the
timestamp has grown, so timestamps strictly increase along the file. The offset is the base
offset of the first batch that reached that timestamp; every batch before it therefore has a
smaller max timestamp. That is what makes ListOffsets by timestamp exact: start scanning at the
last entry whose timestamp is <= the target and nothing earlier can match.

When a segment stops being active a last entry is forced with its final max timestamp, so a
closed segment's largest timestamp (what time retention compares) is its last entry.
"""
from __future__ import annotations

import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from pybroker.storage.abstract_index import AbstractIndex, CorruptIndexError

__all__ = ["TimeIndex", "TimestampOffset"]

_ENTRY = struct.Struct(">qI")

TimestampOffset = tuple[int, int]  # (timestamp, absolute offset)


class TimeIndex(AbstractIndex):
    entry_size = 12
    key_type = "q"

    def __init__(self, path: Path, base_offset: int, max_index_size: int = 10485760, *,
                 directory: Path | None = None) -> None:
        super().__init__(path, base_offset, max_index_size, directory=directory)

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        timestamps = array("q")
        offsets = array("I")
        for ts, rel in _ENTRY.iter_unpack(data):
            timestamps.append(ts)
            offsets.append(rel)
        return timestamps, offsets

    def _encode(self, key: int, value: int) -> bytes:
        return _ENTRY.pack(key, value)

    def _check_entries(self, keys: array[int], values: array[int]) -> None:
        super()._check_entries(keys, values)
        if values and values[-1] < values[0]:
            raise CorruptIndexError(f"{self.path}: offsets out of order")

    def lookup(self, timestamp: int) -> TimestampOffset:
        """The last entry with timestamp <= `timestamp`, or (-1, base offset) if none."""
        self._ensure_loaded()
        i = bisect_right(self._keys, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._keys[i], self.base_offset + self._values[i]

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's.

        `skip_full_check` is for the final entry forced when the segment is rolled: Kafka
        allows that one even in a full index, and so do we (it only exceeds the cap by one).
        """
        self._ensure_loaded()
        if timestamp < 0 or (self._keys and timestamp <= self._keys[-1]):
            return
        if self._values and offset - self.base_offset < self._values[-1]:
            return
        if skip_full_check:
            self.max_entries = max(self.max_entries, len(self._keys) + 1)
        self._append_entry(timestamp, offset - self.base_offset)

    def last_entry(self) -> TimestampOffset:
        self._ensure_loaded()
        if not self._keys:
            return -1, self.base_offset
        return self._keys[-1], self.base_offset + self._values[-1]

    def truncate_to(self, offset: int) -> None:
        """Drop every entry pointing at `offset` or later."""
        self._ensure_loaded()
        relative = offset - self.base_offset
        if relative <= 0:
            self._truncate_entries(0)
            return
        # Offsets are non-decreasing, so the entries to keep are a prefix.
        keep = bisect_left(self._values, relative)
        self._truncate_entries(keep)
