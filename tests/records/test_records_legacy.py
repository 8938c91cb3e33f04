"""Legacy message sets (magic 0 and 1), built by hand: decoding and up-conversion to v2."""
from __future__ import annotations

import gzip
import struct
import zlib

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from protocol.records import (
    BatchHeader, Compression, CorruptRecordError, DecodedRecord, InvalidRecordError,
    decode_batch, decode_message_set, iter_batches, upconvert, validate_batches,
)


def _bytes(data: bytes | None) -> bytes:
    return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data


def message(offset: int, magic: int, key: bytes | None, value: bytes | None, *,
            attributes: int = 0, timestamp: int = -1) -> bytes:
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += _bytes(key) + _bytes(value)
    entry = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(entry)) + entry


def test_magic0_set() -> None:
    data = message(10, 0, b"k", b"v") + message(11, 0, None, b"w") + message(12, 0, b"x", None)
    assert decode_message_set(data) == [
        DecodedRecord(10, -1, b"k", b"v"), DecodedRecord(11, -1, None, b"w"),
        DecodedRecord(12, -1, b"x", None)]
    v2 = upconvert(data)
    ((_, header),) = validate_batches(v2)
    assert (header.base_offset, header.records_count, header.max_timestamp) == (10, 3, -1)
    assert decode_batch(v2, check_crc=True) == decode_message_set(data)


def test_magic1_set_with_create_time() -> None:
    data = message(0, 1, b"a", b"1", timestamp=1000) + message(1, 1, b"b", b"2", timestamp=900)
    records = decode_message_set(data)
    assert [(r.offset, r.timestamp) for r in records] == [(0, 1000), (1, 900)]
    v2 = upconvert(data)
    header = BatchHeader.unpack_from(v2)
    assert header.timestamp_type == 0 and header.max_timestamp == 1000
    assert decode_batch(v2) == records


def test_gzip_wrapper_with_relative_offsets() -> None:
    inner = b"".join(message(i, 1, b"k%d" % i, b"v%d" % i, timestamp=2000 + i)
                     for i in range(3))
    wrapper = message(52, 1, None, gzip.compress(inner), attributes=1, timestamp=2002)
    data = message(49, 1, b"before", b"x", timestamp=1999) + wrapper
    records = decode_message_set(data)
    assert [(r.offset, r.timestamp, r.key) for r in records] == [
        (49, 1999, b"before"), (50, 2000, b"k0"), (51, 2001, b"k1"), (52, 2002, b"k2")]
    v2 = upconvert(data)
    headers = [h for _, h in validate_batches(v2)]
    # the wrapper keeps its own batch and its codec
    assert [(h.base_offset, h.records_count, h.compression) for h in headers] == [
        (49, 1, Compression.NONE), (50, 3, Compression.GZIP)]
    assert [r for pos, h in iter_batches(v2) for r in decode_batch(v2[pos:])] == records


def test_log_append_time_wrapper_overrides_inner_timestamps() -> None:
    inner = b"".join(message(i, 1, None, b"v", timestamp=5) for i in range(2))
    data = message(1, 1, None, gzip.compress(inner), attributes=1 | 0x08, timestamp=777)
    assert [(r.offset, r.timestamp) for r in decode_message_set(data)] == [(0, 777), (1, 777)]
    v2 = upconvert(data)
    header = BatchHeader.unpack_from(v2)
    assert header.timestamp_type == 1 and header.max_timestamp == 777
    assert [r.timestamp for r in decode_batch(v2)] == [777, 777]


def test_magic0_wrapper_keeps_inner_offsets() -> None:
    inner = message(5, 0, None, b"a") + message(6, 0, None, b"b")
    data = message(6, 0, None, gzip.compress(inner), attributes=1)
    assert [r.offset for r in decode_message_set(data)] == [5, 6]


def test_offset_gaps_split_batches() -> None:
    data = message(0, 0, None, b"a") + message(1, 0, None, b"b") + message(5, 0, None, b"c")
    headers = [h for _, h in validate_batches(upconvert(data))]
    assert [(h.base_offset, h.last_offset) for h in headers] == [(0, 1), (5, 5)]


@pytest.mark.parametrize("magic", [0, 1])
def test_kafka_python_legacy_builder(magic: int) -> None:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=1, batch_size=1 << 20)
    for i in range(5):
        builder.append(i, timestamp=3000 + i, key=b"key", value=b"value %d" % i)
    data = bytes(builder.build())
    records = decode_message_set(data)
    assert [r.value for r in records] == [b"value %d" % i for i in range(5)]
    # kafka-python leaves the wrapper offset at 0 for the broker to assign: with magic 1 the
    # relative inner offsets then count up to 0; magic 0 inner offsets are taken as written
    assert [r.offset for r in records] == list(range(-4, 1) if magic else range(5))
    expected_ts = [3000 + i for i in range(5)] if magic else [-1] * 5
    assert [r.timestamp for r in records] == expected_ts
    assert decode_batch(upconvert(data)) == records


def test_partial_tail_is_ignored_and_empty_set_is_empty() -> None:
    data = message(0, 1, b"k", b"v", timestamp=1)
    assert len(decode_message_set(data + message(1, 1, b"k", b"v")[:-3])) == 1
    assert decode_message_set(b"") == [] and upconvert(b"") == b""


def test_bad_crc_and_malformed_messages() -> None:
    data = bytearray(message(0, 1, b"k", b"v", timestamp=1))
    data[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        decode_message_set(data)
    assert decode_message_set(data, verify_crc=False)[0].value == b"w"
    with pytest.raises(InvalidRecordError):  # magic 2 is not a legacy message
        decode_message_set(message(0, 1, b"k", b"v")[:16] + b"\x02" +
                           message(0, 1, b"k", b"v")[17:], verify_crc=False)
    with pytest.raises(InvalidRecordError):  # key length runs past the message
        body = struct.pack(">bbi", 0, 0, 50) + b"k" + _bytes(b"v")
        entry = struct.pack(">I", zlib.crc32(body)) + body
        decode_message_set(struct.pack(">qi", 0, len(entry)) + entry)
    with pytest.raises(InvalidRecordError):  # size too small to be a message
        decode_message_set(struct.pack(">qi", 0, 5) + bytes(5))
