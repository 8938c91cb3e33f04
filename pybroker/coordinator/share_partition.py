"""One share-partition (KIP-932): which records of a partition a share group has handed out,
to whom, how often, and what came back.

Theory of operation
-------------------
Consumers of a share group read one partition together. The leader keeps, per (group,
partition), a window of in-flight records from the share-partition start offset (SPSO, the
first record not yet in a terminal state) to the end offset (SPEO, the first record never
acquired). Below the SPSO every record is done; at or past the SPEO none has been handed out.
Each offset in the window has a state:

    Available --acquire (count += 1, lock runs)--> Acquired
    Acquired  --ACCEPT-->                           Acknowledged   (terminal)
    Acquired  --REJECT / GAP-->                     Archived       (terminal)
    Acquired  --RELEASE, lock expiry, member gone--> Available, or Archived once the
                                                     delivery count reached the limit

The delivery count rises on acquisition (so a record delivered `limit` times is archived the
next time it comes back, never handed out a `limit + 1`-th time). Whenever the record at the
SPSO turns terminal the SPSO walks forward over the terminal run, dropping it from the window;
when the log's start offset passes the SPSO (retention, DeleteRecords) the SPSO jumps to it.

New records are acquired in whole log batches, as Kafka does, so MaxRecords and
`group.share.partition.max.record.locks` are soft: acquisition stops before the next batch
once either is reached, never in the middle of one. Records already in the window (released
or expired) are acquired one offset at a time, as many as MaxRecords allows.

The class is pure: no clock (each operation takes `now_ms`), no I/O. Acquired records are not
durable (`state_batches()` reports them Available, as Kafka's persister does), so a reload
hands them out again; acknowledged and archived ones are, through the owner.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Iterable, Sequence

from protocol.errors import ErrorCode

__all__ = [
    "RecordState", "AckType", "OffsetReset", "SharePartitionConfig", "AcquiredRecords",
    "StateBatch", "AckBatch", "SharePartition",
]


class RecordState(IntEnum):
    """Kafka's delivery states (the numbers are those `__share_group_state` stores)."""
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(IntEnum):
    """ShareFetch/ShareAcknowledge AcknowledgeTypes."""
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


class OffsetReset(str, Enum):
    """`share.auto.offset.reset`: where a share-partition starts when the group has no state."""
    LATEST = "latest"
    EARLIEST = "earliest"


_ACK_VALUES = frozenset(int(t) for t in AckType)
TERMINAL = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})

# What an acknowledgement does to an acquired record (RELEASE depends on the delivery count).
ACK_TARGET: dict[AckType, RecordState] = {
    AckType.GAP: RecordState.ARCHIVED,
    AckType.ACCEPT: RecordState.ACKNOWLEDGED,
    AckType.RELEASE: RecordState.AVAILABLE,
    AckType.REJECT: RecordState.ARCHIVED,
}


@dataclass(frozen=True)
class SharePartitionConfig:
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2000
    auto_offset_reset: OffsetReset = OffsetReset.LATEST


@dataclass(frozen=True)
class AcquiredRecords:
    """ShareFetch's AcquiredRecords entry: a run of offsets with one delivery count."""
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class StateBatch:
    """A run of offsets with one durable state and count (`__share_group_state` StateBatches)."""
    first_offset: int
    last_offset: int
    delivery_state: RecordState
    delivery_count: int


@dataclass(frozen=True)
class AckBatch:
    """One AcknowledgementBatches entry: one type for the whole range, or one per offset."""
    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass
class _InFlight:
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_deadline_ms: int | None = None


class SharePartition:
    """The in-flight window of one share-partition; see the module docstring."""

    def __init__(self, config: SharePartitionConfig, start_offset: int,
                 batches: Iterable[StateBatch] = ()) -> None:
        self.config = config
        self.start_offset = start_offset
        self._records: dict[int, _InFlight] = {}
        end = start_offset
        for b in batches:
            for offset in range(max(b.first_offset, start_offset), b.last_offset + 1):
                state = (RecordState.AVAILABLE if b.delivery_state == RecordState.ACQUIRED
                         else RecordState(b.delivery_state))
                self._records[offset] = _InFlight(state, b.delivery_count)
            end = max(end, b.last_offset + 1)
        # Offsets between known batches were never acquired, but lie below the end: they are
        # Available with no delivery yet.
        for offset in range(start_offset, end):
            self._records.setdefault(offset, _InFlight(RecordState.AVAILABLE, 0))
        self.end_offset = end
        self._advance_start()

    @classmethod
    def initialize(cls, config: SharePartitionConfig, log_start_offset: int,
                   high_watermark: int) -> SharePartition:
        """A share-partition the group has no state for, started per `share.auto.offset.reset`."""
        start = (log_start_offset if config.auto_offset_reset is OffsetReset.EARLIEST
                 else high_watermark)
        return cls(config, start)

    # -- reading -------------------------------------------------------------------------------

    def state_of(self, offset: int) -> RecordState | None:
        """The offset's state in the window; None below the SPSO (done) or at/after the SPEO."""
        record = self._records.get(offset)
        return record.state if record is not None else None

    def delivery_count(self, offset: int) -> int:
        record = self._records.get(offset)
        return record.delivery_count if record is not None else 0

    def in_flight_count(self) -> int:
        return self.end_offset - self.start_offset

    def next_fetch_offset(self) -> int:
        """Where the owner should read the log from: the first Available offset, else the SPEO."""
        for offset in range(self.start_offset, self.end_offset):
            if self._records[offset].state is RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def can_acquire(self) -> bool:
        """Whether a fetch may get anything: a record in the window is Available, or the lock
        cap leaves room for new ones."""
        return (self.next_fetch_offset() < self.end_offset
                or self.in_flight_count() < self.config.max_record_locks)

    def next_deadline(self) -> int | None:
        deadlines = [r.lock_deadline_ms for r in self._records.values()
                     if r.lock_deadline_ms is not None]
        return min(deadlines) if deadlines else None

    def state_batches(self) -> list[StateBatch]:
        """The window as durable runs; Acquired is written as Available (locks do not survive)."""
        out: list[StateBatch] = []
        for offset in range(self.start_offset, self.end_offset):
            record = self._records[offset]
            state = (RecordState.AVAILABLE if record.state is RecordState.ACQUIRED
                     else record.state)
            last = out[-1] if out else None
            if (last is not None and last.last_offset == offset - 1
                    and last.delivery_state == state
                    and last.delivery_count == record.delivery_count):
                out[-1] = StateBatch(last.first_offset, offset, state, record.delivery_count)
            else:
                out.append(StateBatch(offset, offset, state, record.delivery_count))
        return out

    # -- acquiring -----------------------------------------------------------------------------

    def acquire(self, member_id: str, batches: Sequence[tuple[int, int]], max_records: int,
                now_ms: int) -> list[AcquiredRecords]:
        """Acquire what the log returned (batches as (base offset, last offset), in order) for
        `member_id`; the answer is ShareFetch's AcquiredRecords. Records outside the window
        that are not Available (held by others, done) are skipped."""
        acquired: list[tuple[int, int]] = []  # (offset, delivery count)
        deadline = now_ms + self.config.record_lock_duration_ms
        for base, last in batches:
            if len(acquired) >= max_records:
                break
            for offset in range(max(base, self.start_offset), min(last + 1, self.end_offset)):
                if len(acquired) >= max_records:
                    break
                record = self._records[offset]
                if record.state is RecordState.AVAILABLE:
                    self._hand_out(record, member_id, deadline)
                    acquired.append((offset, record.delivery_count))
            if last >= self.end_offset:
                if (len(acquired) >= max_records
                        or self.in_flight_count() >= self.config.max_record_locks):
                    break
                for offset in range(max(base, self.end_offset), last + 1):
                    record = _InFlight(RecordState.AVAILABLE, 0)
                    self._records[offset] = record
                    self._hand_out(record, member_id, deadline)
                    acquired.append((offset, record.delivery_count))
                self.end_offset = max(self.end_offset, last + 1)
        return _runs(acquired)

    def archive_control(self, base: int, last: int) -> None:
        """A control batch (a transaction marker) is never handed out: its offsets that were
        never delivered are archived, so the SPSO can walk past them."""
        for offset in range(max(base, self.start_offset), last + 1):
            record = self._records.get(offset)
            if record is None:
                self._records[offset] = _InFlight(RecordState.ARCHIVED, 0)
            elif record.state is RecordState.AVAILABLE and record.delivery_count == 0:
                record.state = RecordState.ARCHIVED
        self.end_offset = max(self.end_offset, last + 1)
        self._advance_start()

    @staticmethod
    def _hand_out(record: _InFlight, member_id: str, deadline: int) -> None:
        record.state = RecordState.ACQUIRED
        record.delivery_count += 1
        record.member_id = member_id
        record.lock_deadline_ms = deadline

    # -- acknowledging -------------------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: Sequence[AckBatch]) -> ErrorCode:
        """Apply one partition's acknowledgements, all or nothing: a record that is not in the
        window, not Acquired, or held by another member makes the whole set
        INVALID_RECORD_STATE; a malformed batch (types neither one nor one per offset, an
        unknown type, a range backwards or overlapping) makes it INVALID_REQUEST."""
        planned: list[tuple[int, AckType]] = []
        seen: set[int] = set()
        for batch in batches:
            count = batch.last_offset - batch.first_offset + 1
            types = batch.acknowledge_types
            if count < 1 or len(types) not in (1, count):
                return ErrorCode.INVALID_REQUEST
            if any(t not in _ACK_VALUES for t in types):
                return ErrorCode.INVALID_REQUEST
            for i, offset in enumerate(range(batch.first_offset, batch.last_offset + 1)):
                if offset in seen:
                    return ErrorCode.INVALID_REQUEST
                seen.add(offset)
                planned.append((offset, AckType(types[0] if len(types) == 1 else types[i])))
        for offset, _ in planned:
            record = self._records.get(offset)
            if (record is None or record.state is not RecordState.ACQUIRED
                    or record.member_id != member_id):
                return ErrorCode.INVALID_RECORD_STATE
        for offset, ack in planned:
            record = self._records[offset]
            if ack is AckType.RELEASE:
                self._give_back(record)
            else:
                self._settle(record, ACK_TARGET[ack])
        self._advance_start()
        return ErrorCode.NONE

    def release_member(self, member_id: str, *, undo_delivery: bool = False) -> int:
        """A member left, or its share session closed: its acquired records come back. With
        `undo_delivery` (a session closed, or its connection: Kafka's releaseAcquiredRecords,
        DeliveryCountOps.DECREASE) they are Available with the delivery taken back, never
        archived by the limit (handed back unprocessed); else as a release. Returns how
        many."""
        released = 0
        for record in self._records.values():
            if record.state is RecordState.ACQUIRED and record.member_id == member_id:
                if undo_delivery:
                    record.delivery_count -= 1
                    self._settle(record, RecordState.AVAILABLE)
                else:
                    self._give_back(record)
                released += 1
        self._advance_start()
        return released

    def expire(self, now_ms: int) -> int:
        """Acquisition locks that ran out by `now_ms` end: their records come back."""
        expired = 0
        for record in self._records.values():
            if (record.state is RecordState.ACQUIRED and record.lock_deadline_ms is not None
                    and record.lock_deadline_ms <= now_ms):
                self._give_back(record)
                expired += 1
        self._advance_start()
        return expired

    def _give_back(self, record: _InFlight) -> None:
        """Released, expired or orphaned: Available again, or Archived at the delivery limit."""
        self._settle(record, RecordState.ARCHIVED
                     if record.delivery_count >= self.config.delivery_count_limit
                     else RecordState.AVAILABLE)

    @staticmethod
    def _settle(record: _InFlight, state: RecordState) -> None:
        record.state = state
        record.member_id = None
        record.lock_deadline_ms = None

    # -- the window's edges --------------------------------------------------------------------

    def update_log_start(self, log_start_offset: int) -> None:
        """The log's start passed the SPSO: what lies below it is gone, and so are its locks."""
        if log_start_offset <= self.start_offset:
            return
        for offset in range(self.start_offset, min(log_start_offset, self.end_offset)):
            del self._records[offset]
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self._advance_start()

    def _advance_start(self) -> None:
        while (self.start_offset < self.end_offset
               and self._records[self.start_offset].state in TERMINAL):
            del self._records[self.start_offset]
            self.start_offset += 1


def _runs(acquired: list[tuple[int, int]]) -> list[AcquiredRecords]:
    """Contiguous offsets with one delivery count, as AcquiredRecords entries."""
    out: list[AcquiredRecords] = []
    for offset, count in acquired:
        last = out[-1] if out else None
        if last is not None and last.last_offset == offset - 1 and last.delivery_count == count:
            out[-1] = AcquiredRecords(last.first_offset, offset, count)
        else:
            out.append(AcquiredRecords(offset, offset, count))
    return out
