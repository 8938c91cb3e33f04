"""One partition's log: offsets, appends, producer state and transactions (Kafka's UnifiedLog).

Longer than most modules here because the leader's and the follower's append, the reads and the
transaction bookkeeping all move the same offsets; the segment files are `local_log.LocalLog`'s,
retention is `log_retention`'s.

Theory of operation. The log lives in `<log_dir>/<topic>-<partition>/` as a list of segments
sorted by base offset; only the last (active) one is appended to. Four offsets describe it:

    log_start_offset <= high_watermark <= log_end_offset,   recovery_point <= log_end_offset

- `log_end_offset` (LEO): the next offset to assign.
- `high_watermark`: what consumers may read. On one broker the caller moves it to the LEO right
  after an append; with replication it follows the slowest in-sync replica. Replicas fetch up
  to the LEO.
- `log_start_offset`: the first readable offset; moved forward by retention and DeleteRecords.
- `recovery_point`: everything below it is known to be fsynced, so after a crash only segments
  from it onward are re-validated.

Append (leader): walk the batch headers (CRC checked in C), check idempotent sequences, patch
each batch's base offset and leader epoch in place (and LogAppendTime if the topic asks for
it), roll the active segment if needed, write the bytes in one call, index them. A retried
idempotent batch is not written again: its original offsets are returned. Read: bisect the
segment list, then the segment's offset index, and return whole batches from the file with one
pread. Records are never decoded on either path.

Transactions. Producer state (`producer_state`) knows the open transactions and those whose
marker the high watermark has not passed yet; the smallest first offset among them is the
*first unstable offset*, and the *last stable offset* (what read_committed consumers may read)
is the smaller of it and the high watermark. Both are cached, so without transactions reading
the LSO is an attribute read and a comparison. A transactional batch opens its producer's
transaction; a marker (`append_control_marker` on the leader, or a control batch in
`append` / `append_as_follower`) ends it, and an ABORT adds an entry to the `.txnindex` of the
segment the marker lands in, which `aborted_transactions` searches for Fetch.

The split with `LocalLog` follows Kafka's: the local log holds the segments, the log end and
the recovery point (facts about the files) and does roll, read, truncation, the compaction swap
and flush; this class holds the log start, the high watermark, producer state and leader epochs,
decides when to roll (snapshotting producer state then) and calls it once per append or read.

Loading (`log_loader`) trusts the files after a clean shutdown (only the active segment's tail
is re-checked) and re-validates every segment from the recovery point otherwise.

Compaction (`cleaner`) writes cleaned segments off the log's books, then `replace_segments`
swaps them in; the swap runs on the same thread as reads, so a read sees either the old
segments or the new one, never a mix.

Threading: everything runs on the caller's thread except `flush`, which the broker runs in a
worker thread; it only fsyncs and moves the recovery point, and a lock (the local log's, shared
with this class) keeps it from racing `close`.
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from protocol.records.batch import (
    CONTROL, TRANSACTIONAL, BatchHeader, InvalidRecordError, set_base_offset,
    set_log_append_time, set_partition_leader_epoch, validate_batches, walk_batches,
)
from protocol.records.record import ControlRecord, build_control_batch, control_record_of
from protocol.records.types import RecordError
from pybroker.stats.latency_histogram import LatencyHistogram
from pybroker.storage.files import FileCache
from pybroker.storage.leader_epoch_cache import LeaderEpochFileCache
from pybroker.storage.local_log import LocalLog
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_info import (
    AppendInfo, FetchData, MessageTooLarge, OffsetOutOfRange, UnexpectedAppendOffset,
    parse_topic_partition, partition_dir_name,
)
from pybroker.storage.log_retention import LogRetention
from pybroker.storage.producer_state import (
    SNAPSHOT_SUFFIX, CompletedTxn, DuplicateBatch, InvalidProducerEpoch, InvalidTxnState,
    OutOfOrderSequence, ProducerStateManager, TransactionCoordinatorFenced,
)
from pybroker.storage.segment import AppendedBatch, LogSegment, segment_file_name
from pybroker.storage.transaction_index import AbortedTxn

__all__ = [
    "PartitionLog", "LogConfig", "AppendInfo", "FetchData", "OffsetOutOfRange",
    "MessageTooLarge", "UnexpectedAppendOffset", "OutOfOrderSequence", "InvalidProducerEpoch",
    "InvalidTxnState", "TransactionCoordinatorFenced", "parse_topic_partition",
    "partition_dir_name",
]

_TXN_OR_CONTROL = TRANSACTIONAL | CONTROL

log = logging.getLogger(__name__)


# Below this many bytes to walk, loading replays producer state rather than a clean stop
# writing a snapshot (about what a clean start reads of the active segment anyway).
SNAPSHOT_MIN_REPLAY_BYTES = 16 * 1024


def _now_ms() -> int:
    return int(time.time() * 1000)


class PartitionLog(LogRetention):
    """The segmented log of one partition replica."""

    def __init__(self, directory: str | os.PathLike[str], config: LogConfig | None = None, *,
                 log_start_offset: int | None = None, recovery_point: int = 0,
                 high_watermark: int | None = None, had_clean_shutdown: bool = True,
                 files: FileCache | None = None, sync_recovery: bool = True) -> None:
        """`files` lends segments their descriptors (default: a cache of this log's own).
        Without `sync_recovery`, segments recovered after an unclean shutdown are not fsynced
        and the recovery point stays where it was: the caller syncs the file system, then
        calls `mark_synced`."""
        self.dir = Path(directory)
        self.topic, self.partition = parse_topic_partition(self.dir.name)
        self._local = LocalLog(self.dir, config or LogConfig(),
                               files if files is not None else FileCache(64))
        self._lock = self._local.lock  # one lock for the segments and the offsets here
        self.log_start_offset = 0
        self.high_watermark = 0
        self.producer_state = ProducerStateManager(self.dir)
        self._first_unstable: int | None = None  # see `first_unstable_offset`
        self._load(log_start_offset, recovery_point, high_watermark, had_clean_shutdown,
                   sync_recovery)

    def __repr__(self) -> str:
        return (f"PartitionLog({self.topic}-{self.partition}, start={self.log_start_offset}, "
                f"hw={self.high_watermark}, leo={self.log_end_offset})")

    # -- loading -------------------------------------------------------------------------------
    def _load(self, log_start_offset: int | None, recovery_point: int,
              high_watermark: int | None, clean: bool, sync: bool) -> None:
        local = self._local
        local.load(log_start_offset or 0, recovery_point, clean, sync)
        # The segments the loader re-validated (from the one holding the recovery point):
        # their `.txnindex` may lack entries, so replay rebuilds it (Kafka's recoverSegment).
        rebuild_from = None if clean else \
            local.segments[max(local.segment_index(recovery_point), 0)].base_offset
        start = max(log_start_offset or 0, local.segments[0].base_offset)
        self.log_start_offset = min(start, self.log_end_offset)
        hw = self.log_start_offset if high_watermark is None else high_watermark
        self.high_watermark = min(max(hw, self.log_start_offset), self.log_end_offset)

        self.leader_epoch_cache = LeaderEpochFileCache(self.dir)
        # Deferred: an epoch starting at the log end of an empty log is dropped at every
        # start, and a write (with fsync) per partition made starts slow. A crash before the
        # checkpoint writes it only means dropping it again.
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset, defer=True)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self._load_producer_state(rebuild_from)

    def _load_producer_state(self, rebuild_txn_index_from: int | None = None) -> None:
        """Newest snapshot not beyond the log end, then replay the batches after it.

        With `rebuild_txn_index_from`, the `.txnindex` of every segment from that base offset
        on is rebuilt from the markers replayed, so the snapshot is one at or below it.
        """
        state = self.producer_state
        rebuild = rebuild_txn_index_from
        snapshot = state.load(self.log_end_offset, rebuild)
        if rebuild is not None:
            for segment in self.segments[max(self._local.segment_index(rebuild), 0):]:
                if segment.base_offset >= rebuild:
                    segment.txn_index.reset()
        if snapshot != self.log_end_offset:
            start = self.log_start_offset if snapshot is None else max(snapshot,
                                                                        self.log_start_offset)
            segments = self.segments
            for i in range(max(self._local.segment_index(start), 0), len(segments)):
                segment = segments[i]
                on_complete = None
                if rebuild is not None and segment.base_offset >= rebuild:
                    on_complete = segment.txn_index.append_completed
                state.replay(segment.batches_from(start), segment.read_marker, on_complete)
        state.on_high_watermark(self.high_watermark)
        self._refresh_first_unstable()

    # -- state ---------------------------------------------------------------------------------
    @property
    def log_end_offset(self) -> int:
        """The next offset to assign (the local log's)."""
        return self._local.log_end_offset

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    @recovery_point.setter
    def recovery_point(self, offset: int) -> None:
        self._local.recovery_point = offset

    @property
    def config(self) -> LogConfig:
        return self._local.config

    @config.setter
    def config(self, config: LogConfig) -> None:
        """A topic's configuration changed: segments rolled from now on follow it."""
        self._local.config = config

    @property
    def active_segment(self) -> LogSegment:
        return self._local.segments[-1]

    @property
    def size(self) -> int:
        return self._local.size

    @property
    def files(self) -> FileCache:
        return self._local.files

    def set_files(self, files: FileCache) -> None:
        """Take segment descriptors from `files` from now on (a log loaded in a worker with
        a private cache joins the broker's)."""
        self._local.set_files(files)

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction that is open or whose marker is not
        yet below the high watermark; None if there is none (Kafka's firstUnstableOffset)."""
        return self._first_unstable

    def _refresh_first_unstable(self) -> None:
        """Recompute the cached first unstable offset after a transaction changed. Never below
        the log start: retention may delete the start of a transaction still open (Kafka's
        maybeIncrementFirstUnstableOffset clamps it the same way)."""
        first = self.producer_state.first_unstable_offset()
        self._first_unstable = None if first is None else max(first, self.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may read up to: the high watermark, or the first
        unstable offset if that is lower."""
        first = self._first_unstable
        hw = self.high_watermark
        return hw if first is None or first >= hw else first

    def update_high_watermark(self, offset: int | None = None) -> int:
        """Set the high watermark (default: the log end), clamped into [log start, log end].

        Completed transactions whose marker it passes stop holding the LSO back.
        """
        target = self.log_end_offset if offset is None else offset
        hw = self.high_watermark = min(max(target, self.log_start_offset), self.log_end_offset)
        if self._first_unstable is not None and self.producer_state.on_high_watermark(hw):
            self._refresh_first_unstable()
        return hw

    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of each open transaction, oldest first."""
        return dict(self.producer_state.ongoing)

    def aborted_transactions(self, start_offset: int, upper_offset: int,
                             ) -> list[tuple[int, int]]:
        """(producer id, first offset) of every aborted transaction overlapping
        [start_offset, upper_offset), one per transaction: what a read_committed Fetch
        returns beside records read from `start_offset` up to `upper_offset`."""
        return [(txn.producer_id, txn.first_offset)
                for txn in self.collect_aborted_transactions(start_offset, upper_offset)]

    def collect_aborted_transactions(self, start_offset: int, upper_offset: int,
                                     ) -> list[AbortedTxn]:
        """The `.txnindex` entries overlapping [start_offset, upper_offset), from the
        segment holding `start_offset` on, until an entry's last stable offset reaches
        `upper_offset` (Kafka's collectAbortedTransactions)."""
        out: list[AbortedTxn] = []
        segments = self.segments
        for i in range(max(self._local.segment_index(start_offset), 0), len(segments)):
            found, complete = segments[i].txn_index.collect(start_offset, upper_offset)
            out += found
            if complete:
                break
        return out

    # -- appending -----------------------------------------------------------------------------
    def append(self, records: bytes | bytearray | memoryview, *, leader_epoch: int,
               assign_offsets: bool = True, log_append_time: int | None = None,
               now_ms: int | None = None,
               batches: list[tuple[int, BatchHeader]] | None = None) -> AppendInfo:
        """Append a producer's batches as the leader, assigning offsets from the log end.

        Raises CorruptRecordError / InvalidRecordError (from validation), MessageTooLarge,
        OutOfOrderSequence or InvalidProducerEpoch; nothing is written then. With
        `assign_offsets=False` this is a replica append (see `append_as_follower`).
        `log_append_time` is the clock to stamp with when the topic uses LogAppendTime
        (default: now). A bytearray or a writable memoryview (a Produce frame's records,
        received in place) is patched in place; other buffers are copied once.
        `batches` is `validate_batches(records)` when the caller has just run it (the Produce
        path does, to answer with the right error), so the CRCs are not checked twice.
        """
        if not assign_offsets:
            return self.append_as_follower(records)
        if batches is None:
            batches = validate_batches(records)
        local = self._local
        config = local.config
        for pos, header in batches:
            if header.size > config.max_message_bytes:
                raise MessageTooLarge(f"batch of {header.size} bytes exceeds max.message.bytes "
                                      f"{config.max_message_bytes}")
        now = _now_ms() if now_ms is None else now_ms
        buf = records if type(records) is bytearray or (
            type(records) is memoryview and not records.readonly) else bytearray(records)
        stamp = config.log_append_time
        append_time = (now if log_append_time is None else log_append_time) if stamp else -1
        offset = local.log_end_offset
        items = []
        appended: list[AppendedBatch] = []
        max_ts, offset_of_max, messages = -1, offset, 0
        attributes = 0
        for pos, header in batches:
            attributes |= header.attributes
            base, last = offset, offset + header.last_offset_delta
            set_base_offset(buf, pos, base)
            set_partition_leader_epoch(buf, pos, leader_epoch)
            ts = header.max_timestamp
            if stamp:
                set_log_append_time(buf, pos, append_time)
                ts = append_time
            items.append((header, base, last))
            appended.append((pos, header.size, base, last, ts))
            if ts > max_ts:
                max_ts, offset_of_max = ts, base
            messages += header.records_count
            offset = last + 1
        markers = self._read_markers(buf, batches) if attributes & CONTROL else None
        duplicate = self.producer_state.check_append(items, markers)
        if duplicate is not None:
            return self._duplicate_info(duplicate, stamp)
        first_offset, last_offset = items[0][1], items[-1][2]
        self._write(buf, appended, first_offset, last_offset, max_ts, now)
        if leader_epoch >= 0:
            self.leader_epoch_cache.assign(leader_epoch, first_offset)
        if attributes & _TXN_OR_CONTROL:
            self._update_transactions(items, appended, markers)
        else:
            for (header, base, last), batch in zip(items, appended):
                self.producer_state.update(header, base, last, timestamp=batch[4])
        self._local.after_append(messages)
        return AppendInfo(first_offset, last_offset, max_ts, offset_of_max, append_time,
                          self.log_start_offset, messages, len(buf))

    @staticmethod
    def _read_markers(buf: bytearray | memoryview, batches: list[tuple[int, BatchHeader]],
                      ) -> dict[int, ControlRecord]:
        """The record of each control batch, by index: a malformed one is refused."""
        return {i: control_record_of(memoryview(buf)[pos:pos + header.size])
                for i, (pos, header) in enumerate(batches) if header.attributes & CONTROL}

    def _update_transactions(self, items: list[tuple[BatchHeader, int, int]],
                             appended: list[AppendedBatch],
                             markers: dict[int, ControlRecord] | None) -> None:
        """Producer state after a leader append holding transactional or control batches."""
        state = self.producer_state
        for i, ((header, base, last), batch) in enumerate(zip(items, appended)):
            marker = markers.get(i) if markers else None
            if marker is not None and marker.coordinator_epoch is not None \
                    and header.has_producer_id:
                done = state.update_marker(header.producer_id, header.producer_epoch,
                                           marker.coordinator_epoch, marker.is_commit, base,
                                           batch[4])
                if done is not None:
                    self._txn_completed(done)
            else:
                state.update(header, base, last, timestamp=batch[4])
        self._refresh_first_unstable()

    def _txn_completed(self, done: CompletedTxn) -> None:
        """A marker just written ended a transaction: an abort goes to the `.txnindex` of
        the segment holding the marker."""
        self.active_segment.txn_index.append_completed(done)

    def append_control_marker(self, producer_id: int, producer_epoch: int,
                              coordinator_epoch: int, commit: bool, *, leader_epoch: int,
                              now_ms: int | None = None) -> AppendInfo:
        """Write a COMMIT or ABORT marker for `producer_id` at the log end (the leader, for
        WriteTxnMarkers). Raises InvalidProducerEpoch for an epoch older than the producer's,
        TransactionCoordinatorFenced for an older coordinator epoch; a producer without an
        open transaction still gets its marker (it completes nothing)."""
        now = _now_ms() if now_ms is None else now_ms
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        batch = build_control_batch(producer_id, producer_epoch, commit, coordinator_epoch,
                                    timestamp=now, base_offset=self.log_end_offset,
                                    partition_leader_epoch=leader_epoch)
        return self.append(bytearray(batch), leader_epoch=leader_epoch, now_ms=now)

    def _duplicate_info(self, duplicate: DuplicateBatch, stamped: bool) -> AppendInfo:
        return AppendInfo(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
                          duplicate.first_offset, duplicate.timestamp if stamped else -1,
                          self.log_start_offset, 0, 0, duplicate=True)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches fetched from the leader, keeping their offsets and epochs.

        Batches are CRC-checked (record counts are not: compacted batches legitimately have
        fewer records than their offset range). UnexpectedAppendOffset if they do not start at
        or after the log end or go backwards; the follower must truncate first.
        """
        batches, valid, reason = walk_batches(records)
        if reason is not None or not batches:
            raise InvalidRecordError(reason or "no record batch")
        if batches[0][1].base_offset < self.log_end_offset:
            raise UnexpectedAppendOffset(
                f"first offset {batches[0][1].base_offset} < log end {self.log_end_offset}")
        appended: list[AppendedBatch] = []
        expected = self.log_end_offset
        max_ts, offset_of_max, messages = -1, batches[0][1].base_offset, 0
        attributes = 0
        for pos, header in batches:
            attributes |= header.attributes
            if header.base_offset < expected:
                raise UnexpectedAppendOffset(f"batch at {pos} goes back to {header.base_offset}")
            appended.append((pos, header.size, header.base_offset, header.last_offset,
                             header.max_timestamp))
            if header.max_timestamp > max_ts:
                max_ts, offset_of_max = header.max_timestamp, header.base_offset
            messages += header.records_count
            expected = header.next_offset
        first_offset, last_offset = batches[0][1].base_offset, batches[-1][1].last_offset
        self._write(records, appended, first_offset, last_offset, max_ts, _now_ms())
        for _, header in batches:
            self.leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        if attributes & _TXN_OR_CONTROL:
            view = memoryview(records)

            def read_marker(pos: int, header: BatchHeader) -> ControlRecord | None:
                try:
                    return control_record_of(view[pos:pos + header.size])
                except RecordError:
                    return None

            self.producer_state.replay(batches, read_marker, self._txn_completed)
            self._refresh_first_unstable()
        else:
            self.producer_state.replay(batches)
        self._local.after_append(messages)
        return AppendInfo(first_offset, last_offset, max_ts, offset_of_max, -1,
                          self.log_start_offset, messages, valid)

    def _write(self, data: bytes | bytearray | memoryview, appended: list[AppendedBatch],
               first_offset: int, last_offset: int, max_timestamp: int, now_ms: int) -> None:
        local = self._local
        if local.closed:
            raise ValueError(f"{self} is closed")
        segment = local.active_segment
        if segment.is_empty and segment.base_offset != first_offset:
            self._roll(first_offset)  # a replica append after a gap
        elif segment.should_roll(local.config, len(data), last_offset, max_timestamp, now_ms):
            self._roll(first_offset)
        local.append(data, appended, last_offset)

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end (a no-op if the active one is empty)."""
        return self._roll(self.log_end_offset)

    def _roll(self, base_offset: int) -> LogSegment:
        local = self._local
        active = local.active_segment
        segment = local.roll(base_offset)
        if segment is not active:
            # Kafka snapshots producer state at every roll, so loading replays one segment at
            # most.
            self.producer_state.take_snapshot(base_offset)
        return segment

    # -- reading -------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_message: bool = True, region_min_batch: int = 0) -> FetchData:
        """Whole batches from the one holding `offset`, at most `max_bytes` of them (but the
        first batch whole whatever its size, if `min_one_message`), never a batch reaching
        `max_offset` (the high watermark for consumers, default the log end for replicas).
        With `region_min_batch`, records starting with a batch at least that large come back
        as a `FileRegion` of the segment file (for sendfile); see `LogSegment.read`.

        OffsetOutOfRange if `offset` is below the log start or beyond the log end. Reads stay
        within one segment, as Kafka's do; the consumer's next fetch continues.
        """
        local = self._local
        leo = local.log_end_offset
        if offset < self.log_start_offset or offset > leo:
            raise OffsetOutOfRange(offset, self.log_start_offset, leo)
        limit = leo if max_offset is None else min(max_offset, leo)
        if offset < limit:
            found = local.read(offset, max_bytes, limit, min_one_message, region_min_batch)
            if found is not None:
                return FetchData(found.records, found.first_offset, found.next_offset,
                                 self.high_watermark, self.log_start_offset, leo,
                                 self.last_stable_offset)
        return FetchData(b"", -1, offset, self.high_watermark, self.log_start_offset, leo,
                         self.last_stable_offset)

    def offset_for_timestamp(self, timestamp: int, *, max_offset: int | None = None,
                             ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= `timestamp`.

        Exact (ListOffsets by timestamp): segments are skipped by their largest timestamp, the
        time and offset indexes narrow the scan to a few batch headers, and only the batch
        holding the answer is decoded. None if no record qualifies, or if the answer is at or
        beyond `max_offset` (pass the high watermark for consumers).
        """
        start = self.log_start_offset
        segments = self.segments
        for i in range(max(self._local.segment_index(start), 0), len(segments)):
            segment = segments[i]
            if segment.max_timestamp_so_far < timestamp:
                continue
            found = segment.find_offset_by_timestamp(timestamp, start)
            if found is not None:
                if max_offset is not None and found[0] >= max_offset:
                    return None
                return found
        return None

    def offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3)."""
        best: LogSegment | None = None
        for segment in self.segments[max(self._local.segment_index(self.log_start_offset), 0):]:
            if segment.max_timestamp_so_far >= 0 and (
                    best is None or segment.max_timestamp_so_far > best.max_timestamp_so_far):
                best = segment
        return best.max_timestamp_record() if best is not None else None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch; (-1, -1) when unknown."""
        return self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    @property
    def latest_epoch(self) -> int:
        return self.leader_epoch_cache.latest_epoch

    # -- truncation ----------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> bool:
        """Drop everything from `offset` on: whole segments, the partial one, index entries,
        leader epochs and producer state (what a follower does after a leader change).

        The batch holding `offset` goes too; followers truncate at batch boundaries. Returns
        whether anything was removed.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        with self._lock:
            if offset >= self.log_end_offset:
                return False
            if offset < self.segments[0].base_offset:
                self.truncate_fully_and_start_at(offset)
                return True
            self._local.truncate_to(offset)
            self.high_watermark = min(self.high_watermark, self.log_end_offset)
            self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            self._load_producer_state()
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log, empty, at `offset` (a follower that fell
        behind the leader's log start)."""
        with self._lock:
            self._local.truncate_fully_and_start_at(offset)
            self.high_watermark = self.log_start_offset = offset
            self.leader_epoch_cache.clear()
            self.producer_state.truncate_fully()
            self._first_unstable = None

    # -- compaction ----------------------------------------------------------------------------
    def replace_segments(self, cleaned: LogSegment, old: list[LogSegment]) -> bool:
        """Swap `cleaned` in for the consecutive, inactive segments `old`
        (`LocalLog.replace_segments`, which says how a crash is survived). Producer-state
        snapshots named after the segments merged away go too (as in Kafka: only the newest is
        ever loaded, and a compacted log would otherwise keep one per roll forever). False,
        with nothing changed, if `old` is no longer a run of inactive segments of this log
        (retention or a truncation got there first); the caller then deletes `cleaned`.
        """
        with self._lock:
            if not self._local.replace_segments(cleaned, old):
                return False
            for segment in old[1:]:
                (self.dir / segment_file_name(segment.base_offset, SNAPSHOT_SUFFIX)).unlink(
                    missing_ok=True)
            return True

    # -- durability and lifecycle --------------------------------------------------------------
    @property
    def unflushed_messages(self) -> int:
        return self._local.unflushed_messages

    @property
    def last_flush_ms(self) -> int:
        return self._local.last_flush_ms

    @property
    def flush_timer(self) -> LatencyHistogram | None:
        """Where flushes report their time (Kafka's LogFlushRateAndTimeMs); the log manager
        sets its own, shared by its logs. None: not timed."""
        return self._local.flush_timer

    @flush_timer.setter
    def flush_timer(self, timer: LatencyHistogram | None) -> None:
        self._local.flush_timer = timer

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding data below `offset` (default: the log end) and move the
        recovery point there. Blocking: the broker calls it from a worker thread."""
        self._local.flush(offset)

    def maybe_flush(self, now_ms: int) -> bool:
        """The periodic flush: whole rolled segments always, the active one after flush.ms."""
        return self._local.maybe_flush(now_ms)

    def close(self, *, sync: bool = True) -> None:
        """Flush, snapshot producer state at the log end, release every file.

        Without producer ids to keep, the snapshot is skipped when replaying the log after
        the last one costs less than writing it (a few KB: an idle or nearly empty log, of
        which a broker may have tens of thousands). Without `sync` nothing is fsynced and the recovery point stays: the log
        manager syncs each log dir's file system once, then calls `mark_synced` (a fsync per
        file made a clean stop of 10,000 partitions take 8 s).
        """
        with self._lock:
            local = self._local
            if local.closed:
                return
            if sync:
                local.flush()
            else:
                for segment in local.segments:
                    segment.write_indexes()
            state = self.producer_state
            if state.last_snapshot_offset != self.log_end_offset and (
                    state.producers or self._bytes_to_replay() > SNAPSHOT_MIN_REPLAY_BYTES):
                state.take_snapshot(self.log_end_offset, sync=sync)
            self.leader_epoch_cache.write_pending(sync=sync)
            local.close()

    def close_handles(self) -> None:
        """Release every file and write nothing (no flush, snapshot or checkpoint): its log
        dir failed. The next start recovers the log from its recovery point."""
        with self._lock:
            self._local.close_handles()

    def _bytes_to_replay(self) -> int:
        """At most how many bytes loading would walk to rebuild producer state."""
        snapshot = self.producer_state.last_snapshot_offset
        start = self.log_start_offset if snapshot is None else snapshot
        return sum(s.size for s in self.segments[max(self._local.segment_index(start), 0):])

    def mark_synced(self) -> None:
        """The caller synced the file system after an unclean load or a `close(sync=False)`:
        everything up to the log end is durable, so the recovery point moves there."""
        self._local.mark_synced()

    def delete(self) -> None:
        """Remove the whole log: `detach`, then delete the renamed directory."""
        self._local.delete()

    def detach(self) -> Path | None:
        """Close the log and rename its directory to `<name>.<uuid>-delete`, the name the next
        start recognises and removes; returns that path (None if the directory is gone) for
        the caller to delete, which for a large log is best done off the event loop."""
        return self._local.detach()

    @property
    def closed(self) -> bool:
        return self._local.closed
