"""Log compaction (Kafka's LogCleaner): keep the newest record of every key.

Theory of operation. A compacted log ("compact" or "compact,delete" in cleanup.policy) is
split at its *first dirty offset*, kept per log in `cleaner-offset-checkpoint` (one per log
dir, Kafka's text format): below it the log has been cleaned, from it on records may repeat
keys. A cleaning pass over one log:

1. Plan (event-loop thread, `plan`): the cleanable range ends at the *first uncleanable
   offset*: the active segment's base, the high watermark, and, with min.compaction.lag.ms,
   the first segment holding a record younger than the lag; only whole segments below it
   count. The log is cleaned when its dirty ratio (dirty bytes / cleanable bytes) exceeds
   min.cleanable.dirty.ratio, when its oldest dirty record is older than
   max.compaction.lag.ms, or when a tombstone it keeps has reached its delete horizon. Each
   segment read gets its own descriptor, so retention closing a segment meanwhile is harmless.
2. Clean (any thread, `clean`): build the offset map (key -> newest offset) over the dirty
   segments, stopping at a segment boundary once it holds `max_map_entries` keys; then
   rewrite every segment from the log start to the end of the mapped range into
   `<base>.log.cleaned` files with their indexes, adjacent segments merged while the cleaned
   result fits segment.bytes (and the index and offset limits); a segment left unchanged is
   not rewritten. The phase ends at the commit point: the cleaned segments fsynced, renamed
   `.swap`, the directory fsynced. A record is kept when it has a key and no
   newer offset for that key is in the map; offsets, timestamps, headers, the batch's producer
   id, epoch, base sequence, leader epoch, timestamp type and codec are preserved (a batch
   that changes is re-compressed with its own codec). Control batches are kept as they are.
3. Commit (event-loop thread, `commit`, no fsync): each cleaned segment replaces the
   segments it covers through `PartitionLog.replace_segments` (old -> `.deleted`, `.swap` ->
   final, Kafka's crash-safe order: the loader deletes `.cleaned` files and completes `.swap`
   ones), then the checkpoint moves to the end of the mapped range. A group whose segments
   changed meanwhile (retention, truncation) is discarded; the next pass redoes it. (A crash
   between the commit point and this phase completes the swap at the next start even so; the
   only change that can come in between on a leader is retention, and what it had deleted
   comes back, below the checkpointed log start offset, until retention runs again.)

Tombstones (records with a null value) follow Kafka's delete horizon (KIP-534): the first
pass that keeps a tombstone stamps its batch with the DELETE_HORIZON attribute and
baseTimestamp = now + delete.retention.ms (record timestamp deltas are re-based so every
record keeps its timestamp); a later pass at or after that time drops the tombstone. So a
consumer that reads from the start to the end within delete.retention.ms sees every delete.
The earliest pending horizon of each log is remembered (in memory), so the log is cleaned
again when it is reached even if nothing new was written.

Simplifications, deliberate: records without a key are dropped by the cleaner (Kafka does the
same; a compacted topic refuses them at produce); batches left with no record are dropped (Kafka
keeps an empty batch for the last batch of an idempotent producer; producer state here is
restored from snapshots, so nothing needs them); the offset map holds whole keys (Kafka holds
MD5 digests, so no collision can ever drop a record here) and its cap is soft (the segment that
fills it is finished). A log whose cleaning fails is left alone until the broker restarts, as
Kafka marks a partition uncleanable.

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
    CONTROL, DELETE_HORIZON, HEADER, HEADER_SIZE, LOG_APPEND_TIME, MAGIC_V2, BatchHeader,
    Compression, InvalidRecordError, compute_crc, iter_batches,
)
from protocol.records.compression import compress, decompress
from protocol.records.record import get_varint, put_varint
from pybroker.storage.checkpoint import read_offsets, write_offsets
from pybroker.storage.log_config import LONG_MAX
from pybroker.storage.segment import (
    CLEANED_SUFFIX, INDEX_SUFFIX, INT32_MAX, LOG_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX,
    LogSegment, fsync_directory, segment_file_name,
)

if TYPE_CHECKING:
    from pybroker.storage.log_manager import LogManager
    from pybroker.storage.partition_log import PartitionLog

__all__ = ["LogCleaner", "CleaningPlan", "CleanResult", "CleanerStats", "CLEANER_CHECKPOINT",
           "DEFAULT_MAX_MAP_ENTRIES"]

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
# Kafka's log.cleaner.dedupe.buffer.size (128 MiB) buys ~5M MD5 entries; a Python dict entry
# with a short bytes key costs ~128 bytes, so the same budget buys ~1M keys.
DEFAULT_MAX_MAP_ENTRIES = 1 << 20
MAP_ENTRY_BYTES = 128
# Kafka's log.cleaner.io.buffer.size: the read and write buffers of all cleaner threads
# together; each thread reads and writes in chunks of size / threads / 2 (a batch larger than
# a chunk is still read whole).
DEFAULT_IO_BUFFER_SIZE = 524288
_MAX_HORIZON = 1 << 62  # keeps baseTimestamp and every re-based delta inside an int64

TopicPartition = tuple[str, int]


def _now_ms() -> int:
    return int(time.time() * 1000)


class CleaningAborted(Exception):
    """The broker is shutting down; the cleaning stopped and removed its files."""


# -- plans and results -------------------------------------------------------------------------

@dataclass
class _Source:
    """A segment as the cleaner reads it: through its own descriptor, up to its size at
    planning time (segments below the active one only change by truncation or deletion,
    which `commit` detects)."""

    segment: LogSegment
    size: int
    next_base: int  # base offset of the following segment: an upper bound of this one's
    fd: int = -1


@dataclass
class CleaningPlan:
    """What `plan` chose for one log; `clean` consumes it (closing its descriptors)."""

    log: PartitionLog
    first_dirty: int
    first_uncleanable: int
    sources: list[_Source]  # every cleanable segment, from the log's first
    first_dirty_index: int  # sources[first_dirty_index:] are dirty
    clean_bytes: int
    dirty_bytes: int
    now_ms: int
    reason: str

    @property
    def topic_partition(self) -> TopicPartition:
        return self.log.topic, self.log.partition

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    def close(self) -> None:
        for src in self.sources:
            if src.fd >= 0:
                os.close(src.fd)
                src.fd = -1


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
    elapsed_s: float = 0.0


@dataclass
class _Group:
    """Adjacent segments and the one cleaned segment that replaces them."""

    sources: list[_Source]
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


# -- the cleaner -------------------------------------------------------------------------------

class LogCleaner:
    """Compacts the logs of a LogManager; see the module docstring for the three phases.

    `plan` and `commit` must run on the thread that reads and appends (the event loop);
    `clean` may run anywhere. `clean_log` / `clean_all` chain the three, for tests and tools.
    """

    def __init__(self, logs: LogManager, *,
                 max_map_entries: int = DEFAULT_MAX_MAP_ENTRIES,
                 io_chunk: int = DEFAULT_IO_BUFFER_SIZE // 2) -> None:
        self.logs = logs
        self.max_map_entries = max(1, max_map_entries)
        self.io_chunk = max(HEADER_SIZE, io_chunk)
        self._checkpoints: dict[TopicPartition, int] = {}
        for log_dir in logs.log_dirs:
            self._checkpoints.update(read_offsets(log_dir / CLEANER_CHECKPOINT))
        # The log each checkpoint belongs to: a topic deleted and recreated under the same
        # name is a new PartitionLog object and starts dirty from its log start.
        self._owners: dict[TopicPartition, PartitionLog] = {}
        self._horizons: dict[TopicPartition, int] = {}
        self._uncleanable: dict[TopicPartition, PartitionLog] = {}
        self._dirty_dirs: set[Path] = set()

    @staticmethod
    def max_map_entries_for(dedupe_buffer_size: int, threads: int = 1) -> int:
        """Map capacity for Kafka's log.cleaner.dedupe.buffer.size (see MAP_ENTRY_BYTES)."""
        return max(1, dedupe_buffer_size // max(threads, 1) // MAP_ENTRY_BYTES)

    @staticmethod
    def io_chunk_for(io_buffer_size: int, threads: int = 1) -> int:
        """Read and write chunk for Kafka's log.cleaner.io.buffer.size: Kafka gives each
        cleaner thread size / threads / 2 for its read buffer and as much for its write one."""
        return io_buffer_size // max(threads, 1) // 2

    # -- checkpoints ---------------------------------------------------------------------------
    def first_dirty_offset(self, plog: PartitionLog) -> int:
        """The checkpointed first dirty offset, reset to the log start if it is stale."""
        tp = (plog.topic, plog.partition)
        owner = self._owners.get(tp)
        if owner is not plog:
            if owner is not None:
                self._checkpoints.pop(tp, None)
                self._horizons.pop(tp, None)
            self._owners[tp] = plog
        offset = self._checkpoints.get(tp, plog.log_start_offset)
        if offset < plog.log_start_offset or offset > plog.log_end_offset:
            offset = plog.log_start_offset
        return offset

    def checkpoint_files(self) -> list[tuple[Path, dict[TopicPartition, int]]]:
        """The `cleaner-offset-checkpoint` files whose content changed since last asked, with
        their entries (a snapshot: write them from any thread)."""
        out = []
        for log_dir in sorted(self._dirty_dirs):
            live = {}
            for plog in self.logs.logs():
                tp = (plog.topic, plog.partition)
                if (tp in self._checkpoints and self._owners.get(tp) is plog
                        and self.logs.log_dir_of(*tp) == log_dir):
                    live[tp] = self._checkpoints[tp]
            out.append((log_dir / CLEANER_CHECKPOINT, live))
        self._dirty_dirs.clear()
        return out

    @staticmethod
    def write_checkpoint_files(files: list[tuple[Path, dict[TopicPartition, int]]]) -> None:
        for path, entries in files:
            write_offsets(path, entries)

    # -- phase 1: planning ---------------------------------------------------------------------
    def plan(self, plog: PartitionLog, now_ms: int | None = None, *,
             force: bool = False) -> CleaningPlan | None:
        """Choose what to clean in `plog`, or None if it needs no cleaning now.

        `force` ignores the dirty ratio (not the lags, nor the active segment).
        """
        plan = self._assess(plog, now_ms, force)
        if plan is not None:
            self._open(plan)
        return plan

    @staticmethod
    def _open(plan: CleaningPlan) -> None:
        try:
            for src in plan.sources:
                src.fd = os.open(src.segment.log_path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            plan.close()
            raise

    def _assess(self, plog: PartitionLog, now_ms: int | None,
                force: bool) -> CleaningPlan | None:
        now = _now_ms() if now_ms is None else now_ms
        tp = (plog.topic, plog.partition)
        if plog.closed or not plog.config.compact_enabled:
            return None
        if self._uncleanable.get(tp) is plog:
            return None
        config = plog.config
        segments = list(plog.segments)
        if len(segments) < 2:
            return None
        first_dirty = self.first_dirty_offset(plog)
        limit = min(segments[-1].base_offset, plog.high_watermark)
        if config.min_compaction_lag_ms > 0:
            for seg, nxt in zip(segments, segments[1:]):
                if nxt.base_offset > first_dirty and \
                        seg.largest_timestamp > now - config.min_compaction_lag_ms:
                    limit = min(limit, seg.base_offset)
                    break
        sources: list[_Source] = []
        for seg, nxt in zip(segments, segments[1:]):
            if nxt.base_offset > limit:
                break
            sources.append(_Source(seg, seg.size, nxt.base_offset))
        if not sources:
            return None
        dirty_index = next((i for i, s in enumerate(sources) if s.next_base > first_dirty),
                           len(sources))
        clean_bytes = sum(s.size for s in sources[:dirty_index])
        dirty_bytes = sum(s.size for s in sources[dirty_index:])
        total = clean_bytes + dirty_bytes
        ratio = dirty_bytes / total if total else 0.0
        reason = ""
        if force:
            reason = "forced"
        elif dirty_bytes > 0 and ratio > config.min_cleanable_dirty_ratio:
            reason = f"dirty ratio {ratio:.2f} > {config.min_cleanable_dirty_ratio}"
        elif dirty_bytes > 0 and self._overdue(sources[dirty_index], config.max_compaction_lag_ms,
                                               now):
            reason = "max.compaction.lag.ms passed"
        elif self._horizons.get(tp, LONG_MAX) <= now:
            reason = "a tombstone reached its delete horizon"
        if not reason:
            return None
        return CleaningPlan(plog, first_dirty, limit, sources, dirty_index, clean_bytes,
                            dirty_bytes, now, reason)

    @staticmethod
    def _overdue(first_dirty: _Source, max_lag_ms: int, now: int) -> bool:
        """Kafka's rule: the first batch of the first dirty segment is older than the lag."""
        if max_lag_ms >= LONG_MAX:
            return False
        found = first_dirty.segment.translate_offset(first_dirty.segment.base_offset)
        if found is None:
            return False
        ts = found[1].max_timestamp
        return 0 <= ts < now - max_lag_ms

    def grab_filthiest_log(self, now_ms: int | None = None, *,
                           exclude: set[TopicPartition] | None = None) -> CleaningPlan | None:
        """The plan of the log most in need of cleaning (highest dirty ratio), or None."""
        now = _now_ms() if now_ms is None else now_ms
        best: CleaningPlan | None = None
        for plog in self.logs.logs():
            if exclude and (plog.topic, plog.partition) in exclude:
                continue
            try:
                plan = self._assess(plog, now, False)
            except Exception:
                log.exception("cannot plan cleaning %s; leaving it alone", plog)
                self._uncleanable[(plog.topic, plog.partition)] = plog
                continue
            if plan is not None and (best is None or plan.dirty_ratio > best.dirty_ratio):
                best = plan
        if best is not None:
            self._open(best)
        return best

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
        for src in plan.sources[plan.first_dirty_index:]:
            for header, batch in _read_batches(src, stop, self.io_chunk):
                if header.is_control:
                    continue
                base = header.base_offset
                for rec in _parse_records(_records_data(header, batch), header.records_count):
                    if rec[6] is not None:
                        offset_map[rec[6]] = base + rec[5]
            stats.bytes_read += src.size
            end = src.next_base
            if len(offset_map) >= self.max_map_entries:
                break
        return offset_map, end

    def _rewrite(self, plan: CleaningPlan, sources: list[_Source],
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
                self._finish(group, stats)
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
                self._finish(group, stats)
                group = self._start_group(plan, src, result)
                group.changed.append(changed)
                assert group.cleaned is not None
                group.cleaned.append(moved, [
                    (rel, h.size, h.base_offset, h.last_offset, h.max_timestamp)
                    for rel, h in iter_batches(moved)])
        if group is not None:
            self._finish(group, stats)

    @staticmethod
    def _start_group(plan: CleaningPlan, src: _Source, result: CleanResult) -> _Group:
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
    def _write_source(plan: CleaningPlan, group: _Group, src: _Source,
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
        for header, batch in _read_batches(src, stop, chunk):
            out = _filter_batch(header, batch, offset_map, now, new_horizon, stats)
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
    def _finish(group: _Group, stats: CleanerStats) -> None:
        """Seal and fsync the group's cleaned segment, or drop it when it would replace one
        segment with identical bytes."""
        cleaned = group.cleaned
        assert cleaned is not None
        if len(group.sources) == 1 and not any(group.changed):
            cleaned.delete()
            group.cleaned = None
            stats.bytes_after += group.sources[0].size
            return
        cleaned.time_index.maybe_append(cleaned.max_timestamp_so_far,
                                        cleaned.offset_of_max_timestamp, skip_full_check=True)
        cleaned.flush()
        cleaned.offset_index.close_writer()
        cleaned.time_index.close_writer()
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
        tp = plan.topic_partition
        if result.error is not None:
            if not isinstance(result.error, CleaningAborted):
                log.error("cleaning %s failed; leaving it alone until restart", plog,
                          exc_info=result.error)
                self._uncleanable[tp] = plog
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
        if self._owners.get(tp) is plog and self.logs.get(*tp) is plog:
            self._checkpoints[tp] = result.end_offset
            log_dir = self.logs.log_dir_of(*tp)
            if log_dir is not None:
                self._dirty_dirs.add(log_dir)
                if write_checkpoint:
                    self.write_checkpoint_files(self.checkpoint_files())
        if result.next_horizon < LONG_MAX:
            self._horizons[tp] = result.next_horizon
        else:
            self._horizons.pop(tp, None)
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
        out = []
        while True:
            plan = self.grab_filthiest_log(now_ms, exclude=done)
            if plan is None:
                return out
            done.add(plan.topic_partition)
            stats = self.commit(self.clean(plan))
            if stats is not None:
                out.append(stats)


# -- reading and rewriting batches -------------------------------------------------------------

def _remove_cleaned_files(directory: Path, base: int) -> None:
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        (directory / (segment_file_name(base, suffix) + CLEANED_SUFFIX)).unlink(missing_ok=True)


def _read_batches(src: _Source, stop: threading.Event | None, chunk: int,
                  ) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every batch of a segment, through the cleaner's own descriptor, in `chunk`-byte reads
    (a longer one for a batch larger than that)."""
    pos, end, want = 0, src.size, chunk
    while pos < end:
        if stop is not None and stop.is_set():
            raise CleaningAborted()
        buf = memoryview(os.pread(src.fd, min(want, end - pos), pos))
        consumed = 0
        for rel, header in iter_batches(buf):
            if header.magic != MAGIC_V2:
                raise InvalidRecordError(f"{src.segment.log_path}: magic {header.magic} "
                                         f"at {pos + rel}")
            consumed = rel + header.size
            yield header, buf[rel:consumed]
        if consumed == 0:
            if len(buf) < HEADER_SIZE:
                raise InvalidRecordError(f"{src.segment.log_path}: torn batch at {pos}")
            need = BatchHeader.unpack_from(buf).size
            if need <= len(buf) or pos + need > end:
                raise InvalidRecordError(f"{src.segment.log_path}: torn batch at {pos}")
            want = need
            continue
        pos += consumed
        want = chunk


def _records_data(header: BatchHeader, batch: memoryview) -> bytes:
    payload = batch[HEADER_SIZE:]
    codec = header.compression
    return bytes(payload) if codec is Compression.NONE else decompress(codec, payload)


# (record start, attributes position, end of timestamp delta, record end, timestamp delta,
#  offset delta, key, value is null)
_Rec = tuple[int, int, int, int, int, int, "bytes | None", bool]


def _parse_records(data: bytes, count: int) -> list[_Rec]:
    """Locate each record of an uncompressed records section without building objects."""
    out: list[_Rec] = []
    pos, end = 0, len(data)
    try:
        for _ in range(count):
            start = pos
            length, pos = get_varint(data, pos)
            body = pos
            limit = pos + length
            if length <= 0 or limit > end:
                raise InvalidRecordError(f"record length {length} runs past the batch")
            ts_delta, ts_end = get_varint(data, pos + 1)
            offset_delta, pos = get_varint(data, ts_end)
            key_len, pos = get_varint(data, pos)
            key = None
            if key_len >= 0:
                key = data[pos:pos + key_len]
                pos += key_len
            value_len, pos = get_varint(data, pos)
            if pos > limit or (value_len >= 0 and pos + value_len > limit):
                raise InvalidRecordError("record fields run past the record")
            out.append((start, body, ts_end, limit, ts_delta, offset_delta, key, value_len < 0))
            pos = limit
    except IndexError:
        raise InvalidRecordError("records end in the middle of a record") from None
    if pos != end:
        raise InvalidRecordError(f"{end - pos} bytes after the last of {count} records")
    return out


def _filter_batch(header: BatchHeader, batch: memoryview, offset_map: dict[bytes, int],
                  now: int, new_horizon: int, stats: CleanerStats,
                  ) -> tuple[bytes | memoryview, int, int, int | None] | None:
    """The batch with only the records to keep: (bytes, last offset, max timestamp, delete
    horizon if it keeps tombstones), `batch` itself if nothing changes, None if empty."""
    if header.attributes & CONTROL:
        return batch, header.last_offset, header.max_timestamp, None
    data = _records_data(header, batch)
    records = _parse_records(data, header.records_count)
    stats.records_read += len(records)
    base = header.base_offset
    had_horizon = bool(header.attributes & DELETE_HORIZON)
    horizon = header.base_timestamp if had_horizon else None
    kept: list[_Rec] = []
    keeps_tombstone = False
    for rec in records:
        key = rec[6]
        if key is None:
            stats.keyless_removed += 1
            continue
        if base + rec[5] < offset_map.get(key, -1):
            stats.superseded += 1
            continue
        if rec[7]:
            if horizon is not None and now >= horizon:
                stats.tombstones_removed += 1
                continue
            keeps_tombstone = True
        kept.append(rec)
    stats.records_kept += len(kept)
    if not kept:
        return None
    if len(kept) == len(records) and keeps_tombstone == had_horizon:
        return batch, header.last_offset, header.max_timestamp, horizon
    old_base_ts = header.base_timestamp
    attributes = header.attributes & ~DELETE_HORIZON
    if keeps_tombstone:
        new_base_ts = horizon if horizon is not None else new_horizon
        attributes |= DELETE_HORIZON
    elif had_horizon:
        new_base_ts = old_base_ts + kept[0][4]  # back to the first record's own timestamp
    else:
        new_base_ts = old_base_ts
    body = bytearray()
    max_ts = -1
    for start, attrs_pos, ts_end, end, ts_delta, _, _, _ in kept:
        ts = old_base_ts + ts_delta
        if ts > max_ts:
            max_ts = ts
        if new_base_ts == old_base_ts:
            body += data[start:end]
        else:
            rec = bytearray(data[attrs_pos:attrs_pos + 1])
            put_varint(rec, ts - new_base_ts)
            rec += data[ts_end:end]
            put_varint(body, len(rec))
            body += rec
    if header.timestamp_type == LOG_APPEND_TIME:
        max_ts = header.max_timestamp
    codec = header.compression
    payload = body if codec is Compression.NONE else compress(codec, body)
    out = bytearray(HEADER_SIZE + len(payload))
    last_delta = kept[-1][5]
    HEADER.pack_into(out, 0, base, len(out) - 12, header.partition_leader_epoch, MAGIC_V2, 0,
                     attributes, last_delta, new_base_ts, max_ts, header.producer_id,
                     header.producer_epoch, header.base_sequence, len(kept))
    out[HEADER_SIZE:] = payload
    out[17:21] = compute_crc(out, 0, len(out)).to_bytes(4, "big")
    return bytes(out), base + last_delta, max_ts, new_base_ts if keeps_tombstone else None
