"""PartitionLog: append and read across rolls, offsets, fetch limits, timestamps, truncation."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from protocol.records.batch import (
    BatchHeader, CorruptRecordError, InvalidRecordError, iter_batches, verify_crc,
)
from protocol.records.record import decode_batch
from pybroker.storage.log_config import LogConfig
from pybroker.storage.partition_log import (
    MessageTooLarge, OffsetOutOfRange, PartitionLog, UnexpectedAppendOffset,
    parse_topic_partition,
)
from tests.storage.util import SMALL, batch, batch_offsets, files, fill, read_all


def open_log(tmp_path: Path, config: LogConfig = SMALL, name: str = "topic-0",
             **kw: object) -> PartitionLog:
    return PartitionLog(tmp_path / name, config, **kw)  # type: ignore[arg-type]


def test_parse_topic_partition() -> None:
    assert parse_topic_partition("my-topic-with-dashes-12") == ("my-topic-with-dashes", 12)
    for bad in ("nodash", "topic-", "topic-x", "t-0.abc-delete", "-3"):
        with pytest.raises(ValueError):
            parse_topic_partition(bad)


def test_round_trip_across_rolls(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 60)
    assert plog.log_end_offset == 180
    assert len(plog.segments) > 4
    assert files(plog.dir, ".log")[0] == "00000000000000000000.log"
    # Each segment is named by its first offset and stays under segment.bytes.
    for segment, following in zip(plog.segments, plog.segments[1:]):
        assert segment.read_next_offset() == following.base_offset
        assert segment.size <= SMALL.segment_bytes
    records = read_all(plog)
    assert [r.offset for r in records] == list(range(180))
    assert [r.timestamp for r in records] == list(range(1000, 1180))
    assert records[7].value == b"B" * 100


def test_offsets_assigned_and_patched(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    first = plog.append(batch(5, base_offset=999), leader_epoch=7)
    second = plog.append(batch(2) + batch(3), leader_epoch=7)  # two batches in one append
    assert (first.first_offset, first.last_offset) == (0, 4)
    assert (second.first_offset, second.last_offset, second.num_messages) == (5, 9, 5)
    data = plog.read(0, 100_000).records
    headers = [h for _, h in iter_batches(data)]
    assert [(h.base_offset, h.last_offset) for h in headers] == [(0, 4), (5, 6), (7, 9)]
    assert {h.partition_leader_epoch for h in headers} == {7}
    for pos, h in iter_batches(data):
        assert verify_crc(data, pos, h)


def test_bytearray_is_patched_in_place_and_bytes_are_not(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.append(batch(1), leader_epoch=0)
    raw = batch(1)
    plog.append(raw, leader_epoch=0)
    assert BatchHeader.unpack_from(raw).base_offset == 0
    buf = bytearray(batch(1))
    plog.append(buf, leader_epoch=0)
    assert BatchHeader.unpack_from(buf).base_offset == 2


def test_invalid_batches_rejected_and_nothing_written(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    bad_crc = bytearray(batch(2))
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        plog.append(bad_crc, leader_epoch=0)
    with pytest.raises(InvalidRecordError):
        plog.append(batch(2)[:-3], leader_epoch=0)
    with pytest.raises(MessageTooLarge):
        open_log(tmp_path, dataclasses.replace(SMALL, max_message_bytes=200), "big-0") \
            .append(batch(3), leader_epoch=0)
    assert plog.log_end_offset == 0 and plog.size == 0


def test_first_batch_whole_even_if_larger_than_max_bytes(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for _ in range(3):
        plog.append(batch(10), leader_epoch=0)
    size = BatchHeader.unpack_from(batch(10)).size
    data = plog.read(0, 100)
    assert len(data.records) == size and batch_offsets(data.records) == [(0, 9)]
    assert plog.read(0, 100, min_one_message=False).records == b""
    # Otherwise only whole batches that fit.
    assert batch_offsets(plog.read(0, 2 * size + 50).records) == [(0, 9), (10, 19)]
    # A fetch offset inside a batch returns that whole batch.
    assert batch_offsets(plog.read(15, 10**6).records) == [(10, 19), (20, 29)]


def test_max_offset_respected(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 10)  # batches of 3
    data = plog.read(0, 10**6, max_offset=9)
    assert batch_offsets(data.records) == [(0, 2), (3, 5), (6, 8)]
    assert data.next_offset == 9
    # A batch straddling max_offset is withheld, as Kafka's position limit does.
    assert batch_offsets(plog.read(0, 10**6, max_offset=10).records)[-1] == (6, 8)
    empty = plog.read(9, 10**6, max_offset=9)
    assert empty.records == b"" and empty.first_offset == -1


def test_consumers_read_up_to_high_watermark(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.append(batch(3), leader_epoch=0)
    assert plog.high_watermark == 0
    assert plog.read(0, 10**6, max_offset=plog.high_watermark).records == b""
    assert plog.read(0, 10**6).records  # a replica reads to the log end
    assert plog.update_high_watermark() == 3
    assert plog.last_stable_offset == 3
    assert batch_offsets(plog.read(0, 10**6, max_offset=plog.high_watermark).records) == [(0, 2)]


def test_offset_out_of_range(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 4)
    with pytest.raises(OffsetOutOfRange):
        plog.read(13, 1000)
    with pytest.raises(OffsetOutOfRange):
        plog.read(-1, 1000)
    assert plog.read(12, 1000).records == b""  # the log end itself is a valid, empty read
    plog.delete_records_before(6)
    with pytest.raises(OffsetOutOfRange) as exc:
        plog.read(5, 1000)
    assert exc.value.log_start_offset == 6


def test_offset_for_timestamp_is_exact(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    # Out-of-order timestamps inside batches: the answer is the first record in offset order
    # whose timestamp is >= the target, not the first batch.
    plog.append(batch(4, ts=[100, 300, 200, 150]), leader_epoch=0)
    plog.append(batch(3, ts=[250, 400, 50]), leader_epoch=0)
    fill(plog, 80, ts0=1_000)  # several segments, increasing timestamps
    assert plog.offset_for_timestamp(0) == (0, 100)
    assert plog.offset_for_timestamp(101) == (1, 300)
    assert plog.offset_for_timestamp(301) == (5, 400)
    assert plog.offset_for_timestamp(401) == (7, 1000)
    for target in (1000, 1001, 1057, 1123, 1239):
        assert plog.offset_for_timestamp(target) == (7 + target - 1000, target)
    assert plog.offset_for_timestamp(1240) is None
    assert plog.offset_for_timestamp(1200, max_offset=100) is None
    assert plog.offset_of_max_timestamp() == (246, 1239)


def test_offset_for_timestamp_after_reopen_and_delete_records(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 50, ts0=5_000)
    plog.close()
    plog = open_log(tmp_path, high_watermark=150)
    assert plog.offset_for_timestamp(5_077) == (77, 5_077)
    plog.delete_records_before(80)
    assert plog.offset_for_timestamp(5_000) == (80, 5_080)


def test_log_append_time(tmp_path: Path) -> None:
    config = dataclasses.replace(SMALL, message_timestamp_type="LogAppendTime")
    plog = open_log(tmp_path, config)
    info = plog.append(batch(3, ts=[1, 2, 3]), leader_epoch=0, log_append_time=77_000)
    assert info.log_append_time == 77_000 and info.max_timestamp == 77_000
    data = plog.read(0, 10**6).records
    header = BatchHeader.unpack_from(data)
    assert header.timestamp_type == 1 and verify_crc(data, 0, header)
    assert [r.timestamp for r in decode_batch(data)] == [77_000] * 3
    assert plog.offset_for_timestamp(5_000) == (0, 77_000)
    # CreateTime topics keep the producer's timestamps.
    other = open_log(tmp_path, name="create-0")
    assert other.append(batch(1, ts=5), leader_epoch=0, log_append_time=9).log_append_time == -1


def test_reopen_keeps_everything(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 50, epoch=3)
    before = (plog.log_end_offset, [s.base_offset for s in plog.segments], read_all(plog))
    plog.close()
    again = open_log(tmp_path, recovery_point=150, high_watermark=150)
    assert (again.log_end_offset, [s.base_offset for s in again.segments],
            read_all(again)) == before
    assert again.high_watermark == 150 and again.latest_epoch == 3
    info = again.append(batch(2), leader_epoch=3)
    assert info.first_offset == 150


def test_segment_ms_rolls_by_record_timestamps(tmp_path: Path) -> None:
    config = dataclasses.replace(SMALL, segment_bytes=10**9, segment_ms=1000)
    plog = open_log(tmp_path, config)
    plog.append(batch(1, ts=10_000), leader_epoch=0)
    plog.append(batch(1, ts=10_900), leader_epoch=0)
    assert len(plog.segments) == 1
    plog.append(batch(1, ts=11_001), leader_epoch=0)
    assert [s.base_offset for s in plog.segments] == [0, 2]


def test_segment_jitter_ms_takes_a_random_part_off_the_roll_age(tmp_path: Path) -> None:
    """Each segment draws its jitter once, in [0, min(segment.jitter.ms, segment.ms)), and
    rolls once its records span more than segment.ms minus that."""
    config = dataclasses.replace(SMALL, segment_bytes=10**9, segment_ms=1000,
                                 segment_jitter_ms=5000)
    jitters = set()
    for n in range(20):
        plog = open_log(tmp_path, config, name=f"jitter-{n}")
        jitter = plog.active_segment.roll_jitter_ms
        assert 0 <= jitter < 1000
        jitters.add(jitter)
        plog.append(batch(1, ts=10_000), leader_epoch=0)
        plog.append(batch(1, ts=10_000 + 1000 - jitter), leader_epoch=0)  # not more: kept
        assert len(plog.segments) == 1
        plog.append(batch(1, ts=10_000 + 1000 - jitter + 1), leader_epoch=0)
        assert [s.base_offset for s in plog.segments] == [0, 2]
    assert len(jitters) > 1  # drawn per segment, not fixed
    assert open_log(tmp_path, dataclasses.replace(config, segment_jitter_ms=0),
                    name="no-jitter-0").active_segment.roll_jitter_ms == 0


def test_roll_when_offsets_overflow_relative_index(tmp_path: Path) -> None:
    plog = open_log(tmp_path, dataclasses.replace(SMALL, segment_bytes=10**9))
    plog.append(batch(1), leader_epoch=0)
    follower_batch = bytearray(batch(1))
    follower_batch[0:8] = (2**31 + 5).to_bytes(8, "big")
    plog.append_as_follower(follower_batch)
    assert [s.base_offset for s in plog.segments] == [0, 2**31 + 5]
    assert plog.log_end_offset == 2**31 + 6


def test_index_sparseness(tmp_path: Path) -> None:
    config = LogConfig(index_interval_bytes=4096)
    plog = open_log(tmp_path, config)
    for _ in range(200):
        plog.append(batch(8, value_size=100), leader_epoch=0)  # ~1 KB batches
    segment = plog.active_segment
    expected = segment.size / (4096 + 1000)
    assert 0.7 * expected <= segment.offset_index.entries <= expected * 1.3
    # The file gets the entries when the log is flushed (or rolls, or closes).
    assert not segment.offset_index.path.exists()
    plog.flush()
    assert segment.offset_index.path.stat().st_size == 8 * segment.offset_index.entries


def test_truncate_to(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 30, epoch=1)
    plog.append(batch(3), leader_epoch=2)
    fill(plog, 30, epoch=3)
    plog.update_high_watermark()
    assert plog.truncate_to(60)
    assert plog.log_end_offset == 60 and plog.high_watermark == 60
    assert plog.active_segment.read_next_offset() == 60
    assert all(s.base_offset <= 60 for s in plog.segments)
    assert [e.epoch for e in plog.leader_epoch_cache.entries] == [1]
    assert [r.offset for r in read_all(plog)] == list(range(60))
    assert plog.append(batch(2), leader_epoch=4).first_offset == 60
    assert not plog.truncate_to(1000)
    plog.close()
    again = open_log(tmp_path)
    assert again.log_end_offset == 62


def test_truncate_to_segment_boundary_and_fully(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 40)
    boundary = plog.segments[2].base_offset
    plog.truncate_to(boundary)
    assert plog.log_end_offset == boundary
    assert plog.active_segment.base_offset in (boundary, plog.segments[-1].base_offset)
    plog.truncate_fully_and_start_at(500)
    assert [s.base_offset for s in plog.segments] == [500]
    assert (plog.log_start_offset, plog.high_watermark, plog.log_end_offset) == (500, 500, 500)
    assert files(plog.dir, ".log") == ["00000000000000000500.log"]
    assert plog.append(batch(1), leader_epoch=0).first_offset == 500


def test_follower_append_keeps_offsets(tmp_path: Path) -> None:
    leader = open_log(tmp_path, name="leader-0")
    fill(leader, 20, epoch=5)
    follower = open_log(tmp_path, name="follower-0")
    offset = 0
    while offset < leader.log_end_offset:
        data = leader.read(offset, 700)
        follower.append_as_follower(data.records)
        offset = data.next_offset
    assert follower.log_end_offset == leader.log_end_offset
    assert read_all(follower) == read_all(leader)
    assert follower.end_offset_for_epoch(5) == (5, 60)
    with pytest.raises(UnexpectedAppendOffset):
        follower.append_as_follower(leader.read(0, 1000).records)


def test_delete_records_before(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 40)
    third = plog.segments[2].base_offset
    assert plog.delete_records_before(third + 1) == third + 1
    assert plog.segments[0].base_offset == third
    assert read_all(plog)[0].offset == third + 1
    with pytest.raises(OffsetOutOfRange):
        plog.delete_records_before(plog.high_watermark + 1)


def test_flush_moves_recovery_point(tmp_path: Path) -> None:
    plog = open_log(tmp_path, dataclasses.replace(SMALL, flush_messages=10))
    plog.append(batch(4), leader_epoch=0)
    assert plog.recovery_point == 0 and plog.unflushed_messages == 4
    plog.append(batch(6), leader_epoch=0)  # reaches flush.messages
    assert plog.recovery_point == 10 and plog.unflushed_messages == 0

    lazy = open_log(tmp_path, name="lazy-0")  # flush.messages and flush.ms unlimited
    lazy.append(batch(1), leader_epoch=0)
    assert not lazy.maybe_flush(now_ms=10**12)
    fill(lazy, 30)  # rolls: the periodic flush syncs rolled segments whatever flush.ms says
    assert lazy.maybe_flush(now_ms=0)
    assert lazy.recovery_point == lazy.active_segment.base_offset < lazy.log_end_offset
    assert not lazy.maybe_flush(now_ms=0)
    timed = open_log(tmp_path, dataclasses.replace(SMALL, flush_ms=1000), name="timed-0")
    timed.append(batch(1), leader_epoch=0)
    assert not timed.maybe_flush(now_ms=timed.last_flush_ms + 999)
    assert timed.maybe_flush(now_ms=timed.last_flush_ms + 1000)
    assert timed.recovery_point == 1


def test_flush_in_a_worker_thread_while_appending(tmp_path: Path) -> None:
    """The broker runs flush in a thread: it must tolerate rolls, retention and close."""
    import threading

    plog = open_log(tmp_path, dataclasses.replace(SMALL, retention_ms=0))
    errors: list[BaseException] = []
    stop = threading.Event()

    def flusher() -> None:
        try:
            while not stop.is_set():
                plog.flush()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for round_ in range(20):
            fill(plog, 10, ts0=round_ * 100)
            plog.delete_old_segments(now_ms=10**13)
    finally:
        stop.set()
        thread.join()
    plog.close()
    assert not errors
    assert read_all(open_log(tmp_path))[-1].offset == 599
