"""leader-epoch-checkpoint content and OffsetForLeaderEpoch answers."""
from __future__ import annotations

from pathlib import Path

from pybroker.storage.leader_epoch_cache import LeaderEpochFileCache
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
    reloaded = LeaderEpochFileCache(plog.dir)
    assert reloaded.entries == plog.leader_epoch_cache.entries
    assert reloaded.epoch_for_offset(8) == 2


def test_assign_drops_non_monotonic_entries(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(tmp_path)
    cache.assign(1, 0)
    cache.assign(2, 10)
    assert not cache.assign(2, 15)  # same epoch later: nothing new
    cache.assign(3, 8)  # a start offset before epoch 2's: epoch 2 cannot be right
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(1, 0), (3, 8)]
