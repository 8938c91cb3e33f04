"""Retention by time and size, log start offset, deferred file deletion."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from pybroker.storage.partition_log import PartitionLog
from tests.storage.util import SMALL, files, fill, read_all


def test_retention_by_time_deletes_whole_old_segments(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", dataclasses.replace(SMALL, retention_ms=1_000))
    fill(plog, 30, ts0=10_000)  # ts 10_000..10_089, several segments
    fill(plog, 30, ts0=50_000)
    segments = [(s.base_offset, s.largest_timestamp) for s in plog.segments]
    old = [base for base, ts in segments if ts < 50_000]
    assert plog.delete_old_segments(now_ms=50_500) == len(old)
    assert plog.log_start_offset == plog.segments[0].base_offset > 0
    assert all(s.largest_timestamp >= 50_000 for s in plog.segments)
    assert read_all(plog)[0].offset == plog.log_start_offset
    assert plog.delete_old_segments(now_ms=50_500) == 0


def test_retention_never_deletes_the_active_segment(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", dataclasses.replace(SMALL, retention_ms=0,
                                                              retention_bytes=0))
    fill(plog, 40)
    assert plog.delete_old_segments(now_ms=10**13) > 0
    assert len(plog.segments) == 1
    assert plog.segments[0].size > 0
    assert plog.log_start_offset == plog.active_segment.base_offset
    assert files(plog.dir, ".log") == [plog.active_segment.log_path.name]


def test_retention_by_size(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", dataclasses.replace(SMALL, retention_ms=-1,
                                                              retention_bytes=10_000))
    fill(plog, 60)
    total = plog.size
    sizes = [s.size for s in plog.segments]
    # Kafka's rule: drop the oldest while what remains is still >= retention.bytes.
    expected, excess = 0, total - 10_000
    for size in sizes[:-1]:
        if excess - size < 0:
            break
        excess -= size
        expected += 1
    assert plog.delete_old_segments(now_ms=0) == expected > 0
    assert plog.size >= 10_000 and plog.size - plog.segments[0].size < 10_000
    assert plog.log_start_offset == plog.segments[0].base_offset


def test_retention_unlimited_or_compact_keeps_everything(tmp_path: Path) -> None:
    unlimited = PartitionLog(tmp_path / "a-0", dataclasses.replace(SMALL, retention_ms=-1))
    fill(unlimited, 30)
    assert unlimited.delete_old_segments(now_ms=10**13) == 0
    compact = PartitionLog(tmp_path / "b-0", dataclasses.replace(
        SMALL, retention_ms=0, retention_bytes=0, cleanup_policy="compact"))
    fill(compact, 30)
    assert compact.delete_old_segments(now_ms=10**13) == 0


def test_retention_spares_data_above_high_watermark(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", dataclasses.replace(SMALL, retention_ms=0))
    fill(plog, 40)
    plog.update_high_watermark(0)
    assert plog.delete_old_segments(now_ms=10**13) == 0


def test_deleted_files_wait_for_file_delete_delay(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", dataclasses.replace(SMALL, retention_ms=0,
                                                              file_delete_delay_ms=60_000))
    fill(plog, 40)
    count = len(plog.segments) - 1
    assert plog.delete_old_segments(now_ms=10**13 - 120_000) == count
    pending = sorted(p.name for p in plog.dir.glob("*.deleted"))
    assert len(pending) == 3 * count
    assert plog.delete_pending_files(now_ms=0) == 0
    assert plog.delete_pending_files(now_ms=10**13) == count
    assert not list(plog.dir.glob("*.deleted"))


def test_log_start_offset_and_retention_survive_reopen(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    fill(plog, 40)
    start = plog.delete_records_before(plog.segments[1].base_offset + 2)
    plog.close()
    again = PartitionLog(tmp_path / "t-0", SMALL, log_start_offset=start)
    assert again.log_start_offset == start
    assert read_all(again)[0].offset == start


def test_retention_only_renames_files_are_unlinked_later(tmp_path: Path) -> None:
    """Retention runs on the event loop and only renames; closing the due segments is cheap
    and stays there, unlinking (which can take the file system tens of milliseconds) is the
    broker's worker thread's job."""
    plog = PartitionLog(tmp_path / "t-0", dataclasses.replace(SMALL, retention_ms=0))
    fill(plog, 40)
    assert plog.close_due_deletes(now_ms=10**13) == []
    count = plog.delete_old_segments(now_ms=10**13)
    assert count > 0 and len(files(plog.dir, ".deleted")) == 3 * count
    assert plog.close_due_deletes(now_ms=10**13 - 1) == []  # file.delete.delay.ms is 0 here
    due = plog.close_due_deletes(now_ms=10**13)
    assert len(due) == count and all(segment.closed for segment in due)
    assert len(files(plog.dir, ".deleted")) == 3 * count  # closed, not yet unlinked
    for segment in due:
        segment.delete()
    assert not files(plog.dir, ".deleted") and plog.close_due_deletes(now_ms=10**13) == []
    assert read_all(plog)[0].offset == plog.log_start_offset
