"""The four codecs Kafka clients use, through cramjam (one Rust-backed dependency for all).

Formats differ from the codecs' defaults in ways that matter for interoperability:

- snappy: Kafka has no snappy container of its own. librdkafka, franz-go and Go clients send a
  raw snappy block; the Java client (via xerial's SnappyOutputStream) sends its own framing:
  `\\x82SNAPPY\\x00`, int32 version, int32 compatible-version, then (int32 length, raw snappy
  block) chunks. We read both and write raw blocks, which every client reads. cramjam's plain
  `snappy.compress` is the unrelated snappy *framing* format and is not used.
- lz4: the LZ4 frame format, which is what magic-2 batches carry. We write independent
  blocks: Kafka's Java reader (KafkaLZ4BlockInputStream) decodes each block alone, so it
  fails on cramjam.lz4.compress's default linked blocks once a batch passes 64 KB. Any frame
  is read. The old broken-checksum framing of magic 0/1 is not handled.
- zstd: standard frames; decompression handles frames that do not declare their content
  size (streaming producers write those).
- gzip: a standard gzip member.

Data that does not decompress raises CorruptRecordError; an unknown codec id raises
UnsupportedCompressionError.
"""
from __future__ import annotations

import struct

import cramjam

from protocol.records.types import Compression, CorruptRecordError, UnsupportedCompressionError

__all__ = ["compress", "decompress", "XERIAL_MAGIC", "UnsupportedCompressionError"]

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16  # magic + version i32 + compatible version i32
_I32 = struct.Struct(">i")

Buffer = bytes | bytearray | memoryview

GZIP_LEVEL = 6
ZSTD_LEVEL = 3  # Kafka's default zstd level (KIP-390)


def _codec(codec: Compression | int) -> Compression:
    try:
        return Compression(codec)
    except ValueError:
        raise UnsupportedCompressionError(f"unknown compression codec {codec!r}") from None


def compress(codec: Compression | int, data: Buffer) -> bytes:
    codec = _codec(codec)
    if codec is Compression.NONE:
        return bytes(data)
    if codec is Compression.GZIP:
        return bytes(cramjam.gzip.compress(data, level=GZIP_LEVEL))
    if codec is Compression.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec is Compression.LZ4:
        stream = cramjam.lz4.Compressor(block_linked=False)
        stream.compress(data if isinstance(data, bytes) else bytes(data))  # takes bytes only
        return bytes(stream.finish())
    return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVEL))


def decompress(codec: Compression | int, data: Buffer) -> bytes:
    codec = _codec(codec)
    try:
        if codec is Compression.NONE:
            return bytes(data)
        if codec is Compression.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec is Compression.SNAPPY:
            return _snappy_decompress(data)
        if codec is Compression.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"{codec.name.lower()} payload does not decompress: "
                                 f"{exc}") from None


def _snappy_decompress(data: Buffer) -> bytes:
    view = memoryview(data).cast("B")
    if len(view) < _XERIAL_HEADER or view[:len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    out = bytearray()
    pos = _XERIAL_HEADER
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("xerial snappy chunk length cut short")
        (length,) = _I32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CorruptRecordError(f"xerial snappy chunk of {length} bytes runs past the data")
        out += cramjam.snappy.decompress_raw(view[pos:pos + length])
        pos += length
    return bytes(out)
