"""Open files bounded by design (storage/files.py): segment descriptors through an LRU cache,
index files without descriptors, one sync per log dir."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from pybroker.storage.files import FileCache, sync_filesystem
from pybroker.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from pybroker.storage.log_config import LogConfig
from tests.storage.util import batch

SMALL = LogConfig(segment_bytes=2048, index_interval_bytes=256)


def _open_under(directory: Path) -> int:
    """This process's descriptors on files below `directory`."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory)):
            count += 1
    return count


def _fill(manager: LogManager, partitions: int, batches: int) -> None:
    for p in range(partitions):
        plog = manager.get_or_create("t", p, leader_epoch=0)
        for _ in range(batches):
            plog.append(bytearray(batch(3, value_size=60)), leader_epoch=0)


def test_descriptors_stay_within_the_cache(tmp_path: Path) -> None:
    cache = FileCache(8)
    manager = LogManager([str(tmp_path)], default_config=SMALL, files=cache)
    _fill(manager, 40, 20)  # several segments each, more partitions than descriptors
    assert len(cache) <= 8 and _open_under(tmp_path) <= 8
    assert all(len(lg.segments) > 1 for lg in manager.logs())
    for plog in manager.logs():  # every segment readable, through the cache
        offset, seen = 0, 0
        while offset < plog.log_end_offset:
            data = plog.read(offset, 1 << 20)
            offset, seen = data.next_offset, seen + 1
        assert offset == 60 and seen >= len(plog.segments)
    assert _open_under(tmp_path) <= 8
    manager.close()
    assert _open_under(tmp_path) == 0


@pytest.mark.parametrize("workers", [1, 3])
def test_recovery_after_a_crash_holds_few_files(tmp_path: Path, workers: int) -> None:
    manager = LogManager([str(tmp_path)], default_config=SMALL, files=FileCache(8))
    _fill(manager, 40, 20)
    ends = {(lg.topic, lg.partition): lg.log_end_offset for lg in manager.logs()}
    # "kill -9": no close, no marker; the descriptors die with the process.
    manager.files.close_all()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    cache = FileCache(8)
    again = LogManager([str(tmp_path)], default_config=SMALL, files=cache,
                       load_workers=workers)
    assert not again.had_clean_shutdown
    assert {(lg.topic, lg.partition): lg.log_end_offset for lg in again.logs()} == ends
    assert all(lg.recovery_point == lg.log_end_offset for lg in again.logs())
    assert _open_under(tmp_path) <= 8
    again.close()


def test_index_files_hold_no_descriptor(tmp_path: Path) -> None:
    manager = LogManager([str(tmp_path)], default_config=SMALL, files=FileCache(8))
    _fill(manager, 3, 40)
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        assert not target.endswith((".index", ".timeindex")), target
    manager.close()


def test_sync_filesystem(tmp_path: Path) -> None:
    assert sync_filesystem(tmp_path) in (True, False)  # False only without syncfs(2)


def test_out_of_descriptors_gives_cached_ones_back(tmp_path: Path) -> None:
    """EMFILE while the cache holds descriptors: half are closed and the open retried."""
    import resource

    cache = FileCache(64)
    manager = LogManager([str(tmp_path)], default_config=SMALL, files=cache)
    _fill(manager, 40, 1)
    assert len(cache) == 40
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 4096), hard))  # fewer to hog
    hog: list[int] = []
    try:
        while True:  # use up every descriptor the process may have
            try:
                hog.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                break
        cache.close(manager.get("t", 1).active_segment)  # partition 1 has no descriptor now
        hog.append(os.open(os.devnull, os.O_RDONLY))  # and the process none to spare
        data = manager.get("t", 1).read(0, 1 << 20)  # EMFILE, then half the cache given back
        assert data.next_offset == 3 and len(cache) <= 21
    finally:
        for fd in hog:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    manager.close()
