"""compat/js/codecs.js, kafkajs's LZ4 and zstd codecs, against pybroker's codecs (cramjam):
frames each side writes, the other reads. The sizes pass 64 KB blocks and zstd-wasm's 1 MB
default output, where lz4js's own frame code and a frame without a content size go wrong;
the compat matrix's kafkajs codec cells only send a few KB."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import cramjam
import pytest

from compat.helper_process import node_program
from protocol.records import Compression
from protocol.records.compression import compress, decompress
from tests.lz4_frames import FLG_BLOCK_INDEPENDENT, blocks_decoded_alone

pytestmark = pytest.mark.skipif(shutil.which("npm") is None, reason="needs Node and npm")

# Repeats every ~1 KB over 1.5 MB: matches everywhere, block ends included.
TEXT = b"".join(b"record %d of a repetitive payload; " % (i % 37) for i in range(45_000))

RUN = """
const fs = require('fs')
const [codec, op, src, dst] = process.argv.slice(1)
const c = require('./codecs')[codec]()
const input = fs.readFileSync(src)
c[op](op === 'compress' ? { buffer: input } : input).then((out) => fs.writeFileSync(dst, out),
  (e) => { process.stderr.write(e.message); process.exit(3) })
"""


def js(tmp_path: Path, codec: str, op: str, data: bytes) -> bytes:
    """codecs.js's `codec` (LZ4 or ZSTD) applied to `data`; AssertionError with its message
    if it throws."""
    src, dst = tmp_path / "in", tmp_path / "out"
    src.write_bytes(data)
    program = node_program()
    proc = subprocess.run(["node", "-e", RUN, codec, op, str(src), str(dst)],
                          cwd=program.parent, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"codecs.js {codec} {op}: {proc.stderr.strip()}"
    return dst.read_bytes()


def test_lz4_frames_of_ours_read_block_by_block(tmp_path: Path) -> None:
    frame = js(tmp_path, "LZ4", "compress", TEXT)
    assert len(frame) < len(TEXT) // 4
    assert frame[4] & FLG_BLOCK_INDEPENDENT
    assert decompress(Compression.LZ4, frame) == TEXT
    blocks = blocks_decoded_alone(frame)  # as Kafka's Java reader; lz4js's frames fail here
    assert len(blocks) == -(-len(TEXT) // (64 << 10)) and b"".join(blocks) == TEXT


@pytest.mark.parametrize("data", [b"", b"x", b"twelve bytes", TEXT[:13], TEXT[:65_547],
                                  bytes(range(256)) * 300])
def test_lz4_edge_sizes(tmp_path: Path, data: bytes) -> None:
    frame = js(tmp_path, "LZ4", "compress", data)
    assert decompress(Compression.LZ4, frame) == data
    assert js(tmp_path, "LZ4", "decompress", frame) == data


@pytest.mark.parametrize("frame", [
    pytest.param(bytes(cramjam.lz4.compress(TEXT)), id="cramjam-linked-checksummed"),
    pytest.param(compress(Compression.LZ4, TEXT), id="pybroker"),
])
def test_lz4_frames_others_write(tmp_path: Path, frame: bytes) -> None:
    assert js(tmp_path, "LZ4", "decompress", frame) == TEXT


def test_lz4_content_checksum_catches_corruption(tmp_path: Path) -> None:
    frame = bytearray(cramjam.lz4.compress(TEXT))
    assert frame[4] & 0x04  # cramjam writes a content checksum
    frame[-14] ^= 0x01  # a literal: the last block ends 12 bytes from the end (block
    # checksum, end mark, content checksum) and its last 5 bytes are literals
    with pytest.raises(AssertionError, match="content checksum mismatch"):
        js(tmp_path, "LZ4", "decompress", bytes(frame))


def test_zstd_both_ways(tmp_path: Path) -> None:
    frame = js(tmp_path, "ZSTD", "compress", TEXT)
    assert frame[:4] == b"\x28\xb5\x2f\xfd" and len(frame) < len(TEXT) // 10
    assert decompress(Compression.ZSTD, frame) == TEXT
    assert js(tmp_path, "ZSTD", "decompress", compress(Compression.ZSTD, TEXT)) == TEXT


def test_zstd_frame_without_content_size(tmp_path: Path) -> None:
    stream = cramjam.zstd.Compressor()
    for i in range(0, len(TEXT), 100_000):
        stream.compress(TEXT[i:i + 100_000])
    frame = bytes(stream.finish())
    assert frame[4] & 0xC0 == 0  # no content size: 1.5 MB passes zstd-wasm's 1 MB guess
    assert js(tmp_path, "ZSTD", "decompress", frame) == TEXT


def test_zstd_garbage_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="code -"):
        js(tmp_path, "ZSTD", "decompress", b"\x28\xb5\x2f\xfd" + b"not zstd at all" * 10)
