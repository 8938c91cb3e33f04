"""A failed log dir goes offline alone (KIP-112), on real file systems the test mounts: ext4 on
a loop device that the kernel takes read-only (an I/O error), and a tmpfs filled to ENOSPC."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pybroker.storage.log_manager import CLEAN_SHUTDOWN_FILE, KafkaStorageException, LogManager
from pybroker.testing.disk_faults import MountedDisk
from tests.storage.util import SMALL, batch, fill, read_all


def test_a_failed_dir_goes_offline_alone_and_comes_back_repaired(tmp_path: Path,
                                                                 ext4_disk: MountedDisk) -> None:
    healthy = tmp_path / "healthy"
    told: list[tuple[Path, bool]] = []
    logs = LogManager([str(healthy), str(ext4_disk.path)], default_config=SMALL)

    def offline(log_dir: Path) -> None:
        """As the replica manager: lets the partitions go, then closes their logs."""
        told.append((log_dir, b.closed))
        logs.close_failed(log_dir)
    logs.on_dir_offline = offline
    a = logs.get_or_create("t", 0)  # the least-loaded dir, in order: healthy, then the disk
    b = logs.get_or_create("t", 1)
    assert logs.log_dir_of("t", 0) == healthy and logs.log_dir_of("t", 1) == ext4_disk.path
    fill(a, 5)
    fill(b, 5)
    b.flush()
    logs.checkpoint()
    ext4_disk.fail()
    with pytest.raises(OSError) as failed:
        b.append(batch(3), leader_epoch=0)
    assert failed.value.errno == errno.EROFS
    assert logs.fail_log(b, failed.value) and not logs.fail_log(b, failed.value)
    assert told == [(ext4_disk.path, False)] and b.closed  # closed by the listener
    assert logs.offline_dirs.keys() == {ext4_disk.path} and logs.online_dirs == [healthy]
    assert logs.get("t", 1) is None and logs.is_offline("t", 1) and not logs.is_offline("t", 0)
    assert logs.offline_partitions() == [("t", 1)] == logs.offline_partitions(ext4_disk.path)
    with pytest.raises(KafkaStorageException, match="offline"):
        logs.get_or_create("t", 1)  # never recreated elsewhere while the dir is down
    c = logs.get_or_create("t", 2)  # new logs go to the dirs still online
    assert logs.log_dir_of("t", 2) == healthy
    fill(a, 2)
    fill(c, 1)
    logs.checkpoint()  # skips the failed dir
    logs.close()
    assert (healthy / CLEAN_SHUTDOWN_FILE).exists()
    assert not (ext4_disk.path / CLEAN_SHUTDOWN_FILE).exists()

    ext4_disk.repair()
    again = LogManager([str(healthy), str(ext4_disk.path)], default_config=SMALL)
    try:
        assert not again.offline_dirs
        b2 = again.get("t", 1)
        assert b2 is not None and b2.log_end_offset == 15
        assert [r.offset for r in read_all(b2)] == list(range(15))
        a2 = again.get("t", 0)
        assert a2 is not None and a2.log_end_offset == 21
    finally:
        again.close()


def test_a_flush_that_fails_in_a_worker_takes_the_dir_offline(tmp_path: Path,
                                                              ext4_disk: MountedDisk) -> None:
    """The periodic flush, checkpoint and retention run in worker threads: their OSError takes
    the dir offline too, and the other dir's logs keep being flushed."""
    healthy = tmp_path / "healthy"
    logs = LogManager([str(healthy), str(ext4_disk.path)], default_config=SMALL)
    a = logs.get_or_create("t", 0)
    b = logs.get_or_create("t", 1)
    fill(a, 20)
    fill(b, 20)  # rolls segments: flush_dirty fsyncs them
    ext4_disk.fail()
    logs.flush_dirty(now_ms=2**62)
    assert logs.offline_dirs.keys() == {ext4_disk.path}
    assert a.recovery_point > 0  # its rolled segments were flushed all the same
    logs.checkpoint()
    logs.close()


def test_a_full_disk_fails_the_write_and_leaves_no_half_batch(tmpfs_disk: MountedDisk) -> None:
    """The disk fills under a log: the append that meets ENOSPC leaves nothing of itself in
    the segment file (a page's slack may take part of it); space freed and the log reloaded
    (no clean shutdown), it ends at the last append that succeeded and every record reads
    back."""
    logs = LogManager([str(tmpfs_disk.path)], default_config=SMALL)
    plog = logs.get_or_create("t", 0)
    fill(plog, 10)
    assert tmpfs_disk.fill() > 0
    appended = plog.log_end_offset
    with pytest.raises(OSError) as full:
        for _ in range(1000):
            plog.append(batch(4, value_size=700), leader_epoch=0)
            appended += 4
    assert full.value.errno == errno.ENOSPC
    assert plog.log_end_offset == appended
    active = plog.active_segment
    assert os.path.getsize(active.log_path) == active.size  # no torn tail
    logs.fail_log(plog, full.value)
    assert logs.offline_dirs.keys() == {tmpfs_disk.path}
    logs.close()  # nothing to write on the only, failed, dir
    assert not (tmpfs_disk.path / CLEAN_SHUTDOWN_FILE).exists()
    tmpfs_disk.free()
    again = LogManager([str(tmpfs_disk.path)], default_config=SMALL)
    try:
        reloaded = again.get("t", 0)
        assert reloaded is not None and not again.had_clean_shutdown
        assert reloaded.log_end_offset == appended
        assert [r.offset for r in read_all(reloaded)] == list(range(appended))
    finally:
        again.close()


def test_a_dir_that_fails_to_load_starts_offline(tmp_path: Path, ext4_disk: MountedDisk) -> None:
    """A dir whose loading fails with an OSError (here the disk failed while the broker was
    down: the first write of the start, the clean-shutdown marker's removal, meets EROFS)
    starts offline, as Kafka's loadLogs puts it in its offline dirs, and the other dir is
    served. Its logs, read before the failure was met, are offline too: never recreated."""
    healthy = tmp_path / "healthy"
    logs = LogManager([str(healthy), str(ext4_disk.path)], default_config=SMALL)
    fill(logs.get_or_create("t", 0), 5)
    fill(logs.get_or_create("t", 1), 5)
    logs.close()
    ext4_disk.fail()
    again = LogManager([str(healthy), str(ext4_disk.path)], default_config=SMALL)
    try:
        assert again.offline_dirs.keys() == {ext4_disk.path}
        assert "Read-only file system" in again.offline_dirs[ext4_disk.path]
        assert again.online_dirs == [healthy]
        a = again.get("t", 0)
        assert a is not None and a.log_end_offset == 15
        assert again.get("t", 1) is None and again.is_offline("t", 1)
        with pytest.raises(KafkaStorageException, match="offline"):
            again.get_or_create("t", 1)
        assert again.log_dir_of("t", 2) is None
        again.get_or_create("t", 2)  # a new log: in the dir still online
        assert again.log_dir_of("t", 2) == healthy
    finally:
        again.close()
    assert (healthy / CLEAN_SHUTDOWN_FILE).exists()


def test_a_replica_not_found_while_a_dir_is_offline_is_not_made_empty(tmp_path: Path) -> None:
    """At start (`new=False`) a log that is not found may be in the offline dir: creating it
    empty elsewhere would serve an empty replica, so it is offline (Kafka's getOrCreateLog
    with isNew false). A new replica (`new=True`, the default) is created online."""
    healthy, unusable = tmp_path / "healthy", tmp_path / "unusable"
    logs = LogManager([str(healthy), str(unusable)], default_config=SMALL,
                      offline_dirs={unusable: "not a directory"})
    try:
        assert not unusable.exists()  # never touched
        assert logs.online_dirs == [healthy]
        with pytest.raises(KafkaStorageException, match="are offline"):
            logs.get_or_create("old", 0, new=False)
        assert logs.is_offline("old", 0) and logs.offline_partitions(unusable) == [("old", 0)]
        with pytest.raises(KafkaStorageException):
            logs.get_or_create("old", 0)  # stays offline while the broker runs
        assert logs.get_or_create("fresh", 0).dir.parent == healthy
    finally:
        logs.close()
    assert not unusable.exists()
    again = LogManager([str(healthy), str(unusable)], default_config=SMALL)
    try:  # both dirs online: a replica not found is made (a topic created while down)
        assert again.get_or_create("old", 0, new=False).dir.parent == unusable
    finally:
        again.close()


def test_no_dir_left_online_at_start_is_an_error_naming_them(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with pytest.raises(OSError, match="all log dirs in .* have failed") as failed:
        LogManager([str(a), str(b)], offline_dirs={a: "why a", b: "why b"})
    assert f"{a}: why a" in str(failed.value) and f"{b}: why b" in str(failed.value)
