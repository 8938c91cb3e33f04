// LZ4 and zstd for kafkajs, in plain JavaScript and WebAssembly: kafkajs ships gzip only and
// its own LZ4/zstd plug-ins wrap native addons (node-gyp or downloaded prebuilt binaries).
//
// A kafkajs codec is a function returning { compress(encoder) -> Buffer, decompress(buffer)
// -> Buffer } (kafkajs/src/protocol/message/compression): registered in CompressionCodecs.
//
// LZ4: record batches v2 carry one LZ4 frame. lz4js supplies the block decoder and xxHash32
// only. Its frame reader takes a block checksum for the start of the block (the frame format
// puts it after the block's data: every frame pybroker's cramjam writes has them), its frame
// writer chains 4 MB blocks, which Kafka's Java reader (KafkaLZ4BlockInputStream decompresses
// each block alone) cannot follow, and its block coder breaks a rule (see lz4Block). We write
// what the Java producer writes: 64 KB independent blocks, no checksums but the header's.
//
// zstd: @bokuweb/zstd-wasm's single-shot ZSTD_decompress needs the output size up front; a
// frame that does not declare it (a streaming writer's) is retried with room doubled.
'use strict'
const lz4 = require('lz4js')
const xxh32 = require('lz4js/xxh32').hash
const zstd = require('@bokuweb/zstd-wasm')

const LZ4_MAGIC = 0x184D2204
const FLG_VERSION = 0x40
const FLG_BLOCK_INDEPENDENT = 0x20
const FLG_BLOCK_CHECKSUM = 0x10
const FLG_CONTENT_SIZE = 0x08
const FLG_CONTENT_CHECKSUM = 0x04
const FLG_DICT_ID = 0x01
const BD_64KB = 4 << 4
const BLOCK_SIZES = { 4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20 }
const BLOCK_UNCOMPRESSED = 0x80000000
const WRITE_BLOCK = 64 << 10

// LZ4 block rules (lz4's doc/lz4_Block_format.md): the last 5 bytes are literals and the
// last match starts at least 12 bytes before the block's end. lz4js's block coder lets a
// match start 10 bytes from the end, which the reference decoder refuses once the block fills
// its buffer (every 64 KB block but the last): cramjam, hence pybroker, rejected such frames.
const MIN_MATCH = 4
const LAST_LITERALS = 5
const MATCH_FROM_END = 12
const MAX_OFFSET = 65535

function lz4Length (out, o, n) {
  for (; n >= 255; n -= 255) out[o++] = 255
  out[o++] = n
  return o
}

function lz4Sequence (out, o, src, from, to, offset, matchLen) {
  const literals = to - from
  const extra = matchLen - MIN_MATCH
  out[o++] = (Math.min(literals, 15) << 4) | (matchLen ? Math.min(extra, 15) : 0)
  if (literals >= 15) o = lz4Length(out, o, literals - 15)
  src.copy(out, o, from, to)
  o += literals
  if (!matchLen) return o
  out[o++] = offset & 0xff
  out[o++] = offset >> 8
  return extra >= 15 ? lz4Length(out, o, extra - 15) : o
}

// lz4Block writes src[start, end) as one block into out from 0 (greedy, one hash probe):
// matches only within the block, so it decodes alone. Returns the block's size.
function lz4Block (src, start, end, out, table) {
  let o = 0
  let anchor = start
  let i = start
  let misses = 0
  while (i <= end - MATCH_FROM_END) {
    const seq = src.readUInt32LE(i)
    const h = Math.imul(seq, 2654435761) >>> 16
    const ref = table[h] - 1
    table[h] = i + 1
    if (ref >= start && i - ref <= MAX_OFFSET && src.readUInt32LE(ref) === seq) {
      let len = MIN_MATCH
      while (i + len < end - LAST_LITERALS && src[ref + len] === src[i + len]) len++
      o = lz4Sequence(out, o, src, anchor, i, i - ref, len)
      i += len
      anchor = i
      misses = 0
    } else {
      i += 1 + (misses++ >> 6) // skip faster through data that does not compress
    }
  }
  return lz4Sequence(out, o, src, anchor, end, 0, 0)
}

function lz4Compress (src) {
  const blocks = Math.ceil(src.length / WRITE_BLOCK)
  // header 7, per block a 4-byte size and at worst the block stored as is, end mark 4
  const out = Buffer.alloc(7 + blocks * (4 + WRITE_BLOCK) + 4)
  out.writeUInt32LE(LZ4_MAGIC, 0)
  out[4] = FLG_VERSION | FLG_BLOCK_INDEPENDENT
  out[5] = BD_64KB
  out[6] = (xxh32(0, out, 4, 2) >>> 8) & 0xff
  let at = 7
  const table = new Int32Array(1 << 16)
  const scratch = Buffer.alloc(WRITE_BLOCK + (WRITE_BLOCK >> 8) + 16)
  for (let start = 0; start < src.length; start += WRITE_BLOCK) {
    const size = Math.min(WRITE_BLOCK, src.length - start)
    const packed = lz4Block(src, start, start + size, scratch, table)
    if (packed < size) {
      out.writeUInt32LE(packed, at)
      scratch.copy(out, at + 4, 0, packed)
      at += 4 + packed
    } else {
      out.writeUInt32LE((BLOCK_UNCOMPRESSED | size) >>> 0, at)
      src.copy(out, at + 4, start, start + size)
      at += 4 + size
    }
  }
  out.writeUInt32LE(0, at)
  return out.subarray(0, at + 4)
}

// lz4Decompress reads one or more concatenated frames, checking the header and content
// checksums (a block coder gone wrong shows here rather than as bad records).
function lz4Decompress (src) {
  const parts = []
  let at = 0
  while (at < src.length) {
    if (src.length - at < 7 || src.readUInt32LE(at) !== LZ4_MAGIC) throw new Error('LZ4: not a frame')
    const flg = src[at + 4]
    const blockMax = BLOCK_SIZES[(src[at + 5] >> 4) & 7]
    if ((flg & 0xc0) !== FLG_VERSION) throw new Error(`LZ4: frame version ${flg >> 6}`)
    if (flg & FLG_DICT_ID) throw new Error('LZ4: frames with a preset dictionary are not supported')
    if (blockMax === undefined) throw new Error('LZ4: bad block size')
    const descriptor = 2 + (flg & FLG_CONTENT_SIZE ? 8 : 0)
    if (((xxh32(0, src, at + 4, descriptor) >>> 8) & 0xff) !== src[at + 4 + descriptor]) {
      throw new Error('LZ4: header checksum mismatch')
    }
    let p = at + 4 + descriptor + 1
    // room: every block is at most blockMax; its exact size when stored uncompressed
    let room = 0
    for (let q = p; ;) {
      const word = src.readUInt32LE(q)
      if (word === 0) break
      const len = (word & ~BLOCK_UNCOMPRESSED) >>> 0
      room += word & BLOCK_UNCOMPRESSED ? len : blockMax
      q += 4 + len + (flg & FLG_BLOCK_CHECKSUM ? 4 : 0)
    }
    const dst = Buffer.alloc(room)
    let n = 0
    for (;;) {
      const word = src.readUInt32LE(p)
      p += 4
      if (word === 0) break
      const len = (word & ~BLOCK_UNCOMPRESSED) >>> 0
      if (p + len > src.length) throw new Error('LZ4: truncated block')
      if (word & BLOCK_UNCOMPRESSED) {
        src.copy(dst, n, p, p + len)
        n += len
      } else {
        n = lz4.decompressBlock(src, dst, p, len, n) // earlier blocks stay in dst: linked ones decode too
      }
      p += len + (flg & FLG_BLOCK_CHECKSUM ? 4 : 0) // the block checksum follows the block
    }
    if (flg & FLG_CONTENT_CHECKSUM) {
      if ((xxh32(0, dst, 0, n) >>> 0) !== src.readUInt32LE(p)) throw new Error('LZ4: content checksum mismatch')
      p += 4
    }
    parts.push(dst.subarray(0, n))
    at = p
  }
  return parts.length === 1 ? parts[0] : Buffer.concat(parts)
}

const LZ4 = () => ({
  async compress (encoder) { return lz4Compress(encoder.buffer) },
  async decompress (buffer) { return lz4Decompress(buffer) }
})

let zstdReady = null
const ZSTD_LEVEL = 3 // Kafka's default (KIP-390)
const ZSTD_MAX_OUT = 1 << 30
const ZSTD_DST_TOO_SMALL = /code -70$/ // ZSTD_error_dstSize_tooSmall, as zstd-wasm reports it

async function zstdDecompress (buffer) {
  await (zstdReady = zstdReady || zstd.init())
  // the size a frame declares wins; this room serves frames that declare none
  for (let room = Math.max(1 << 20, buffer.length * 8); ; room *= 2) {
    try {
      const out = zstd.decompress(buffer, { defaultHeapSize: room })
      return Buffer.from(out.buffer, out.byteOffset, out.byteLength)
    } catch (e) {
      if (room >= ZSTD_MAX_OUT || !ZSTD_DST_TOO_SMALL.test(e.message)) throw e
    }
  }
}

const ZSTD = () => ({
  async compress (encoder) {
    await (zstdReady = zstdReady || zstd.init())
    const out = zstd.compress(encoder.buffer, ZSTD_LEVEL)
    return Buffer.from(out.buffer, out.byteOffset, out.byteLength)
  },
  decompress: zstdDecompress
})

module.exports = { LZ4, ZSTD, lz4Compress, lz4Decompress }
