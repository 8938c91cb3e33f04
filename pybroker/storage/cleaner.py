"""Log compaction (Kafka's LogCleaner and its Cleaner): keep the newest record of every key.

Theory of operation. A compacted log ("compact" or "compact,delete" in cleanup.policy) is
split at its *first dirty offset*: below it the log has been cleaned, from it on records may
repeat keys. The work is split as in Kafka:

- `cleaner_manager.LogCleanerManager` (Kafka's LogCleanerManager): the
  `cleaner-offset-checkpoint` files, the delete horizons still pending, the logs left alone
  after a failure, and phase 1, planning: which log to clean and which segments (see its
  docstring for the first uncleanable offset and the dirty-ratio, lag and horizon rules).
- this module (Kafka's Cleaner, behind the LogCleaner façade the broker holds): phases 2 and 3
  below, cleaning and commit.
- `protocol.records.record_filter` (Kafka's MemoryRecords.filterTo): the record-level rewrite
  of one batch, and the delete horizon of tombstones (KIP-534).

A cleaning pass over one log:

1. Plan (event-loop thread, `plan`): the manager's; each segment read gets its own
   descriptor, so retention closing a segment meanwhile is harmless.
2. Clean (any thread, `clean`): build the offset map (key -> newest offset) over the dirty
   segments, stopping at a segment boundary once it holds `max_map_entries` keys; then
   rewrite every segment from the log start to the end of the mapped range into
   `<base>.log.cleaned` files with their indexes, adjacent segments merged while the cleaned
   result fits segment.bytes (and the index and offset limits); a segment left unchanged is
   not rewritten. The phase ends at the commit point: the cleaned segments fsynced, renamed
   `.swap`, the directory fsynced. A record is kept when it has a key and no newer offset for
   that key is in the map; offsets, timestamps, headers and the batch's producer fields,
   leader epoch, timestamp type and codec are preserved (`record_filter` says how).
3. Commit (event-loop thread, `commit`, no fsync): each cleaned segment replaces the
   segments it covers through `PartitionLog.replace_segments` (old -> `.deleted`, `.swap` ->
   final, Kafka's crash-safe order: the loader deletes `.cleaned` files and completes `.swap`
   ones), then the checkpoint moves to the end of the mapped range (`done_cleaning`). A group
   whose segments changed meanwhile (retention, truncation) is discarded; the next pass redoes
   it. (A crash between the commit point and this phase completes the swap at the next start
   even so; the only change that can come in between on a leader is retention, and what it had
   deleted comes back, below the checkpointed log start offset, until retention runs again.)

Transactions: the cleanable range ends at the last stable offset, so every transaction with
data in it has its marker. Aborted data is dropped whole, from the offset map as from the
output; committed transactional data is compacted like any other; a marker is kept while its
transaction has a batch left, then until its delete horizon (`cleaned_transactions`,
`record_filter.filter_control_batch`). A cleaned segment's `.txnindex` holds the entries of
the ABORT markers it keeps.

Simplifications, deliberate: the offset map holds whole keys (Kafka holds MD5 digests, so no
collision can ever drop a record here) and its cap is soft (the segment that fills it is
finished). Keyless records and emptied batches are dropped (see `record_filter`). A log whose
cleaning fails is left alone until the broker restarts, as Kafka marks a partition
uncleanable.

Offsets are never reassigned, so cleaning leaves gaps, also at the end of the cleaned range: a
consumer positioned in a trailing gap gets nothing until newer records arrive (as on Kafka).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from protocol.records.batch import (
    CONTROL, HEADER_SIZE, BatchHeader, InvalidRecordError, iter_batches,
)
from protocol.records.record import ControlRecord, control_record_of
from protocol.records.record_filter import filter_batch, filter_control_batch, keyed_offsets
from protocol.records.types import RecordError
from pybroker.storage.batch_walk import BatchWalk
from pybroker.storage.cleaned_transactions import CleanedTransactions
from protocol.topic_partition import TopicPartition
from pybroker.storage.cleaner_manager import (
    CLEANER_CHECKPOINT, CleaningPlan, LogCleanerManager, SourceSegment,
)
from pybroker.storage.log_config import LONG_MAX
from pybroker.storage.segment import (
    CLEANED_SUFFIX, INT32_MAX, SWAP_SUFFIX, LogSegment, fsync_directory, segment_file_names,
)

if TYPE_CHECKING:
    from pybroker.storage.log_manager import LogManager
    from pybroker.storage.partition_log import PartitionLog
    from pybroker.storage.transaction_index import AbortedTxn

__all__ = ["LogCleaner", "CleaningPlan", "CleanResult", "CleanerStats", "CLEANER_CHECKPOINT",
           "DEFAULT_MAX_MAP_ENTRIES"]

log = logging.getLogger(__name__)

# Kafka's log.cleaner.dedupe.buffer.size (128 MiB) buys ~5M MD5 entries; a Python dict entry
# with a short bytes key costs ~128 bytes, so the same budget buys ~1M keys.
DEFAULT_MAX_MAP_ENTRIES = 1 << 20
MAP_ENTRY_BYTES = 128
# Kafka's log.cleaner.io.buffer.size: the read and write buffers of all cleaner threads
# together; each thread reads and writes in chunks of size / threads / 2 (a batch larger than
# a chunk is still read whole).
DEFAULT_IO_BUFFER_SIZE = 524288
_MAX_HORIZON = 1 << 62  # keeps baseTimestamp and every re-based delta inside an int64


class CleaningAborted(Exception):
    """The broker is shutting down; the cleaning stopped and removed its files."""


# -- results -----------------------------------------------------------------------------------
@dataclass
class CleanerStats:
    """What one cleaning did, for logs, tests and benchmarks."""

    topic: str
    partition: int
    first_dirty: int = 0
    end_offset: int = 0
    segments_before: int = 0
    segments_after: int = 0
    bytes_read: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    map_keys: int = 0
    records_read: int = 0
    records_kept: int = 0
    superseded: int = 0
    tombstones_removed: int = 0
    keyless_removed: int = 0
    aborted_removed: int = 0  # records of aborted transactions
    markers_removed: int = 0
    elapsed_s: float = 0.0


@dataclass
class _Group:
    """Adjacent segments and the one cleaned segment that replaces them."""

    sources: list[SourceSegment]
    cleaned: LogSegment | None = None  # None: nothing changed, the old segment stays
    changed: list[bool] = field(default_factory=list)  # per source: does its output differ


@dataclass
class CleanResult:
    plan: CleaningPlan
    groups: list[_Group] = field(default_factory=list)
    end_offset: int = 0  # the new first dirty offset once committed
    next_horizon: int = LONG_MAX  # earliest delete horizon among the tombstones kept
    stats: CleanerStats | None = None
    error: BaseException | None = None
    txns: CleanedTransactions | None = None  # the rewrite's walk
    kept_aborts: list[AbortedTxn] = field(default_factory=list)  # entries of kept markers



# -- the cleaner -------------------------------------------------------------------------------

class LogCleaner:
    """Compacts the logs of a LogManager; see the module docstring for the three phases.

    `plan` and `commit` must run on the thread that reads and appends (the event loop);
    `clean` may run anywhere. `clean_log` / `clean_all` chain the three, for tests and tools.
    Planning and checkpoints are the manager's; the methods that hand them through are what
    the broker calls, so it needs one object, as Kafka's LogCleaner wraps its manager.
    """

    def __init__(self, logs: LogManager, *,
                 max_map_entries: int = DEFAULT_MAX_MAP_ENTRIES,
                 io_chunk: int = DEFAULT_IO_BUFFER_SIZE // 2) -> None:
        self.logs = logs
        self.manager = LogCleanerManager(logs)
        self.max_map_entries = max(1, max_map_entries)
        self.io_chunk = max(HEADER_SIZE, io_chunk)

    @staticmethod
    def max_map_entries_for(dedupe_buffer_size: int, threads: int = 1) -> int:
        """Map capacity for Kafka's log.cleaner.dedupe.buffer.size (see MAP_ENTRY_BYTES)."""
        return max(1, dedupe_buffer_size // max(threads, 1) // MAP_ENTRY_BYTES)

    @staticmethod
    def io_chunk_for(io_buffer_size: int, threads: int = 1) -> int:
        """Read and write chunk for Kafka's log.cleaner.io.buffer.size: Kafka gives each
        cleaner thread size / threads / 2 for its read buffer and as much for its write one."""
        return io_buffer_size // max(threads, 1) // 2

    # -- the manager's part: checkpoints and phase 1, planning (see LogCleanerManager) -------
    def first_dirty_offset(self, plog: PartitionLog) -> int:
        return self.manager.first_dirty_offset(plog)

    def checkpoint_files(self) -> list[tuple[Path, dict[TopicPartition, int]]]:
        return self.manager.checkpoint_files()

    write_checkpoint_files = staticmethod(LogCleanerManager.write_checkpoint_files)

    def plan(self, plog: PartitionLog, now_ms: int | None = None, *,
             force: bool = False) -> CleaningPlan | None:
        return self.manager.plan(plog, now_ms, force=force)

    def grab_filthiest_log(self, now_ms: int | None = None, *,
                           exclude: set[TopicPartition] | None = None) -> CleaningPlan | None:
        return self.manager.grab_filthiest_log(now_ms, exclude=exclude)

    # -- phase 2: cleaning ---------------------------------------------------------------------
    def clean(self, plan: CleaningPlan, stop: threading.Event | None = None) -> CleanResult:
        """Build the offset map and write the cleaned segments; blocking, any thread.

        Ends at the commit point: the cleaned segments are fsynced, renamed `.swap` and the
        directory fsynced, so that `commit` on the event loop never waits for the disk.
        Never raises: a failure is returned in `error` with every file it wrote removed. A set
        `stop` aborts between batches (CleaningAborted in `error`). The plan's descriptors are
        closed on return.
        """
        started = time.monotonic()
        plog = plan.log
        result = CleanResult(plan, end_offset=plan.first_dirty)
        stats = CleanerStats(plog.topic, plog.partition, first_dirty=plan.first_dirty)
        result.stats = stats
        try:
            offset_map, end = self._build_offset_map(plan, stats, stop)
            result.end_offset = max(end, plan.first_dirty)
            stats.map_keys = len(offset_map)
            rewrite = [s for s in plan.sources if s.next_base <= result.end_offset]
            result.txns = CleanedTransactions(plan.aborted)
            self._rewrite(plan, rewrite, offset_map, result, stats, stop)
            if stop is not None and stop.is_set():
                raise CleaningAborted()
            cleaned = [g.cleaned for g in result.groups if g.cleaned is not None]
            for segment in cleaned:
                segment.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
            if cleaned:
                fsync_directory(plog.dir)
        except BaseException as exc:  # noqa: BLE001 - handed to commit, which logs it
            for group in result.groups:
                if group.cleaned is not None:
                    group.cleaned.delete()
                    group.cleaned = None
            result.error = exc
        finally:
            plan.close()
        stats.end_offset = result.end_offset
        stats.elapsed_s = time.monotonic() - started
        return result

    def _build_offset_map(self, plan: CleaningPlan, stats: CleanerStats,
                          stop: threading.Event | None) -> tuple[dict[bytes, int], int]:
        offset_map: dict[bytes, int] = {}
        end = plan.first_dirty
        # Aborted records must not supersede anything: they are left out of the map.
        txns = CleanedTransactions(plan.aborted) if plan.aborted else None
        for src in plan.sources[plan.first_dirty_index:]:
            for header, batch in _read_batches(src, stop, self.io_chunk):
                if header.attributes & CONTROL:
                    continue
                if txns is not None and txns.is_aborted(header):
                    continue
                for key, offset in keyed_offsets(header, batch):
                    offset_map[key] = offset
            stats.bytes_read += src.size
            end = src.next_base
            if len(offset_map) >= self.max_map_entries:
                break
        return offset_map, end

    def _rewrite(self, plan: CleaningPlan, sources: list[SourceSegment],
                 offset_map: dict[bytes, int], result: CleanResult, stats: CleanerStats,
                 stop: threading.Event | None) -> None:
        """Write the kept batches of `sources` into as few cleaned segments as fit.

        Adjacent segments share one cleaned segment while it stays within segment.bytes, its
        offsets within the indexes' 32-bit relative offsets and its index entries within
        segment.index.bytes: Kafka's groupSegmentsBySize, but judged on the cleaned sizes
        rather than the old ones, so a heavily compacted log collapses in one pass. A segment
        whose output overflows the current cleaned segment starts the next one (its bytes are
        moved over).
        """
        config = plan.log.config
        max_entries = min(config.segment_index_bytes // 8, config.segment_index_bytes // 12)
        group: _Group | None = None
        for src in sources:
            if group is not None and \
                    src.next_base - 1 - group.sources[0].segment.base_offset > INT32_MAX:
                self._finish(group, stats, result.kept_aborts)
                group = None
            if group is None:
                group = self._start_group(plan, src, result)
                group.changed.append(self._write_source(plan, group, src, offset_map, result,
                                                        stats, stop, self.io_chunk))
                continue
            cleaned = group.cleaned
            assert cleaned is not None
            mark = cleaned.size
            group.sources.append(src)
            changed = self._write_source(plan, group, src, offset_map, result, stats, stop,
                                         self.io_chunk)
            group.changed.append(changed)
            if cleaned.size > mark and (
                    cleaned.size > config.segment_bytes
                    or cleaned.offset_index.entries + 1 > max_entries
                    or cleaned.time_index.entries + 1 > max_entries):
                moved = os.pread(cleaned.fd, cleaned.size - mark, mark)
                cleaned.truncate_to(src.segment.base_offset)
                group.sources.pop()
                group.changed.pop()
                self._finish(group, stats, result.kept_aborts)
                group = self._start_group(plan, src, result)
                group.changed.append(changed)
                assert group.cleaned is not None
                group.cleaned.append(moved, [
                    (rel, h.size, h.base_offset, h.last_offset, h.max_timestamp)
                    for rel, h in iter_batches(moved)])
        if group is not None:
            self._finish(group, stats, result.kept_aborts)

    @staticmethod
    def _start_group(plan: CleaningPlan, src: SourceSegment, result: CleanResult) -> _Group:
        plog = plan.log
        base = src.segment.base_offset
        _remove_cleaned_files(plog.dir, base)
        # Indexes are append-only files here: a large cap costs nothing and lets an entry
        # that overflows the normal size be written before the group is split.
        config = dataclasses.replace(plog.config, segment_index_bytes=_MAX_HORIZON)
        group = _Group([src], LogSegment(plog.dir, base, config, create=True,
                                         file_suffix=CLEANED_SUFFIX))
        result.groups.append(group)
        return group

    @staticmethod
    def _write_source(plan: CleaningPlan, group: _Group, src: SourceSegment,
                      offset_map: dict[bytes, int], result: CleanResult,
                      stats: CleanerStats, stop: threading.Event | None, chunk: int) -> bool:
        """Append the batches `src` keeps to the group's cleaned segment, `chunk` bytes at a
        time; whether anything differs from `src`."""
        cleaned = group.cleaned
        assert cleaned is not None
        now = plan.now_ms
        new_horizon = min(now + plan.log.config.delete_retention_ms, _MAX_HORIZON)
        changed = False
        pending = bytearray()
        appended: list[tuple[int, int, int, int, int]] = []
        stats.bytes_before += src.size
        stats.bytes_read += src.size
        txns = result.txns
        assert txns is not None
        for header, batch in _read_batches(src, stop, chunk):
            if header.attributes & CONTROL:
                out = filter_control_batch(header, batch,
                                           txns.marker_removable(header, _marker(batch)), now,
                                           new_horizon)
                if out is None:
                    stats.markers_removed += 1
                else:
                    aborted = txns.aborted_ended_by(header.base_offset)
                    if aborted is not None:
                        result.kept_aborts.append(aborted)
            elif txns.is_aborted(header):
                stats.aborted_removed += header.records_count
                out = None
            else:
                out = filter_batch(header, batch, offset_map, now, new_horizon, stats)
            if out is None:
                changed = True
                continue
            data, last_offset, max_ts, horizon = out
            if data is not batch:
                changed = True
            if horizon is not None:
                result.next_horizon = min(result.next_horizon, horizon)
            appended.append((len(pending), len(data), header.base_offset, last_offset, max_ts))
            pending += data
            if len(pending) >= chunk:
                cleaned.append(pending, appended)
                pending, appended = bytearray(), []
        if pending:
            cleaned.append(pending, appended)
        return changed

    @staticmethod
    def _finish(group: _Group, stats: CleanerStats,
                kept_aborts: list[AbortedTxn] | None = None) -> None:
        """Seal and fsync the group's cleaned segment, or drop it when it would replace one
        segment with identical bytes. `kept_aborts`: the `.txnindex` entries of the ABORT
        markers kept so far, of which the group's go to its segment."""
        cleaned = group.cleaned
        assert cleaned is not None
        if len(group.sources) == 1 and not any(group.changed):
            cleaned.delete()
            group.cleaned = None
            stats.bytes_after += group.sources[0].size
            return
        low, high = group.sources[0].segment.base_offset, group.sources[-1].next_base
        for aborted in kept_aborts or ():
            if low <= aborted.last_offset < high:
                cleaned.txn_index.append(aborted)
        cleaned.time_index.maybe_append(cleaned.max_timestamp_so_far,
                                        cleaned.offset_of_max_timestamp, skip_full_check=True)
        cleaned.flush()
        for index in cleaned.indexes:
            index.close_writer()
        stats.bytes_after += cleaned.size

    # -- phase 3: committing -------------------------------------------------------------------
    def commit(self, result: CleanResult, *,
               write_checkpoint: bool = True) -> CleanerStats | None:
        """Swap the cleaned segments in and move the checkpoint; the stats, or None if the
        cleaning failed or was abandoned (its files are removed either way).

        Touches no disk but renames and unlinks, except to write `cleaner-offset-checkpoint`
        (fsynced); with `write_checkpoint=False` the caller writes it later, off the event
        loop, with `checkpoint_files` and `write_checkpoint_files`. Losing it in a crash only
        means cleaning that range again.
        """
        plan = result.plan
        plog = plan.log
        if result.error is not None:
            if not isinstance(result.error, CleaningAborted):
                log.error("cleaning %s failed; leaving it alone until restart", plog,
                          exc_info=result.error)
                self.manager.mark_uncleanable(plog)
            return None
        complete = True
        for group in result.groups:
            cleaned = group.cleaned
            if cleaned is None:
                continue
            old = [s.segment for s in group.sources]
            if any(s.segment.size != s.size for s in group.sources) or \
                    not plog.replace_segments(cleaned, old):
                cleaned.delete()
                complete = False
        stats = result.stats
        assert stats is not None
        if not complete:
            log.info("%s changed while it was cleaned; some segments stay dirty", plog)
            return stats
        self.manager.done_cleaning(plog, result.end_offset, result.next_horizon,
                                   write_checkpoint=write_checkpoint)
        stats.segments_before = len(plan.sources)
        stats.segments_after = sum(1 for _ in result.groups)
        log.info("cleaned %s (%s): offsets %d..%d, %d -> %d bytes, %d of %d records kept, "
                 "%d tombstone(s) removed, %.3fs", plog, plan.reason,
                 plan.sources[0].segment.base_offset, result.end_offset, stats.bytes_before,
                 stats.bytes_after, stats.records_kept, stats.records_read,
                 stats.tombstones_removed, stats.elapsed_s)
        return stats

    # -- all three at once ---------------------------------------------------------------------
    def clean_log(self, plog: PartitionLog, now_ms: int | None = None, *,
                  force: bool = False) -> CleanerStats | None:
        """Plan, clean and commit one log on the calling thread; None if nothing was done."""
        plan = self.plan(plog, now_ms, force=force)
        if plan is None:
            return None
        return self.commit(self.clean(plan))

    def clean_all(self, now_ms: int | None = None) -> list[CleanerStats]:
        """Clean every log that needs it, filthiest first, each at most once."""
        done: set[TopicPartition] = set()
        out: list[CleanerStats] = []
        while True:
            plan = self.grab_filthiest_log(now_ms, exclude=done)
            if plan is None:
                return out
            done.add(plan.topic_partition)
            stats = self.commit(self.clean(plan))
            if stats is not None:
                out.append(stats)


def _marker(batch: memoryview) -> ControlRecord | None:
    try:
        return control_record_of(batch)
    except RecordError:
        return None


# -- reading segments --------------------------------------------------------------------------

def _remove_cleaned_files(directory: Path, base: int) -> None:
    for name in segment_file_names(base, CLEANED_SUFFIX):
        (directory / name).unlink(missing_ok=True)


def _read_batches(src: SourceSegment, stop: threading.Event | None, chunk: int,
                  ) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every batch of a segment up to its size at planning time, through the cleaner's own
    descriptor, in `chunk`-byte reads (see `BatchWalk`). The segments cleaned are below the
    active one, so where the walk stops short (a torn or malformed batch) the segment is
    corrupt: InvalidRecordError, and the log is left alone. A set `stop` aborts between
    batches."""
    walk = BatchWalk(lambda: src.fd, 0, src.size, chunk=chunk)
    for pos, header in walk:
        if stop is not None and stop.is_set():
            raise CleaningAborted()
        yield header, walk.batch(pos, header)
    if walk.reason is not None:
        raise InvalidRecordError(f"{src.segment.log_path}: {walk.reason}")

