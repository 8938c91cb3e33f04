"""Message sets of magic 0 and 1: read them and rebuild them as magic-2 batches.

Only clients that believe the broker predates 0.11 still send these, so the broker accepts
them, if at all, by converting once at the door and storing v2 only. One entry:

    offset i64 | size i32 | crc u32 | magic i8 | attributes i8 | (magic 1: timestamp i64) |
    keyLength i32 (-1 = null) | key | valueLength i32 (-1 = null) | value

The CRC is IEEE CRC-32 (zlib) over magic..end. A compressed set is one wrapper message whose
value, decompressed, is a message set of inner messages; with magic 1 the inner offsets are
relative (0..n-1) and the wrapper carries the absolute offset of the last one, and a wrapper
marked LogAppendTime imposes its timestamp on all inner messages.
"""
from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from protocol.records.batch import LOG_APPEND_TIME, NO_TIMESTAMP
from protocol.records.compression import decompress
from protocol.records.record import DecodedRecord, Record, build_batch
from protocol.records.types import Compression, CorruptRecordError, InvalidRecordError

__all__ = ["decode_message_set", "upconvert"]

_ENTRY = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_CRC_START = 16  # magic, right after offset + size + crc
_TIMESTAMP_TYPE = 0x08

Buffer = bytes | bytearray | memoryview
# (records, codec, timestamp type, wrapper id): the unit that becomes one v2 batch
_Run = tuple[list[DecodedRecord], int, int, int | None]


def _field(view: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise InvalidRecordError("message ends inside a length")
    (length,) = _I32.unpack_from(view, pos)
    pos += 4
    if length == -1:
        return None, pos
    if length < 0 or pos + length > end:
        raise InvalidRecordError(f"message field of {length} bytes runs past the message")
    return bytes(view[pos:pos + length]), pos + length


def _messages(view: memoryview, verify_crc: bool,
              ) -> Iterator[tuple[int, int, int, int, bytes | None, bytes | None]]:
    """(offset, magic, attributes, timestamp, key, value) per entry; a partial last entry is
    dropped silently, as a Fetch cut at max_bytes leaves one."""
    pos, end = 0, len(view)
    while end - pos >= 12:
        offset, size = _I64.unpack_from(view, pos)[0], _I32.unpack_from(view, pos + 8)[0]
        if size < 14:
            raise InvalidRecordError(f"message size {size} at {pos} is too small")
        stop = pos + 12 + size
        if stop > end:
            return
        _, _, crc, magic, attributes = _ENTRY.unpack_from(view, pos)
        if magic not in (0, 1):
            raise InvalidRecordError(f"magic {magic} at {pos} is not a legacy message")
        if verify_crc and zlib.crc32(view[pos + _CRC_START:stop]) != crc:
            raise CorruptRecordError(f"crc mismatch in message at {pos}")
        cur = pos + 18
        timestamp = NO_TIMESTAMP
        if magic == 1:
            if cur + 8 > stop:
                raise InvalidRecordError("magic-1 message too short for its timestamp")
            timestamp = _I64.unpack_from(view, cur)[0]
            cur += 8
        key, cur = _field(view, cur, stop)
        value, cur = _field(view, cur, stop)
        if cur != stop:
            raise InvalidRecordError(f"{stop - cur} stray bytes in message at {pos}")
        yield offset, magic, attributes, timestamp, key, value
        pos = stop


def _runs(buf: Buffer, verify_crc: bool) -> list[_Run]:
    """Group records into runs that can each become one v2 batch: a compressed wrapper is
    one run; uncompressed messages share a run while their offsets stay contiguous."""
    runs: list[_Run] = []
    with memoryview(buf) as view:
        for n, (offset, magic, attrs, timestamp, key, value) in enumerate(
                _messages(view.cast("B"), verify_crc)):
            codec = attrs & 0x07
            ts_type = LOG_APPEND_TIME if magic == 1 and attrs & _TIMESTAMP_TYPE else 0
            if codec == Compression.NONE:
                _add(runs, DecodedRecord(offset, timestamp, key, value), 0, ts_type, None)
                continue
            if value is None:
                raise InvalidRecordError(f"compressed wrapper at offset {offset} has no value")
            inner = list(_messages(memoryview(decompress(codec, value)), verify_crc))
            if not inner:
                raise InvalidRecordError(f"compressed wrapper at offset {offset} is empty")
            # magic 1: inner offsets are relative and the wrapper holds the last absolute one
            shift = offset - inner[-1][0] if magic == 1 else 0
            for i_offset, _, i_attrs, i_timestamp, i_key, i_value in inner:
                if i_attrs & 0x07:
                    raise InvalidRecordError("compressed message inside a compressed wrapper")
                ts = timestamp if ts_type == LOG_APPEND_TIME else i_timestamp
                _add(runs, DecodedRecord(i_offset + shift, ts, i_key, i_value), codec,
                     ts_type, n)
    return runs


def _add(runs: list[_Run], record: DecodedRecord, codec: int, ts_type: int,
         wrapper: int | None) -> None:
    if runs:
        last, last_codec, last_ts_type, last_wrapper = runs[-1]
        if ((last_codec, last_ts_type, last_wrapper) == (codec, ts_type, wrapper)
                and record.offset == last[-1].offset + 1):
            last.append(record)
            return
    runs.append(([record], codec, ts_type, wrapper))


def decode_message_set(buf: Buffer, *, verify_crc: bool = True) -> list[DecodedRecord]:
    """Every record of a magic 0/1 message set with absolute offsets (v0 timestamps are -1).

    CorruptRecordError for a CRC mismatch or an undecompressable wrapper; InvalidRecordError
    for malformed messages.
    """
    return [record for records, *_ in _runs(buf, verify_crc) for record in records]


def upconvert(message_set_bytes: Buffer, *, verify_crc: bool = True) -> bytes:
    """Rebuild a magic 0/1 message set as magic-2 batches, keeping offsets and timestamps.

    A compressed wrapper becomes one batch with the same codec; uncompressed messages are
    joined while their offsets are contiguous (a v2 batch cannot hold gaps).
    """
    out = bytearray()
    for records, codec, ts_type, _ in _runs(message_set_bytes, verify_crc):
        out += build_batch(
            [Record(r.key, r.value, timestamp=r.timestamp) for r in records],
            base_offset=records[0].offset, compression=codec, timestamp_type=ts_type)
    return bytes(out)
