"""The log cleaner: newest value per key at its original offset, tombstones and their delete
horizon, the dirty ratio and compaction lags, compressed batches, the swap and its crash
safety, the checkpoint."""
from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from protocol.records.batch import (
    DELETE_HORIZON, LOG_APPEND_TIME, Compression, iter_batches, verify_crc,
)
from protocol.records.record import Record, build_batch, build_control_batch, decode_batch
from pybroker.storage.cleaner import CLEANER_CHECKPOINT, CleaningAborted, LogCleaner
from pybroker.storage.log_manager import LogManager
from pybroker.storage.partition_log import PartitionLog
from pybroker.storage.segment import CLEANED_SUFFIX, SWAP_SUFFIX
from tests.storage.compacted_logs import COMPACT, DAY, T0, as_map, open_logs, put, read_all
from tests.storage.util import files


def updates(plog: PartitionLog, n: int, keys: int, *, per_batch: int = 1,
            codec: Compression = Compression.NONE) -> dict[bytes, tuple[int, bytes, int]]:
    """n updates round-robin over `keys` keys; key -> (offset, value, timestamp) of the last."""
    latest: dict[bytes, tuple[int, bytes, int]] = {}
    i = 0
    while i < n:
        recs = [Record(b"key-%03d" % ((i + j) % keys), b"value-%06d" % (i + j),
                       headers=(("h", b"%d" % (i + j)),), timestamp=T0 + i + j)
                for j in range(min(per_batch, n - i))]
        info = plog.append(build_batch(recs, compression=codec), leader_epoch=0)
        for j, r in enumerate(recs):
            assert r.key is not None and r.value is not None and r.timestamp is not None
            latest[r.key] = (info.first_offset + j, r.value, r.timestamp)
        i += len(recs)
    plog.update_high_watermark()
    return latest


def log_files(plog: PartitionLog) -> list[str]:
    return sorted(os.listdir(plog.dir))


# -- what is kept ------------------------------------------------------------------------------

def test_ten_thousand_updates_over_100_keys_leave_the_100_newest(tmp_path: Path) -> None:
    logs = open_logs(tmp_path)
    plog = logs.get_or_create("t", 0)
    latest = updates(plog, 10_000, 100)
    plog.roll()  # the active segment is never cleaned: make it empty
    leo, segments_before, size_before = plog.log_end_offset, len(plog.segments), plog.size
    stats = LogCleaner(logs).clean_log(plog)
    assert stats is not None and stats.records_kept == 100 and stats.superseded == 9_900
    assert as_map(plog) == latest  # the newest value of each key, at its original offset
    assert plog.log_end_offset == leo and plog.log_start_offset == 0
    assert len(plog.segments) < segments_before // 20 and plog.size < size_before // 50
    assert not [n for n in log_files(plog) if n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX))]
    # Headers survive; every rewritten batch has a valid CRC; gaps are where records were.
    for r in read_all(plog):
        assert r.headers == (("h", r.value[len(b"value-"):].lstrip(b"0") or b"0"),)
    logs.close()
    again = open_logs(tmp_path)
    assert as_map(again.get("t", 0)) == latest
    assert (tmp_path / "logs" / CLEANER_CHECKPOINT).read_text() == "0\n1\nt 0 10000\n"


@pytest.mark.parametrize("codec", list(Compression))
def test_compressed_batches_keep_their_codec_and_fields(tmp_path: Path,
                                                        codec: Compression) -> None:
    logs = open_logs(tmp_path)
    plog = logs.get_or_create("t", 0)
    for i in range(40):  # idempotent-looking batches of 5: producer fields must survive
        recs = [Record(b"k%d" % ((i * 5 + j) % 7), b"v%d" % (i * 5 + j), timestamp=T0 + i)
                for j in range(5)]
        plog.append(build_batch(recs, compression=codec, producer_id=42, producer_epoch=3,
                                base_sequence=i * 5), leader_epoch=0)
    plog.update_high_watermark()
    plog.roll()
    expected = as_all(plog)
    LogCleaner(logs).clean_log(plog)
    got = read_all(plog)
    assert {r.key: (r.offset, r.value) for r in got} == expected
    assert len(got) == 7
    for seg in plog.segments[:-1]:
        data = seg.read(seg.base_offset, 1 << 20, max_offset=1 << 40)
        for pos, h in iter_batches(data.records if data else b""):
            assert h.compression is codec
            assert (h.producer_id, h.producer_epoch) == (42, 3)
            assert h.base_sequence % 5 == 0 and h.base_offset % 5 == 0  # batch base kept
            assert verify_crc(data.records, pos, h)
            assert h.records_count <= 5 and h.last_offset_delta < 5


def as_all(plog: PartitionLog) -> dict[bytes | None, tuple[int, bytes | None]]:
    """Newest (offset, value) per key, by reading everything (no cleaning)."""
    out: dict[bytes | None, tuple[int, bytes | None]] = {}
    for r in read_all(plog):
        out[r.key] = (r.offset, r.value)
    return out


def test_the_active_segment_is_never_touched(tmp_path: Path) -> None:
    logs = open_logs(tmp_path)
    plog = logs.get_or_create("t", 0)
    updates(plog, 3_000, 10)
    active = plog.active_segment
    active_bytes = active.log_path.read_bytes()
    LogCleaner(logs).clean_log(plog)
    assert plog.active_segment is active and active.log_path.read_bytes() == active_bytes
    # Below the active segment each key appears once; the active segment may repeat it.
    below = [r for r in read_all(plog) if r.offset < active.base_offset]
    assert len({r.key for r in below}) == len(below) <= 10


def test_records_without_key_are_dropped_and_control_batches_kept(tmp_path: Path) -> None:
    logs = open_logs(tmp_path)
    plog = logs.get_or_create("t", 0)
    put(plog, None, b"no key")
    put(plog, b"a", b"1")
    plog.append(build_control_batch(7, 0, True, 0, T0), leader_epoch=0)
    put(plog, b"a", b"2")
    plog.update_high_watermark()
    plog.roll()
    stats = LogCleaner(logs).clean_log(plog)
    assert stats is not None and stats.keyless_removed == 1
    data = plog.read(0, 1 << 20).records
    kinds = [(h.base_offset, h.is_control) for _, h in iter_batches(data)]
    assert kinds == [(2, True), (3, False)]


def test_log_append_time_batches_keep_their_timestamp(tmp_path: Path) -> None:
    config = dataclasses.replace(COMPACT, message_timestamp_type="LogAppendTime")
    logs = open_logs(tmp_path, config)
    plog = logs.get_or_create("t", 0)
    plog.append(build_batch([Record(b"a", b"1", timestamp=1), Record(b"b", b"1", timestamp=2)]),
                leader_epoch=0, log_append_time=T0)
    put(plog, b"a", b"2")
    plog.roll()
    LogCleaner(logs).clean_log(plog)
    data = plog.read(0, 1 << 20).records
    first = next(iter_batches(data))[1]
    assert first.timestamp_type == LOG_APPEND_TIME and first.max_timestamp == T0
    assert [(r.key, r.timestamp) for r in decode_batch(data)] == [(b"b", T0)]


# -- tombstones --------------------------------------------------------------------------------

def test_tombstones_stay_for_delete_retention_then_disappear(tmp_path: Path) -> None:
    config = dataclasses.replace(COMPACT, delete_retention_ms=DAY)
    logs = open_logs(tmp_path, config)
    plog = logs.get_or_create("t", 0)
    updates(plog, 200, 20)
    dead = [b"key-%03d" % i for i in range(0, 20, 2)]
    for key in dead:
        put(plog, key, None, ts=T0 + 1000)
    plog.roll()
    cleaner = LogCleaner(logs)
    now = T0 + 10_000
    first = cleaner.clean_log(plog, now)
    assert first is not None and first.tombstones_removed == 0
    kept = as_map(plog)
    assert len(kept) == 20 and all(kept[k][1] is None for k in dead)
    assert all(kept[k][2] == T0 + 1000 for k in dead)  # record timestamps survive re-basing
    # The batches holding them carry the delete horizon: now + delete.retention.ms.
    data = b"".join(seg.read(seg.base_offset, 1 << 20, max_offset=1 << 40).records
                    for seg in plog.segments[:-1] if not seg.is_empty)
    horizons = {h.base_timestamp for _, h in iter_batches(data) if h.attributes & DELETE_HORIZON}
    assert horizons == {now + DAY}
    # Before the horizon nothing needs cleaning; at it, the log is cleaned without new writes.
    assert cleaner.plan(plog, now + DAY - 1) is None
    second = cleaner.clean_all(now + DAY)
    assert [s.tombstones_removed for s in second] == [10]
    assert set(as_map(plog)) == {b"key-%03d" % i for i in range(1, 20, 2)}
    assert cleaner.plan(plog, now + 2 * DAY) is None  # no tombstone left to wait for


def test_a_tombstone_superseded_by_a_new_value_goes_at_once(tmp_path: Path) -> None:
    logs = open_logs(tmp_path)
    plog = logs.get_or_create("t", 0)
    put(plog, b"a", b"1")
    put(plog, b"a", None)
    put(plog, b"a", b"3")
    plog.roll()
    LogCleaner(logs).clean_log(plog, T0)
    assert as_map(plog) == {b"a": (2, b"3", T0)}


# -- when to clean -----------------------------------------------------------------------------

def test_min_cleanable_dirty_ratio(tmp_path: Path) -> None:
    logs = open_logs(tmp_path, dataclasses.replace(COMPACT, min_cleanable_dirty_ratio=0.5))
    plog = logs.get_or_create("t", 0)
    cleaner = LogCleaner(logs)
    updates(plog, 2_000, 2_000)  # all distinct keys: cleaning keeps everything
    plog.roll()
    assert cleaner.clean_log(plog) is not None  # all dirty: ratio 1
    clean_size = plog.size
    put(plog, b"x", b"1")
    plog.roll()
    plan = cleaner.plan(plog)
    assert plan is None  # a few dirty bytes over a large clean log: ratio ~0
    updates(plog, 3_000, 3_000)
    plog.roll()
    plan = cleaner.plan(plog)
    assert plan is not None and plan.dirty_ratio > 0.5
    assert plan.clean_bytes == clean_size
    plan.close()


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path: Path) -> None:
    config = dataclasses.replace(COMPACT, min_compaction_lag_ms=60_000)
    logs = open_logs(tmp_path, config)
    plog = logs.get_or_create("t", 0)
    for i in range(300):  # timestamps T0 .. T0 + 299s
        put(plog, b"k%d" % (i % 3), b"v%d" % i, ts=T0 + i * 1000)
    plog.roll()
    stats = LogCleaner(logs).clean_log(plog, now_ms=T0 + 200_000)
    assert stats is not None
    # Only segments whose newest record is older than now - 60 s were cleaned.
    assert 0 < stats.end_offset <= 141
    young = [r for r in read_all(plog) if r.offset >= stats.end_offset]
    assert len(young) == 300 - stats.end_offset
    # Every record younger than the lag (offsets 141..299) is still there.
    assert set(range(141, 300)) <= {r.offset for r in young}


def test_max_compaction_lag_forces_cleaning_below_the_ratio(tmp_path: Path) -> None:
    config = dataclasses.replace(COMPACT, min_cleanable_dirty_ratio=0.99,
                                 max_compaction_lag_ms=60_000)
    logs = open_logs(tmp_path, config)
    plog = logs.get_or_create("t", 0)
    cleaner = LogCleaner(logs)
    updates(plog, 2_000, 2_000)
    plog.roll()
    assert cleaner.clean_log(plog, now_ms=T0) is not None  # ratio 1 > 0.99
    put(plog, b"key-000", b"again", ts=T0 + 10_000)
    plog.roll()
    assert cleaner.plan(plog, now_ms=T0 + 20_000) is None
    stats = cleaner.clean_log(plog, now_ms=T0 + 71_000)
    assert stats is not None and stats.superseded == 1


def test_delete_policy_logs_are_left_alone(tmp_path: Path) -> None:
    logs = open_logs(tmp_path, dataclasses.replace(COMPACT, cleanup_policy="delete"))
    plog = logs.get_or_create("t", 0)
    updates(plog, 500, 5)
    plog.roll()
    assert LogCleaner(logs).clean_all() == []
    assert len(read_all(plog)) == 500


def test_compact_delete_logs_are_cleaned(tmp_path: Path) -> None:
    logs = open_logs(tmp_path, dataclasses.replace(COMPACT, cleanup_policy="compact,delete"))
    plog = logs.get_or_create("t", 0)
    latest = updates(plog, 500, 5)
    plog.roll()
    assert [s.records_kept for s in LogCleaner(logs).clean_all()] == [5]
    assert {k: v[:2] for k, v in as_map(plog).items()} == {k: v[:2] for k, v in latest.items()}


def test_records_above_the_high_watermark_are_not_cleaned(tmp_path: Path) -> None:
    logs = open_logs(tmp_path)
    plog = logs.get_or_create("t", 0)
    updates(plog, 1_000, 10)
    plog.update_high_watermark(500)
    plog.roll()
    stats = LogCleaner(logs).clean_log(plog)
    assert stats is not None and stats.end_offset <= 500
    assert len([r for r in read_all(plog) if r.offset >= stats.end_offset]) == \
        1_000 - stats.end_offset


def test_map_capacity_cleans_in_several_passes(tmp_path: Path) -> None:
    logs = open_logs(tmp_path)
    plog = logs.get_or_create("t", 0)
    latest = updates(plog, 3_000, 300)
    plog.roll()
    cleaner = LogCleaner(logs, max_map_entries=100)
    ends = []
    while (stats := cleaner.clean_log(plog)) is not None:
        ends.append(stats.end_offset)
        assert len(ends) < 100
    assert ends == sorted(ends) and len(ends) > 2 and ends[-1] == 3_000
    assert as_map(plog) == latest


# -- checkpoint --------------------------------------------------------------------------------

def test_checkpoint_survives_a_restart_and_resets_for_a_new_log(tmp_path: Path) -> None:
    logs = open_logs(tmp_path)
    plog = logs.get_or_create("t", 0)
    updates(plog, 1_000, 10)
    plog.roll()
    cleaner = LogCleaner(logs)
    cleaner.clean_log(plog)
    assert cleaner.first_dirty_offset(plog) == 1_000
    logs.close()
    logs = open_logs(tmp_path)
    cleaner = LogCleaner(logs)
    plog = logs.get("t", 0)
    assert cleaner.first_dirty_offset(plog) == 1_000
    logs.delete("t", 0)
    fresh = logs.get_or_create("t", 0)
    updates(fresh, 2_000, 10)
    assert cleaner.first_dirty_offset(fresh) == 0  # a new log under an old name


def _planned(logs: LogManager) -> tuple[PartitionLog, LogCleaner, Any, dict]:
    """Partition t-0 with 2,000 updates over 10 keys, rolled, and the cleaner's plan for it;
    `latest` is what `updates` returns."""
    plog = logs.get_or_create("t", 0)
    latest = updates(plog, 2_000, 10)
    plog.roll()
    cleaner = LogCleaner(logs)
    plan = cleaner.plan(plog)
    assert plan is not None
    return plog, cleaner, plan, latest


# -- the swap: readers and concurrent changes ---------------------------------------------------

def test_reads_see_old_segments_until_commit(tmp_path: Path) -> None:
    logs = open_logs(tmp_path)
    plog, cleaner, plan, latest = _planned(logs)
    done = threading.Event()
    box = {}

    def work() -> None:
        box["result"] = cleaner.clean(plan)
        done.set()

    worker = threading.Thread(target=work)
    worker.start()
    while not done.is_set():  # reads and appends carry on while the worker cleans
        assert len(read_all(plog)) >= 2_000
    worker.join()
    assert len(read_all(plog)) == 2_000  # not swapped yet
    put(plog, b"late", b"1")
    assert cleaner.commit(box["result"]) is not None
    got = as_map(plog)
    assert {k: v for k, v in got.items() if k != b"late"} == latest
    assert got[b"late"][0] == 2_000


def test_retention_during_cleaning_discards_that_group(tmp_path: Path) -> None:
    config = dataclasses.replace(COMPACT, cleanup_policy="compact,delete", retention_ms=1000)
    logs = open_logs(tmp_path, config)
    plog, cleaner, plan, _ = _planned(logs)
    result = cleaner.clean(plan)
    assert plog.delete_old_segments(now_ms=T0 + 10**9) > 0  # retention wins the race
    stats = cleaner.commit(result)
    assert stats is not None
    assert not [n for n in log_files(plog) if n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX))]
    assert cleaner.first_dirty_offset(plog) == plog.log_start_offset  # not advanced
    assert read_all(plog) == []


def test_stop_aborts_and_leaves_no_files(tmp_path: Path) -> None:
    logs = open_logs(tmp_path)
    plog, cleaner, plan, _ = _planned(logs)
    stop = threading.Event()
    stop.set()
    result = cleaner.clean(plan, stop)
    assert isinstance(result.error, CleaningAborted)
    assert cleaner.commit(result) is None
    assert not [n for n in log_files(plog) if n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX))]
    assert len(read_all(plog)) == 2_000
    assert cleaner.clean_log(plog) is not None  # an abort does not make the log uncleanable


def test_a_corrupt_segment_makes_the_log_uncleanable_not_the_broker_fail(
        tmp_path: Path) -> None:
    logs = open_logs(tmp_path)
    plog = logs.get_or_create("t", 0)
    other = logs.get_or_create("u", 0)
    updates(plog, 500, 10)
    updates(other, 500, 10)
    plog.roll()
    other.roll()
    path = plog.segments[0].log_path
    data = bytearray(path.read_bytes())
    data[61] = 0x7F  # the first record's length varint: records no longer parse
    path.write_bytes(data)
    cleaner = LogCleaner(logs)
    cleaned = cleaner.clean_all()
    assert [(s.topic, s.records_kept) for s in cleaned] == [("u", 10)]
    assert cleaner.plan(plog) is None  # left alone until restart
    assert not [n for n in log_files(plog) if n.endswith(CLEANED_SUFFIX)]


# -- crash safety ------------------------------------------------------------------------------

def _cleaned_but_not_swapped(tmp_path: Path) -> tuple[LogManager, PartitionLog, list, dict]:
    logs = open_logs(tmp_path)
    plog, cleaner, plan, latest = _planned(logs)
    result = cleaner.clean(plan)
    assert result.error is None
    return logs, plog, [g for g in result.groups if g.cleaned is not None], latest


def test_crash_before_the_commit_point_keeps_the_old_segments(tmp_path: Path) -> None:
    logs, plog, groups, _ = _cleaned_but_not_swapped(tmp_path)
    for group in groups:  # the files as they were before the worker's rename to .swap
        group.cleaned.change_file_suffixes(SWAP_SUFFIX, CLEANED_SUFFIX)
        group.cleaned.close()
    assert [n for n in log_files(plog) if n.endswith(CLEANED_SUFFIX)]
    directory = plog.dir
    logs.close()  # a crash: the .cleaned files are left behind
    again = PartitionLog(directory, COMPACT)
    assert len(read_all(again)) == 2_000
    assert not [n for n in os.listdir(directory) if n.endswith(CLEANED_SUFFIX)]


@pytest.mark.parametrize("old_renamed", [False, True])
def test_crash_after_the_commit_point_completes_the_swap(tmp_path: Path,
                                                         old_renamed: bool) -> None:
    logs, plog, groups, latest = _cleaned_but_not_swapped(tmp_path)
    directory = plog.dir
    assert [n for n in log_files(plog) if n.endswith(SWAP_SUFFIX)]  # clean() ends committed
    for group in groups:  # then what replace_segments does, up to a crash
        group.cleaned.close()
        if old_renamed:
            for src in group.sources:
                src.segment.rename_for_deletion()
    for seg in plog.segments:
        seg.close()
    again = PartitionLog(directory, COMPACT, had_clean_shutdown=False)
    assert {r.key: (r.offset, r.value) for r in read_all(again)} == \
        {k: v[:2] for k, v in latest.items()}
    assert len(read_all(again)) == 10
    names = os.listdir(directory)
    assert not [n for n in names if n.endswith((SWAP_SUFFIX, CLEANED_SUFFIX, ".deleted"))]
    assert again.log_end_offset == 2_000
    assert again.append(build_batch([Record(b"k", b"v")]), leader_epoch=0).first_offset == 2_000


def test_merged_segments_lose_their_files_and_snapshots(tmp_path: Path) -> None:
    logs = open_logs(tmp_path)
    plog = logs.get_or_create("t", 0)
    updates(plog, 5_000, 5)
    plog.roll()
    before = len(files(plog.dir, ".snapshot"))
    LogCleaner(logs).clean_log(plog)
    assert len(plog.segments) == 2
    assert files(plog.dir, ".log") == [s.log_path.name for s in plog.segments]
    assert len(files(plog.dir, ".snapshot")) < before
    assert files(plog.dir, ".snapshot")[-1] == \
        f"{plog.active_segment.base_offset:020d}.snapshot"


def test_loading_removes_swap_indexes_without_their_log(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", COMPACT)
    put(plog, b"a", b"1")
    plog.close()
    stray = tmp_path / "t-0" / ("00000000000000000000.index" + SWAP_SUFFIX)
    stray.write_bytes(b"\0" * 8)
    again = PartitionLog(tmp_path / "t-0", COMPACT)
    assert not stray.exists() and [r.value for r in read_all(again)] == [b"1"]


def test_replace_segments_takes_cleaned_files_through_the_commit_point(tmp_path: Path) -> None:
    logs, plog, groups, latest = _cleaned_but_not_swapped(tmp_path)
    for group in groups:
        group.cleaned.change_file_suffixes(SWAP_SUFFIX, CLEANED_SUFFIX)
        old = [src.segment for src in group.sources]
        assert not plog.replace_segments(group.cleaned, old[1:] or [plog.active_segment])
        assert plog.replace_segments(group.cleaned, old)
    assert {r.key: (r.offset, r.value) for r in read_all(plog)} == \
        {k: v[:2] for k, v in latest.items()}
    assert not [n for n in log_files(plog) if n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX))]


def test_io_chunk_bounds_every_read_but_a_larger_batch(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """log.cleaner.io.buffer.size: the cleaner reads segments in chunks of size / threads / 2
    (Kafka's per-thread read buffer); a batch larger than a chunk is still read whole."""
    import pybroker.storage.cleaner as cleaner_module

    assert LogCleaner.io_chunk_for(524288, 1) == 262144
    assert LogCleaner.io_chunk_for(524288, 4) == 65536
    logs = open_logs(tmp_path, dataclasses.replace(COMPACT, segment_bytes=1 << 20))
    plog = logs.get_or_create("t", 0)
    latest = updates(plog, 2_000, 50, per_batch=10)
    big = b"B" * 20_000
    latest[b"big"] = (put(plog, b"big", big), big, T0)
    plog.roll()
    reads: list[int] = []
    real_pread = os.pread

    def pread(fd: int, n: int, offset: int) -> bytes:
        data = real_pread(fd, n, offset)
        reads.append(len(data))
        return data

    monkeypatch.setattr(cleaner_module.os, "pread", pread)
    assert LogCleaner(logs, io_chunk=4096).clean_log(plog) is not None
    monkeypatch.undo()
    assert plog.segments[0].size > 4096 * 4  # what used to be read in one go
    assert max(reads) > 20_000  # the big batch, whole
    assert {n for n in reads if n > 4096} == {max(reads)}
    assert {k: (o, v) for k, (o, v, _) in as_map(plog).items()} == \
        {k: (o, v) for k, (o, v, _) in latest.items()}
