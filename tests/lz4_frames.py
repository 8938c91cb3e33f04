"""Reading an LZ4 frame block by block, as Kafka's Java reader (KafkaLZ4BlockInputStream)
does: each block decoded alone into a fresh buffer, so a block whose matches reach into the
block before (a "linked" frame) fails there, although whole-frame decoders read it."""
from __future__ import annotations

import struct

import cramjam

MAGIC = b"\x04\x22\x4d\x18"
FLG_BLOCK_INDEPENDENT = 0x20
FLG_BLOCK_CHECKSUM = 0x10
FLG_CONTENT_SIZE = 0x08
BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
STORED = 0x80000000


def blocks_decoded_alone(frame: bytes) -> list[bytes]:
    """Each block of the frame decoded on its own; cramjam.DecompressionError if one cannot be."""
    assert frame[:4] == MAGIC, f"not an LZ4 frame: {frame[:4]!r}"
    flg, bd = frame[4], frame[5]
    block_max = BLOCK_MAX[(bd >> 4) & 7]
    pos = 4 + 2 + (8 if flg & FLG_CONTENT_SIZE else 0) + 1
    out: list[bytes] = []
    while True:
        (word,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if word == 0:
            return out
        size = word & ~STORED
        block = frame[pos:pos + size]
        pos += size + (4 if flg & FLG_BLOCK_CHECKSUM else 0)
        if word & STORED:
            out.append(block)
        else:
            alone = bytearray(block_max)  # a fresh buffer: no earlier block to refer to
            out.append(bytes(alone[:cramjam.lz4.decompress_block_into(block, alone)]))
