"""Record batch v2 headers: golden CRCs, interop with kafka-python and aiokafka, patches,
walking and validation."""
from __future__ import annotations

import struct

import construct as c
import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

from protocol.records import batch as b
from protocol.records import (
    BatchHeader, Compression, CorruptRecordError, InvalidRecordError, Record,
    UnsupportedCompressionError, build_batch, compute_crc, decode_batch, iter_batches,
    set_base_offset, set_log_append_time, set_partition_leader_epoch, validate_batches,
    verify_crc, walk_batches,
)

RECORDS = [
    Record(b"k0", b"v0", (("h1", b"a"), ("h2", None)), 1_700_000_000_000),
    Record(None, b"v1", (), 1_700_000_000_005),
    Record(b"k2", None, (("h\u00e9", b""),), 1_699_999_999_990),
]

# The same header as a construct schema: the struct format is held to it below.
HEADER_SCHEMA = c.Struct(
    "base_offset" / c.Int64sb, "batch_length" / c.Int32sb, "partition_leader_epoch" / c.Int32sb,
    "magic" / c.Int8sb, "crc" / c.Int32ub, "attributes" / c.Int16sb,
    "last_offset_delta" / c.Int32sb, "base_timestamp" / c.Int64sb, "max_timestamp" / c.Int64sb,
    "producer_id" / c.Int64sb, "producer_epoch" / c.Int16sb, "base_sequence" / c.Int32sb,
    "records_count" / c.Int32sb,
)


def kp_batch(compression: int = 0, records=RECORDS, **producer) -> bytes:
    builder = KpBuilder(magic=2, compression_type=compression,
                        is_transactional=producer.get("transactional", False),
                        producer_id=producer.get("producer_id", -1),
                        producer_epoch=producer.get("producer_epoch", -1),
                        base_sequence=producer.get("base_sequence", -1), batch_size=1 << 20)
    for i, r in enumerate(records):
        builder.append(i, timestamp=r.timestamp, key=r.key, value=r.value,
                       headers=list(r.headers))
    return bytes(builder.build())


# -- layout and golden values ------------------------------------------------------------------

def test_crc32c_golden_values() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0
    assert crc32c(b"\x00" * 32) == 0x8A9136AA


def test_header_layout_constants() -> None:
    assert b.HEADER.size == b.HEADER_SIZE == b.RECORDS == 61
    assert b.MIN_BATCH_LENGTH == 49
    offsets = [b.BASE_OFFSET, b.LENGTH, b.LEADER_EPOCH, b.MAGIC, b.CRC, b.ATTRIBUTES,
               b.LAST_OFFSET_DELTA, b.BASE_TIMESTAMP, b.MAX_TIMESTAMP, b.PRODUCER_ID,
               b.PRODUCER_EPOCH, b.BASE_SEQUENCE, b.RECORDS_COUNT, b.RECORDS]
    assert offsets == [0, 8, 12, 16, 17, 21, 23, 27, 35, 43, 51, 53, 57, 61]
    sizes = [struct.calcsize(">" + ch) for ch in "qiibIhiqqqhii"]
    assert [sum(sizes[:i]) for i in range(14)] == offsets


int_ranges = {"q": (-2**63, 2**63 - 1), "i": (-2**31, 2**31 - 1), "b": (-128, 127),
              "I": (0, 2**32 - 1), "h": (-2**15, 2**15 - 1)}


@given(st.tuples(*(st.integers(*int_ranges[ch]) for ch in "qiibIhiqqqhii")))
def test_struct_header_matches_construct_schema(values: tuple[int, ...]) -> None:
    packed = b.HEADER.pack(*values)
    names = [sc.name for sc in HEADER_SCHEMA.subcons]
    assert packed == HEADER_SCHEMA.build(dict(zip(names, values)))
    header = BatchHeader.unpack_from(packed)
    assert [getattr(header, n) for n in names] == list(values)
    assert header.pack() == packed


def test_header_properties() -> None:
    header = BatchHeader.unpack_from(build_batch(
        RECORDS, base_offset=100, compression=Compression.GZIP, producer_id=7,
        producer_epoch=2, base_sequence=2**31 - 2, transactional=True))
    assert header.compression is Compression.GZIP
    assert header.timestamp_type == 0
    assert header.is_transactional and not header.is_control
    assert (header.last_offset, header.next_offset) == (102, 103)
    assert header.has_producer_id and header.last_sequence == 0  # wrapped at 2**31
    assert header.base_timestamp == RECORDS[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in RECORDS)
    assert header.records_count == 3 and header.last_offset_delta == 2
    plain = BatchHeader.unpack_from(build_batch(RECORDS))
    assert not plain.has_producer_id and plain.last_sequence == -1
    assert plain.partition_leader_epoch == -1
    bad = b.HEADER.pack(0, 49, 0, 2, 0, 5, 0, 0, 0, -1, -1, -1, 1)
    with pytest.raises(UnsupportedCompressionError):
        BatchHeader.unpack_from(bad).compression


def test_unpack_from_short_buffer() -> None:
    with pytest.raises(InvalidRecordError):
        BatchHeader.unpack_from(b"\x00" * 60)


# -- interop with kafka-python and aiokafka ----------------------------------------------------

@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_kafka_python_batch_verifies_and_decodes(codec: Compression) -> None:
    records = RECORDS * 20  # kafka-python stores a batch uncompressed if gzip does not pay
    data = kp_batch(codec, records, producer_id=9, producer_epoch=1, base_sequence=5)
    (pos, header), = iter_batches(data)
    assert pos == 0 and header.size == len(data)
    assert verify_crc(data, 0, header)
    assert header.compression is codec and header.producer_id == 9
    assert header.base_sequence == 5 and header.records_count == 60
    decoded = decode_batch(data, check_crc=True)
    assert [(d.offset, d.timestamp, d.key, d.value, d.headers) for d in decoded] == [
        (i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)]


@pytest.mark.parametrize("codec", list(Compression))
def test_aiokafka_batch_verifies_and_decodes(codec: Compression) -> None:
    builder = AioBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
                         producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, r in enumerate(RECORDS):
        builder.append(i, timestamp=r.timestamp, key=r.key, value=r.value,
                       headers=list(r.headers))
    data = bytes(builder.build())
    assert validate_batches(data)[0][1].compression is codec
    decoded = decode_batch(data, check_crc=True)
    assert [(d.key, d.value, d.headers, d.timestamp) for d in decoded] == [
        (r.key, r.value, r.headers, r.timestamp) for r in RECORDS]


def _read_with(reader, data: bytes) -> list[tuple]:
    batch = reader(data)
    assert batch.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_our_batch_reads_in_kafka_python(codec: Compression) -> None:
    data = build_batch(RECORDS, base_offset=40, compression=codec)
    assert _read_with(KpBatch, data) == [
        (40 + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(RECORDS)]


@pytest.mark.parametrize("codec", list(Compression))
def test_our_batch_reads_in_aiokafka(codec: Compression) -> None:
    records = RECORDS * 50  # enough to make every codec actually compress
    data = build_batch(records, base_offset=7, compression=codec)
    assert AioBatch(data).compression_type == codec
    assert _read_with(AioBatch, data) == [
        (7 + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)]


def test_log_append_time_reads_in_kafka_python() -> None:
    data = bytearray(build_batch(RECORDS))
    set_log_append_time(data, 0, 1_800_000_000_000)
    batch = KpBatch(bytes(data))
    assert batch.timestamp_type == 1
    assert [r[1] for r in _read_with(KpBatch, bytes(data))] == [1_800_000_000_000] * 3


# -- patches -----------------------------------------------------------------------------------

def test_set_base_offset_and_leader_epoch_keep_the_crc() -> None:
    data = bytearray(build_batch(RECORDS) * 2)
    first = BatchHeader.unpack_from(data, 0)
    set_base_offset(data, first.size, 1234)
    set_partition_leader_epoch(data, first.size, 17)
    (_, h0), (_, h1) = validate_batches(data)
    assert h1.base_offset == 1234 and h1.partition_leader_epoch == 17
    assert h1.crc == h0.crc and verify_crc(data, first.size, h1)
    assert [r.offset for r in decode_batch(memoryview(data)[first.size:])] == [1234, 1235, 1236]
    assert h0.base_offset == 0  # the neighbour is untouched


def test_set_log_append_time_recomputes_the_crc() -> None:
    data = bytearray(build_batch(RECORDS, compression=Compression.LZ4))
    before = BatchHeader.unpack_from(data)
    set_log_append_time(data, 0, 1_800_000_000_000)
    after = BatchHeader.unpack_from(data)
    assert after.timestamp_type == 1 and after.compression is Compression.LZ4
    assert after.max_timestamp == 1_800_000_000_000
    assert after.base_timestamp == before.base_timestamp
    assert after.crc != before.crc and verify_crc(data, 0, after)
    assert after.crc == crc32c(bytes(data[21:]))
    assert {r.timestamp for r in decode_batch(data, check_crc=True)} == {1_800_000_000_000}


def test_compute_crc_accepts_a_size_and_refuses_overruns() -> None:
    data = build_batch(RECORDS)
    header = BatchHeader.unpack_from(data)
    assert compute_crc(data, 0, header) == compute_crc(data, 0, len(data)) == header.crc
    with pytest.raises(ValueError):
        compute_crc(data, 0, len(data) + 1)
    assert not verify_crc(data[:-1], 0, header)


# -- walking and validation --------------------------------------------------------------------

def three_batches() -> tuple[bytes, list[int]]:
    parts = [build_batch(RECORDS, base_offset=3 * i) for i in range(3)]
    return b"".join(parts), [0, len(parts[0]), len(parts[0]) + len(parts[1])]


def test_walk_clean_buffer() -> None:
    data, starts = three_batches()
    batches, valid, reason = walk_batches(data)
    assert [p for p, _ in batches] == starts and valid == len(data) and reason is None
    assert [h.base_offset for _, h in batches] == [0, 3, 6]
    assert walk_batches(b"") == ([], 0, None)


@pytest.mark.parametrize("cut", [1, 11, 12, 30, 60, 61, 62])
def test_walk_stops_at_a_torn_tail(cut: int) -> None:
    data, starts = three_batches()
    torn = data[:starts[2] + cut]
    batches, valid, reason = walk_batches(torn)
    assert len(batches) == 2 and valid == starts[2]
    assert reason is not None and reason.startswith("torn tail")
    assert [p for p, _ in iter_batches(torn)] == starts[:2]  # silently


def test_walk_stops_at_a_corrupt_crc() -> None:
    data, starts = three_batches()
    corrupt = bytearray(data)
    corrupt[starts[1] + 70] ^= 0xFF
    batches, valid, reason = walk_batches(corrupt)
    assert len(batches) == 1 and valid == starts[1] and reason.startswith("crc mismatch")
    assert walk_batches(corrupt, verify_crc=False)[1] == len(data)


def test_walk_stops_at_bad_magic_and_bad_length() -> None:
    data, starts = three_batches()
    bad = bytearray(data)
    bad[starts[2] + b.MAGIC] = 1
    assert walk_batches(bad)[1:] == (starts[2], f"bad magic 1 at {starts[2]}")
    bad = bytearray(data)
    struct.pack_into(">i", bad, starts[1] + b.LENGTH, 48)
    batches, valid, reason = walk_batches(bad)
    assert valid == starts[1] and reason.startswith("bad length")
    with pytest.raises(InvalidRecordError):
        list(iter_batches(bad))
    # zero padding (a preallocated or torn file) reads as bad magic
    assert walk_batches(data + bytes(100))[1:] == (len(data), f"bad magic 0 at {len(data)}")


def test_validate_accepts_and_returns_every_batch() -> None:
    data, starts = three_batches()
    assert [p for p, _ in validate_batches(data)] == starts
    assert len(validate_batches(memoryview(data)[starts[1]:])) == 2


@pytest.mark.parametrize("payload", [
    b"", b"garbage", bytes(61), b"\x00" * 200,
    build_batch(RECORDS)[:-1],                 # truncated
    build_batch(RECORDS) + b"\x00",            # one trailing byte
    build_batch(RECORDS) + build_batch(RECORDS)[:70],  # trailing partial batch
])
def test_validate_rejects_malformed_payloads(payload: bytes) -> None:
    with pytest.raises(InvalidRecordError):
        validate_batches(payload)


def test_validate_rejects_a_bad_crc_as_corrupt() -> None:
    data = bytearray(build_batch(RECORDS))
    data[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        validate_batches(data)


def _patched(**fields: int) -> bytearray:
    data = bytearray(build_batch(RECORDS))
    header = BatchHeader.unpack_from(data)
    values = {sc.name: getattr(header, sc.name) for sc in HEADER_SCHEMA.subcons} | fields
    b.HEADER.pack_into(data, 0, *values.values())
    struct.pack_into(">I", data, b.CRC, compute_crc(data, 0, len(data)))
    return data


@pytest.mark.parametrize("fields", [
    {"records_count": 0}, {"records_count": -1}, {"last_offset_delta": 5},
])
def test_validate_rejects_inconsistent_counts(fields: dict[str, int]) -> None:
    with pytest.raises(InvalidRecordError):
        validate_batches(_patched(**fields))


def test_validate_rejects_an_unknown_codec() -> None:
    with pytest.raises(UnsupportedCompressionError):
        validate_batches(_patched(attributes=6))


def test_fast_header_construction_equals_the_dataclass() -> None:
    data = build_batch(RECORDS, base_offset=5, producer_id=3, producer_epoch=1, base_sequence=0)
    fields = b.HEADER.unpack_from(data)
    slow = BatchHeader(*fields)
    for fast in (BatchHeader.unpack_from(data), walk_batches(data)[0][0][1],
                 next(iter_batches(data))[1]):
        assert type(fast) is BatchHeader
        assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
        with pytest.raises(AttributeError):  # still frozen
            fast.base_offset = 1  # type: ignore[misc]


def test_buffers_are_released_after_walking() -> None:
    data = bytearray(build_batch(RECORDS))
    walk_batches(data)
    list(iter_batches(data))
    validate_batches(data)
    compute_crc(data, 0, len(data))
    data += b"\x00"  # a bytearray still exported to a memoryview could not grow
