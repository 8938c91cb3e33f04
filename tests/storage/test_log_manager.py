"""LogManager: loading dirs, checkpoints, the clean-shutdown marker, deletion, fast start."""
from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE, HIGH_WATERMARK_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT, LogManager,
)
from tests.storage.util import SMALL, batch, files, fill, read_all


def manager(tmp_path: Path, dirs: int = 1) -> LogManager:
    return LogManager([str(tmp_path / f"d{i}") for i in range(dirs)], default_config=SMALL)


def test_create_reopen_and_checkpoints(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    a = logs.get_or_create("orders-eu", 0)
    b = logs.get_or_create("orders-eu", 1)
    assert logs.get_or_create("orders-eu", 0) is a and logs.get("nope", 0) is None
    fill(a, 30)
    b.append(batch(5), leader_epoch=0)  # high watermark left at 0
    a.delete_records_before(10)
    logs.close()
    d0 = tmp_path / "d0"
    assert (d0 / CLEAN_SHUTDOWN_FILE).exists()
    assert (d0 / RECOVERY_POINT_CHECKPOINT).read_text() == \
        "0\n2\norders-eu 0 90\norders-eu 1 5\n"
    assert (d0 / LOG_START_OFFSET_CHECKPOINT).read_text() == \
        "0\n2\norders-eu 0 10\norders-eu 1 0\n"
    assert (d0 / HIGH_WATERMARK_CHECKPOINT).read_text() == \
        "0\n2\norders-eu 0 90\norders-eu 1 0\n"

    again = manager(tmp_path)
    assert again.had_clean_shutdown
    assert not (d0 / CLEAN_SHUTDOWN_FILE).exists()  # removed while running
    assert sorted((lg.topic, lg.partition) for lg in again.logs()) == \
        [("orders-eu", 0), ("orders-eu", 1)]
    a2 = again.get("orders-eu", 0)
    assert a2 is not None
    assert (a2.log_start_offset, a2.high_watermark, a2.log_end_offset) == (10, 90, 90)
    assert read_all(a2)[0].offset == 10
    new_config = LogConfig(retention_ms=5)
    assert again.get_or_create("orders-eu", 0, new_config).config is new_config
    again.close()


def test_unclean_start_recovers_after_recovery_point(tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    logs = manager(tmp_path)
    plog = logs.get_or_create("t", 0)
    fill(plog, 30)
    plog.flush()
    logs.checkpoint()
    fill(plog, 5)  # unflushed, past the recovery point
    records = read_all(plog)
    newest = plog.dir / files(plog.dir, ".log")[-1]
    # Crash: no close(). Scribble over the tail as a torn write would.
    with open(newest, "ab") as f:
        f.write(b"\xff" * 37)
    with caplog.at_level(logging.WARNING):
        again = manager(tmp_path)
    assert not again.had_clean_shutdown
    assert "truncated 37" in caplog.text
    plog2 = again.get("t", 0)
    assert plog2 is not None and read_all(plog2) == records
    assert plog2.recovery_point == plog2.log_end_offset  # recovered data is fsynced
    assert (tmp_path / "d0" / RECOVERY_POINT_CHECKPOINT).read_text().endswith(
        f"t 0 {plog2.log_end_offset}\n")
    again.close()
    assert manager(tmp_path).had_clean_shutdown


def test_marker_absent_while_running(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    logs.get_or_create("t", 0).append(batch(1), leader_epoch=0)
    assert not (tmp_path / "d0" / CLEAN_SHUTDOWN_FILE).exists()
    logs.close()
    logs.close()  # idempotent
    assert (tmp_path / "d0" / CLEAN_SHUTDOWN_FILE).exists()


def test_delete_and_leftover_delete_dirs(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    fill(logs.get_or_create("gone", 3), 5)
    assert logs.delete("gone", 3) and not logs.delete("gone", 3)
    assert [p.name for p in (tmp_path / "d0").iterdir() if p.is_dir()] == []
    logs.close()
    leftover = tmp_path / "d0" / "old-0.0123abcd-delete"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"x")
    (tmp_path / "d0" / "not a partition").mkdir()
    again = manager(tmp_path)
    assert not leftover.exists() and len(again) == 0


def test_partitions_spread_over_log_dirs(tmp_path: Path) -> None:
    logs = manager(tmp_path, dirs=2)
    for p in range(6):
        logs.get_or_create("t", p)
    assert sorted(len([p for p in (tmp_path / f"d{i}").iterdir() if p.is_dir()])
                  for i in range(2)) == [3, 3]
    logs.close()
    assert len(manager(tmp_path, dirs=2)) == 6


def test_flush_dirty_and_cleanup(tmp_path: Path) -> None:
    logs = LogManager([str(tmp_path / "d0")], default_config=LogConfig(
        segment_bytes=4096, index_interval_bytes=512, file_delete_delay_ms=0, retention_ms=10,
        flush_ms=1000))
    plog = logs.get_or_create("t", 0)
    fill(plog, 40)
    assert logs.flush_dirty(now_ms=plog.last_flush_ms + 1000) == 1
    assert plog.recovery_point == plog.log_end_offset
    assert logs.flush_dirty(now_ms=plog.last_flush_ms + 1000) == 0
    before = len(plog.segments)
    assert logs.cleanup(now_ms=10**13) == before - 1 > 0
    assert len(plog.segments) == 1 and logs.cleanup(now_ms=10**13) == 0


def test_open_1000_partitions_after_clean_shutdown(tmp_path: Path) -> None:
    logs = LogManager([str(tmp_path / "d0")])
    payload = batch(5)
    for p in range(1000):
        plog = logs.get_or_create("many", p)
        plog.append(payload, leader_epoch=0)
        plog.update_high_watermark()
    start = time.perf_counter()
    logs.close()
    closed = time.perf_counter() - start
    start = time.perf_counter()
    again = LogManager([str(tmp_path / "d0")])
    elapsed = time.perf_counter() - start
    print(f"\nclose of 1,000 partitions: {closed:.3f} s; open: {elapsed:.3f} s")
    assert len(again) == 1000
    assert all(lg.log_end_offset == 5 and lg.high_watermark == 5 for lg in again.logs())
    assert elapsed < 10  # generous: the figure is printed, not asserted tightly
    again.close()
