"""The segments of one partition replica on disk (Kafka's LocalLog): the segment list, roll,
read, truncation, compaction's swap, flush, and the files' lifecycle.

`PartitionLog` (Kafka's UnifiedLog) holds one and keeps what gives the bytes meaning: the log
start, the high watermark and last stable offset, producer state, transactions and leader
epochs. The split follows what each offset is a fact about: the log end offset and the
recovery point describe the files, so they live here and `PartitionLog` reads them.

Structural changes (roll, truncation, the compaction swap, deletes) take `lock`, which
`PartitionLog` shares for its own changes; appends and reads run on the caller's thread
without it, as in `PartitionLog`. `flush` runs in a worker thread.
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
from pybroker.storage.log_loader import load_segments
from pybroker.storage.log_info import SegmentRead
from pybroker.storage.segment import (
    CLEANED_SUFFIX, SWAP_SUFFIX, AppendedBatch, LogSegment, fsync_directory,
)

if TYPE_CHECKING:
    from pybroker.stats.latency_histogram import LatencyHistogram
    from pybroker.storage.log_config import LogConfig

__all__ = ["LocalLog"]


def _now_ms() -> int:
    return int(time.time() * 1000)


class LocalLog:
    """The segment list of one partition replica, its log end and its recovery point."""

    def __init__(self, directory: Path, config: LogConfig, files: FileCache) -> None:
        self.dir = directory
        self.files = files
        self.config = config
        self.segments: list[LogSegment] = []
        self._base_offsets: list[int] = []
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self.lock = threading.RLock()
        self.closed = False
        self._unflushed_messages = 0
        self.last_flush_ms = _now_ms()
        # Where flushes report their time (Kafka's LogFlushRateAndTimeMs); the log manager
        # sets its own, shared by its logs. None: not timed.
        self.flush_timer: LatencyHistogram | None = None
        self.log_end_offset = 0
        self.recovery_point = 0

    def load(self, initial_offset: int, recovery_point: int, clean: bool, sync: bool) -> None:
        """Open the segments in `dir` (`log_loader`), then set the log end and the recovery
        point from them."""
        for segment in load_segments(self.dir, self.config, initial_offset=initial_offset,
                                     recovery_point=recovery_point, clean=clean,
                                     files=self.files, sync=sync):
            self.add_segment(segment)
        self.log_end_offset = self.active_segment.read_next_offset()
        if not clean and sync:  # everything up to the log end was just validated and fsynced
            recovery_point = self.log_end_offset
        self.recovery_point = max(min(recovery_point, self.log_end_offset), 0)

    def set_files(self, files: FileCache) -> None:
        """Take segment descriptors from `files` from now on (a log loaded in a worker with
        a private cache joins the broker's)."""
        with self.lock:
            self.files = files
            for segment in self.segments:
                segment.set_files(files)

    def add_segment(self, segment: LogSegment) -> None:
        self.segments.append(segment)
        self._base_offsets.append(segment.base_offset)

    def segment_index(self, offset: int) -> int:
        return bisect_right(self._base_offsets, offset) - 1

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    # -- appending and rolling -----------------------------------------------------------------
    def append(self, data: bytes | bytearray | memoryview, appended: list[AppendedBatch],
               last_offset: int) -> None:
        """Write batches whose offsets the caller assigned (and rolled for) to the active
        segment, and move the log end past them."""
        self.segments[-1].append(data, appended)
        self.log_end_offset = last_offset + 1

    def after_append(self, messages: int) -> None:
        """Count what an append added; flush once flush.messages are unflushed."""
        self._unflushed_messages += messages
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()

    def roll(self, base_offset: int) -> LogSegment:
        """Start a new active segment at `base_offset` (the active one itself if it is empty and
        already starts there)."""
        active = self.active_segment
        if active.is_empty and active.base_offset == base_offset:
            return active
        if base_offset < self.log_end_offset:
            raise ValueError(f"cannot roll to {base_offset} below log end {self.log_end_offset}")
        active.on_become_inactive()
        if active.is_empty:  # a gap before the new base: the empty segment serves no reads
            self.segments.pop()
            self._base_offsets.pop()
            active.delete()
        segment = LogSegment(self.dir, base_offset, self.config, create=True, files=self.files)
        self.add_segment(segment)
        return segment

    # -- reading -------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, limit: int, min_one_message: bool,
             region_min_batch: int) -> SegmentRead | None:
        """Whole batches from the segment holding `offset` on, never one reaching `limit`; None
        when there are none. See `PartitionLog.read`."""
        segments = self.segments
        for i in range(max(self.segment_index(offset), 0), len(segments)):
            found = segments[i].read(offset, max_bytes, max_offset=limit,
                                     min_one_message=min_one_message,
                                     region_min_batch=region_min_batch)
            if found is not None:
                return found if found.records else None
        return None

    # -- truncation ----------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Drop the segments and the part of a segment from `offset` on. The caller holds
        `lock` and checked that the first segment starts at or below `offset`."""
        keep = bisect_right(self._base_offsets, offset)
        removed = self.segments[keep:]
        del self.segments[keep:]
        del self._base_offsets[keep:]
        self.remove_segments(removed)
        active = self.active_segment
        active.truncate_to(offset)
        self.log_end_offset = active.read_next_offset()
        self.recovery_point = min(self.recovery_point, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart, empty, at `offset`."""
        with self.lock:
            removed = self.segments[:]
            self.segments.clear()
            self._base_offsets.clear()
            self.remove_segments(removed)
            self.add_segment(LogSegment(self.dir, offset, self.config, create=True,
                                        files=self.files))
            self.log_end_offset = self.recovery_point = offset
            self._unflushed_messages = 0

    def remove_oldest(self, count: int, now_ms: int | None = None) -> None:
        """Drop the `count` oldest segments (retention), deleting them after the delay."""
        removed = self.segments[:count]
        del self.segments[:count]
        del self._base_offsets[:count]
        self.remove_segments(removed, now_ms)

    # -- compaction ----------------------------------------------------------------------------
    def replace_segments(self, cleaned: LogSegment, old: list[LogSegment]) -> bool:
        """Swap `cleaned` in for the consecutive, inactive segments `old`, as Kafka's
        replaceSegments does. `cleaned` is fsynced, its files suffixed `.cleaned`, or already
        `.swap` if the caller passed the commit point itself (renamed and fsynced the
        directory off the event loop).

        Steps: `.cleaned` -> `.swap` and an fsync of the directory (the commit point: from
        here a crash completes the swap at the next load), the old segments renamed
        `.deleted` (removed after file.delete.delay.ms), `.swap` -> final names. Those last
        renames need no fsync: whichever of them a crash loses, the loader completes the swap.
        False, with nothing changed, if `old` is no longer a run of inactive segments of this
        log (retention or a truncation got there first); the caller then deletes `cleaned`.
        """
        with self.lock:
            if self.closed or not old or cleaned.base_offset != old[0].base_offset:
                return False
            try:
                i = next(n for n, seg in enumerate(self.segments) if seg is old[0])
            except StopIteration:
                return False
            run = self.segments[i:i + len(old)]
            if (len(run) != len(old) or any(a is not b for a, b in zip(run, old))
                    or i + len(old) >= len(self.segments)):
                return False
            if not cleaned.log_path.name.endswith(SWAP_SUFFIX):
                cleaned.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
                fsync_directory(self.dir)
            cleaned.set_files(self.files)  # written with the cleaner's own descriptors
            self.segments[i:i + len(old)] = [cleaned]
            self._base_offsets[i:i + len(old)] = [cleaned.base_offset]
            self.remove_segments(old)
            cleaned.change_file_suffixes(SWAP_SUFFIX, "")
            return True

    # -- durability and lifecycle --------------------------------------------------------------
    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding data below `offset` (default: the log end) and move the
        recovery point there. Blocking: the broker calls it from a worker thread."""
        with self.lock:  # a consistent view; the fsyncs themselves run unlocked
            if self.closed:
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
        if self.closed:
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

    def close(self) -> None:
        """Close every segment and delete those awaiting deletion; the caller flushed first
        (or syncs the file system itself)."""
        self.closed = True
        for segment in self.segments:
            segment.close()
        for _, segment in self._pending_deletes:
            segment.delete()
        self._pending_deletes.clear()

    def close_handles(self) -> None:
        """Close every file without writing to any: the log dir failed (see
        `LogManager.fail_dir`). What was written stays on disk for the next start's recovery."""
        self.closed = True
        for segment in self.segments:
            segment.close_handles()
        for _, segment in self._pending_deletes:
            segment.close_handles()
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
        with self.lock:
            if not self.closed:
                self.close()
            target = self.dir.with_name(f"{self.dir.name}.{uuid.uuid4().hex}-delete")
            try:
                os.rename(self.dir, target)
            except FileNotFoundError:
                return None
            return target

    def remove_segments(self, segments: list[LogSegment], now_ms: int | None = None) -> None:
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
        with self.lock:
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
