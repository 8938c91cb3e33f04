"""Idempotent-producer state of one partition (Kafka's ProducerStateManager).

One module on purpose (about 530 lines): sequence checks, transactions and snapshots all update
the same per-producer entries.

Theory of operation. An idempotent producer numbers its batches per partition (producer id,
epoch, base sequence). The partition remembers, per producer id, its epoch and the metadata of
its last five batches (Kafka's producer keeps at most five requests in flight, so a retry can
only ever repeat one of those). Before a batch is written:

- a batch matching one of the five (same epoch, same first and last sequence) is a retry of
  something already written: the caller answers with the original offsets and writes nothing;
- an epoch older than the known one is a zombie producer: `InvalidProducerEpoch`;
- a newer epoch must start again at sequence 0;
- in the same epoch the sequence must follow the last one (wrapping at 2**31-1), else
  `OutOfOrderSequence` (a gap means a lost batch: the producer must not skip ahead);
- an unknown producer id is accepted at any sequence (its state may have been lost with old
  segments; Kafka accepts too).

Transactions (Kafka's ProducerAppendInfo). A transactional data batch opens its producer's
transaction, or continues it: the entry's `current_txn_first_offset` is the offset of the
transaction's first batch here. While it is open, a non-transactional batch from the same
producer is refused (`InvalidTxnState`). A control batch, the COMMIT or ABORT marker the
transaction coordinator writes, ends it; a marker from an older epoch than the producer's is
refused (`InvalidProducerEpoch`), one from an older coordinator epoch too
(`TransactionCoordinatorFenced`), and the marker's epoch becomes the producer's, which is how
the coordinator's epoch bump fences a zombie producer here. A marker for a producer with no
open transaction is written but completes nothing. A completed transaction stays
"unreplicated" until the high watermark passes its marker: until then a consumer reading
committed data must not get past its first offset. `first_unstable_offset` is the smallest
first offset of the open and unreplicated transactions, from which the log derives its last
stable offset.

The state is derived from the log, so it is rebuilt by replaying batch headers (and the one
record of each control batch). Snapshots
(`<20-digit offset>.snapshot`, "state after every batch below this offset") bound the replay:
one is written when a segment rolls and at close, and loading starts from the newest valid
snapshot not beyond the log end. Snapshot files are our own format, with a CRC32C so a torn
one is detected and skipped.
"""
from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from protocol.records import checksum
from protocol.records.batch import CONTROL, NO_SEQUENCE, TRANSACTIONAL, BatchHeader
from protocol.records.record import ControlRecord
from protocol.records.types import InvalidRecordError
from pybroker.storage.files import write_atomically

__all__ = [
    "ProducerStateManager", "ProducerStateEntry", "BatchMetadata", "DuplicateBatch",
    "OutOfOrderSequence", "InvalidProducerEpoch", "InvalidTxnState",
    "TransactionCoordinatorFenced", "CompletedTxn", "SNAPSHOT_SUFFIX", "NUM_BATCHES_TO_RETAIN",
]

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1
NO_PRODUCER_EPOCH = -1

_MAGIC = b"PBPS"
_VERSION = 1
_FILE_HEADER = struct.Struct(">4sHII")  # magic, version, crc32c of the rest, entry count
_ENTRY = struct.Struct(">qhqiqB")  # pid, epoch, last timestamp, coordinator epoch,
#                                    current txn first offset (-1), batch count
_BATCH = struct.Struct(">iiqqq")  # first seq, last seq, first offset, last offset, timestamp


class OutOfOrderSequence(Exception):
    """The batch's sequence does not follow the producer's last one
    (OUT_OF_ORDER_SEQUENCE_NUMBER)."""


class InvalidProducerEpoch(Exception):
    """The batch comes from an older epoch of a known producer (INVALID_PRODUCER_EPOCH)."""


class InvalidTxnState(Exception):
    """A non-transactional batch from a producer whose transaction is open
    (INVALID_TXN_STATE)."""


class TransactionCoordinatorFenced(Exception):
    """A transaction marker from an older coordinator epoch than the last one seen for the
    producer: a deposed coordinator (TRANSACTION_COORDINATOR_FENCED)."""


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended: its first offset here, the marker's offset, the outcome,
    and the partition's last stable offset right after (what a `.txnindex` entry records)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    last_stable_offset: int


# Reads the marker of a control batch (pos, header): what replay needs beyond the header.
MarkerReader = Callable[[int, BatchHeader], "ControlRecord | None"]


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class DuplicateBatch:
    """A retried batch: answer the producer with where it was written the first time."""

    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1  # first offset of the open transaction, else -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch,
                                  deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
                                  self.last_timestamp, self.coordinator_epoch,
                                  self.current_txn_first_offset)

    def find_duplicate(self, header: BatchHeader) -> DuplicateBatch | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        first, last = header.base_sequence, header.last_sequence
        for batch in self.batches:
            if batch.first_seq == first and batch.last_seq == last:
                return DuplicateBatch(batch.first_offset, batch.last_offset, batch.timestamp)
        return None

    def apply(self, header: BatchHeader, first_offset: int, last_offset: int,
              timestamp: int | None = None) -> None:
        """Record a written batch (no checks: used live after `check` and on replay).

        `timestamp` is the batch's max timestamp as written, when the broker stamped it
        (LogAppendTime); a retry is answered with it.
        """
        ts = header.max_timestamp if timestamp is None else timestamp
        if header.producer_epoch != self.producer_epoch:
            self.producer_epoch = header.producer_epoch
            self.batches.clear()
        if header.base_sequence != NO_SEQUENCE and not header.is_control:
            self.batches.append(BatchMetadata(header.base_sequence, header.last_sequence,
                                              first_offset, last_offset, ts))
        if header.attributes & TRANSACTIONAL and not header.attributes & CONTROL and \
                self.current_txn_first_offset < 0:
            self.current_txn_first_offset = first_offset
        if ts > self.last_timestamp:
            self.last_timestamp = ts

    def apply_marker(self, epoch: int, coordinator_epoch: int, timestamp: int) -> int:
        """Record a written marker; returns the first offset of the transaction it ended
        (-1 if none was open)."""
        if epoch != self.producer_epoch:
            self.producer_epoch = epoch
            self.batches.clear()
        self.coordinator_epoch = coordinator_epoch
        if timestamp > self.last_timestamp:
            self.last_timestamp = timestamp
        first, self.current_txn_first_offset = self.current_txn_first_offset, -1
        return first


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def check_marker(entry: ProducerStateEntry | None, producer_id: int, epoch: int,
                 coordinator_epoch: int) -> None:
    """Kafka's appendEndTxnMarker checks: a marker may not come from an older producer epoch
    (InvalidProducerEpoch) nor an older coordinator epoch (TransactionCoordinatorFenced)."""
    if entry is None:
        return
    if entry.producer_epoch != NO_PRODUCER_EPOCH and epoch < entry.producer_epoch:
        raise InvalidProducerEpoch(
            f"transaction marker for producer {producer_id} at epoch {epoch} is older than "
            f"the current epoch {entry.producer_epoch}")
    if coordinator_epoch < entry.coordinator_epoch:
        raise TransactionCoordinatorFenced(
            f"transaction marker for producer {producer_id} from coordinator epoch "
            f"{coordinator_epoch}, older than {entry.coordinator_epoch}")


def check_entry(entry: ProducerStateEntry | None, header: BatchHeader) -> DuplicateBatch | None:
    """The rules of the module docstring for one data batch against one producer's state."""
    if entry is None or header.is_control:
        return None
    epoch = header.producer_epoch
    if entry.producer_epoch != NO_PRODUCER_EPOCH and epoch < entry.producer_epoch:
        raise InvalidProducerEpoch(
            f"producer {header.producer_id} epoch {epoch} is older than the current epoch "
            f"{entry.producer_epoch}")
    seq = header.base_sequence
    if epoch != entry.producer_epoch:
        # A batch without a sequence is the broker's own (a transactional offset commit):
        # as Kafka checks sequences of clients' batches only, its epoch alone is checked.
        if seq not in (0, NO_SEQUENCE) and entry.producer_epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequence(
                f"producer {header.producer_id}: new epoch {epoch} must start at sequence 0, "
                f"got {seq}")
    else:
        duplicate = entry.find_duplicate(header)
        if duplicate is not None:
            return duplicate
        last = entry.last_seq
        if last != NO_SEQUENCE and seq != NO_SEQUENCE and not _in_sequence(last, seq):
            raise OutOfOrderSequence(
                f"producer {header.producer_id} epoch {epoch}: expected sequence "
                f"{0 if last == INT32_MAX else last + 1}, got {seq}")
    if entry.current_txn_first_offset >= 0 and not header.attributes & TRANSACTIONAL:
        raise InvalidTxnState(
            f"non-transactional batch from producer {header.producer_id}, whose transaction "
            f"from offset {entry.current_txn_first_offset} is open")
    return None


class ProducerStateManager:
    """Per-producer state of one partition, with snapshot files in the partition directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerStateEntry] = {}
        self.last_snapshot_offset: int | None = None
        # Open transactions, producer id -> first offset, kept in first-offset order (offsets
        # only grow, and a loaded snapshot is sorted), so the smallest is the first item.
        self.ongoing: dict[int, int] = {}
        # Completed transactions whose marker the high watermark has not passed, in marker
        # order (Kafka's unreplicatedTxns).
        self.unreplicated: deque[CompletedTxn] = deque()
        # Markers written since this state was made (not persisted): a transaction
        # verification that waited on the coordinator compares it before and after (Kafka's
        # VerificationGuard), since a transaction that ended meanwhile must not reopen here.
        self.markers_written = 0

    # -- live use ------------------------------------------------------------------------------
    def check(self, header: BatchHeader) -> DuplicateBatch | None:
        """None if the batch may be written, its original offsets if it is a retry.

        Raises OutOfOrderSequence, InvalidProducerEpoch or InvalidTxnState (see the module
        docstring), InvalidRecordError for a transactional batch without a producer id;
        other batches without a producer id are always accepted. Control batches are checked
        by `check_marker`.
        """
        if not header.has_producer_id:
            if header.attributes & TRANSACTIONAL:
                raise InvalidRecordError("transactional batch without a producer id")
            return None
        return check_entry(self.producers.get(header.producer_id), header)

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Whether a marker may end `producer_id`'s transaction (raises as `check_marker`)."""
        check_marker(self.producers.get(producer_id), producer_id, epoch, coordinator_epoch)

    def check_append(self, items: Sequence[tuple[BatchHeader, int, int]],
                     markers: dict[int, ControlRecord] | None = None,
                     ) -> DuplicateBatch | None:
        """`check` every batch of one append, each against the state the earlier ones leave.

        `markers` holds the decoded record of each control batch, by its index in `items`
        (a control batch without one is an unknown control type: no transaction effect).
        Nothing is changed: the caller applies `update` only once the bytes are written, so a
        failed write leaves the state as it was.
        """
        if len(items) == 1 and not markers:
            return self.check(items[0][0])
        staged: dict[int, ProducerStateEntry] = {}
        for i, (header, first_offset, last_offset) in enumerate(items):
            if not header.has_producer_id:
                self.check(header)
                continue
            pid = header.producer_id
            entry = staged.get(pid)
            if entry is None:
                current = self.producers.get(pid)
                entry = current.copy() if current is not None else None
            marker = markers.get(i) if markers else None
            if marker is not None and marker.coordinator_epoch is not None:
                check_marker(entry, pid, header.producer_epoch, marker.coordinator_epoch)
                if entry is None:
                    entry = ProducerStateEntry(pid)
                entry.apply_marker(header.producer_epoch, marker.coordinator_epoch,
                                   header.max_timestamp)
            else:
                duplicate = check_entry(entry, header)
                if duplicate is not None:
                    return duplicate
                if entry is None:
                    entry = ProducerStateEntry(pid)
                entry.apply(header, first_offset, last_offset)
            staged[pid] = entry
        return None

    def update(self, header: BatchHeader, first_offset: int, last_offset: int,
               timestamp: int | None = None) -> None:
        """Record a data batch that has been written at first_offset..last_offset."""
        if not header.has_producer_id:
            return
        pid = header.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerStateEntry(pid)
        entry.apply(header, first_offset, last_offset, timestamp)
        if header.attributes & TRANSACTIONAL and pid not in self.ongoing and \
                entry.current_txn_first_offset >= 0:
            self.ongoing[pid] = entry.current_txn_first_offset

    def update_marker(self, producer_id: int, epoch: int, coordinator_epoch: int, commit: bool,
                      offset: int, timestamp: int) -> CompletedTxn | None:
        """Record a COMMIT or ABORT marker written at `offset`; the transaction it completed
        (now unreplicated), or None if the producer had none open."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        first = entry.apply_marker(epoch, coordinator_epoch, timestamp)
        self.markers_written += 1
        self.ongoing.pop(producer_id, None)
        if first < 0:
            return None
        # Kafka's lastStableOffset(completedTxn): the first other open transaction, if any.
        lso = next(iter(self.ongoing.values()), offset + 1)
        done = CompletedTxn(producer_id, first, offset, not commit, lso)
        self.unreplicated.append(done)
        return done

    def replay(self, headers: Iterable[tuple[int, BatchHeader]],
               read_marker: MarkerReader | None = None,
               on_complete: Callable[[CompletedTxn], None] | None = None) -> None:
        """Apply written batches without checks (loading, and follower appends).

        `read_marker` reads a control batch's record; without it control batches only move
        their producer's epoch. `on_complete` is told of every transaction a marker ends.
        """
        for pos, header in headers:
            if not header.has_producer_id:
                continue
            if header.attributes & CONTROL:
                marker = read_marker(pos, header) if read_marker is not None else None
                if marker is None or marker.coordinator_epoch is None:
                    self.update(header, header.base_offset, header.last_offset)
                    continue
                done = self.update_marker(header.producer_id, header.producer_epoch,
                                          marker.coordinator_epoch, marker.is_commit,
                                          header.base_offset, header.max_timestamp)
                if done is not None and on_complete is not None:
                    on_complete(done)
            else:
                self.update(header, header.base_offset, header.last_offset)

    # -- transactions --------------------------------------------------------------------------
    def first_unstable_offset(self) -> int | None:
        """The smallest first offset of the open and unreplicated transactions."""
        first = next(iter(self.ongoing.values()), None)
        for txn in self.unreplicated:
            if first is None or txn.first_offset < first:
                first = txn.first_offset
        return first

    def on_high_watermark(self, high_watermark: int) -> bool:
        """Forget completed transactions whose marker is below the high watermark (Kafka's
        onHighWatermarkUpdated); whether any went."""
        pending = self.unreplicated
        removed = False
        while pending and pending[0].last_offset < high_watermark:
            pending.popleft()
            removed = True
        return removed

    def _reset_transactions(self) -> None:
        """Derive the open transactions from the entries (after loading a snapshot)."""
        self.ongoing = dict(sorted(
            ((pid, e.current_txn_first_offset) for pid, e in self.producers.items()
             if e.current_txn_first_offset >= 0), key=lambda item: item[1]))
        self.unreplicated = deque()

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers silent for `expiration_ms` (Kafka's producer.id.expiration.ms),
        except those with an open transaction (its marker still has to find them)."""
        expired = [pid for pid, e in self.producers.items()
                   if e.last_timestamp >= 0 and now_ms - e.last_timestamp > expiration_ms
                   and e.current_txn_first_offset < 0]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def clear(self) -> None:
        self.producers.clear()
        self._reset_transactions()

    # -- snapshots -----------------------------------------------------------------------------
    def _snapshot_path(self, offset: int) -> Path:
        return self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files present, ascending."""
        out = []
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        for name in names:
            if name.endswith(SNAPSHOT_SUFFIX):
                stem = name[:-len(SNAPSHOT_SUFFIX)]
                if stem.isdigit():
                    out.append(int(stem))
        return sorted(out)

    def take_snapshot(self, offset: int, *, sync: bool = False) -> Path:
        """Write the current state as of `offset`, atomically (`write_atomically`). Not
        fsynced unless `sync`: a roll writes one on the event loop, and a snapshot lost in a
        crash only means replaying more of the log at the next load."""
        body = bytearray()
        for entry in self.producers.values():
            body += _ENTRY.pack(entry.producer_id, entry.producer_epoch, entry.last_timestamp,
                                entry.coordinator_epoch, entry.current_txn_first_offset,
                                len(entry.batches))
            for b in entry.batches:
                body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset,
                                    b.timestamp)
        count = struct.pack(">I", len(self.producers))
        crc = checksum.crc32c(count + body)
        data = _FILE_HEADER.pack(_MAGIC, _VERSION, crc, len(self.producers)) + body
        path = self._snapshot_path(offset)
        write_atomically(path, data, sync=sync)
        self.last_snapshot_offset = offset
        return path

    def _read_snapshot(self, path: Path) -> dict[int, ProducerStateEntry]:
        data = path.read_bytes()
        if len(data) < _FILE_HEADER.size:
            raise ValueError("shorter than its header")
        magic, version, crc, count = _FILE_HEADER.unpack_from(data)
        if magic != _MAGIC or version != _VERSION:
            raise ValueError(f"unknown magic/version {magic!r}/{version}")
        if checksum.crc32c(data[_FILE_HEADER.size - 4:]) != crc:
            raise ValueError("crc mismatch")
        producers: dict[int, ProducerStateEntry] = {}
        pos = _FILE_HEADER.size
        for _ in range(count):
            pid, epoch, last_ts, coord_epoch, txn_first, n = _ENTRY.unpack_from(data, pos)
            pos += _ENTRY.size
            entry = ProducerStateEntry(pid, epoch, deque(maxlen=NUM_BATCHES_TO_RETAIN),
                                       last_ts, coord_epoch, txn_first)
            for _ in range(n):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(data, pos)))
                pos += _BATCH.size
            producers[pid] = entry
        if pos != len(data):
            raise ValueError(f"{len(data) - pos} trailing bytes")
        return producers

    def load(self, log_end_offset: int, at_most: int | None = None) -> int | None:
        """Load the newest readable snapshot at or below the log end (and `at_most`, when the
        caller must replay from there); its offset, or None.

        Snapshots beyond the log end describe batches that are gone (an unclean shutdown or a
        truncation) and are deleted; unreadable ones are deleted with a warning and the next
        older one is tried. The caller replays the log from the returned offset.
        """
        self.producers = {}
        self._reset_transactions()
        self.last_snapshot_offset = None
        # One read of the directory for both: a start with 10,000 partitions reads 10,000.
        kept = self.delete_snapshots_after(log_end_offset)
        limit = log_end_offset if at_most is None else min(at_most, log_end_offset)
        for offset in reversed(kept):
            if offset > limit:
                continue
            path = self._snapshot_path(offset)
            try:
                self.producers = self._read_snapshot(path)
            except (OSError, ValueError, struct.error) as exc:
                log.warning("deleting unreadable producer snapshot %s: %s", path, exc)
                path.unlink(missing_ok=True)
                continue
            self._reset_transactions()
            self.last_snapshot_offset = offset
            return offset
        return None

    def delete_snapshots_after(self, offset: int) -> list[int]:
        """Remove snapshots strictly beyond `offset`; the offsets of those left, ascending."""
        kept = []
        for snap in self.snapshot_offsets():
            if snap > offset:
                self._snapshot_path(snap).unlink(missing_ok=True)
            else:
                kept.append(snap)
        if self.last_snapshot_offset is not None and self.last_snapshot_offset > offset:
            self.last_snapshot_offset = None
        return kept

    def delete_snapshots_before(self, offset: int) -> None:
        """Remove snapshots strictly below `offset` (their segments are gone)."""
        for snap in self.snapshot_offsets():
            if snap < offset:
                self._snapshot_path(snap).unlink(missing_ok=True)

    def truncate_fully(self) -> None:
        """Forget everything, snapshots included (the log restarts at a new offset)."""
        self.producers = {}
        self._reset_transactions()
        self.last_snapshot_offset = None
        for snap in self.snapshot_offsets():
            self._snapshot_path(snap).unlink(missing_ok=True)
