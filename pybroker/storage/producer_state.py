"""Idempotent-producer state of one partition (Kafka's ProducerStateManager).

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

The state is derived from the log, so it is rebuilt by replaying batch headers. Snapshots
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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from protocol.records.batch import NO_SEQUENCE, BatchHeader
from pybroker.storage.files import write_atomically

__all__ = [
    "ProducerStateManager", "ProducerStateEntry", "BatchMetadata", "DuplicateBatch",
    "OutOfOrderSequence", "InvalidProducerEpoch", "SNAPSHOT_SUFFIX", "NUM_BATCHES_TO_RETAIN",
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
    current_txn_first_offset: int = -1  # kept for transactions; always -1 for now

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
        self.last_timestamp = max(self.last_timestamp, ts)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def check_entry(entry: ProducerStateEntry | None, header: BatchHeader) -> DuplicateBatch | None:
    """The rules of the module docstring for one batch against one producer's state."""
    if entry is None or header.is_control:
        return None
    epoch = header.producer_epoch
    if entry.producer_epoch != NO_PRODUCER_EPOCH and epoch < entry.producer_epoch:
        raise InvalidProducerEpoch(
            f"producer {header.producer_id} epoch {epoch} is older than the current epoch "
            f"{entry.producer_epoch}")
    seq = header.base_sequence
    if epoch != entry.producer_epoch:
        if seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequence(
                f"producer {header.producer_id}: new epoch {epoch} must start at sequence 0, "
                f"got {seq}")
        return None
    duplicate = entry.find_duplicate(header)
    if duplicate is not None:
        return duplicate
    last = entry.last_seq
    if last != NO_SEQUENCE and seq != NO_SEQUENCE and not _in_sequence(last, seq):
        raise OutOfOrderSequence(
            f"producer {header.producer_id} epoch {epoch}: expected sequence "
            f"{0 if last == INT32_MAX else last + 1}, got {seq}")
    return None


class ProducerStateManager:
    """Per-producer state of one partition, with snapshot files in the partition directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerStateEntry] = {}
        self.last_snapshot_offset: int | None = None

    # -- live use ------------------------------------------------------------------------------
    def check(self, header: BatchHeader) -> DuplicateBatch | None:
        """None if the batch may be written, its original offsets if it is a retry.

        Raises OutOfOrderSequence or InvalidProducerEpoch; batches without a producer id are
        always accepted.
        """
        if not header.has_producer_id:
            return None
        return check_entry(self.producers.get(header.producer_id), header)

    def check_append(self, items: Sequence[tuple[BatchHeader, int, int]],
                     ) -> DuplicateBatch | None:
        """`check` every batch of one append, each against the state the earlier ones leave.

        Nothing is changed: the caller applies `update` only once the bytes are written, so a
        failed write leaves the state as it was.
        """
        if len(items) == 1:
            return self.check(items[0][0])
        staged: dict[int, ProducerStateEntry] = {}
        for header, first_offset, last_offset in items:
            if not header.has_producer_id:
                continue
            pid = header.producer_id
            entry = staged.get(pid)
            if entry is None:
                current = self.producers.get(pid)
                entry = current.copy() if current is not None else None
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
        """Record a batch that has been written at first_offset..last_offset."""
        if not header.has_producer_id:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerStateEntry(header.producer_id)
        entry.apply(header, first_offset, last_offset, timestamp)

    def replay(self, headers: Iterable[tuple[int, BatchHeader]]) -> None:
        """Apply written batches without checks (loading, and follower appends)."""
        for _, header in headers:
            if header.has_producer_id:
                self.update(header, header.base_offset, header.last_offset)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers silent for `expiration_ms` (Kafka's producer.id.expiration.ms)."""
        expired = [pid for pid, e in self.producers.items()
                   if e.last_timestamp >= 0 and now_ms - e.last_timestamp > expiration_ms]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def clear(self) -> None:
        self.producers.clear()

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
        crc = crc32c(count + body)
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
        if crc32c(data[_FILE_HEADER.size - 4:]) != crc:
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

    def load(self, log_end_offset: int) -> int | None:
        """Load the newest readable snapshot at or below the log end; its offset, or None.

        Snapshots beyond the log end describe batches that are gone (an unclean shutdown or a
        truncation) and are deleted; unreadable ones are deleted with a warning and the next
        older one is tried. The caller replays the log from the returned offset.
        """
        self.producers = {}
        self.last_snapshot_offset = None
        self.delete_snapshots_after(log_end_offset)
        for offset in reversed(self.snapshot_offsets()):
            path = self._snapshot_path(offset)
            try:
                self.producers = self._read_snapshot(path)
            except (OSError, ValueError, struct.error) as exc:
                log.warning("deleting unreadable producer snapshot %s: %s", path, exc)
                path.unlink(missing_ok=True)
                continue
            self.last_snapshot_offset = offset
            return offset
        return None

    def delete_snapshots_after(self, offset: int) -> None:
        """Remove snapshots strictly beyond `offset`."""
        for snap in self.snapshot_offsets():
            if snap > offset:
                self._snapshot_path(snap).unlink(missing_ok=True)
        if self.last_snapshot_offset is not None and self.last_snapshot_offset > offset:
            self.last_snapshot_offset = None

    def delete_snapshots_before(self, offset: int) -> None:
        """Remove snapshots strictly below `offset` (their segments are gone)."""
        for snap in self.snapshot_offsets():
            if snap < offset:
                self._snapshot_path(snap).unlink(missing_ok=True)

    def truncate_fully(self) -> None:
        """Forget everything, snapshots included (the log restarts at a new offset)."""
        self.producers = {}
        self.last_snapshot_offset = None
        for snap in self.snapshot_offsets():
            self._snapshot_path(snap).unlink(missing_ok=True)
