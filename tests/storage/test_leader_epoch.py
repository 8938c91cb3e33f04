"""leader-epoch-checkpoint content and OffsetForLeaderEpoch answers."""
from __future__ import annotations

from pathlib import Path

from pybroker.storage.leader_epoch_cache import LeaderEpochFileCache
from pybroker.storage.log_manager import LogManager
from pybroker.storage.partition_log import PartitionLog
from tests.storage.util import SMALL, batch


def test_checkpoint_written_when_a_new_epoch_appears(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    plog.append(batch(3), leader_epoch=1)
    plog.append(batch(2), leader_epoch=1)
    plog.append(batch(4), leader_epoch=3)
    plog.append(batch(1), leader_epoch=7)
    text = (plog.dir / "leader-epoch-checkpoint").read_text()
    assert text == "0\n3\n1 0\n3 5\n7 9\n"


def test_end_offset_for_epoch(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    assert plog.end_offset_for_epoch(0) == (-1, -1)
    plog.append(batch(3), leader_epoch=1)
    plog.append(batch(4), leader_epoch=3)
    plog.append(batch(1), leader_epoch=7)
    assert plog.end_offset_for_epoch(7) == (7, 8)  # latest: the log end
    assert plog.end_offset_for_epoch(3) == (3, 7)
    assert plog.end_offset_for_epoch(1) == (1, 3)
    assert plog.end_offset_for_epoch(5) == (3, 7)  # unknown: the largest epoch below it
    assert plog.end_offset_for_epoch(0) == (0, 0)  # below every epoch
    assert plog.end_offset_for_epoch(8) == (-1, -1)
    assert plog.end_offset_for_epoch(-1) == (-1, -1)


def test_truncation_and_log_start_adjust_epochs(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    for epoch in (1, 2, 3, 4):
        plog.append(batch(5), leader_epoch=epoch)
    plog.update_high_watermark()
    plog.truncate_to(15)  # epoch 3 started at 10: kept; epoch 4 (at 15) dropped
    assert [(e.epoch, e.start_offset) for e in plog.leader_epoch_cache.entries] == \
        [(1, 0), (2, 5), (3, 10)]
    plog.delete_records_before(7)
    assert [(e.epoch, e.start_offset) for e in plog.leader_epoch_cache.entries] == \
        [(2, 7), (3, 10)]
    assert plog.leader_epoch_cache.write_pending()
    assert not plog.leader_epoch_cache.write_pending()
    reloaded = LeaderEpochFileCache(plog.dir)
    assert reloaded.entries == plog.leader_epoch_cache.entries
    assert reloaded.epoch_for_offset(8) == 2


def test_a_moved_log_start_is_written_later_and_survives_a_crash(tmp_path: Path) -> None:
    """A new log start leaves the file stale until `write_pending` (the broker's checkpoint
    job, in a worker thread); a crash before then loses nothing, since loading drops the
    entries before the log start again."""
    checkpoint = tmp_path / "t-0" / "leader-epoch-checkpoint"
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    for epoch in (1, 2, 3):
        plog.append(batch(5), leader_epoch=epoch)
    plog.update_high_watermark()
    plog.delete_records_before(7)
    assert checkpoint.read_text() == "0\n3\n1 0\n2 5\n3 10\n"  # not rewritten yet

    crashed = PartitionLog(tmp_path / "t-0", SMALL, log_start_offset=7)  # no close: a crash
    assert [(e.epoch, e.start_offset) for e in crashed.leader_epoch_cache.entries] == \
        [(2, 7), (3, 10)]
    assert crashed.end_offset_for_epoch(2) == (2, 10)

    plog.append(batch(1), leader_epoch=4)  # a new epoch is written at once, with the change
    assert checkpoint.read_text() == "0\n3\n2 7\n3 10\n4 15\n"
    assert not plog.leader_epoch_cache.write_pending()


def test_the_checkpoint_job_writes_pending_epoch_changes(tmp_path: Path) -> None:
    logs = LogManager([str(tmp_path / "logs")], default_config=SMALL)
    plog = logs.get_or_create("t", 0)
    plog.append(batch(5), leader_epoch=1)
    plog.append(batch(5), leader_epoch=2)
    plog.update_high_watermark()
    plog.delete_records_before(3)
    logs.checkpoint()
    assert LeaderEpochFileCache(plog.dir).entries == plog.leader_epoch_cache.entries
    assert [(e.epoch, e.start_offset) for e in plog.leader_epoch_cache.entries] == \
        [(1, 3), (2, 5)]
    logs.close()


def test_assign_drops_non_monotonic_entries(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(tmp_path)
    cache.assign(1, 0)
    cache.assign(2, 10)
    assert not cache.assign(2, 15)  # same epoch later: nothing new
    cache.assign(3, 8)  # a start offset before epoch 2's: epoch 2 cannot be right
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(1, 0), (3, 8)]
