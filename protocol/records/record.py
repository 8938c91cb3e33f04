"""Records inside a v2 batch: varint encoding, decoding, and transaction control records.

The broker never comes here on Produce or Fetch (batches stay opaque there). This is for the
tools, the tests, log compaction (which needs keys) and the broker's own internal records.

One record, all varints zigzag-encoded (`DefaultRecord.java`):

    length | attributes i8 | timestampDelta varlong | offsetDelta varint |
    keyLength (-1 = null) | key | valueLength (-1 = null) | value |
    headerCount | [headerKeyLength | headerKey (UTF-8) | headerValueLength (-1 = null) | value]

Decoding is strict: a length that runs past the data, a record whose fields do not fill its
declared length, a count that disagrees with the header or trailing bytes all raise
InvalidRecordError, because compaction and tools must not act on misread data.
"""
from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum

from protocol.records.batch import (
    CONTROL, CREATE_TIME, HEADER_SIZE, LOG_APPEND_TIME, MAGIC_V2, MIN_BATCH_LENGTH,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, TIMESTAMP_TYPE,
    TRANSACTIONAL, BatchHeader, iter_batches, pack_batch, verify_crc,
)
from protocol.records.compression import compress, decompress
from protocol.records.types import Compression, CorruptRecordError, InvalidRecordError

__all__ = [
    "Record", "DecodedRecord", "ControlType", "ControlRecord",
    "encode_records", "decode_records", "decode_batch", "iter_records_in",
    "build_control_batch", "decode_control_record", "control_record_of", "build_batch",
    "records_data",
]

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class Record:
    """A record to write. `timestamp` None means "now" when the batch is built."""

    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp: int | None = None


@dataclass(frozen=True)
class DecodedRecord:
    """A record read back, with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


# -- varints -----------------------------------------------------------------------------------

def put_varint(out: bytearray, value: int) -> None:
    """Append a zigzag varint/varlong (the two differ only in their range)."""
    n = (value << 1) ^ (value >> 63)
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def get_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a zigzag varint at `pos`; returns (value, next position). IndexError past the end."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    n = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return (n >> 1) ^ -(n & 1), pos
        shift += 7
        if shift > 63:
            raise InvalidRecordError("varint longer than 10 bytes")


def _put_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(1)  # zigzag(-1)
    else:
        put_varint(out, len(data))
        out += data


# -- encoding ----------------------------------------------------------------------------------

def encode_records(records: Sequence[Record], timestamps: Sequence[int],
                   base_timestamp: int) -> bytes:
    """The uncompressed records section of a batch, offset deltas 0..n-1.

    `timestamps` holds each record's resolved timestamp (the caller decides what "now" is),
    stored as deltas from `base_timestamp`.
    """
    out = bytearray()
    body = bytearray()
    for delta, (record, timestamp) in enumerate(zip(records, timestamps, strict=True)):
        body.clear()
        body.append(0)  # record attributes: unused
        put_varint(body, timestamp - base_timestamp)
        put_varint(body, delta)
        _put_bytes(body, record.key)
        _put_bytes(body, record.value)
        put_varint(body, len(record.headers))
        for name, value in record.headers:
            _put_bytes(body, name.encode())
            _put_bytes(body, value)
        put_varint(out, len(body))
        out += body
    return bytes(out)


# -- decoding ----------------------------------------------------------------------------------

def _get_bytes(buf: bytes, pos: int, limit: int) -> tuple[bytes | None, int]:
    length, pos = get_varint(buf, pos)
    if length < 0:
        if length != -1:
            raise InvalidRecordError(f"negative length {length}")
        return None, pos
    if pos + length > limit:
        raise InvalidRecordError(f"length {length} runs past the record")
    return buf[pos:pos + length], pos + length


def decode_records(data: bytes, count: int, base_offset: int, base_timestamp: int,
                   log_append_time: int | None = None) -> list[DecodedRecord]:
    """Decode `count` records filling all of `data` (an uncompressed records section).

    With `log_append_time` set, every record reports it as its timestamp (LogAppendTime).
    """
    out: list[DecodedRecord] = []
    pos = 0
    end = len(data)
    try:
        for _ in range(count):
            length, pos = get_varint(data, pos)
            limit = pos + length
            if length < 0 or limit > end:
                raise InvalidRecordError(f"record length {length} runs past the batch")
            pos += 1  # attributes
            ts_delta, pos = get_varint(data, pos)
            offset_delta, pos = get_varint(data, pos)
            key, pos = _get_bytes(data, pos, limit)
            value, pos = _get_bytes(data, pos, limit)
            n_headers, pos = get_varint(data, pos)
            if n_headers < 0:
                raise InvalidRecordError(f"negative header count {n_headers}")
            headers = []
            for _ in range(n_headers):
                name, pos = _get_bytes(data, pos, limit)
                if name is None:
                    raise InvalidRecordError("null header key")
                hvalue, pos = _get_bytes(data, pos, limit)
                headers.append((name.decode(), hvalue))
            if pos != limit:
                raise InvalidRecordError(f"record fields fill {pos - limit + length} of "
                                         f"{length} bytes")
            timestamp = (base_timestamp + ts_delta if log_append_time is None
                         else log_append_time)
            out.append(DecodedRecord(base_offset + offset_delta, timestamp, key, value,
                                     tuple(headers)))
    except IndexError:
        raise InvalidRecordError("records end in the middle of a record") from None
    except UnicodeDecodeError as exc:
        raise InvalidRecordError(f"header key is not UTF-8: {exc}") from None
    if pos != end:
        raise InvalidRecordError(f"{end - pos} bytes after the last of {count} records")
    return out


def records_data(header: BatchHeader, batch: bytes | bytearray | memoryview) -> bytes:
    """The records section of the batch at the start of `batch` (`header` being its header),
    decompressed: what record-level readers walk. CorruptRecordError if it does not
    decompress."""
    payload = memoryview(batch)[HEADER_SIZE:header.size]
    codec = header.compression
    return bytes(payload) if codec is Compression.NONE else decompress(codec, payload)


def decode_batch(batch_bytes: bytes | bytearray | memoryview, *,
                 check_crc: bool = False) -> list[DecodedRecord]:
    """Decode the batch at the start of `batch_bytes`, decompressing as needed.

    Offsets and timestamps come out absolute. InvalidRecordError if the bytes do not hold a
    whole magic-2 batch or the records are malformed; CorruptRecordError if `check_crc` is set
    and the CRC does not match, or if the payload does not decompress.
    """
    header = BatchHeader.unpack_from(batch_bytes, 0)
    if header.magic != MAGIC_V2:
        raise InvalidRecordError(f"magic {header.magic} is not a v2 batch")
    if header.batch_length < MIN_BATCH_LENGTH or header.size > len(memoryview(batch_bytes)):
        raise InvalidRecordError(f"batch of {header.size} bytes does not fit the buffer")
    if check_crc and not verify_crc(batch_bytes, 0, header):
        raise CorruptRecordError("crc mismatch")
    data = records_data(header, batch_bytes)
    append_time = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
    return decode_records(data, header.records_count, header.base_offset,
                          header.base_timestamp, append_time)


def recompress_batch(batch_bytes: bytes | bytearray | memoryview, codec: Compression) -> bytes:
    """The batch at the start of `batch_bytes` with its records compressed by `codec` instead:
    a topic's compression.type differing from the producer's (Kafka's LogValidator rebuilds
    the batch the same way). Producer id, epoch, base sequence, transactional flag, leader
    epoch, timestamp type and every record are kept; offset deltas become 0..n-1, which is
    what a producer's batch has."""
    header = BatchHeader.unpack_from(batch_bytes, 0)
    records = [Record(r.key, r.value, r.headers, r.timestamp) for r in decode_batch(batch_bytes)]
    return build_batch(records, base_offset=header.base_offset, compression=codec,
                       producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                       base_sequence=header.base_sequence,
                       transactional=header.is_transactional,
                       partition_leader_epoch=header.partition_leader_epoch,
                       timestamp_type=header.timestamp_type,
                       base_timestamp=header.base_timestamp)


def iter_records_in(buf: bytes | bytearray | memoryview, *,
                    include_control: bool = False) -> Iterator[DecodedRecord]:
    """Every record of every complete batch in a blob (a Fetch response, a segment).

    Control batches (transaction markers) are skipped unless asked for, as consumers do.
    """
    view = memoryview(buf)
    for pos, header in iter_batches(view):
        if header.is_control and not include_control:
            continue
        yield from decode_batch(view[pos:pos + header.size])


# -- control records (transaction markers) -----------------------------------------------------

class ControlType(IntEnum):
    ABORT = 0
    COMMIT = 1


_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch


@dataclass(frozen=True)
class ControlRecord:
    """A decoded control record; coordinator_epoch is set for commit and abort markers."""

    version: int
    type: int
    coordinator_epoch: int | None = None

    @property
    def is_commit(self) -> bool:
        return self.type == ControlType.COMMIT

    @property
    def is_abort(self) -> bool:
        return self.type == ControlType.ABORT


def build_control_batch(producer_id: int, producer_epoch: int, commit: bool,
                        coordinator_epoch: int, timestamp: int | None = None, *,
                        base_offset: int = 0,
                        partition_leader_epoch: int = -1) -> bytes:
    """The one-record control batch that ends a transaction on a partition."""
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    record = Record(key=_CONTROL_KEY.pack(0, kind),
                    value=_END_TXN_VALUE.pack(0, coordinator_epoch), timestamp=timestamp)
    return build_batch([record], base_offset=base_offset, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
                       transactional=True, control=True,
                       partition_leader_epoch=partition_leader_epoch)


def decode_control_record(key: bytes | None, value: bytes | None) -> ControlRecord:
    """Read a control record's key (and, for commit/abort, its value).

    Other control types (KRaft's leader-change and snapshot records) are returned with their
    type and no coordinator epoch. InvalidRecordError for a key or marker value too short.
    """
    if key is None or len(key) < _CONTROL_KEY.size:
        raise InvalidRecordError("control record key shorter than 4 bytes")
    version, kind = _CONTROL_KEY.unpack_from(key)
    if kind not in (ControlType.ABORT, ControlType.COMMIT):
        return ControlRecord(version, kind)
    if value is None or len(value) < _END_TXN_VALUE.size:
        raise InvalidRecordError("transaction marker value shorter than 6 bytes")
    _, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
    return ControlRecord(version, kind, coordinator_epoch)


def control_record_of(batch_bytes: bytes | bytearray | memoryview) -> ControlRecord:
    """The record of the control batch at the start of `batch_bytes` (a transaction marker
    holds exactly one). InvalidRecordError if it is not a control batch or has no record."""
    header = BatchHeader.unpack_from(batch_bytes, 0)
    if not header.attributes & CONTROL:
        raise InvalidRecordError("not a control batch")
    for record in decode_batch(batch_bytes):
        return decode_control_record(record.key, record.value)
    raise InvalidRecordError("control batch without a record")


# -- building (tools, tests, control and internal records; not the hot path) -------------------

def build_batch(records: Iterable[Record], *, base_offset: int = 0,
                compression: Compression | int = Compression.NONE,
                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                base_sequence: int = NO_SEQUENCE, transactional: bool = False,
                control: bool = False,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                timestamp_type: int = CREATE_TIME, base_timestamp: int | None = None) -> bytes:
    """Encode records as one magic-2 batch with offset deltas 0..n-1.

    A record without a timestamp gets the current time in ms. baseTimestamp defaults to the
    first record's timestamp (as producers do; later deltas may be negative) and maxTimestamp
    is the largest record timestamp. ValueError for an empty record list: a batch with no
    records has no meaningful offset range.
    """
    records = list(records)
    if not records:
        raise ValueError("a batch needs at least one record")
    now = int(time.time() * 1000)
    timestamps = [now if r.timestamp is None else r.timestamp for r in records]
    if base_timestamp is None:
        base_timestamp = timestamps[0]
    body = encode_records(records, timestamps, base_timestamp)
    codec = Compression(compression)
    if codec is not Compression.NONE:
        body = compress(codec, body)
    attributes = codec | (TIMESTAMP_TYPE if timestamp_type == LOG_APPEND_TIME else 0)
    if transactional:
        attributes |= TRANSACTIONAL
    if control:
        attributes |= CONTROL
    return pack_batch(body, base_offset=base_offset,
                      partition_leader_epoch=partition_leader_epoch, attributes=attributes,
                      last_offset_delta=len(records) - 1, base_timestamp=base_timestamp,
                      max_timestamp=max(timestamps), producer_id=producer_id,
                      producer_epoch=producer_epoch, base_sequence=base_sequence,
                      records_count=len(records))
