"""Records inside batches: round trips through every codec, timestamps, control records and
strict decoding."""
from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KpBatch

from protocol.records import (
    BatchHeader, Compression, ControlType, CorruptRecordError, DecodedRecord,
    InvalidRecordError, Record, build_batch, build_control_batch, decode_batch,
    decode_control_record, decode_records, encode_records, iter_records_in,
    set_log_append_time,
)
from protocol.records.record import get_varint, put_varint

keys = st.none() | st.binary(max_size=40)
values = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=20)),
                   max_size=3).map(tuple)
timestamps = st.integers(min_value=0, max_value=2**45)
record_lists = st.lists(st.builds(Record, keys, values, headers, timestamps),
                        min_size=1, max_size=30)


@pytest.mark.parametrize("codec", list(Compression))
@settings(max_examples=60, deadline=None)
@given(records=record_lists, base_offset=st.integers(0, 2**40))
def test_round_trip_random_records(codec: Compression, records: list[Record],
                                   base_offset: int) -> None:
    data = build_batch(records, base_offset=base_offset, compression=codec)
    header = BatchHeader.unpack_from(data)
    assert header.records_count == len(records) and header.size == len(data)
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert decode_batch(data, check_crc=True) == [
        DecodedRecord(base_offset + i, r.timestamp, r.key, r.value, r.headers)
        for i, r in enumerate(records)]


@settings(max_examples=60, deadline=None)
@given(records=record_lists)
def test_random_records_read_in_kafka_python(records: list[Record]) -> None:
    batch = KpBatch(build_batch(records))
    assert batch.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch] == [
        (i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)]


@given(st.integers(-2**63, 2**63 - 1))
def test_varint_round_trip(value: int) -> None:
    out = bytearray()
    put_varint(out, value)
    assert len(out) <= 10
    assert get_varint(bytes(out), 0) == (value, len(out))


@pytest.mark.parametrize(("value", "encoded"), [
    (0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"), (64, b"\x80\x01"),
    (300, b"\xd8\x04"), (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
    (-2**63, b"\xff" * 9 + b"\x01"),
])
def test_varint_golden(value: int, encoded: bytes) -> None:
    out = bytearray()
    put_varint(out, value)
    assert bytes(out) == encoded


def test_known_record_bytes() -> None:
    body = encode_records([Record(b"k", b"vv", (("h", None),))], [1005], 1000)
    # length 12, attrs 0, tsDelta 5, offsetDelta 0, key 1 'k', value 2 'vv', 1 header 'h' null
    assert body == bytes([24, 0, 10, 0, 2]) + b"k" + bytes([4]) + b"vv" + bytes([2, 2]) + \
        b"h" + bytes([1])


def test_missing_timestamps_default_to_now() -> None:
    before = int(time.time() * 1000)
    decoded = decode_batch(build_batch([Record(b"a", b"b"), Record(b"c", None)]))
    after = int(time.time() * 1000)
    assert before <= decoded[0].timestamp == decoded[1].timestamp <= after


def test_explicit_base_timestamp_and_empty_batch() -> None:
    data = build_batch([Record(None, b"x", timestamp=50)], base_timestamp=10)
    assert BatchHeader.unpack_from(data).base_timestamp == 10
    assert decode_batch(data)[0].timestamp == 50
    with pytest.raises(ValueError):
        build_batch([])


def test_log_append_time_batches_report_max_timestamp() -> None:
    records = [Record(None, b"x", timestamp=t) for t in (5, 9, 7)]
    built = build_batch(records, timestamp_type=1)
    assert {r.timestamp for r in decode_batch(built)} == {9}
    patched = bytearray(build_batch(records))
    set_log_append_time(patched, 0, 12345)
    assert [r.timestamp for r in decode_batch(patched)] == [12345] * 3


def test_iter_records_in_walks_every_batch_and_skips_markers() -> None:
    blob = (build_batch([Record(b"a", b"1", timestamp=1)], base_offset=0)
            + build_control_batch(4, 0, True, 3, timestamp=2)
            + build_batch([Record(b"b", b"2", timestamp=3)] * 2, base_offset=2,
                          compression=Compression.ZSTD))
    assert [(r.offset, r.key) for r in iter_records_in(blob)] == [(0, b"a"), (2, b"b"),
                                                                 (3, b"b")]
    assert len(list(iter_records_in(blob, include_control=True))) == 4
    assert len(list(iter_records_in(blob[:-1]))) == 1  # the torn last batch is left out


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch(commit: bool) -> None:
    data = build_control_batch(77, 3, commit, coordinator_epoch=12, timestamp=1000)
    header = BatchHeader.unpack_from(data)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, -1)
    (record,) = decode_batch(data, check_crc=True)
    marker = decode_control_record(record.key, record.value)
    assert marker.is_commit is commit and marker.is_abort is not commit
    assert (marker.version, marker.coordinator_epoch) == (0, 12)
    assert marker.type == (ControlType.COMMIT if commit else ControlType.ABORT)
    # kafka-python reads it as a control record too
    (kp_record,) = list(KpBatch(data))
    assert kp_record.type == int(commit) and KpBatch(data).is_control_batch


def test_decode_control_record_errors_and_other_types() -> None:
    assert decode_control_record(b"\x00\x00\x00\x02", None).coordinator_epoch is None
    with pytest.raises(InvalidRecordError):
        decode_control_record(b"\x00", b"")
    with pytest.raises(InvalidRecordError):
        decode_control_record(b"\x00\x00\x00\x01", b"\x00")


def body_of(*records: Record) -> bytes:
    return encode_records(records, [r.timestamp or 0 for r in records], 0)


@pytest.mark.parametrize(("data", "count"), [
    (body_of(Record(b"k", b"v"))[:-1], 1),               # cut short
    (body_of(Record(b"k", b"v")) + b"\x00", 1),          # trailing byte
    (body_of(Record(b"k", b"v")), 2),                    # count too high
    (bytes([6, 0, 0, 0, 3, 0, 0]), 1),                   # key length -2
    (bytes([8, 0, 0, 0, 20, 0, 0, 0]), 1),               # key runs past the record
    (bytes([12, 0, 0, 0, 1, 1, 2, 1, 1, 0, 0, 0]), 1),   # null header key
    (bytes([12, 0, 0, 0, 1, 1, 2, 2, 0xff, 1, 0, 0]), 1),  # header key not UTF-8
    (bytes([10, 0, 0, 0, 1, 1, 0, 7, 7]), 1),            # fields shorter than the length
    (b"\xff" * 11, 1),                                   # endless varint
])
def test_malformed_records_are_rejected(data: bytes, count: int) -> None:
    with pytest.raises(InvalidRecordError):
        decode_records(data, count, 0, 0)


def test_decode_batch_errors() -> None:
    data = bytearray(build_batch([Record(b"k", b"v" * 100)] * 10, compression=Compression.GZIP))
    with pytest.raises(InvalidRecordError):
        decode_batch(data[:-1])
    data[-3] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        decode_batch(data, check_crc=True)
    with pytest.raises(CorruptRecordError):  # the gzip trailer no longer matches
        decode_batch(data)
    data[16] = 1
    with pytest.raises(InvalidRecordError):
        decode_batch(data)


def test_recompress_batch_keeps_the_producer_fields() -> None:
    """compression.type's rebuild (protocol.records.record.recompress_batch): another codec,
    the same records and the same producer id, epoch, sequence, flags and leader epoch."""
    from protocol.records.batch import BatchHeader, Compression, verify_crc
    from protocol.records.record import build_batch
    from protocol.records.record import Record, decode_batch, recompress_batch
    original = build_batch([Record(b"k", b"v" * 50, (("h", b"x"),), 1_000),
                            Record(None, None, (), 1_005)], compression=Compression.SNAPPY,
                           producer_id=42, producer_epoch=3, base_sequence=7,
                           transactional=True, partition_leader_epoch=5)
    rebuilt = recompress_batch(original, Compression.GZIP)
    before, after = BatchHeader.unpack_from(original), BatchHeader.unpack_from(rebuilt)
    assert after.compression is Compression.GZIP and verify_crc(rebuilt, 0, after)
    for name in ("producer_id", "producer_epoch", "base_sequence", "partition_leader_epoch",
                 "last_offset_delta", "base_timestamp", "max_timestamp", "records_count"):
        assert getattr(after, name) == getattr(before, name), name
    assert after.is_transactional
    assert decode_batch(rebuilt) == decode_batch(original)
