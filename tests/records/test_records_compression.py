"""Codecs: round trips, the xerial snappy framing of the Java client, lz4 frames (ours with
independent blocks), zstd frames without a content size, and errors."""
from __future__ import annotations

import gzip
import struct

import cramjam
import pytest
from aiokafka import codec as aio_codec
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.records import Compression, CorruptRecordError, UnsupportedCompressionError
from protocol.records.compression import XERIAL_MAGIC, compress, decompress
from tests.lz4_frames import FLG_BLOCK_INDEPENDENT, blocks_decoded_alone

TEXT = b"".join(b"record %d of a fairly repetitive payload; " % i for i in range(2000))


@pytest.mark.parametrize("codec", list(Compression))
@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=5000))
def test_round_trip(codec: Compression, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", list(Compression)[1:])
def test_compresses_and_accepts_any_buffer(codec: Compression) -> None:
    packed = compress(codec, bytearray(TEXT))
    assert len(packed) < len(TEXT) // 4
    assert decompress(codec, memoryview(packed)) == TEXT


def test_formats_on_the_wire() -> None:
    assert compress(Compression.GZIP, TEXT)[:2] == b"\x1f\x8b"
    assert gzip.decompress(compress(Compression.GZIP, TEXT)) == TEXT
    assert compress(Compression.LZ4, TEXT)[:4] == b"\x04\x22\x4d\x18"  # lz4 frame magic
    assert compress(Compression.ZSTD, TEXT)[:4] == b"\x28\xb5\x2f\xfd"  # zstd frame magic
    raw = compress(Compression.SNAPPY, TEXT)  # a raw block, as librdkafka writes
    assert bytes(cramjam.snappy.decompress_raw(raw)) == TEXT


def xerial(data: bytes, block: int) -> bytes:
    out = bytearray(XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    for i in range(0, len(data), block):
        chunk = bytes(cramjam.snappy.compress_raw(data[i:i + block]))
        out += struct.pack(">i", len(chunk)) + chunk
    return bytes(out)


@pytest.mark.parametrize("block", [32 * 1024, 1000, 7])
def test_xerial_framed_snappy(block: int) -> None:
    assert decompress(Compression.SNAPPY, xerial(TEXT, block)) == TEXT


def test_xerial_framing_written_by_aiokafka() -> None:
    framed = aio_codec.snappy_encode(TEXT, xerial_compatible=True)
    assert framed.startswith(XERIAL_MAGIC)
    assert decompress(Compression.SNAPPY, framed) == TEXT
    assert aio_codec.snappy_decode(compress(Compression.SNAPPY, TEXT)) == TEXT


@pytest.mark.parametrize("framed", [
    xerial(TEXT, 1000)[:-5], xerial(TEXT, 1000)[:18], xerial(TEXT, 1000) + b"\x00\x00",
])
def test_broken_xerial_framing(framed: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(Compression.SNAPPY, framed)


def test_zstd_frame_without_content_size() -> None:
    stream = cramjam.zstd.Compressor()
    stream.compress(TEXT)
    frame = bytes(stream.finish())
    assert frame[4] & 0xC0 == 0  # frame header descriptor: no content size field
    assert decompress(Compression.ZSTD, frame) == TEXT


def test_lz4_frames_from_other_writers() -> None:
    # block-independent with block checksums, as a streaming writer may produce
    stream = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
    stream.compress(TEXT)
    assert decompress(Compression.LZ4, bytes(stream.finish())) == TEXT
    assert decompress(Compression.LZ4, aio_codec.lz4_encode(TEXT)) == TEXT


def test_lz4_blocks_decode_alone() -> None:
    frame = compress(Compression.LZ4, TEXT * 3)  # 260 KB: four 64 KB blocks
    assert frame[4] & FLG_BLOCK_INDEPENDENT
    blocks = blocks_decoded_alone(frame)
    assert len(blocks) == 4 and b"".join(blocks) == TEXT * 3


@pytest.mark.parametrize("codec", list(Compression)[1:])
def test_garbage_is_corrupt(codec: Compression) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"this is not compressed data at all")


@pytest.mark.parametrize("codec", [5, 7, -1, "gzip"])
def test_unknown_codec(codec: object) -> None:
    with pytest.raises(UnsupportedCompressionError):
        compress(codec, b"x")  # type: ignore[arg-type]
    with pytest.raises(UnsupportedCompressionError):
        decompress(codec, b"x")  # type: ignore[arg-type]
