"""Offset and time indexes: entry formats, lookups, truncation, reload, corruption."""
from __future__ import annotations

import os
import struct
import threading
from pathlib import Path

import pytest

from pybroker.storage.abstract_index import CorruptIndexError
from pybroker.storage.offset_index import OffsetIndex
from pybroker.storage.time_index import TimeIndex


def test_offset_index_entries_are_kafka_format(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100)
    index.append(100, 0)
    index.append(110, 4096)
    index.close()
    data = (tmp_path / "00000000000000000100.index").read_bytes()
    assert data == struct.pack(">IIII", 0, 0, 10, 4096)


def test_offset_index_lookup_is_largest_entry_at_or_below(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "a.index", 1000)
    for i in range(1, 100):
        index.append(1000 + i * 10, i * 500)
    assert index.lookup(999) == (1000, 0)  # below the base
    assert index.lookup(1005) == (1000, 0)  # before the first entry
    assert index.lookup(1010) == (1010, 500)
    assert index.lookup(1019) == (1010, 500)
    assert index.lookup(1500) == (1500, 25000)
    assert index.lookup(10**12) == (1990, 49500)


def test_offset_index_ignores_non_increasing_entries(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "a.index", 0)
    index.append(10, 100)
    index.append(10, 200)
    index.append(5, 300)
    assert index.entries == 1


def test_offset_index_truncate_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    index = OffsetIndex(path, 0)
    for i in range(1, 11):
        index.append(i * 10, i * 100)
    index.write_pending()
    assert path.stat().st_size == 80
    index.truncate_to(55)  # keeps 10..50
    assert index.entries == 5
    assert path.stat().st_size == 40
    index.truncate_to(50)  # an entry at exactly 50 goes: its batch is being removed
    assert index.last_entry() == (40, 400)
    index.close()
    again = OffsetIndex(path, 0)
    assert again.entries == 4 and again.lookup(45) == (40, 400)


def test_offset_index_full(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "a.index", 0, max_index_size=24)
    for i in range(1, 4):
        index.append(i, i)
    assert index.is_full
    with pytest.raises(CorruptIndexError):
        index._append_entry(9, 9)


def test_torn_index_file_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    path.write_bytes(struct.pack(">II", 1, 1) + b"\x00\x01\x02")
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0).load()


def test_index_is_loaded_lazily(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    path.write_bytes(b"\x00" * 5)  # corrupt, but nobody has looked yet
    index = OffsetIndex(path, 0)
    with pytest.raises(CorruptIndexError):
        index.lookup(3)


def test_time_index_keeps_only_increasing_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000050.timeindex"
    index = TimeIndex(path, 50)
    index.maybe_append(1000, 50)
    index.maybe_append(1000, 60)  # not larger: skipped
    index.maybe_append(900, 70)  # smaller: skipped
    index.maybe_append(2000, 80)
    index.maybe_append(-1, 90)  # no timestamp: skipped
    assert index.entries == 2
    index.close()
    assert path.read_bytes() == struct.pack(">qIqI", 1000, 0, 2000, 30)


def test_time_index_lookup_and_truncate(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "a.timeindex", 0)
    for i in range(10):
        index.maybe_append(1000 + i * 100, i * 10)
    assert index.lookup(999) == (-1, 0)
    assert index.lookup(1000) == (1000, 0)
    assert index.lookup(1450) == (1400, 40)
    assert index.lookup(10**15) == (1900, 90)
    index.truncate_to(45)
    assert index.last_entry() == (1400, 40)
    index.close()
    again = TimeIndex(tmp_path / "a.timeindex", 0)
    assert again.entries == 5 and again.lookup(5000) == (1400, 40)


def test_an_index_fsync_in_a_worker_does_not_hold_up_other_indexes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A flush's fsync in a worker thread may take as long as the disk likes (seconds on a
    busy or failing disk); the event loop meanwhile writes, truncates and renames other
    indexes when it rolls or truncates a segment. Those serialise with file writes under one
    lock, which the fsync must not hold, or the loop stalls for as long as the fsync."""
    flushed = OffsetIndex(tmp_path / "a.index", 0)
    flushed.append(10, 100)
    rolled = OffsetIndex(tmp_path / "b.index", 0)
    for i in range(1, 5):
        rolled.append(i * 10, i * 100)
    rolled.write_pending()
    in_fsync, disk_done = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        in_fsync.set()
        disk_done.wait()
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    worker = threading.Thread(target=flushed.flush)
    worker.start()
    try:
        assert in_fsync.wait(10)
        loop = threading.Thread(target=lambda: (rolled.append(50, 500), rolled.truncate_to(30),
                                                rolled.write_pending(),
                                                rolled.rename(tmp_path / "b.index.deleted")))
        loop.start()
        loop.join(5)
        assert not loop.is_alive(), "the index writes waited for another index's fsync"
    finally:
        disk_done.set()
        worker.join(10)
    assert not worker.is_alive()
    assert (tmp_path / "b.index.deleted").read_bytes() == struct.pack(">IIII", 10, 100, 20, 200)
    assert (tmp_path / "a.index").read_bytes() == struct.pack(">II", 10, 100)


def test_a_truncation_during_a_flushs_fsync_leaves_the_index_to_sync_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fsync runs outside the lock, so the event loop may truncate the file while it runs;
    what the fsync covered is then unknown, and the next flush must fsync again."""
    index = OffsetIndex(tmp_path / "a.index", 0)
    for i in range(1, 5):
        index.append(i * 10, i * 100)
    in_fsync, disk_done = threading.Event(), threading.Event()
    synced: list[int] = []
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        synced.append(fd)
        if len(synced) == 1:
            in_fsync.set()
            disk_done.wait()
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    worker = threading.Thread(target=index.flush)
    worker.start()
    try:
        assert in_fsync.wait(10)
        index.truncate_to(30)
    finally:
        disk_done.set()
        worker.join(10)
    assert len(synced) == 1
    index.flush()
    assert len(synced) == 2  # the truncation after the first fsync's write was not covered
    index.flush()
    assert len(synced) == 2  # nothing changed since
    assert (tmp_path / "a.index").read_bytes() == struct.pack(">IIII", 10, 100, 20, 200)
