"""The transaction coordinator's state machine: Kafka's transitions, errors and flows, driven
with chosen times; every flow's records, loaded into a fresh machine, give the same state."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from pybroker.coordinator.txn_records import TxnLogValue
from pybroker.coordinator.txn_state import (
    VALID_PREVIOUS_STATES, MarkerJob, TxnConfig, TxnState, TxnStateMachine,
)
from tests.coordinator.txn_driver import TxnDriver, persisted_view

E = ErrorCode
S = TxnState
A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


@pytest.fixture
def d() -> TxnDriver:
    return TxnDriver()


def check_load(d: TxnDriver) -> None:
    """Replaying the log into a fresh machine yields what live replay built."""
    assert persisted_view(d.loaded()) == persisted_view(d.m)


def state(d: TxnDriver, tid: str = "t") -> TxnState:
    txn = d.m.describe(tid)
    assert txn is not None
    return txn.state


def ongoing(d: TxnDriver, *tps: tuple[str, int], tid: str = "t") -> tuple[int, int]:
    pid, epoch = d.producer(tid)
    assert d.add(tid, pid, epoch, *(tps or (A0,))) == E.NONE
    return pid, epoch


def verified(d: TxnDriver, producer_id: int, epoch: int, tp: TopicPartition = A0,
             tid: str = "t") -> ErrorCode:
    """The coordinator's answer to a leader verifying one partition (verify-only
    AddPartitionsToTxn, or its own produce path in process)."""
    return d.m.verify_partitions(tid, producer_id, epoch, [tp])[tp]


# -- the states --------------------------------------------------------------------------------

def test_states_have_kafkas_ids_names_and_transitions() -> None:
    assert [(s.value, s.kafka_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"),
        (4, "CompleteCommit"), (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert S.from_kafka_name("PrepareAbort") is S.PREPARE_ABORT
    assert S.from_kafka_name("prepareabort") is None
    idle = {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert VALID_PREVIOUS_STATES == {
        S.EMPTY: idle, S.ONGOING: idle | {S.ONGOING}, S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT}, S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.DEAD: idle, S.PREPARE_EPOCH_FENCE: {S.ONGOING}}


def test_every_transition_the_machine_makes_is_in_kafkas_table(d: TxnDriver) -> None:
    """Run the flows and check each record's state against the previous one."""
    pid, epoch = ongoing(d, A0)
    d.end("t", pid, epoch, True)
    d.write_markers()
    d.add("t", pid, epoch, A1)
    d.init("t")                             # fences: Ongoing -> PrepareAbort
    d.write_markers()
    pid, epoch = d.producer("t")            # CompleteAbort -> Empty
    d.add("t", pid, epoch, B0)
    d.end("t", pid, epoch, False)
    d.write_markers()
    seen = [v.state for _, v, _, _ in d.log if v is not None]
    assert set(seen) == {S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT,
                         S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    previous = S.EMPTY
    for s in seen:
        assert previous in VALID_PREVIOUS_STATES[S(s)], (previous, s)
        previous = S(s)


# -- InitProducerId ----------------------------------------------------------------------------

def test_init_new_id_allocates_and_persists_epoch_0(d: TxnDriver) -> None:
    assert d.m.needs_producer_id("t")
    out = d.m.init_producer_id("t", 60_000, 3, 7, 500, new_producer_id=42)
    assert out.response == (E.NONE, 42, 0)
    assert out.records == [("t", TxnLogValue(42, 0, 60_000, S.EMPTY, (), 500, -1))]
    assert out.markers == []
    txn = d.m.describe("t")
    assert txn is not None and txn.pending and txn.producer_epoch == -1  # not yet persisted
    again = d.m.init_producer_id("t", 60_000, 3, 7, 500, new_producer_id=43)
    assert again.response[0] == E.CONCURRENT_TRANSACTIONS and not again.records
    d.m.replay("t", out.records[0][1], 3, 7)
    txn = d.m.describe("t")
    assert txn is not None and not txn.pending
    assert (txn.producer_id, txn.producer_epoch, txn.state, txn.log_partition) == \
        (42, 0, S.EMPTY, 3)
    assert not d.m.needs_producer_id("t")


def test_init_again_bumps_the_epoch_and_the_timeout(d: TxnDriver) -> None:
    assert d.init("t", 10_000) == (E.NONE, 1000, 0)
    d.now = 2_000
    assert d.init("t", 20_000) == (E.NONE, 1000, 1)
    txn = d.m.describe("t")
    assert txn is not None
    assert (txn.timeout_ms, txn.last_update_ms, txn.last_producer_id) == (20_000, 2_000, 1000)
    check_load(d)


@pytest.mark.parametrize("timeout,error", [
    (0, E.INVALID_TRANSACTION_TIMEOUT), (-1, E.INVALID_TRANSACTION_TIMEOUT),
    (900_001, E.INVALID_TRANSACTION_TIMEOUT), (900_000, E.NONE), (1, E.NONE)])
def test_init_timeout_bounds(d: TxnDriver, timeout: int, error: ErrorCode) -> None:
    assert d.init("t", timeout)[0] == error
    assert ("t" in d.m) == (error == E.NONE)


def test_init_bad_requests(d: TxnDriver) -> None:
    assert d.init("")[0] == E.INVALID_REQUEST
    assert d.init("t", expected_producer_id=5)[0] == E.INVALID_REQUEST
    assert d.init("t", expected_epoch=5)[0] == E.INVALID_REQUEST
    assert "t" not in d.m and not d.log


def test_init_of_unknown_id_without_a_new_producer_id_is_retried(d: TxnDriver) -> None:
    out = d.m.init_producer_id("t", 60_000, 3, 7, 0, new_producer_id=None)
    assert out.response == (E.CONCURRENT_TRANSACTIONS, -1, -1) and not out.records
    assert "t" not in d.m


def test_init_while_preparing_is_concurrent(d: TxnDriver) -> None:
    pid, epoch = ongoing(d)
    assert d.end("t", pid, epoch, True) == E.NONE
    before = len(d.log)
    assert d.init("t")[0] == E.CONCURRENT_TRANSACTIONS
    assert len(d.log) == before and state(d) is S.PREPARE_COMMIT


def test_init_while_ongoing_fences_and_aborts(d: TxnDriver) -> None:
    pid, epoch = ongoing(d, A0, B0)
    d.now = 5_000
    assert d.init("t") == (E.CONCURRENT_TRANSACTIONS, -1, -1)
    assert d.log[-1][1] == TxnLogValue(pid, epoch + 1, 60_000, S.PREPARE_ABORT,
                                       (("a", (0,)), ("b", (0,))), 5_000, 1_000)
    assert d.jobs == [MarkerJob("t", pid, epoch + 1, False, frozenset({A0, B0}), 7)]
    # the fenced producer can no longer add, commit or write
    assert d.add("t", pid, epoch, A1) == E.PRODUCER_FENCED
    assert d.end("t", pid, epoch, True) == E.PRODUCER_FENCED
    assert verified(d, pid, epoch) == E.PRODUCER_FENCED
    assert d.init("t")[0] == E.CONCURRENT_TRANSACTIONS  # markers not yet written
    d.write_markers()
    assert state(d) is S.COMPLETE_ABORT
    assert d.init("t") == (E.NONE, pid, epoch + 2)
    assert state(d) is S.EMPTY
    check_load(d)


def test_persist_failed_leaves_the_state(d: TxnDriver) -> None:
    pid, epoch = ongoing(d)
    out = d.m.end_transaction("t", pid, epoch, True, d.now)
    assert out.records and d.m.describe("t").pending  # type: ignore[union-attr]
    d.m.persist_failed("t")
    txn = d.m.describe("t")
    assert txn is not None and not txn.pending and txn.state is S.ONGOING
    assert d.end("t", pid, epoch, True) == E.NONE  # the retry goes through
    assert state(d) is S.PREPARE_COMMIT


def test_persist_failed_of_a_new_id_forgets_it(d: TxnDriver) -> None:
    d.m.init_producer_id("t", 60_000, 3, 7, 0, new_producer_id=42)
    d.m.persist_failed("t")
    assert "t" not in d.m and d.m.needs_producer_id("t")
    assert verified(d, 42, 0) == E.INVALID_PRODUCER_ID_MAPPING
    d.m.persist_failed("nobody")  # harmless


def test_persist_failed_of_a_fence_then_a_retry_fences_to_the_same_epoch(d: TxnDriver) -> None:
    pid, epoch = ongoing(d)
    first = d.m.init_producer_id("t", 60_000, 3, 7, d.now, new_producer_id=None)
    d.m.persist_failed("t")
    second = d.m.init_producer_id("t", 60_000, 3, 7, d.now, new_producer_id=None)
    assert first.records == second.records and first.markers == second.markers
    assert second.records[0][1] is not None and second.records[0][1].producer_epoch == epoch + 1


# -- epoch exhaustion and KIP-360 --------------------------------------------------------------

def at_epoch(d: TxnDriver, epoch: int, state: TxnState = S.EMPTY,
             partitions: tuple = (), tid: str = "t", pid: int = 77) -> None:
    d.m.replay(tid, TxnLogValue(pid, epoch, 60_000, state, partitions, 0,
                                -1 if state is S.EMPTY else 0), d.partition,
               d.coordinator_epoch)


def test_epoch_exhaustion_rotates_the_producer_id(d: TxnDriver) -> None:
    at_epoch(d, 32765)
    assert not d.m.needs_producer_id("t")
    assert d.init("t") == (E.NONE, 77, 32766)
    assert d.m.needs_producer_id("t")
    assert d.init("t") == (E.NONE, 1000, 0)
    txn = d.m.describe("t")
    assert txn is not None and txn.last_producer_id == 77
    assert verified(d, 77, 32766) == E.INVALID_PRODUCER_ID_MAPPING  # the old id's is over
    assert d.add("t", 1000, 0, A0) == E.NONE
    assert verified(d, 1000, 0) == E.NONE


def test_exhausted_epoch_without_a_new_id_is_retried(d: TxnDriver) -> None:
    at_epoch(d, 32766)
    out = d.m.init_producer_id("t", 60_000, 3, 7, 0, new_producer_id=None)
    assert out.response[0] == E.CONCURRENT_TRANSACTIONS and not out.records


def test_fencing_at_the_last_epoch_then_rotation(d: TxnDriver) -> None:
    at_epoch(d, 32766, S.ONGOING, (("a", (0,)),))
    assert not d.m.needs_producer_id("t")
    assert d.init("t")[0] == E.CONCURRENT_TRANSACTIONS
    assert d.jobs[0].producer_epoch == 32767
    d.write_markers()
    assert d.m.needs_producer_id("t")
    assert d.init("t") == (E.NONE, 1000, 0)


def test_kip360_expected_epoch(d: TxnDriver) -> None:
    d.producer()
    pid, epoch = d.producer()  # epoch 1
    # the producer recovers with its current id and epoch: bumped
    assert d.init(expected_producer_id=pid, expected_epoch=epoch) == (E.NONE, pid, epoch + 1)
    # its retry (the response was lost) gets the same epoch back, and a record
    before = len(d.log)
    assert d.init(expected_producer_id=pid, expected_epoch=epoch) == (E.NONE, pid, epoch + 1)
    assert len(d.log) == before + 1
    # an older epoch, or another id, is fenced
    assert d.init(expected_producer_id=pid, expected_epoch=epoch - 1)[0] == E.PRODUCER_FENCED
    assert d.init(expected_producer_id=pid + 1, expected_epoch=epoch + 1)[0] == \
        E.PRODUCER_FENCED
    # a new producer (no expectation) bumps and forgets the last epoch
    assert d.init() == (E.NONE, pid, epoch + 2)
    assert d.init(expected_producer_id=pid, expected_epoch=epoch + 1)[0] == E.PRODUCER_FENCED
    check_load(d)


def test_kip360_on_an_unknown_id_starts_afresh(d: TxnDriver) -> None:
    assert d.init(expected_producer_id=5, expected_epoch=3) == (E.NONE, 1000, 0)


def test_kip360_retry_across_rotation(d: TxnDriver) -> None:
    at_epoch(d, 32765)
    assert d.init() == (E.NONE, 77, 32766)
    assert d.init(expected_producer_id=77, expected_epoch=32766) == (E.NONE, 1000, 0)
    # the same request retried: the previous id with its exhausted epoch
    assert d.init(expected_producer_id=77, expected_epoch=32766) == (E.NONE, 1000, 0)


# -- AddPartitionsToTxn ------------------------------------------------------------------------

def test_add_partitions_errors(d: TxnDriver) -> None:
    assert d.add("t", 1, 0, A0) == E.INVALID_PRODUCER_ID_MAPPING
    pid, epoch = d.producer()
    assert d.add("t", pid + 1, epoch, A0) == E.INVALID_PRODUCER_ID_MAPPING
    assert d.add("t", pid, epoch + 1, A0) == E.PRODUCER_FENCED
    assert d.add("t", pid, epoch - 1, A0) == E.PRODUCER_FENCED
    out = d.m.add_partitions("t", pid, epoch, [A0], d.now)  # not persisted yet
    assert d.m.add_partitions("t", pid, epoch, [A1], d.now).response == \
        E.CONCURRENT_TRANSACTIONS
    d.run(out)
    assert d.end("t", pid, epoch, True) == E.NONE
    assert d.add("t", pid, epoch, A1) == E.CONCURRENT_TRANSACTIONS  # PrepareCommit
    assert state(d) is S.PREPARE_COMMIT


def test_add_partitions_starts_and_grows_the_transaction(d: TxnDriver) -> None:
    pid, epoch = d.producer()
    d.now = 2_000
    assert d.add("t", pid, epoch, A0) == E.NONE
    assert d.log[-1][1] == TxnLogValue(pid, epoch, 60_000, S.ONGOING, (("a", (0,)),),
                                       2_000, 2_000)
    before = len(d.log)
    d.now = 3_000
    assert d.add("t", pid, epoch, A0) == E.NONE  # already in: no record
    assert len(d.log) == before
    assert d.add("t", pid, epoch, B0, A1) == E.NONE
    assert d.log[-1][1] == TxnLogValue(pid, epoch, 60_000, S.ONGOING,
                                       (("a", (0, 1)), ("b", (0,))), 3_000, 2_000)
    d.end("t", pid, epoch, True)
    d.write_markers()
    d.now = 9_000
    assert d.add("t", pid, epoch, A1) == E.NONE  # the next transaction starts now
    txn = d.m.describe("t")
    assert txn is not None and (txn.start_ms, txn.partitions) == (9_000, {A1})
    check_load(d)


# -- EndTxn ------------------------------------------------------------------------------------

@pytest.mark.parametrize("commit", [True, False])
def test_end_transaction_flow(d: TxnDriver, commit: bool) -> None:
    pid, epoch = ongoing(d, A0, B0)
    prepare, complete = (S.PREPARE_COMMIT, S.COMPLETE_COMMIT) if commit \
        else (S.PREPARE_ABORT, S.COMPLETE_ABORT)
    d.now = 4_000
    assert d.end("t", pid, epoch, commit) == E.NONE
    assert state(d) is prepare
    assert d.jobs == [MarkerJob("t", pid, epoch, commit, frozenset({A0, B0}), 7)]
    assert d.end("t", pid, epoch, commit) == E.CONCURRENT_TRANSACTIONS  # retry while preparing
    assert d.end("t", pid, epoch, not commit) == E.INVALID_TXN_STATE
    assert verified(d, pid, epoch) == E.CONCURRENT_TRANSACTIONS
    d.now = 5_000
    d.write_markers()
    assert d.log[-1][1] == TxnLogValue(pid, epoch, 60_000, complete, (), 5_000, 1_000)
    assert d.end("t", pid, epoch, commit) == E.NONE              # idempotent retry
    assert d.end("t", pid, epoch, not commit) == E.INVALID_TXN_STATE
    check_load(d)


def test_end_transaction_errors(d: TxnDriver) -> None:
    assert d.end("t", 1, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    pid, epoch = d.producer()
    assert d.end("t", pid, epoch, True) == E.INVALID_TXN_STATE   # Empty
    assert d.end("t", pid, epoch, False) == E.INVALID_TXN_STATE
    assert d.end("t", pid + 1, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert d.end("t", pid, epoch + 1, True) == E.PRODUCER_FENCED
    d.add("t", pid, epoch, A0)
    out = d.m.end_transaction("t", pid, epoch, True, d.now)
    assert d.m.end_transaction("t", pid, epoch, True, d.now).response == \
        E.CONCURRENT_TRANSACTIONS  # pending
    d.run(out)


def test_empty_transaction_completes_through_an_empty_job(d: TxnDriver) -> None:
    pid, epoch = d.producer()
    assert d.add("t", pid, epoch) == E.NONE
    assert state(d) is S.ONGOING
    assert d.end("t", pid, epoch, True) == E.NONE
    assert d.jobs == [MarkerJob("t", pid, epoch, True, frozenset(), 7)]
    d.write_markers()
    assert state(d) is S.COMPLETE_COMMIT
    check_load(d)


def test_markers_written_is_ignored_when_the_transaction_moved_on(d: TxnDriver) -> None:
    pid, epoch = ongoing(d)
    d.end("t", pid, epoch, True)
    job = d.jobs[0]
    for stale in (MarkerJob("t", pid, epoch, False, job.partitions, 7),
                  MarkerJob("t", pid, epoch + 1, True, job.partitions, 7),
                  MarkerJob("t", pid + 1, epoch, True, job.partitions, 7),
                  MarkerJob("t", pid, epoch, True, job.partitions, 6),
                  MarkerJob("u", pid, epoch, True, job.partitions, 7)):
        out = d.m.markers_written(stale, d.now)
        assert not out.records and not out.markers
    first = d.m.markers_written(job, d.now)
    assert len(first.records) == 1
    assert not d.m.markers_written(job, d.now).records  # a duplicate while pending
    d.run(first)
    assert not d.m.markers_written(job, d.now).records  # already complete


# -- timeouts and expiry -----------------------------------------------------------------------

def test_timed_out_transaction_is_aborted_and_its_producer_fenced(d: TxnDriver) -> None:
    pid, epoch = d.producer("t", timeout=10_000)
    d.add("t", pid, epoch, A0)                 # started at 1_000
    assert d.m.next_deadline() == 11_001
    d.expire(11_000)                           # start + timeout == now: not yet
    assert state(d) is S.ONGOING and not d.jobs
    d.expire(11_001)
    assert state(d) is S.PREPARE_ABORT
    assert d.jobs == [MarkerJob("t", pid, epoch + 1, False, frozenset({A0}), 7)]
    assert d.m.next_deadline() is None
    d.write_markers()
    assert state(d) is S.COMPLETE_ABORT
    assert d.end("t", pid, epoch, True) == E.PRODUCER_FENCED
    assert d.add("t", pid, epoch, A0) == E.PRODUCER_FENCED
    assert d.init("t") == (E.NONE, pid, epoch + 2)
    check_load(d)


def test_expire_skips_pending_transactions(d: TxnDriver) -> None:
    pid, epoch = d.producer("t", timeout=10_000)
    d.add("t", pid, epoch, A0)
    pending = d.m.end_transaction("t", pid, epoch, True, d.now)
    assert not d.m.expire(100_000).records
    d.run(pending)
    assert not d.m.expire(100_000).records  # PrepareCommit is not timed out


def test_idle_ids_expire_with_a_tombstone() -> None:
    d = TxnDriver(TxnConfig(id_expiration_ms=50_000))
    d.producer("idle")                         # Empty, updated at 1_000
    pid, epoch = d.producer("open", timeout=900_000)
    d.add("open", pid, epoch, A0)              # Ongoing: never expired this way
    d.expire(50_999)
    assert "idle" in d.m
    out = d.m.expire(51_000)                   # last update <= now - expiration
    assert out.records == [("idle", None)] and not out.markers
    assert d.m.describe("idle").pending        # type: ignore[union-attr]
    assert not d.m.expire(52_000).records      # pending: not again
    d.m.persist_failed("idle")
    assert "idle" in d.m and not d.m.describe("idle").pending  # type: ignore[union-attr]
    d.expire(52_000)
    assert "idle" not in d.m and "open" in d.m
    assert verified(d, 1000, 0, tid="idle") == E.INVALID_PRODUCER_ID_MAPPING
    check_load(d)
    assert "idle" not in d.loaded()
    assert d.init("idle") == (E.NONE, 1002, 0)  # a new producer id


@pytest.mark.parametrize("end", [S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_completed_ids_expire(end: TxnState) -> None:
    d = TxnDriver(TxnConfig(id_expiration_ms=50_000))
    pid, epoch = ongoing(d)
    d.end("t", pid, epoch, end is S.COMPLETE_COMMIT)
    d.expire(100_000)
    assert state(d) in (S.PREPARE_COMMIT, S.PREPARE_ABORT)  # not while preparing
    d.write_markers()
    d.expire(100_000 + 50_000)
    assert "t" not in d.m


# -- produce verification ----------------------------------------------------------------------

def test_verify_partitions(d: TxnDriver) -> None:
    """Kafka's handleVerifyPartitionsInTransaction: the id, then its producer id and epoch,
    then a transaction being ended; else per partition, in the transaction as persisted."""
    assert verified(d, 1000, 0) == E.INVALID_PRODUCER_ID_MAPPING  # an id it does not know
    pid, epoch = d.producer()
    assert verified(d, pid, epoch) == E.TRANSACTION_ABORTABLE  # Empty
    assert verified(d, pid + 1, epoch) == E.INVALID_PRODUCER_ID_MAPPING
    out = d.m.add_partitions("t", pid, epoch, [A0], d.now)
    assert verified(d, pid, epoch) == E.TRANSACTION_ABORTABLE  # not yet persisted
    d.run(out)
    assert d.m.verify_partitions("t", pid, epoch, [A0, A1]) == {
        A0: E.NONE, A1: E.TRANSACTION_ABORTABLE}
    assert verified(d, pid, epoch - 1) == E.PRODUCER_FENCED
    assert verified(d, pid, epoch + 1) == E.PRODUCER_FENCED
    d.producer("other")
    assert verified(d, pid, epoch, tid="other") == E.INVALID_PRODUCER_ID_MAPPING  # t's id
    d.end("t", pid, epoch, True)
    assert verified(d, pid, epoch) == E.CONCURRENT_TRANSACTIONS  # PrepareCommit
    d.write_markers()
    assert verified(d, pid, epoch) == E.TRANSACTION_ABORTABLE  # CompleteCommit


# -- loading, unloading, describing ------------------------------------------------------------

def test_load_then_pending_markers_completes_what_was_prepared(d: TxnDriver) -> None:
    pid, epoch = ongoing(d, A0, tid="committing")
    d.end("committing", pid, epoch, True)
    pid2, epoch2 = ongoing(d, B0, tid="aborting")
    d.end("aborting", pid2, epoch2, False)
    ongoing(d, A1, tid="open")
    d.jobs.clear()                               # the old coordinator died before markers
    fresh = d.loaded(coordinator_epoch=8)
    assert persisted_view(fresh) == {k: v for k, v in persisted_view(d.m).items()}
    jobs = sorted(fresh.pending_markers(), key=lambda j: j.transactional_id)
    assert jobs == [MarkerJob("aborting", pid2, epoch2, False, frozenset({B0}), 8),
                    MarkerJob("committing", pid, epoch, True, frozenset({A0}), 8)]
    assert fresh.pending_markers(partition=d.partition + 1) == []
    for job in jobs:
        for tid, value in fresh.markers_written(job, 9_000).records:
            fresh.replay(tid, value, d.partition, 8)
    assert fresh.describe("committing").state is S.COMPLETE_COMMIT  # type: ignore[union-attr]
    assert fresh.describe("aborting").state is S.COMPLETE_ABORT  # type: ignore[union-attr]
    assert fresh.pending_markers() == []


def test_the_last_epoch_lives_only_in_memory(d: TxnDriver) -> None:
    """Record v0 has no last epoch: after a load, a KIP-360 retry is fenced (as in Kafka)."""
    d.producer()
    pid, epoch = d.producer()
    assert d.init(expected_producer_id=pid, expected_epoch=epoch) == (E.NONE, pid, epoch + 1)
    assert d.m.describe("t").last_producer_epoch == epoch  # type: ignore[union-attr]
    fresh = d.loaded()
    assert fresh.describe("t").last_producer_epoch == -1  # type: ignore[union-attr]
    out = fresh.init_producer_id("t", 60_000, d.partition, 7, d.now, new_producer_id=None,
                                 expected_producer_id=pid, expected_epoch=epoch)
    assert out.response[0] == E.PRODUCER_FENCED and not out.records


def test_load_skips_to_the_last_record_and_tombstones_remove(d: TxnDriver) -> None:
    m = TxnStateMachine()
    v1 = TxnLogValue(5, 0, 1000, S.EMPTY, (), 10, -1)
    v2 = TxnLogValue(5, 0, 1000, S.ONGOING, (("a", (0,)),), 20, 20)
    for tid, value in [("x", v1), ("y", v1), ("x", v2), ("y", None)]:
        m.replay(tid, value, 1, 4)
    assert "y" not in m and len(m) == 1
    x = m.describe("x")
    assert x is not None and (x.state, x.partitions, x.start_ms) == (S.ONGOING, {A0}, 20)
    assert m.verify_partitions("x", 5, 0, [A0]) == {A0: E.NONE}


def test_unload_forgets_one_partition() -> None:
    m = TxnStateMachine()
    m.replay("p1", TxnLogValue(1, 0, 1000, S.ONGOING, (("a", (0,)),), 0, 0), 1, 4)
    m.replay("p2", TxnLogValue(2, 0, 1000, S.PREPARE_ABORT, (("a", (0,)),), 0, 0), 2, 4)
    m.unload(2)
    assert "p2" not in m and "p1" in m
    assert m.pending_markers() == []
    assert m.verify_partitions("p2", 2, 0, [A0]) == {A0: E.INVALID_PRODUCER_ID_MAPPING}
    assert m.verify_partitions("p1", 1, 0, [A0]) == {A0: E.NONE}


def test_unload_drops_a_pending_transition(d: TxnDriver) -> None:
    pid, epoch = ongoing(d)
    out = d.m.end_transaction("t", pid, epoch, True, d.now)
    d.m.unload(d.partition)
    job = out.markers[0]
    assert not d.m.markers_written(job, d.now).records
    d.m.persist_failed("t")  # the owner's failed append after unload: harmless
    assert "t" not in d.m


def test_describe_returns_a_copy(d: TxnDriver) -> None:
    assert d.m.describe("t") is None
    ongoing(d, A0)
    txn = d.m.describe("t")
    assert txn is not None
    txn.partitions.add(B0)
    assert d.m.describe("t").partitions == {A0}  # type: ignore[union-attr]


def test_list_filters(d: TxnDriver) -> None:
    d.producer("empty")                          # pid 1000, start -1
    d.now = 2_000
    ongoing(d, A0, tid="open")                   # pid 1001, started 2_000
    d.now = 3_000
    pid, epoch = ongoing(d, B0, tid="done")      # pid 1002, started 3_000
    d.end("done", pid, epoch, True)
    d.write_markers()

    def ids(states: set[str] = set(), pids: set[int] = set(), duration: int = -1,
            now: int = 10_000) -> list[str]:
        return [t.transactional_id for t in d.m.list(states, pids, duration, now)]

    assert ids() == ["done", "empty", "open"]
    assert ids({"Ongoing"}) == ["open"]
    assert ids({"Ongoing", "CompleteCommit"}) == ["done", "open"]
    assert ids({"NoSuchState"}) == []
    assert ids(pids={1000, 1002}) == ["done", "empty"]
    assert ids({"Ongoing"}, {1000}) == []
    # running longer than 7.5 s at 10 s: started before 2.5 s (Kafka counts start -1 as old)
    assert ids(duration=7_500) == ["empty", "open"]
    assert ids(duration=8_000) == ["empty"]      # exactly 8 s is not longer


# -- the property: records alone reproduce the state -------------------------------------------

OPS = st.lists(st.tuples(
    st.sampled_from(["init", "add", "add", "add", "commit", "abort", "markers", "markers",
                     "expire", "stale"]),
    st.sampled_from(["t1", "t2"]),
    st.sets(st.sampled_from([A0, A1, B0]), max_size=2),
    st.one_of(st.integers(0, 2_000), st.integers(0, 60_000))), min_size=5, max_size=40)


@settings(max_examples=80, deadline=None)
@given(OPS)
def test_replaying_the_records_reproduces_the_transactions(ops: list) -> None:
    d = TxnDriver(TxnConfig(max_timeout_ms=20_000, id_expiration_ms=40_000))
    d.producer("t1", timeout=10_000)
    d.producer("t2", timeout=10_000)
    for op, tid, tps, dt in ops:
        d.now += dt
        txn = d.m.describe(tid)
        pid, epoch = (txn.producer_id, txn.producer_epoch) if txn else (-1, -1)
        if op == "init":
            d.init(tid, timeout=10_000)
        elif op == "add":
            d.add(tid, pid, epoch, *tps)
        elif op in ("commit", "abort"):
            d.end(tid, pid, epoch, op == "commit")
        elif op == "markers":
            d.write_markers()
        elif op == "expire":
            d.expire(d.now)
        else:
            d.add(tid, pid, epoch - 1, *tps)  # an old producer: never changes anything
        for t in d.m.list(set(), set(), -1, d.now):
            assert not t.pending
            assert (t.state is S.EMPTY) <= (not t.partitions and t.start_ms == -1)
        assert persisted_view(d.loaded()) == persisted_view(d.m)
    unfinished = {j.transactional_id for j in d.jobs}
    assert {j.transactional_id for j in d.loaded().pending_markers()} <= unfinished
