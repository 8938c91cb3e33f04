"""The share-partition state machine (KIP-932), driven with chosen times: one test per rule."""
from __future__ import annotations

from typing import Any

import pytest

from protocol.errors import ErrorCode
from pybroker.coordinator.share_partition import (
    AckBatch, AckType, AcquiredRecords, OffsetReset, RecordState, SharePartition,
    SharePartitionConfig, StateBatch,
)

LOCK = 30_000


def sp(start: int = 0, **config: Any) -> SharePartition:
    return SharePartition(SharePartitionConfig(**config), start)


def ack(first: int, last: int, *types: AckType) -> AckBatch:
    return AckBatch(first, last, tuple(int(t) for t in types))


# -- start offset from share.auto.offset.reset ------------------------------------------------

def test_latest_is_the_default_and_starts_at_the_high_watermark() -> None:
    p = SharePartition.initialize(SharePartitionConfig(), log_start_offset=3, high_watermark=10)
    assert (p.start_offset, p.end_offset) == (10, 10)
    assert p.next_fetch_offset() == 10


def test_earliest_starts_at_the_log_start() -> None:
    config = SharePartitionConfig(auto_offset_reset=OffsetReset.EARLIEST)
    p = SharePartition.initialize(config, log_start_offset=3, high_watermark=10)
    assert (p.start_offset, p.end_offset) == (3, 3)


# -- acquisition ---------------------------------------------------------------------------------

def test_acquire_takes_whole_batches_and_locks_them() -> None:
    p = sp()
    got = p.acquire("m1", [(0, 4), (5, 9)], max_records=500, now_ms=1000)
    assert got == [AcquiredRecords(0, 9, 1)]
    assert (p.start_offset, p.end_offset) == (0, 10)
    assert p.state_of(3) is RecordState.ACQUIRED
    assert p.next_deadline() == 1000 + LOCK
    assert p.next_fetch_offset() == 10


def test_max_records_is_soft_never_splitting_a_new_batch() -> None:
    p = sp()
    got = p.acquire("m1", [(0, 4), (5, 9)], max_records=3, now_ms=0)
    assert got == [AcquiredRecords(0, 4, 1)]
    assert p.end_offset == 5


def test_the_lock_cap_stops_new_records_before_the_next_batch() -> None:
    p = sp(max_record_locks=4)
    assert p.acquire("m1", [(0, 2), (3, 5), (6, 8)], 500, 0) == [AcquiredRecords(0, 5, 1)]
    assert p.in_flight_count() == 6
    assert not p.can_acquire()
    assert p.acquire("m2", [(6, 8)], 500, 0) == []


def test_acquired_records_are_not_handed_to_another_member() -> None:
    p = sp()
    p.acquire("m1", [(0, 4)], 500, 0)
    assert p.acquire("m2", [(0, 4)], 500, 0) == []
    assert p.acquire("m2", [(0, 4), (5, 6)], 500, 0) == [AcquiredRecords(5, 6, 1)]


def test_available_records_in_the_window_are_acquired_one_by_one_up_to_max_records() -> None:
    p = sp()
    p.acquire("m1", [(0, 4)], 500, 0)
    assert p.acknowledge("m1", [ack(0, 4, AckType.RELEASE)]) == ErrorCode.NONE
    assert p.acquire("m2", [(0, 4)], 2, 0) == [AcquiredRecords(0, 1, 2)]
    assert p.state_of(2) is RecordState.AVAILABLE
    assert p.next_fetch_offset() == 2


def test_a_batch_starting_below_the_start_offset_is_acquired_from_it() -> None:
    p = sp(start=3)
    assert p.acquire("m1", [(0, 5)], 500, 0) == [AcquiredRecords(3, 5, 1)]


def test_a_control_batch_is_archived_never_handed_out() -> None:
    p = sp()
    p.acquire("m1", [(0, 1)], 500, 0)
    p.archive_control(2, 2)
    assert p.acquire("m1", [(3, 4)], 500, 0) == [AcquiredRecords(3, 4, 1)]
    assert p.acknowledge("m1", [ack(0, 1, AckType.ACCEPT)]) == ErrorCode.NONE
    assert p.start_offset == 3


# -- acknowledgement -----------------------------------------------------------------------------

@pytest.mark.parametrize("ack_type,state", [
    (AckType.ACCEPT, RecordState.ACKNOWLEDGED),
    (AckType.REJECT, RecordState.ARCHIVED),
    (AckType.GAP, RecordState.ARCHIVED),
    (AckType.RELEASE, RecordState.AVAILABLE),
])
def test_each_ack_type_moves_an_acquired_record(ack_type: AckType, state: RecordState) -> None:
    p = sp()
    p.acquire("m1", [(0, 2)], 500, 0)
    assert p.acknowledge("m1", [ack(1, 1, ack_type)]) == ErrorCode.NONE
    assert p.state_of(1) is state


def test_one_type_per_offset() -> None:
    p = sp()
    p.acquire("m1", [(0, 2)], 500, 0)
    types = (AckType.RELEASE, AckType.ACCEPT, AckType.REJECT)
    assert p.acknowledge("m1", [ack(0, 2, *types)]) == ErrorCode.NONE
    assert p.start_offset == 0
    assert [p.state_of(o) for o in range(3)] == [
        RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED]


def test_the_start_offset_walks_over_terminal_records() -> None:
    p = sp()
    p.acquire("m1", [(0, 4)], 500, 0)
    assert p.acknowledge("m1", [ack(1, 2, AckType.ACCEPT)]) == ErrorCode.NONE
    assert p.start_offset == 0
    assert p.acknowledge("m1", [ack(0, 0, AckType.REJECT)]) == ErrorCode.NONE
    assert p.start_offset == 3
    assert p.state_of(1) is None
    assert p.acknowledge("m1", [ack(3, 4, AckType.ACCEPT)]) == ErrorCode.NONE
    assert (p.start_offset, p.end_offset, p.in_flight_count()) == (5, 5, 0)


@pytest.mark.parametrize("member,batch", [
    ("m2", ack(0, 0, AckType.ACCEPT)),  # held by m1
    ("m1", ack(4, 4, AckType.ACCEPT)),  # never acquired (past the end offset)
    ("m1", ack(2, 3, AckType.ACCEPT)),  # 2 is held by m2, 3 by m1
])
def test_acknowledging_what_the_member_does_not_hold_is_invalid_record_state(
        member: str, batch: AckBatch) -> None:
    p = sp()
    p.acquire("m1", [(0, 1)], 500, 0)
    p.acquire("m2", [(2, 2)], 500, 0)
    p.acquire("m1", [(3, 3)], 500, 0)
    assert p.acknowledge(member, [batch]) == ErrorCode.INVALID_RECORD_STATE
    assert [p.state_of(o) for o in range(4)] == [RecordState.ACQUIRED] * 4


def test_a_failed_acknowledgement_changes_nothing() -> None:
    p = sp()
    p.acquire("m1", [(0, 1)], 500, 0)
    assert p.acknowledge("m1", [ack(0, 0, AckType.ACCEPT), ack(5, 5, AckType.ACCEPT)]) \
        == ErrorCode.INVALID_RECORD_STATE
    assert p.state_of(0) is RecordState.ACQUIRED


def test_acknowledging_a_terminal_record_again_is_invalid_record_state() -> None:
    p = sp()
    p.acquire("m1", [(0, 3)], 500, 0)
    assert p.acknowledge("m1", [ack(2, 2, AckType.ACCEPT)]) == ErrorCode.NONE
    assert p.acknowledge("m1", [ack(2, 2, AckType.ACCEPT)]) == ErrorCode.INVALID_RECORD_STATE
    assert p.acknowledge("m1", [ack(0, 0, AckType.ACCEPT)]) == ErrorCode.NONE
    assert p.start_offset == 1  # 1 is still acquired: the SPSO stops there
    assert p.acknowledge("m1", [ack(0, 0, AckType.ACCEPT)]) == ErrorCode.INVALID_RECORD_STATE


@pytest.mark.parametrize("batch", [
    AckBatch(0, 2, (1, 1)),  # neither one type nor one per offset
    AckBatch(2, 0, (1,)),  # backwards
    AckBatch(0, 0, (7,)),  # no such type
    AckBatch(0, 0, ()),  # no type
])
def test_malformed_acknowledgements_are_invalid_request(batch: AckBatch) -> None:
    p = sp()
    p.acquire("m1", [(0, 2)], 500, 0)
    assert p.acknowledge("m1", [batch]) == ErrorCode.INVALID_REQUEST
    assert p.state_of(0) is RecordState.ACQUIRED


def test_overlapping_batches_are_invalid_request() -> None:
    p = sp()
    p.acquire("m1", [(0, 2)], 500, 0)
    assert p.acknowledge("m1", [ack(0, 1, AckType.ACCEPT), ack(1, 2, AckType.ACCEPT)]) \
        == ErrorCode.INVALID_REQUEST


# -- locks, delivery count, members leaving ----------------------------------------------------

def test_a_lock_expires_at_its_deadline_not_before() -> None:
    p = sp(record_lock_duration_ms=100)
    p.acquire("m1", [(0, 1)], 500, now_ms=1000)
    assert p.expire(1099) == 0
    assert p.state_of(0) is RecordState.ACQUIRED
    assert p.expire(1100) == 2
    assert p.state_of(0) is RecordState.AVAILABLE
    assert p.next_deadline() is None
    assert p.acknowledge("m1", [ack(0, 0, AckType.ACCEPT)]) == ErrorCode.INVALID_RECORD_STATE


def test_each_acquisition_gets_a_fresh_lock() -> None:
    p = sp(record_lock_duration_ms=100)
    p.acquire("m1", [(0, 0)], 500, now_ms=0)
    p.expire(100)
    assert p.acquire("m2", [(0, 0)], 500, now_ms=150) == [AcquiredRecords(0, 0, 2)]
    assert p.next_deadline() == 250
    assert p.expire(200) == 0


def test_the_delivery_limit_archives_a_record_instead_of_releasing_it() -> None:
    p = sp(delivery_count_limit=3)
    p.acquire("m1", [(0, 1)], 500, 0)
    assert p.acknowledge("m1", [ack(1, 1, AckType.ACCEPT)]) == ErrorCode.NONE
    for count in (1, 2):
        assert p.acknowledge("m1", [ack(0, 0, AckType.RELEASE)]) == ErrorCode.NONE
        assert p.state_of(0) is RecordState.AVAILABLE
        assert p.acquire("m1", [(0, 1)], 500, 0) == [AcquiredRecords(0, 0, count + 1)]
    assert p.acknowledge("m1", [ack(0, 0, AckType.RELEASE)]) == ErrorCode.NONE
    assert p.state_of(0) is None  # archived at the third release, and the SPSO walked past it
    assert p.start_offset == 2


def test_the_delivery_limit_applies_to_lock_expiry_too() -> None:
    p = sp(delivery_count_limit=2, record_lock_duration_ms=10)
    p.acquire("m1", [(0, 0)], 500, 0)
    p.expire(10)
    p.acquire("m1", [(0, 0)], 500, 10)
    p.expire(20)
    assert p.start_offset == 1
    assert p.acquire("m1", [(0, 0)], 500, 20) == []


def test_a_member_leaving_releases_only_its_records() -> None:
    p = sp()
    p.acquire("m1", [(0, 1)], 500, 0)
    p.acquire("m2", [(2, 3)], 500, 0)
    assert p.release_member("m1") == 2
    assert [p.state_of(o) for o in range(4)] == [RecordState.AVAILABLE] * 2 + [
        RecordState.ACQUIRED] * 2
    assert p.next_fetch_offset() == 0
    assert [r.delivery_count for r in p.acquire("m2", [(0, 1)], 500, 0)] == [2]


def test_a_closed_session_gives_its_records_back_with_the_delivery_taken_back() -> None:
    p = sp()
    p.acquire("m1", [(0, 1)], 500, 0)
    assert p.release_member("m1", undo_delivery=True) == 2
    assert [r.delivery_count for r in p.acquire("m2", [(0, 1)], 500, 0)] == [1]


# -- the log start passing the window ------------------------------------------------------------

def test_the_start_offset_jumps_when_the_log_start_passes_it() -> None:
    p = sp()
    p.acquire("m1", [(0, 4)], 500, 0)
    p.update_log_start(3)
    assert (p.start_offset, p.end_offset) == (3, 5)
    assert p.state_of(2) is None
    assert p.acknowledge("m1", [ack(2, 2, AckType.ACCEPT)]) == ErrorCode.INVALID_RECORD_STATE
    p.update_log_start(9)
    assert (p.start_offset, p.end_offset, p.next_fetch_offset()) == (9, 9, 9)


def test_a_log_start_below_the_start_offset_changes_nothing() -> None:
    p = sp(start=5)
    p.update_log_start(2)
    assert (p.start_offset, p.end_offset) == (5, 5)


# -- the durable view ----------------------------------------------------------------------------

def test_state_batches_write_acquired_as_available_and_reload_so() -> None:
    p = sp(start=10)
    p.acquire("m1", [(10, 14)], 500, 0)
    p.acknowledge("m1", [ack(11, 11, AckType.ACCEPT), ack(12, 12, AckType.REJECT)])
    batches = p.state_batches()
    assert batches == [
        StateBatch(10, 10, RecordState.AVAILABLE, 1),
        StateBatch(11, 11, RecordState.ACKNOWLEDGED, 1),
        StateBatch(12, 12, RecordState.ARCHIVED, 1),
        StateBatch(13, 14, RecordState.AVAILABLE, 1),
    ]
    again = SharePartition(p.config, p.start_offset, batches)
    assert (again.start_offset, again.end_offset) == (10, 15)
    assert again.acquire("m2", [(10, 14)], 500, 0) == [
        AcquiredRecords(10, 10, 2), AcquiredRecords(13, 14, 2)]


def test_a_reload_walks_over_a_terminal_head() -> None:
    batches = [StateBatch(0, 1, RecordState.ACKNOWLEDGED, 1),
               StateBatch(2, 2, RecordState.AVAILABLE, 3)]
    p = SharePartition(SharePartitionConfig(), 0, batches)
    assert (p.start_offset, p.end_offset, p.delivery_count(2)) == (2, 3, 3)
