"""Transactions in the partition log: producer state, LSO, markers, `.txnindex`, restarts."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from protocol.records.batch import iter_batches
from protocol.records.record import build_control_batch, control_record_of
from protocol.records.types import InvalidRecordError
from pybroker.storage.partition_log import PartitionLog
from pybroker.storage.producer_state import (
    InvalidProducerEpoch, InvalidTxnState, TransactionCoordinatorFenced,
)
from pybroker.storage.transaction_index import TXN_ENTRY, AbortedTxn, TransactionIndex
from pybroker.storage.validator import error_code
from tests.storage.util import SMALL, batch, files

A, B, C = 1000, 2000, 3000


class Seq:
    """Per-producer sequence numbers, so every batch is in order."""

    def __init__(self) -> None:
        self.next: dict[tuple[int, int], int] = {}

    def txn(self, pid: int, n: int = 2, *, epoch: int = 0, transactional: bool = True,
            value_size: int = 100) -> bytes:
        seq = self.next.get((pid, epoch), 0)
        self.next[(pid, epoch)] = seq + n
        return batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                     transactional=transactional, value_size=value_size)


def open_log(tmp_path: Path, **kw: object) -> PartitionLog:
    return PartitionLog(tmp_path / "t-0", SMALL, **kw)  # type: ignore[arg-type]


def marker(plog: PartitionLog, pid: int, commit: bool, *, epoch: int = 0,
           coordinator_epoch: int = 0) -> int:
    info = plog.append_control_marker(pid, epoch, coordinator_epoch, commit, leader_epoch=0,
                                      now_ms=5_000)
    assert info.first_offset == info.last_offset
    return info.first_offset


def plain(plog: PartitionLog, n: int = 1) -> None:
    plog.append(batch(n), leader_epoch=0)


# -- LSO -----------------------------------------------------------------------------------------
def test_without_transactions_lso_is_the_high_watermark(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plain(plog, 5)
    assert plog.first_unstable_offset is None and plog.last_stable_offset == 0
    plog.update_high_watermark()
    assert plog.last_stable_offset == 5 and plog.ongoing_transactions() == {}


def test_lso_with_one_producer(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    plain(plog, 3)
    plog.append(seq.txn(A), leader_epoch=0)  # 3..4
    plain(plog, 2)
    plog.append(seq.txn(A), leader_epoch=0)  # 7..8: continues, first offset stays 3
    plog.update_high_watermark()
    assert plog.ongoing_transactions() == {A: 3}
    assert plog.first_unstable_offset == 3 and plog.last_stable_offset == 3
    end = marker(plog, A, commit=True)
    assert end == 9 and plog.ongoing_transactions() == {}
    # The marker is not below the high watermark yet: the transaction still holds the LSO.
    assert plog.last_stable_offset == 3
    plog.update_high_watermark(end)
    assert plog.last_stable_offset == 3, "HW at the marker has not passed it"
    plog.update_high_watermark()
    assert plog.first_unstable_offset is None and plog.last_stable_offset == 10


def test_lso_with_interleaved_producers(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    plain(plog, 5)
    plog.append(seq.txn(A, 1), leader_epoch=0)  # A opens at 5
    plain(plog, 2)
    plog.append(seq.txn(B, 1), leader_epoch=0)  # B opens at 8
    plog.append(seq.txn(A, 1), leader_epoch=0)
    plog.update_high_watermark()
    assert plog.ongoing_transactions() == {A: 5, B: 8}
    assert plog.last_stable_offset == 5
    marker(plog, A, commit=True)
    plog.update_high_watermark()
    assert plog.last_stable_offset == 8
    abort_at = marker(plog, B, commit=False)
    plog.update_high_watermark()
    assert plog.last_stable_offset == plog.high_watermark == plog.log_end_offset
    assert plog.aborted_transactions(0, plog.log_end_offset) == [(B, 8)]
    entry = plog.active_segment.txn_index.entries[0]
    # Kafka's lastStableOffset for the entry: no other transaction open -> marker + 1.
    assert entry == AbortedTxn(B, 8, abort_at, abort_at + 1)


def test_abort_entry_records_the_lso_of_another_open_transaction(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    plog.append(seq.txn(A, 1), leader_epoch=0)  # 0
    plog.append(seq.txn(B, 1), leader_epoch=0)  # 1
    at = marker(plog, B, commit=False)
    assert plog.active_segment.txn_index.entries == [AbortedTxn(B, 1, at, 0)]


def test_high_watermark_below_marker_keeps_lso(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    plog.append(seq.txn(A, 3), leader_epoch=0)
    plain(plog, 2)
    plog.update_high_watermark()
    at = marker(plog, A, commit=False)
    plog.update_high_watermark(at - 1)
    assert plog.last_stable_offset == 0
    plog.update_high_watermark(at + 1)
    assert plog.last_stable_offset == at + 1


def test_marker_without_open_transaction_is_written_and_completes_nothing(
        tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plain(plog)
    at = marker(plog, A, commit=False, epoch=3)
    assert at == 1 and plog.log_end_offset == 2
    assert plog.first_unstable_offset is None and plog.aborted_transactions(0, 2) == []
    assert not files(plog.dir, ".txnindex")


# -- producer-state rules ----------------------------------------------------------------------
def test_non_transactional_batch_during_transaction_is_refused(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    plog.append(seq.txn(A), leader_epoch=0)
    end = plog.log_end_offset
    with pytest.raises(InvalidTxnState) as exc:
        plog.append(seq.txn(A, transactional=False), leader_epoch=0)
    assert error_code(exc.value) == ErrorCode.INVALID_TXN_STATE
    assert plog.log_end_offset == end
    marker(plog, A, commit=True)
    seq.next[(A, 0)] -= 2  # the refused batch was not written: retry its sequence
    plog.append(seq.txn(A, transactional=False), leader_epoch=0)  # fine once ended


def test_transactional_batch_without_producer_id_is_invalid_record(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    with pytest.raises(InvalidRecordError) as exc:
        plog.append(batch(1, transactional=True), leader_epoch=0)
    assert error_code(exc.value) == ErrorCode.INVALID_RECORD
    assert plog.log_end_offset == 0


def test_marker_from_older_producer_epoch_is_refused(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    plog.append(seq.txn(A, epoch=2), leader_epoch=0)
    with pytest.raises(InvalidProducerEpoch):
        marker(plog, A, commit=True, epoch=1)
    assert plog.ongoing_transactions() == {A: 0}


def test_marker_with_bumped_epoch_fences_the_old_producer(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    plog.append(seq.txn(A, epoch=0), leader_epoch=0)
    marker(plog, A, commit=False, epoch=1)  # the coordinator aborts with epoch + 1
    with pytest.raises(InvalidProducerEpoch) as exc:
        plog.append(seq.txn(A, epoch=0), leader_epoch=0)
    assert error_code(exc.value) == ErrorCode.INVALID_PRODUCER_EPOCH
    plog.append(seq.txn(A, epoch=1), leader_epoch=0)  # the new epoch is served
    assert plog.ongoing_transactions() == {A: 3}


def test_broker_written_batch_without_sequence_is_checked_for_its_epoch_only(
        tmp_path: Path) -> None:
    """A transactional offset commit (written by the group coordinator, base sequence -1)
    after an epoch bump: no sequence rule, as Kafka checks clients' sequences only."""
    plog = open_log(tmp_path)
    plog.append(batch(1, producer_id=A, producer_epoch=0, base_sequence=-1,
                      transactional=True), leader_epoch=0)
    marker(plog, A, commit=False, epoch=1)
    plog.append(batch(1, producer_id=A, producer_epoch=2, base_sequence=-1,
                      transactional=True), leader_epoch=0)
    assert plog.ongoing_transactions() == {A: 2}
    with pytest.raises(InvalidProducerEpoch):
        plog.append(batch(1, producer_id=A, producer_epoch=1, base_sequence=-1,
                          transactional=True), leader_epoch=0)


def test_marker_from_older_coordinator_epoch_is_fenced(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    plog.append(seq.txn(A), leader_epoch=0)
    marker(plog, A, commit=True, coordinator_epoch=5)
    plog.append(seq.txn(A), leader_epoch=0)
    end = plog.log_end_offset
    with pytest.raises(TransactionCoordinatorFenced) as exc:
        marker(plog, A, commit=True, coordinator_epoch=4)
    assert error_code(exc.value) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert plog.log_end_offset == end and plog.ongoing_transactions() == {A: 3}
    marker(plog, A, commit=True, coordinator_epoch=5)
    assert plog.ongoing_transactions() == {}


def test_leader_append_of_a_control_batch_ends_the_transaction(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    plog.append(seq.txn(A, 2), leader_epoch=0)
    info = plog.append(build_control_batch(A, 0, False, 0, timestamp=1), leader_epoch=0)
    assert info.first_offset == 2 and plog.ongoing_transactions() == {}
    assert plog.aborted_transactions(0, 3) == [(A, 0)]


# -- aborted transactions and the .txnindex ------------------------------------------------------
def _aborts_across_segments(plog: PartitionLog, seq: Seq) -> dict[str, int]:
    """A commits in segment 0; B starts in segment 0, rolls, aborts in segment 1; C aborts
    in segment 2."""
    at = {}
    plog.append(seq.txn(A), leader_epoch=0)  # 0..1
    at["B"] = plog.log_end_offset
    plog.append(seq.txn(B), leader_epoch=0)  # 2..3
    marker(plog, A, commit=True)  # 4
    plog.roll()
    plog.append(seq.txn(B), leader_epoch=0)  # 5..6: B continues in the new segment
    at["B_end"] = marker(plog, B, commit=False)  # 7
    plain(plog, 2)  # 8..9
    plog.roll()
    at["C"] = plog.log_end_offset
    plog.append(seq.txn(C), leader_epoch=0)  # 10..11
    at["C_end"] = marker(plog, C, commit=False)  # 12
    plain(plog)  # 13
    plog.update_high_watermark()
    return at


def test_aborted_transactions_over_ranges_and_segments(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    at = _aborts_across_segments(plog, seq)
    assert [s.base_offset for s in plog.segments] == [0, 5, 10]
    assert files(plog.dir, ".txnindex") == ["00000000000000000005.txnindex",
                                             "00000000000000000010.txnindex"]
    assert plog.aborted_transactions(0, 14) == [(B, at["B"]), (C, at["C"])]
    assert plog.aborted_transactions(0, 2) == [], "B starts at the upper bound"
    assert plog.aborted_transactions(0, 3) == [(B, 2)]
    assert plog.aborted_transactions(7, 8) == [(B, 2)], "the marker itself is in range"
    assert plog.aborted_transactions(8, 14) == [(C, 10)]
    assert plog.aborted_transactions(13, 14) == []
    # One entry per aborted transaction with its exact first offset, even though B's data
    # spans two segments.
    assert plog.aborted_transactions(2, 14).count((B, 2)) == 1


def test_txnindex_survives_close_and_reopen(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    at = _aborts_across_segments(plog, seq)
    plog.close()
    plog = open_log(tmp_path, recovery_point=14, high_watermark=14)
    assert plog.aborted_transactions(0, 14) == [(B, at["B"]), (C, at["C"])]
    assert plog.last_stable_offset == 14


def test_txnindex_rebuilt_after_unclean_load(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    at = _aborts_across_segments(plog, seq)
    expected = [s.txn_index.entries for s in plog.segments]
    plog.flush()
    for segment in plog.segments:
        segment.close()  # a crash: no close(), so no snapshot at the log end
    (tmp_path / "t-0" / "00000000000000000005.txnindex").unlink()
    (tmp_path / "t-0" / "00000000000000000010.snapshot").unlink()
    plog = open_log(tmp_path, had_clean_shutdown=False, recovery_point=0, high_watermark=14)
    assert [s.txn_index.entries for s in plog.segments] == expected
    assert plog.aborted_transactions(0, 14) == [(B, at["B"]), (C, at["C"])]


def test_missing_txnindex_after_clean_load_means_no_aborts(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    _aborts_across_segments(plog, seq)
    plog.close()
    (tmp_path / "t-0" / "00000000000000000010.txnindex").unlink()
    plog = open_log(tmp_path, recovery_point=14, high_watermark=14)
    assert plog.aborted_transactions(10, 14) == []


def test_torn_txnindex_entry_is_dropped(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path, "00000000000000000000.txnindex")
    index.append(AbortedTxn(1, 0, 5, 6))
    index.append(AbortedTxn(2, 3, 9, 10))
    with open(index.path, "ab") as f:
        f.write(b"\0" * 7)
    again = TransactionIndex(tmp_path, "00000000000000000000.txnindex")
    assert again.entries == [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10)]
    assert index.path.stat().st_size == 2 * TXN_ENTRY.size
    assert again.collect(6, 100) == ([AbortedTxn(2, 3, 9, 10)], False)
    # The first entry's LSO (6) passed the upper end: the search stops there (Kafka's rule).
    assert again.collect(0, 4) == ([AbortedTxn(1, 0, 5, 6)], True)
    with pytest.raises(ValueError):
        again.append(AbortedTxn(3, 9, 9, 10))


# -- restarts ------------------------------------------------------------------------------------
def test_open_transaction_survives_clean_restart(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    plain(plog, 2)
    plog.append(seq.txn(A), leader_epoch=0)  # 2..3
    plog.append(seq.txn(B), leader_epoch=0)  # 4..5
    plain(plog)
    plog.update_high_watermark()
    before = (plog.ongoing_transactions(), plog.last_stable_offset)
    plog.close()
    plog = open_log(tmp_path, recovery_point=7, high_watermark=7)
    assert (plog.ongoing_transactions(), plog.last_stable_offset) == before == ({A: 2, B: 4}, 2)
    marker(plog, A, commit=True)
    plog.update_high_watermark()
    assert plog.last_stable_offset == 4


def test_open_transaction_survives_crash(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    plain(plog, 2)
    plog.append(seq.txn(A), leader_epoch=0)  # 2..3
    plog.roll()  # a snapshot at 4, so the rest comes from replay
    plog.append(seq.txn(B), leader_epoch=0)  # 4..5
    plog.append(seq.txn(A), leader_epoch=0)  # 6..7
    plog.update_high_watermark()
    assert plog.last_stable_offset == 2
    plog.flush()
    for segment in plog.segments:
        segment.close()  # killed: no close(), no snapshot at the log end
    plog = open_log(tmp_path, had_clean_shutdown=False, recovery_point=4, high_watermark=8)
    assert plog.ongoing_transactions() == {A: 2, B: 4}
    assert plog.last_stable_offset == 2
    marker(plog, A, commit=False)
    plog.update_high_watermark()
    assert plog.last_stable_offset == 4
    assert plog.aborted_transactions(0, 9) == [(A, 2)]


def test_completed_transaction_above_high_watermark_after_restart(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    plog.append(seq.txn(A), leader_epoch=0)
    plog.roll()
    marker(plog, A, commit=True)  # 2, replayed from the snapshot at 2 when reopened
    for segment in plog.segments:
        segment.close()
    plog = open_log(tmp_path, high_watermark=1)
    assert plog.ongoing_transactions() == {} and plog.last_stable_offset == 0
    plog.update_high_watermark()
    assert plog.last_stable_offset == 3


# -- truncation and followers ------------------------------------------------------------------
def test_truncate_drops_txnindex_entries_and_transactions(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    at = _aborts_across_segments(plog, seq)
    assert plog.truncate_to(at["C_end"])  # C's marker goes: C is open again
    assert plog.aborted_transactions(0, 20) == [(B, 2)]
    assert plog.ongoing_transactions() == {C: 10}
    assert plog.last_stable_offset == 10
    assert plog.truncate_to(at["B_end"])  # B's marker goes too, and segment 10
    assert plog.ongoing_transactions() == {B: 2}
    assert plog.aborted_transactions(0, 20) == []
    assert files(plog.dir, ".txnindex") == []
    assert plog.truncate_to(2)  # A's commit marker (4) goes: A is open again
    assert plog.ongoing_transactions() == {A: 0} and plog.first_unstable_offset == 0
    plog.truncate_fully_and_start_at(100)
    assert plog.first_unstable_offset is None and plog.last_stable_offset == 100


def test_follower_replays_markers(tmp_path: Path) -> None:
    leader, seq = PartitionLog(tmp_path / "l-0", SMALL), Seq()
    _aborts_across_segments(leader, seq)
    follower = PartitionLog(tmp_path / "f-0", SMALL)
    offset = 0
    while offset < leader.log_end_offset:
        data = leader.read(offset, 100_000)
        follower.append_as_follower(data.records)
        offset = data.next_offset
        if offset == 5:
            follower.update_high_watermark()
            assert follower.ongoing_transactions() == {B: 2}
            assert follower.last_stable_offset == 2
    follower.update_high_watermark()
    assert follower.aborted_transactions(0, 14) == leader.aborted_transactions(0, 14)
    assert follower.last_stable_offset == 14 and follower.ongoing_transactions() == {}
    # A follower mirrors the leader: an old-epoch marker is not refused there.
    follower.append_as_follower(build_control_batch(C, 0, True, 0, base_offset=14))
    assert follower.log_end_offset == 15


def test_retention_deletes_txnindex_files_and_keeps_open_transactions(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    at = _aborts_across_segments(plog, seq)
    plog.append(seq.txn(A), leader_epoch=0)  # 14..15: A opens again, in segment 10
    plog.roll()
    plain(plog)
    plog.update_high_watermark()
    assert plog.last_stable_offset == 14
    plog.delete_records_before(15)  # into A's open transaction
    plog.delete_old_segments(now_ms=0)
    plog.delete_pending_files(now_ms=10**13)
    assert files(plog.dir, ".txnindex") == ["00000000000000000010.txnindex"]
    assert not [name for name in os.listdir(plog.dir) if name.endswith(".deleted")]
    assert plog.aborted_transactions(15, plog.log_end_offset) == []
    assert plog.ongoing_transactions() == {A: 14}
    assert plog.first_unstable_offset == plog.last_stable_offset == 15, "clamped to the start"
    marker(plog, A, commit=True)
    plog.update_high_watermark()
    assert plog.last_stable_offset == plog.log_end_offset
    assert at["C_end"] == 12


def test_cleaned_segment_files_are_renamed_with_their_txnindex(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    _aborts_across_segments(plog, seq)
    segment = plog.segments[1]
    segment.change_file_suffixes("", ".swap")
    assert files(plog.dir, ".txnindex.swap") == ["00000000000000000005.txnindex.swap"]
    segment.change_file_suffixes(".swap", "")
    assert segment.txn_index.entries and segment.txn_index.path.exists()


def test_expiry_keeps_producers_with_open_transactions(tmp_path: Path) -> None:
    plog, seq = open_log(tmp_path), Seq()
    plog.append(seq.txn(A), leader_epoch=0)
    plog.append(seq.txn(B, transactional=False), leader_epoch=0)
    assert plog.producer_state.remove_expired(10**12, 1) == 1
    assert A in plog.producer_state.producers


def test_control_record_of_reads_the_marker() -> None:
    data = build_control_batch(A, 3, False, 7, timestamp=1, base_offset=4)
    record = control_record_of(data)
    assert record.is_abort and record.coordinator_epoch == 7
    assert [h.producer_epoch for _, h in iter_batches(data)] == [3]
    with pytest.raises(InvalidRecordError):
        control_record_of(batch(1))


def test_validator_serves_transactional_batches_but_not_client_markers() -> None:
    from pybroker.config import load_broker_config, resolve_topic_config
    from pybroker.storage.validator import Rejected, validate_records

    topic = resolve_topic_config(load_broker_config(None, {}), {})
    data = Seq().txn(A)
    assert validate_records(data, topic, produce_version=9, internal=False,
                            now_ms=0).records == data
    with pytest.raises(Rejected) as exc:
        validate_records(build_control_batch(A, 0, True, 0), topic, produce_version=9,
                         internal=False, now_ms=0)
    assert exc.value.code == ErrorCode.INVALID_RECORD
