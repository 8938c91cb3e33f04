"""Retention of a partition log: DeleteRecords, retention.ms / retention.bytes, and the
delayed removal of deleted segments (the retention half of Kafka's UnifiedLog).

A mixin of `PartitionLog`, kept in its own module by concept: it works on the log's
segments, offsets and lock, which `PartitionLog` owns and documents.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pybroker.storage.log_info import OffsetOutOfRange
from pybroker.storage.segment import LogSegment

if TYPE_CHECKING:
    from pybroker.storage.leader_epoch_cache import LeaderEpochFileCache
    from pybroker.storage.log_config import LogConfig
    from pybroker.storage.producer_state import ProducerStateManager

__all__ = ["LogRetention"]


def _now_ms() -> int:
    return int(time.time() * 1000)


class LogRetention:
    """Deleting old data from the front of a log; see `PartitionLog` for the state."""

    segments: list[LogSegment]
    _base_offsets: list[int]
    _pending_deletes: list[tuple[int, LogSegment]]
    _lock: threading.RLock
    config: LogConfig
    log_start_offset: int
    high_watermark: int
    recovery_point: int
    leader_epoch_cache: LeaderEpochFileCache
    producer_state: ProducerStateManager
    if TYPE_CHECKING:
        @property
        def size(self) -> int: ...  # PartitionLog's, read-only there
    _first_unstable: int | None
    _refresh_first_unstable: Callable[[], None]  # PartitionLog's

    # -- retention -----------------------------------------------------------------------------
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: make `offset` the log start; returns the new log start offset.

        OffsetOutOfRange above the high watermark (only committed data may be deleted).
        Segments wholly below the new start are deleted right away.
        """
        with self._lock:
            if offset > self.high_watermark or offset < 0:
                raise OffsetOutOfRange(offset, self.log_start_offset, self.high_watermark)
            if offset > self.log_start_offset:
                self.log_start_offset = offset
                self.leader_epoch_cache.truncate_from_start(offset)
                self._delete_oldest(lambda seg, nxt: nxt.base_offset <= self.log_start_offset)
                if self._first_unstable is not None:
                    self._refresh_first_unstable()
            return self.log_start_offset

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention; returns the number of segments deleted (renamed `.deleted`: the
        files go with `delete_pending_files`).

        In order: segments wholly below the log start; then, if the cleanup policy includes
        "delete", segments whose largest timestamp is older than retention.ms, then the oldest
        segments while the log stays at or above retention.bytes without them. The active
        segment is never deleted, nor any segment holding data at or above the high watermark.
        Producer ids idle for producer.id.expiration.ms are forgotten on the same schedule.
        """
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            deleted = self._delete_oldest(
                lambda seg, nxt: nxt.base_offset <= self.log_start_offset, now)
            config = self.config
            if config.delete_enabled and config.retention_ms >= 0:
                deleted += self._delete_oldest(
                    lambda seg, nxt: now - seg.largest_timestamp > config.retention_ms, now)
            if config.delete_enabled and config.retention_bytes >= 0:
                excess = self.size - config.retention_bytes

                def over_size(seg: LogSegment, nxt: LogSegment) -> bool:
                    nonlocal excess
                    if excess - seg.size < 0:
                        return False
                    excess -= seg.size
                    return True

                deleted += self._delete_oldest(over_size, now)
            self.producer_state.remove_expired(now, config.producer_id_expiration_ms)
            return deleted

    def _delete_oldest(self, predicate: Callable[[LogSegment, LogSegment], bool],
                       now_ms: int | None = None) -> int:
        """Delete segments from the oldest while predicate(segment, next segment) holds."""
        count = 0
        for i in range(len(self.segments) - 1):
            segment, following = self.segments[i], self.segments[i + 1]
            if following.base_offset > self.high_watermark or not predicate(segment, following):
                break
            count += 1
        if not count:
            return 0
        removed = self.segments[:count]
        del self.segments[:count]
        del self._base_offsets[:count]
        self._remove_segments(removed, now_ms)
        first = self.segments[0].base_offset
        if first > self.log_start_offset:
            self.log_start_offset = first
            self.leader_epoch_cache.truncate_from_start(first)
            if self._first_unstable is not None:
                self._refresh_first_unstable()
        self.high_watermark = max(self.high_watermark, self.log_start_offset)
        self.recovery_point = max(self.recovery_point, self.log_start_offset)
        self.producer_state.delete_snapshots_before(first)
        return count

    def _remove_segments(self, segments: list[LogSegment], now_ms: int | None = None) -> None:
        """Rename to `.deleted` now; they are closed and unlinked once file.delete.delay.ms
        has passed (`close_due_deletes`), so a reader holding a descriptor (a sendfile in
        flight) finishes first."""
        now = _now_ms() if now_ms is None else now_ms
        deadline = now + max(0, self.config.file_delete_delay_ms)
        for segment in segments:
            segment.rename_for_deletion()
            self._pending_deletes.append((deadline, segment))

    def close_due_deletes(self, now_ms: int | None = None) -> list[LogSegment]:
        """Forget and close the `.deleted` segments whose delay has passed, and return them
        for `LogSegment.delete`. Closing is cheap while the files are still linked, and on the
        event loop no sendfile can be midway through one; unlinking, when the file system
        frees the blocks, is the slow part the broker leaves to a worker thread."""
        if not self._pending_deletes:
            # The broker asks every log every second: with 30,000 logs, taking each lock and
            # reading the clock was 15% of its CPU while they were being written to.
            return []
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            due = [s for deadline, s in self._pending_deletes if deadline <= now]
            if due:
                self._pending_deletes = [(d, s) for d, s in self._pending_deletes if d > now]
        for segment in due:
            segment.close()
        return due

    def delete_pending_files(self, now_ms: int | None = None) -> int:
        """Close and unlink the `.deleted` segments whose delay has passed; returns how many."""
        due = self.close_due_deletes(now_ms)
        for segment in due:
            segment.delete()
        return len(due)

