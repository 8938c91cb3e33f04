"""Record batch v2 (magic 2): the 61-byte header, CRC32C, and the few in-place patches.

This is the broker's hot path. Produce, log recovery and Fetch treat a batch as opaque bytes:
they read the fixed header with one `struct` call, check the CRC32C in C over a memoryview
slice (no copy), and assign offsets by overwriting 8 bytes. Nothing here looks at records, so
the cost per batch is constant whatever the batch holds. Record-level work (building, decoding,
compression, and `build_batch` for tools, tests and the broker's own control and internal
records) lives in `record.py` and `compression.py`, which import this module, never the other
way round.

Layout (all big-endian; `batchLength` counts the bytes after itself, so a batch occupies
`batchLength + 12` bytes):

    baseOffset i64 @0 | batchLength i32 @8 | partitionLeaderEpoch i32 @12 | magic i8 @16 |
    crc u32 @17 | attributes i16 @21 | lastOffsetDelta i32 @23 | baseTimestamp i64 @27 |
    maxTimestamp i64 @35 | producerId i64 @43 | producerEpoch i16 @51 | baseSequence i32 @53 |
    recordsCount i32 @57 | records @61

The CRC covers bytes 21 to the end of the batch. baseOffset, batchLength and
partitionLeaderEpoch sit before it, which is why the broker can stamp offsets and leader
epochs without recomputing anything; LogAppendTime changes attributes and maxTimestamp, which
are covered, so that patch recomputes the CRC.
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import cast

from protocol.records import checksum
from protocol.records.types import Compression, CorruptRecordError, InvalidRecordError, \
    RecordError, UnsupportedCompressionError

__all__ = [
    "HEADER", "HEADER_SIZE", "LOG_OVERHEAD", "MIN_BATCH_LENGTH", "MAGIC_V2",
    "BASE_OFFSET", "LENGTH", "LEADER_EPOCH", "MAGIC", "CRC", "ATTRIBUTES", "LAST_OFFSET_DELTA",
    "BASE_TIMESTAMP", "MAX_TIMESTAMP", "PRODUCER_ID", "PRODUCER_EPOCH", "BASE_SEQUENCE",
    "RECORDS_COUNT", "RECORDS",
    "COMPRESSION_MASK", "TIMESTAMP_TYPE", "TRANSACTIONAL", "CONTROL", "DELETE_HORIZON",
    "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH", "NO_SEQUENCE", "NO_PARTITION_LEADER_EPOCH",
    "NO_TIMESTAMP", "CREATE_TIME", "LOG_APPEND_TIME",
    "Compression", "BatchHeader", "RecordError", "InvalidRecordError", "CorruptRecordError",
    "UnsupportedCompressionError",
    "iter_batches", "walk_batches", "validate_batches", "compute_crc", "verify_crc",
    "set_base_offset", "set_partition_leader_epoch", "set_log_append_time", "pack_batch",
]

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49: a header with no records
MAGIC_V2 = 2

# Byte offsets of each header field from the start of the batch.
BASE_OFFSET = 0
LENGTH = 8
LEADER_EPOCH = 12
MAGIC = 16
CRC = 17
ATTRIBUTES = 21
LAST_OFFSET_DELTA = 23
BASE_TIMESTAMP = 27
MAX_TIMESTAMP = 35
PRODUCER_ID = 43
PRODUCER_EPOCH = 51
BASE_SEQUENCE = 53
RECORDS_COUNT = 57
RECORDS = 61

# Attribute bits.
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20
DELETE_HORIZON = 0x40

# Kafka's "absent" values.
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed 61-byte header of one batch, as read from the wire.

    Reading it never decompresses or parses records: offsets, count and timestamps are all
    available here, which is what lets the broker pass compressed batches through untouched.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def unpack_from(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
        """Read the header at `pos`; InvalidRecordError if fewer than 61 bytes remain."""
        try:
            fields = HEADER.unpack_from(buf, pos)
        except struct.error as exc:
            raise InvalidRecordError(f"incomplete batch header at {pos}: {exc}") from None
        return _make_header(*fields) if cls is BatchHeader else cls(*fields)

    def pack(self) -> bytes:
        return HEADER.pack(
            self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic,
            self.crc, self.attributes, self.last_offset_delta, self.base_timestamp,
            self.max_timestamp, self.producer_id, self.producer_epoch, self.base_sequence,
            self.records_count)

    @property
    def compression(self) -> Compression:
        """The codec; UnsupportedCompressionError for ids 5-7, which Kafka never assigned."""
        codec = self.attributes & COMPRESSION_MASK
        if codec > Compression.ZSTD:
            raise UnsupportedCompressionError(f"unknown compression codec id {codec}")
        return Compression(codec)

    @property
    def timestamp_type(self) -> int:
        """0 (CreateTime, set by the producer) or 1 (LogAppendTime, set by the broker)."""
        return (self.attributes & TIMESTAMP_TYPE) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping at 2**31 like Kafka; -1 without a sequence."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


class _HeaderFiller:
    """Builds a BatchHeader about four times faster than its generated __init__.

    A frozen dataclass sets each of its 13 fields through object.__setattr__, which costs
    ~1.4 us and dominated the per-batch cost of walking a log. This class has exactly the
    same slots, so it can fill them with plain attribute stores and then hand the object to
    BatchHeader by `__class__` assignment (CPython allows it between classes of identical
    layout). The result is an ordinary, frozen BatchHeader; a test holds the two paths equal.
    """

    __slots__ = BatchHeader.__slots__

    def __init__(self, base_offset: int, batch_length: int, partition_leader_epoch: int,
                 magic: int, crc: int, attributes: int, last_offset_delta: int,
                 base_timestamp: int, max_timestamp: int, producer_id: int,
                 producer_epoch: int, base_sequence: int, records_count: int) -> None:
        self.base_offset = base_offset
        self.batch_length = batch_length
        self.partition_leader_epoch = partition_leader_epoch
        self.magic = magic
        self.crc = crc
        self.attributes = attributes
        self.last_offset_delta = last_offset_delta
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.records_count = records_count
        # Same slots, so CPython allows it (see above); to mypy the classes are unrelated.
        self.__class__ = BatchHeader  # type: ignore[assignment]


_make_header = cast("Callable[..., BatchHeader]", _HeaderFiller)


def _view(buf: bytes | bytearray | memoryview) -> memoryview:
    """A flat byte view, so lengths and slices count bytes whatever buffer came in."""
    view = memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


# -- walking a blob of batches -----------------------------------------------------------------

def iter_batches(buf: bytes | bytearray | memoryview,
                 start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of every complete batch from `start`.

    An incomplete last batch is normal (a Fetch response cut at max_bytes, a read that ends
    mid-batch) and ends the walk silently. A batch length below 49 cannot be stepped over, so it
    raises InvalidRecordError instead of looping or hiding corruption. Neither magic nor CRC is
    checked here; `walk_batches` and `validate_batches` do that.
    """
    view = _view(buf)
    end = len(view)
    unpack = HEADER.unpack_from
    make = _make_header
    pos = start
    while end - pos >= HEADER_SIZE:
        fields = unpack(view, pos)
        length = fields[1]
        if length < MIN_BATCH_LENGTH:
            raise InvalidRecordError(f"batch length {length} < {MIN_BATCH_LENGTH} at {pos}")
        size = length + LOG_OVERHEAD
        if pos + size > end:
            return
        yield pos, make(*fields)
        pos += size


def walk_batches(buf: bytes | bytearray | memoryview, *, verify_crc: bool = True,
                 ) -> tuple[list[tuple[int, BatchHeader]], int, str | None]:
    """Check batches from the start of `buf` until the first bad one.

    Returns (valid batches with positions, length of the valid prefix, reason or None). The
    reason starts with one of "bad magic", "bad length", "torn tail" or "crc mismatch", then
    says where. Log recovery truncates a segment to the valid prefix; a clean buffer gives
    reason None and a prefix equal to its length.
    """
    out: list[tuple[int, BatchHeader]] = []
    append = out.append
    unpack = HEADER.unpack_from
    make = _make_header
    with _view(buf) as view:
        end = len(view)
        pos = 0
        while pos < end:
            left = end - pos
            if left < HEADER_SIZE:
                if left > MAGIC and view[pos + MAGIC] != MAGIC_V2:
                    return out, pos, f"bad magic {view[pos + MAGIC]} at {pos}"
                return out, pos, f"torn tail: {left} bytes at {pos}, short of a batch header"
            fields = unpack(view, pos)
            if fields[3] != MAGIC_V2:
                return out, pos, f"bad magic {fields[3]} at {pos}"
            length = fields[1]
            if length < MIN_BATCH_LENGTH:
                return out, pos, f"bad length {length} < {MIN_BATCH_LENGTH} at {pos}"
            size = length + LOG_OVERHEAD
            if size > left:
                return out, pos, f"torn tail: batch at {pos} needs {size} bytes, {left} left"
            if verify_crc and checksum.crc32c(view[pos + ATTRIBUTES:pos + size]) != fields[4]:
                return out, pos, f"crc mismatch at {pos}"
            append((pos, make(*fields)))
            pos += size
    return out, pos, None


def validate_batches(buf: bytes | bytearray | memoryview) -> list[tuple[int, BatchHeader]]:
    """Check a Produce payload: one or more whole, well-formed magic-2 batches, nothing else.

    Raises CorruptRecordError for a CRC mismatch, UnsupportedCompressionError for codec ids
    5-7, and InvalidRecordError for everything else: no batch at all, bad magic, bad length,
    a truncated batch or trailing bytes, a negative or zero record count, or a count that
    disagrees with lastOffsetDelta (Kafka's LogValidator rejects those from clients too).
    """
    batches, _, reason = walk_batches(buf)
    if reason is not None:
        if reason.startswith("crc"):
            raise CorruptRecordError(reason)
        raise InvalidRecordError(reason)
    if not batches:
        raise InvalidRecordError("no record batch")
    for pos, header in batches:
        if header.records_count <= 0:
            raise InvalidRecordError(f"batch at {pos} has {header.records_count} records")
        if header.last_offset_delta + 1 != header.records_count:
            raise InvalidRecordError(
                f"batch at {pos}: lastOffsetDelta {header.last_offset_delta} does not match "
                f"{header.records_count} records")
        if header.attributes & COMPRESSION_MASK > Compression.ZSTD:
            raise UnsupportedCompressionError(
                f"batch at {pos}: unknown codec id {header.attributes & COMPRESSION_MASK}")
    return batches


# -- CRC ---------------------------------------------------------------------------------------

def compute_crc(buf: bytes | bytearray | memoryview, pos: int,
                header_or_size: BatchHeader | int) -> int:
    """CRC32C of the batch at `pos`, from attributes to its end.

    `header_or_size` is the batch's header or its total size in bytes (batch_length + 12).
    ValueError if the batch runs past the buffer, which would otherwise give a silently
    wrong CRC over fewer bytes.
    """
    size = header_or_size if isinstance(header_or_size, int) else header_or_size.size
    with _view(buf) as view:
        if size < HEADER_SIZE or pos < 0 or pos + size > len(view):
            raise ValueError(f"batch of {size} bytes at {pos} does not fit a "
                             f"{len(view)}-byte buffer")
        return checksum.crc32c(view[pos + ATTRIBUTES:pos + size])


def verify_crc(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    try:
        return compute_crc(buf, pos, header) == header.crc
    except ValueError:
        return False


# -- assembling a batch from its fields --------------------------------------------------------

def pack_batch(payload: bytes | bytearray, *, base_offset: int, partition_leader_epoch: int,
               attributes: int, last_offset_delta: int, base_timestamp: int,
               max_timestamp: int, producer_id: int, producer_epoch: int, base_sequence: int,
               records_count: int) -> bytes:
    """A whole magic-2 batch: the header over `payload` (the records section, compressed as
    `attributes` says), with batchLength and the CRC32C filled in.

    The one place a batch is assembled from its fields, so that building a batch
    (`record.build_batch`) and rewriting one (`record_filter.filter_batch`) cannot disagree
    on the layout or on what the CRC covers.
    """
    out = bytearray(HEADER_SIZE + len(payload))
    HEADER.pack_into(out, 0, base_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch,
                     MAGIC_V2, 0, attributes, last_offset_delta, base_timestamp, max_timestamp,
                     producer_id, producer_epoch, base_sequence, records_count)
    out[HEADER_SIZE:] = payload
    _U32.pack_into(out, CRC, compute_crc(out, 0, len(out)))
    return bytes(out)


# -- in-place patches (the broker's side of append) --------------------------------------------

def set_base_offset(buf: bytearray | memoryview, pos: int, offset: int) -> None:
    """Assign offsets to the batch at `pos`; baseOffset is outside the CRC."""
    _I64.pack_into(buf, pos + BASE_OFFSET, offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp the leader epoch of the appending leader; also outside the CRC."""
    _I32.pack_into(buf, pos + LEADER_EPOCH, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with the broker's clock, then recompute the CRC.

    Records keep their own deltas; readers report maxTimestamp for every record of such a
    batch, as Kafka's do.
    """
    attributes = _I16.unpack_from(buf, pos + ATTRIBUTES)[0] | TIMESTAMP_TYPE
    _I16.pack_into(buf, pos + ATTRIBUTES, attributes)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP, timestamp_ms)
    size = _I32.unpack_from(buf, pos + LENGTH)[0] + LOG_OVERHEAD
    _U32.pack_into(buf, pos + CRC, compute_crc(buf, pos, size))
