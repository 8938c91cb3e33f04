"""The segments of one partition replica on disk: lookup, flush, file lifecycle (the start
of Kafka's LocalLog).

A mixin of `PartitionLog` for now, holding the methods that touch only segments and files;
`PartitionLog` owns and documents the state.
"""
from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from bisect import bisect_right
from pathlib import Path
from typing import TYPE_CHECKING

from pybroker.storage.files import FileCache
from pybroker.storage.segment import LogSegment

if TYPE_CHECKING:
    from pybroker.stats.latency_histogram import LatencyHistogram
    from pybroker.storage.log_config import LogConfig

__all__ = ["LocalLog"]


def _now_ms() -> int:
    return int(time.time() * 1000)


class LocalLog:
    """Segments and their files; see `PartitionLog` for the state."""

    dir: Path
    files: FileCache
    config: LogConfig
    segments: list[LogSegment]
    _base_offsets: list[int]
    _pending_deletes: list[tuple[int, LogSegment]]
    _lock: threading.RLock
    _closed: bool
    _unflushed_messages: int
    last_flush_ms: int
    flush_timer: LatencyHistogram | None
    log_end_offset: int
    recovery_point: int

    def set_files(self, files: FileCache) -> None:
        """Take segment descriptors from `files` from now on (a log loaded in a worker with
        a private cache joins the broker's)."""
        with self._lock:
            self.files = files
            for segment in self.segments:
                segment.set_files(files)

    def _add_segment(self, segment: LogSegment) -> None:
        self.segments.append(segment)
        self._base_offsets.append(segment.base_offset)

    def _segment_index(self, offset: int) -> int:
        return bisect_right(self._base_offsets, offset) - 1

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    # -- durability and lifecycle --------------------------------------------------------------
    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding data below `offset` (default: the log end) and move the
        recovery point there. Blocking: the broker calls it from a worker thread."""
        with self._lock:  # a consistent view; the fsyncs themselves run unlocked
            if self._closed:
                return
            leo = self.log_end_offset
            target = leo if offset is None else min(offset, leo)
            start = self.recovery_point
            segments = list(self.segments)
        if target <= start:
            return
        began = time.perf_counter()
        for i, segment in enumerate(segments):
            upper = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if upper is not None and upper <= start:
                continue
            if segment.base_offset >= target:
                break
            segment.flush()
        if self.flush_timer is not None:
            self.flush_timer.observe(time.perf_counter() - began)
        # A truncation may have run meanwhile: never leave the recovery point past the end.
        self.recovery_point = min(max(self.recovery_point, target), self.log_end_offset)
        if target >= leo:
            self._unflushed_messages = 0
            self.last_flush_ms = _now_ms()

    def maybe_flush(self, now_ms: int) -> bool:
        """The periodic flush: whole rolled segments always, the active one after flush.ms."""
        if self._closed:
            return False
        if self.log_end_offset > self.recovery_point and \
                now_ms - self.last_flush_ms >= self.config.flush_ms:
            self.flush()
            return True
        if self.recovery_point < self.active_segment.base_offset:
            self.flush(self.active_segment.base_offset)
            return True
        return False

    def mark_synced(self) -> None:
        """The caller synced the file system after an unclean load or a `close(sync=False)`:
        everything up to the log end is durable, so the recovery point moves there."""
        self.recovery_point = max(self.recovery_point, self.log_end_offset)

    def _close_files(self) -> None:
        self._closed = True
        for segment in self.segments:
            segment.close()
        for _, segment in self._pending_deletes:
            segment.delete()
        self._pending_deletes.clear()

    def delete(self) -> None:
        """Remove the whole log: `detach`, then delete the renamed directory."""
        target = self.detach()
        if target is not None:
            shutil.rmtree(target, ignore_errors=True)

    def detach(self) -> Path | None:
        """Close the log and rename its directory to `<name>.<uuid>-delete`, the name the next
        start recognises and removes; returns that path (None if the directory is gone) for
        the caller to delete, which for a large log is best done off the event loop."""
        with self._lock:
            if not self._closed:
                self._close_files()
            target = self.dir.with_name(f"{self.dir.name}.{uuid.uuid4().hex}-delete")
            try:
                os.rename(self.dir, target)
            except FileNotFoundError:
                return None
            return target

    @property
    def closed(self) -> bool:
        return self._closed

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
