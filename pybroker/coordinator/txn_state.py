"""The transaction coordinator (InitProducerId, AddPartitionsToTxn, EndTxn, timeouts, expiry)
as a pure state machine, after Kafka's TransactionCoordinator and TransactionMetadata.

One module on purpose (about 530 lines): one state machine, whose transitions read best side by
side.

Theory of operation
-------------------
`TxnStateMachine` holds the transactions of the `__transaction_state` partitions this broker
leads, keyed by transactional id, each tagged with its partition and that partition's
coordinator epoch (its leader epoch). It never reads a clock or does I/O: every operation takes
`now_ms` and returns a `TxnOutcome`: the `response`, the `records` to persist, and the
`markers` (`MarkerJob`s) to write to the data partitions.

Durability first. An operation only *prepares* a transition: it marks the transaction
`pending` and returns the record of its new state. The owner appends the records to
`__transaction_state` and then calls `replay` for each, which is what changes the state (and
clears `pending`); only then does it answer and send the markers. If the append fails it calls
`persist_failed`, which clears `pending` and leaves the state as it was. While a transition is
pending, every other operation on that id gets CONCURRENT_TRANSACTIONS, as in Kafka. Loading a
partition at election is `replay` of every record in its log, so live and loaded state cannot
diverge — except in what Kafka's record v0 does not carry (the last producer id and epoch,
used only to recognise a retried InitProducerId), which live replay takes from the prepared
transition and loading resets to -1, as Kafka's load does.

Ending a transaction. EndTxn on an Ongoing transaction writes PrepareCommit/PrepareAbort and
hands out a `MarkerJob`; when the owner has written every marker it calls `markers_written`,
which returns the CompleteCommit/CompleteAbort record (the partitions cleared). A transaction
with no partitions gets a job with no partitions, which the owner completes at once. After a
load, `pending_markers()` lists the Prepare* transactions whose markers must be (re)sent.

Fencing. InitProducerId while a transaction is Ongoing, and the timeout sweep in `expire`,
abort it under a bumped epoch (Kafka's PrepareEpochFence, which never reaches the log: we write
its PrepareAbort directly), so the old producer's next request gets PRODUCER_FENCED. The
fencing InitProducerId answers CONCURRENT_TRANSACTIONS; its retry, once the abort completed,
bumps the epoch again. When an epoch reaches 32766 (Short.MaxValue - 1) the next
InitProducerId rotates to a new producer id at epoch 0; ids come from the owner (they need
I/O), which asks `needs_producer_id` first.

This implements transactions V1 (Kafka's TV_0/TV_1): the epoch is bumped by InitProducerId and
fencing only, never by EndTxn (KIP-890 part 2 is not advertised).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Generic, Iterable, Sequence, TypeVar

from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from pybroker.coordinator.txn_records import TxnLogValue, group_partitions

__all__ = [
    "TxnState", "VALID_PREVIOUS_STATES", "TxnMetadata", "MarkerJob", "TxnOutcome", "TxnConfig",
    "TxnStateMachine", "MAX_EPOCH_BEFORE_ROTATION", "is_epoch_exhausted",
]

T = TypeVar("T")

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH_BEFORE_ROTATION = 32766  # Short.MaxValue - 1: from here a new producer id is needed


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_EPOCH_BEFORE_ROTATION


class TxnState(IntEnum):
    """Kafka's TransactionState; the numbers are the `TransactionStatus` of the log record."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use (and filter by)."""
        return _KAFKA_NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> "TxnState | None":
        return _BY_KAFKA_NAME.get(name)


_S = TxnState
_KAFKA_NAMES = {
    _S.EMPTY: "Empty", _S.ONGOING: "Ongoing", _S.PREPARE_COMMIT: "PrepareCommit",
    _S.PREPARE_ABORT: "PrepareAbort", _S.COMPLETE_COMMIT: "CompleteCommit",
    _S.COMPLETE_ABORT: "CompleteAbort", _S.DEAD: "Dead",
    _S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_KAFKA_NAME = {name: state for state, name in _KAFKA_NAMES.items()}

# The transitions Kafka allows: a state may be entered only from these.
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}
# States in which no transaction is open: InitProducerId may bump, expiry may remove.
_IDLE = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
_PREPARING = frozenset({_S.PREPARE_COMMIT, _S.PREPARE_ABORT})
# States of a transaction that is open: begun, its end not yet complete.
_OPEN = frozenset({_S.ONGOING, _S.PREPARE_COMMIT, _S.PREPARE_ABORT, _S.PREPARE_EPOCH_FENCE})


@dataclass(frozen=True)
class TxnConfig:
    max_timeout_ms: int = 900_000              # transaction.max.timeout.ms
    id_expiration_ms: int = 7 * 24 * 3600_000  # transactional.id.expiration.ms


@dataclass
class TxnMetadata:
    """One transactional id's state. `last_producer_id`/`last_producer_epoch` recognise a
    retried InitProducerId (KIP-360) and are not in the v0 record; `log_partition` is the
    `__transaction_state` partition holding it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    last_update_ms: int
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending: bool = False
    log_partition: int = 0

    def log_value(self) -> TxnLogValue:
        return TxnLogValue(self.producer_id, self.producer_epoch, self.timeout_ms,
                           self.state, group_partitions(self.partitions),
                           self.last_update_ms, self.start_ms)

    def copy(self) -> "TxnMetadata":
        return replace(self, partitions=set(self.partitions))


@dataclass(frozen=True)
class MarkerJob:
    """Write a COMMIT or ABORT marker for (producer_id, producer_epoch) to each partition."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]
    coordinator_epoch: int


@dataclass
class TxnOutcome(Generic[T]):
    """Persist `records`, replay each, then answer `response` and send `markers`."""

    response: T
    records: list[tuple[str, TxnLogValue | None]] = field(default_factory=list)
    markers: list[MarkerJob] = field(default_factory=list)


InitResult = tuple[ErrorCode, int, int]


def _init_error(error: ErrorCode) -> TxnOutcome[InitResult]:
    return TxnOutcome((error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH))


class TxnStateMachine:
    def __init__(self, config: TxnConfig | None = None) -> None:
        self.config = config or TxnConfig()
        self._txns: dict[str, TxnMetadata] = {}
        # The prepared (not yet persisted) next state of each pending id; None for expiry.
        self._transit: dict[str, TxnMetadata | None] = {}
        self._coordinator_epochs: dict[int, int] = {}  # __transaction_state partition -> epoch

    # -- preparing transitions -----------------------------------------------------------------
    def _prepare(self, txn: TxnMetadata, target: TxnMetadata,
                 out: TxnOutcome[T]) -> TxnMetadata:
        """Mark `txn` pending with `target` as its next state, and emit target's record."""
        if txn.state not in VALID_PREVIOUS_STATES[target.state]:
            raise AssertionError(f"illegal transition {txn.state.kafka_name} -> "
                                 f"{target.state.kafka_name} of {txn.transactional_id}")
        txn.pending = True
        target.pending = False
        self._transit[txn.transactional_id] = target
        out.records.append((txn.transactional_id, target.log_value()))
        return target

    def _prepare_end(self, txn: TxnMetadata, epoch: int, commit: bool, now: int,
                     out: TxnOutcome[T]) -> None:
        """Ongoing -> PrepareCommit/PrepareAbort under `epoch`, and the job for its markers."""
        target = txn.copy()
        target.state = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
        if epoch != txn.producer_epoch:  # a fence: the old producer's last epoch is forgotten
            target.producer_epoch, target.last_producer_epoch = epoch, NO_PRODUCER_EPOCH
        target.last_update_ms = now
        self._prepare(txn, target, out)
        out.markers.append(self._marker_job(target))

    def _prepare_fence(self, txn: TxnMetadata, now: int, out: TxnOutcome[T]) -> None:
        """Abort an Ongoing transaction under epoch + 1 (Kafka's PrepareEpochFence, whose only
        way out is PrepareAbort: we write that)."""
        self._prepare_end(txn, txn.producer_epoch + 1, False, now, out)

    def _marker_job(self, txn: TxnMetadata) -> MarkerJob:
        return MarkerJob(txn.transactional_id, txn.producer_id, txn.producer_epoch,
                         txn.state is _S.PREPARE_COMMIT, frozenset(txn.partitions),
                         self._coordinator_epochs.get(txn.log_partition, -1))

    # -- InitProducerId ------------------------------------------------------------------------
    def needs_producer_id(self, transactional_id: str) -> bool:
        """Whether InitProducerId must be given a newly allocated producer id: the id is unknown,
        or its epoch is exhausted and no transaction is open. Call it, allocate, and call
        `init_producer_id` with no other operation in between for the answer to hold."""
        txn = self._txns.get(transactional_id)
        if txn is None:
            return True
        return txn.state in _IDLE and not txn.pending and is_epoch_exhausted(txn.producer_epoch)

    def init_producer_id(self, transactional_id: str, timeout_ms: int, partition: int,
                         coordinator_epoch: int, now_ms: int, *, new_producer_id: int | None,
                         expected_producer_id: int = NO_PRODUCER_ID,
                         expected_epoch: int = NO_PRODUCER_EPOCH) -> TxnOutcome[InitResult]:
        """(error, producer id, epoch), answered once the records are persisted.

        `expected_*` are InitProducerId v3+'s producer id and epoch (-1/-1: none). A
        `new_producer_id` is used only when `needs_producer_id` holds; without one where it is
        needed the answer is CONCURRENT_TRANSACTIONS, so the client retries.
        """
        if not transactional_id:
            return _init_error(ErrorCode.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return _init_error(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if (expected_producer_id == NO_PRODUCER_ID) != (expected_epoch == NO_PRODUCER_EPOCH):
            return _init_error(ErrorCode.INVALID_REQUEST)
        self._coordinator_epochs[partition] = coordinator_epoch
        txn = self._txns.get(transactional_id)
        if txn is None:
            if new_producer_id is None:
                return _init_error(ErrorCode.CONCURRENT_TRANSACTIONS)
            # Kafka's first metadata: epoch -1, which the bump below makes 0. It exists (and
            # answers CONCURRENT_TRANSACTIONS to others) only until its record is persisted.
            txn = TxnMetadata(transactional_id, new_producer_id, NO_PRODUCER_EPOCH, timeout_ms,
                              _S.EMPTY, now_ms, log_partition=partition)
            self._add(txn)
            new_producer_id = None
        if txn.pending:
            return _init_error(ErrorCode.CONCURRENT_TRANSACTIONS)
        expected = None if expected_producer_id == NO_PRODUCER_ID \
            else (expected_producer_id, expected_epoch)
        if expected is not None and not self._is_valid_producer_id(txn, *expected):
            return _init_error(ErrorCode.PRODUCER_FENCED)
        out: TxnOutcome[InitResult] = _init_error(ErrorCode.CONCURRENT_TRANSACTIONS)
        if txn.state in _PREPARING:
            return out
        if txn.state is _S.ONGOING:
            self._prepare_fence(txn, now_ms, out)
            return out
        assert txn.state in _IDLE, txn
        target = txn.copy()
        target.state, target.timeout_ms, target.last_update_ms = _S.EMPTY, timeout_ms, now_ms
        target.partitions, target.start_ms = set(), -1
        target.last_producer_id = txn.producer_id
        if is_epoch_exhausted(txn.producer_epoch) and (
                expected is None or expected[1] == txn.producer_epoch):
            if new_producer_id is None:
                return out
            target.producer_id, target.producer_epoch = new_producer_id, 0
            target.last_producer_epoch = NO_PRODUCER_EPOCH if expected is None \
                else txn.producer_epoch
        else:
            epochs = self._next_epochs(txn, None if expected is None else expected[1])
            if epochs is None:
                return _init_error(ErrorCode.PRODUCER_FENCED)
            target.producer_epoch, target.last_producer_epoch = epochs
        self._prepare(txn, target, out)
        out.response = (ErrorCode.NONE, target.producer_id, target.producer_epoch)
        return out

    @staticmethod
    def _is_valid_producer_id(txn: TxnMetadata, producer_id: int, epoch: int) -> bool:
        """KIP-360: a producer recovering with its old id and epoch may continue, unless another
        producer took over. The id matches the current one, or the metadata is brand new, or
        it is the previous id and its epoch was exhausted (a retry after a rotation)."""
        return (txn.producer_epoch == NO_PRODUCER_EPOCH or producer_id == txn.producer_id
                or (producer_id == txn.last_producer_id and is_epoch_exhausted(epoch)))

    @staticmethod
    def _next_epochs(txn: TxnMetadata, expected_epoch: int | None) -> tuple[int, int] | None:
        """(new epoch, last epoch) for a bump, or None if the expected epoch is fenced."""
        epoch = txn.producer_epoch
        if expected_epoch is None:
            return (epoch + 1, NO_PRODUCER_EPOCH) if not is_epoch_exhausted(epoch) else None
        if epoch == NO_PRODUCER_EPOCH or (expected_epoch == epoch
                                          and not is_epoch_exhausted(epoch)):
            return epoch + 1, epoch
        if expected_epoch == txn.last_producer_epoch:
            return epoch, txn.last_producer_epoch  # a retry of a bump that succeeded
        return None

    # -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------
    def _check_producer(self, transactional_id: str, producer_id: int,
                        producer_epoch: int) -> TxnMetadata | ErrorCode:
        txn = self._txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if txn.pending:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return txn

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition],
                       now_ms: int) -> TxnOutcome[ErrorCode]:
        """PRODUCER_FENCED for another epoch: AddPartitionsToTxn v0-1 answers it as
        INVALID_PRODUCER_EPOCH (the handler's job)."""
        checked = self._check_producer(transactional_id, producer_id, producer_epoch)
        if isinstance(checked, ErrorCode):
            return TxnOutcome(checked)
        txn, added = checked, set(partitions)
        if txn.state in _PREPARING:
            return TxnOutcome(ErrorCode.CONCURRENT_TRANSACTIONS)
        if txn.state is _S.ONGOING and added <= txn.partitions:
            return TxnOutcome(ErrorCode.NONE)
        out = TxnOutcome(ErrorCode.NONE)
        target = txn.copy()
        if txn.state in _IDLE:
            target.start_ms = now_ms
        target.state, target.partitions, target.last_update_ms = \
            _S.ONGOING, txn.partitions | added, now_ms
        self._prepare(txn, target, out)
        return out

    # -- EndTxn --------------------------------------------------------------------------------
    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        commit: bool, now_ms: int) -> TxnOutcome[ErrorCode]:
        checked = self._check_producer(transactional_id, producer_id, producer_epoch)
        if isinstance(checked, ErrorCode):
            return TxnOutcome(checked)
        txn = checked
        if txn.state is _S.ONGOING:
            out = TxnOutcome(ErrorCode.NONE)
            self._prepare_end(txn, txn.producer_epoch, commit, now_ms, out)
            return out
        same = _S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT
        preparing = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
        if txn.state is same:
            return TxnOutcome(ErrorCode.NONE)  # a retry of an end that completed
        if txn.state is preparing:
            return TxnOutcome(ErrorCode.CONCURRENT_TRANSACTIONS)
        return TxnOutcome(ErrorCode.INVALID_TXN_STATE)  # Empty, or the opposite result

    def markers_written(self, job: MarkerJob, now_ms: int) -> TxnOutcome[None]:
        """PrepareX -> CompleteX once every marker of `job` is written; nothing if the
        transaction moved on meanwhile (unloaded, re-elected, completed by a duplicate job)."""
        out: TxnOutcome[None] = TxnOutcome(None)
        txn = self._txns.get(job.transactional_id)
        preparing = _S.PREPARE_COMMIT if job.commit else _S.PREPARE_ABORT
        if (txn is None or txn.pending or txn.state is not preparing
                or txn.producer_id != job.producer_id
                or txn.producer_epoch != job.producer_epoch
                or self._coordinator_epochs.get(txn.log_partition) != job.coordinator_epoch):
            return out
        target = txn.copy()
        target.state = _S.COMPLETE_COMMIT if job.commit else _S.COMPLETE_ABORT
        target.partitions, target.last_update_ms = set(), now_ms
        self._prepare(txn, target, out)
        return out

    # -- timers --------------------------------------------------------------------------------
    def expire(self, now_ms: int) -> TxnOutcome[None]:
        """Abort transactions open longer than their timeout (fencing their producer), and
        remove ids idle for transactional.id.expiration.ms with a tombstone."""
        out: TxnOutcome[None] = TxnOutcome(None)
        horizon = now_ms - self.config.id_expiration_ms
        for txn in list(self._txns.values()):
            if txn.pending:
                continue
            if txn.state is _S.ONGOING and txn.start_ms + txn.timeout_ms < now_ms:
                self._prepare_fence(txn, now_ms, out)
            elif txn.state in _IDLE and txn.last_update_ms <= horizon:
                txn.pending = True
                self._transit[txn.transactional_id] = None
                out.records.append((txn.transactional_id, None))
        return out

    def next_deadline(self) -> int | None:
        """When `expire` has a transaction to abort next (id expiry is a slow periodic sweep)."""
        deadlines = [t.start_ms + t.timeout_ms + 1 for t in self._txns.values()
                     if t.state is _S.ONGOING and not t.pending]
        return min(deadlines, default=None)

    # -- durability ----------------------------------------------------------------------------
    def replay(self, transactional_id: str, value: TxnLogValue | None, partition: int,
               coordinator_epoch: int) -> None:
        """Apply a persisted record: after an outcome's append, and for every record when
        loading a partition. The prepared transition is adopted when it is what was written
        (it carries what the record does not); otherwise the record is the state."""
        self._coordinator_epochs[partition] = coordinator_epoch
        transit = self._transit.pop(transactional_id, None)
        if value is None:
            self._remove(transactional_id)
            return
        if transit is not None and transit.log_value() == value:
            txn = transit
        else:
            txn = TxnMetadata(transactional_id, value.producer_id, value.producer_epoch,
                              value.timeout_ms, TxnState(value.state), value.last_update_ms,
                              {(t, p) for t, ps in value.partitions for p in ps},
                              value.start_ms)
        txn.pending, txn.log_partition = False, partition
        self._remove(transactional_id)
        self._add(txn)

    def persist_failed(self, transactional_id: str) -> None:
        """The append of a prepared transition failed: forget it. A new id whose first record
        failed is forgotten altogether."""
        self._transit.pop(transactional_id, None)
        txn = self._txns.get(transactional_id)
        if txn is None:
            return
        txn.pending = False
        if txn.producer_epoch == NO_PRODUCER_EPOCH:
            self._remove(transactional_id)

    def pending_markers(self, partition: int | None = None) -> list[MarkerJob]:
        """The Prepare* transactions (of one partition, or all) whose markers must be sent:
        after a load, those the previous coordinator did not complete."""
        return [self._marker_job(t) for t in self._txns.values()
                if t.state in _PREPARING and not t.pending
                and (partition is None or t.log_partition == partition)]

    def unload(self, partition: int) -> None:
        """Forget the transactions of a __transaction_state partition this broker no longer
        leads; their pending appends will be answered by persist_failed or ignored."""
        for tid in [tid for tid, t in self._txns.items() if t.log_partition == partition]:
            self._transit.pop(tid, None)
            self._remove(tid)
        self._coordinator_epochs.pop(partition, None)

    def _add(self, txn: TxnMetadata) -> None:
        self._txns[txn.transactional_id] = txn

    def _remove(self, transactional_id: str) -> None:
        self._txns.pop(transactional_id, None)

    # -- queries -------------------------------------------------------------------------------
    def describe(self, transactional_id: str) -> TxnMetadata | None:
        """A copy of the id's state (DescribeTransactions: None is TRANSACTIONAL_ID_NOT_FOUND)."""
        txn = self._txns.get(transactional_id)
        return None if txn is None else txn.copy()

    def list(self, states: set[str], producer_ids: set[int], duration_ms: int,
             now_ms: int) -> list[TxnMetadata]:
        """ListTransactions: empty filters match everything; a state name Kafka does not know
        matches nothing; `duration_ms` >= 0 keeps those running longer than it (v1)."""
        out = []
        for txn in self._txns.values():
            if producer_ids and txn.producer_id not in producer_ids:
                continue
            if states and txn.state.kafka_name not in states:
                continue
            if duration_ms >= 0 and now_ms - txn.start_ms <= duration_ms:
                continue
            out.append(txn.copy())
        return sorted(out, key=lambda t: t.transactional_id)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Sequence[TopicPartition]
                          ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ with verifyOnly, a partition leader asking (KIP-890 part 1):
        is each partition in the id's transaction, as persisted? Kafka's answers: the
        transaction's own problem for every partition (INVALID_PRODUCER_ID_MAPPING,
        PRODUCER_FENCED, CONCURRENT_TRANSACTIONS while its markers are decided), else NONE or
        TRANSACTION_ABORTABLE per partition. Nothing is added."""
        txn = self._txns.get(transactional_id)
        code = ErrorCode.NONE
        if txn is None or txn.producer_id != producer_id:
            code = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif txn.producer_epoch != producer_epoch:
            code = ErrorCode.PRODUCER_FENCED
        elif txn.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            code = ErrorCode.CONCURRENT_TRANSACTIONS
        if code:
            return {tp: code for tp in partitions}
        assert txn is not None
        return {tp: ErrorCode.NONE if tp in txn.partitions else ErrorCode.TRANSACTION_ABORTABLE
                for tp in partitions}

    def open_transactions(self) -> int:
        """Transactions begun and not yet completed: Ongoing, or preparing their commit,
        abort or fence (markers not yet all written). For /metrics; one pass over the ids."""
        return sum(1 for txn in self._txns.values() if txn.state in _OPEN)

    def __contains__(self, transactional_id: str) -> bool:
        return transactional_id in self._txns

    def __len__(self) -> int:
        return len(self._txns)
