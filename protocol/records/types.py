"""The codec ids and the record error family: the leaf every records module imports.

Kept apart so that `batch` (the hot path), `compression` and `record` can all name them
without importing each other in a circle.
"""
from __future__ import annotations

from enum import IntEnum

__all__ = ["Compression", "RecordError", "InvalidRecordError", "CorruptRecordError",
           "UnsupportedCompressionError"]


class Compression(IntEnum):
    """The codec in attribute bits 0-2; ids are Kafka's (`CompressionType.java`)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class RecordError(ValueError):
    """Bytes that are not acceptable record data; the subclass says which Kafka error fits."""


class InvalidRecordError(RecordError):
    """Malformed framing or content (Kafka's INVALID_RECORD, 87)."""


class CorruptRecordError(RecordError):
    """A batch whose CRC does not match, or whose payload does not decompress
    (Kafka's CORRUPT_MESSAGE, 2)."""


class UnsupportedCompressionError(RecordError):
    """A codec id we do not know (Kafka's UNSUPPORTED_COMPRESSION_TYPE, 76)."""
