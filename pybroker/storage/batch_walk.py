"""Walking the batches of a `.log` file in chunks: the segment's and the cleaner's one reader.

A segment is never read whole: finding an offset walks the headers from an index entry,
recovery and index rebuilds walk a whole segment, and the cleaner reads every batch of the
segments it compacts. All of them read the file in chunks and take whole batches out of each
chunk; a batch cut by the end of a chunk is not an error, the next read starts at it and is
long enough to hold it whole (a batch larger than a chunk gets a read of its own size).

Where the walk stops short is the caller's to judge: at the tail of the active segment a torn
batch is what a crash leaves (recovery truncates there), while in a segment the cleaner reads
it is corruption. So the walk never raises on bad bytes; it stops at the first batch that is
torn (runs past `end`), has a bad magic or length, or (with `verify_crc`) a CRC mismatch, and
`valid_end` and `reason` say where and why.
"""
from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator

from protocol.records.batch import LOG_OVERHEAD, BatchHeader, walk_batches

__all__ = ["BatchWalk"]

_I32 = struct.Struct(">i")


class BatchWalk:
    """Iterate (file position, header) over the whole batches in [`start`, `end`) of a file.

    `fd` is called for the descriptor at every read, not once: a segment's descriptor comes
    from a cache that may close it when the caller uses other files between two batches.
    """

    __slots__ = ("_fd", "start", "end", "chunk", "verify_crc", "valid_end", "reason",
                 "_buf", "_buf_pos", "_view")

    def __init__(self, fd: Callable[[], int], start: int, end: int, *, chunk: int,
                 verify_crc: bool = False) -> None:
        self._fd = fd
        self.start = start
        self.end = end
        self.chunk = chunk
        self.verify_crc = verify_crc
        self.valid_end = start
        self.reason: str | None = None
        self._buf = b""
        self._buf_pos = start
        self._view: memoryview | None = None

    def __iter__(self) -> Iterator[tuple[int, BatchHeader]]:
        end = self.end
        pos = self.start
        want = self.chunk
        while pos < end:
            buf = os.pread(self._fd(), min(want, end - pos), pos)
            if not buf:
                self.reason = f"short read at {pos}"
                return
            self._buf, self._buf_pos, self._view = buf, pos, None
            batches, valid, reason = walk_batches(buf, verify_crc=self.verify_crc)
            for rel, header in batches:
                yield pos + rel, header
            chunk_end = pos + len(buf)
            pos += valid
            self.valid_end = pos
            if reason is None:
                want = self.chunk
                continue
            if reason.startswith("torn tail") and chunk_end < end:
                # Cut by the chunk, not by the file: read again from this batch, whole.
                want = self.chunk
                if len(buf) - valid >= LOG_OVERHEAD:
                    need = _I32.unpack_from(buf, valid + 8)[0] + LOG_OVERHEAD
                    if pos + need > end:
                        self.reason = f"torn tail: batch at {pos} needs {need} bytes"
                        return
                    want = max(want, need)
                continue
            self.reason = reason
            return

    def batch(self, position: int, header: BatchHeader) -> memoryview:
        """The bytes of the batch just yielded at `position`: a view of the chunk already
        read (no read of its own), which keeps that chunk alive."""
        view = self._view
        if view is None:
            view = self._view = memoryview(self._buf)
        rel = position - self._buf_pos
        return view[rel:rel + header.size]
