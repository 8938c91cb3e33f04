"""Idempotent producers: duplicates, sequence and epoch errors, persistence across restarts."""
from __future__ import annotations

from pathlib import Path

import pytest

from protocol.records.batch import BatchHeader
from pybroker.storage.partition_log import PartitionLog
from pybroker.storage.producer_state import (
    InvalidProducerEpoch, OutOfOrderSequence, ProducerStateManager,
)
from tests.storage.util import SMALL, batch, files, read_all

PID = 4242


def idem(seq: int, n: int = 2, *, pid: int = PID, epoch: int = 0, **kw: object) -> bytes:
    return batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, **kw)


def open_log(tmp_path: Path, **kw: object) -> PartitionLog:
    return PartitionLog(tmp_path / "t-0", SMALL, **kw)  # type: ignore[arg-type]


def test_duplicate_returns_original_offsets_and_writes_nothing(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.append(batch(3), leader_epoch=0)
    first = plog.append(idem(0), leader_epoch=0)
    second = plog.append(idem(2), leader_epoch=0)
    size = plog.size
    retry = plog.append(idem(0), leader_epoch=0)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (3, 4)
    assert (first.first_offset, first.duplicate) == (3, False)
    assert plog.append(idem(2), leader_epoch=0).first_offset == second.first_offset
    assert plog.size == size and plog.log_end_offset == 7


def test_only_last_five_batches_are_remembered(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for i in range(7):
        plog.append(idem(i, 1), leader_epoch=0)
    assert plog.append(idem(2, 1), leader_epoch=0).duplicate
    with pytest.raises(OutOfOrderSequence):  # seq 1 has left the window: not a known retry
        plog.append(idem(1, 1), leader_epoch=0)


def test_out_of_order_sequence(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.append(idem(0), leader_epoch=0)  # seqs 0-1
    with pytest.raises(OutOfOrderSequence):
        plog.append(idem(3), leader_epoch=0)  # a gap: seq 2 was lost
    with pytest.raises(OutOfOrderSequence):
        plog.append(idem(1), leader_epoch=0)  # overlaps, not a duplicate
    assert plog.log_end_offset == 2
    assert plog.append(idem(2), leader_epoch=0).first_offset == 2


def test_sequence_wraps_at_int32_max(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.append(idem(2**31 - 2, 2), leader_epoch=0)  # seqs MAX-1, MAX
    assert plog.append(idem(0), leader_epoch=0).first_offset == 2


def test_epochs(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.append(idem(0, epoch=3), leader_epoch=0)
    with pytest.raises(InvalidProducerEpoch):
        plog.append(idem(2, epoch=2), leader_epoch=0)  # a fenced zombie
    with pytest.raises(OutOfOrderSequence):
        plog.append(idem(5, epoch=4), leader_epoch=0)  # a new epoch restarts at 0
    plog.append(idem(0, epoch=4), leader_epoch=0)
    with pytest.raises(InvalidProducerEpoch):
        plog.append(idem(2, epoch=3), leader_epoch=0)


def test_unknown_producer_accepts_any_sequence(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    assert plog.append(idem(57), leader_epoch=0).first_offset == 0
    assert plog.append(idem(59), leader_epoch=0).first_offset == 2
    assert plog.append(idem(0, pid=7), leader_epoch=0).first_offset == 4


def test_several_batches_in_one_append_are_checked_in_order(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.append(idem(0) + idem(2), leader_epoch=0)
    with pytest.raises(OutOfOrderSequence):
        plog.append(idem(4) + idem(7), leader_epoch=0)
    assert plog.log_end_offset == 4  # nothing of the failed append was written
    assert plog.append(idem(4) + idem(6), leader_epoch=0).last_offset == 7


def test_state_survives_clean_close(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for i in range(0, 20, 2):
        plog.append(idem(i), leader_epoch=0)
    plog.close()
    assert files(plog.dir, ".snapshot")[-1] == "00000000000000000020.snapshot"
    again = open_log(tmp_path)
    assert again.append(idem(18), leader_epoch=0).first_offset == 18
    with pytest.raises(OutOfOrderSequence):
        again.append(idem(21), leader_epoch=0)
    assert again.append(idem(20), leader_epoch=0).first_offset == 20


def test_state_survives_unclean_shutdown_by_snapshot_and_replay(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for i in range(0, 120, 2):  # rolls several times: snapshots at each roll
        plog.append(idem(i, value_size=150), leader_epoch=0)
    assert len(plog.segments) > 2
    snapshots = files(plog.dir, ".snapshot")
    assert snapshots and int(snapshots[-1][:20]) == plog.active_segment.base_offset
    # "Crash": no close, so no snapshot at the log end; the tail must be replayed.
    again = open_log(tmp_path, had_clean_shutdown=False)
    assert again.log_end_offset == 120
    assert again.append(idem(118), leader_epoch=0).duplicate
    assert again.append(idem(120), leader_epoch=0).first_offset == 120


def test_corrupt_snapshot_is_skipped(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for i in range(0, 10, 2):
        plog.append(idem(i), leader_epoch=0)
    plog.close()
    snapshot = plog.dir / files(plog.dir, ".snapshot")[-1]
    data = bytearray(snapshot.read_bytes())
    data[-1] ^= 0xFF
    snapshot.write_bytes(data)
    again = open_log(tmp_path)  # falls back to replaying the log
    assert not snapshot.exists()
    assert again.append(idem(8), leader_epoch=0).duplicate


def test_truncation_rebuilds_state(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for i in range(0, 100, 2):
        plog.append(idem(i, value_size=150), leader_epoch=0)
    plog.truncate_to(50)
    assert all(int(name[:20]) <= 50 for name in files(plog.dir, ".snapshot"))
    assert plog.append(idem(50), leader_epoch=0).first_offset == 50  # seq 48 was last
    assert read_all(plog)[-1].offset == 51


def test_snapshot_round_trip(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    for pid in range(3):
        for seq in range(0, 14, 2):
            header = BatchHeader.unpack_from(idem(seq, pid=pid, epoch=pid + 1))
            state.update(header, 100 * pid + seq, 100 * pid + seq + 1)
    state.take_snapshot(77, sync=True)
    loaded = ProducerStateManager(tmp_path)
    assert loaded.load(100) == 77
    assert loaded.producers == state.producers
    assert len(loaded.producers[1].batches) == 5
    assert loaded.load(50) is None  # a snapshot past the log end is stale and goes
    assert not (tmp_path / "00000000000000000077.snapshot").exists()


def test_idle_producers_expire_with_retention(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.append(idem(0, ts=1_000), leader_epoch=0)
    plog.append(idem(0, pid=9, ts=90_000_000), leader_epoch=0)
    plog.delete_old_segments(now_ms=1_000 + 86_400_001)
    assert set(plog.producer_state.producers) == {9}
    assert plog.append(idem(57), leader_epoch=0).first_offset == 4  # unknown again: accepted


def test_duplicate_under_log_append_time_reports_the_original_append_time(
        tmp_path: Path) -> None:
    import dataclasses

    plog = PartitionLog(tmp_path / "t-0", dataclasses.replace(
        SMALL, message_timestamp_type="LogAppendTime"))
    plog.append(idem(0), leader_epoch=0, log_append_time=5_000)
    retry = plog.append(idem(0), leader_epoch=0, log_append_time=9_000)
    assert retry.duplicate and retry.log_append_time == 5_000 and retry.first_offset == 0
