"""Splitting a byte stream into Kafka frames (a 4-byte big-endian size, then the payload).

Sans-I/O, in h11's manner: push bytes in with `receive_data`, pull whole frames out with
`next_frame`, which returns `NEED_DATA` until one is complete. A declared size that is negative
or over the maximum is refused as soon as its 4 bytes arrive, before anything is buffered for it.

A large frame can instead be received in place: once its size is known (and the broker has
reserved its memory), `open_frame` gives it one bytearray of that size, `receive_into` hands
out the writable part still to fill (for `os.readv` / `recv_into`) and `received` counts what
was written there; bytes pushed with `receive_data` meanwhile fill it too. `next_frame` then
returns that bytearray itself: no join of chunks, and decoding can hand out writable views of
it (`protocol.primitives.FrameReader`). Each open frame has a bytearray of its own, never reused,
so a view of one stays valid for as long as it is held.
"""
from __future__ import annotations

import enum
import struct
from collections import deque
from typing import Final, Literal

from protocol.codec import ProtocolError

SIZE = struct.Struct(">i")


class _NeedData(enum.Enum):
    """An enum of one member rather than a bare object, so that a type checker narrows
    `frame is NEED_DATA` to the frame's bytes."""

    NEED_DATA = "NEED_DATA"

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData.NEED_DATA


class FrameTooLarge(ProtocolError):
    """The peer declared a frame larger than we accept (or a negative size)."""


class FrameBuffer:
    """Received chunks are kept as they came; each frame is copied out exactly once.

    (Appending every chunk to one growing bytearray and slicing frames out of it copied a
    1 MB Produce frame two or three times; the profile showed that as a third of the broker's
    time under 1 KB-record load.)
    """

    def __init__(self, max_frame_size: int = 104857600) -> None:
        self.max_frame_size = max_frame_size
        self._chunks: deque[bytes] = deque()
        self._offset = 0  # bytes of the first chunk already handed out
        self._size = 0  # bytes buffered and not yet handed out, the open frame's excluded
        self._open: bytearray | None = None  # the frame being received in place
        self._filled = 0  # bytes of it received

    def receive_data(self, data: bytes | bytearray) -> None:
        if not data:
            return
        frame = self._open
        if frame is not None and self._filled < len(frame):
            n = min(len(data), len(frame) - self._filled)
            frame[self._filled:self._filled + n] = memoryview(data)[:n]
            self._filled += n
            if n == len(data):
                return
            self._chunks.append(bytes(memoryview(data)[n:]))
            self._size += len(data) - n
            return
        self._chunks.append(bytes(data))
        self._size += len(data)

    @property
    def buffered(self) -> int:
        return self._size + self._filled

    def open_frame(self) -> None:
        """Receive the rest of the pending frame (its size prefix here, the frame not yet
        whole) into a bytearray of its own; a no-op when there is no such frame or one is
        already open. The bytes of it already buffered are copied there once."""
        if self._open is not None:
            return
        size = self._peek_size()
        if size is None or size < 0 or size > self.max_frame_size or self._size >= 4 + size:
            return
        self._take(4)
        frame = bytearray(size)
        have = 0
        chunks = self._chunks
        while chunks:  # every byte buffered after the prefix is this frame's
            with memoryview(chunks.popleft()) as chunk:
                part = chunk[self._offset:]
                frame[have:have + len(part)] = part
                have += len(part)
            self._offset = 0
        self._size = 0
        self._open, self._filled = frame, have

    def receive_into(self) -> memoryview | None:
        """The open frame's part still to receive, writable; None when no frame is open (or
        it is whole). Write at most that much, then call `received`."""
        frame = self._open
        if frame is None or self._filled == len(frame):
            return None
        return memoryview(frame)[self._filled:]

    def received(self, n: int) -> None:
        """`n` bytes were written at the start of what `receive_into` returned."""
        assert self._open is not None and 0 <= n <= len(self._open) - self._filled
        self._filled += n

    def _peek_size(self) -> int | None:
        if self._open is not None:
            return len(self._open)
        if self._size < 4:
            return None
        first = self._chunks[0]
        if len(first) - self._offset < 4:
            self._merge_first(4)
            first = self._chunks[0]
        return SIZE.unpack_from(first, self._offset)[0]

    def _merge_first(self, at_least: int) -> None:
        """Join leading chunks until the first holds `at_least` unread bytes (rare: only when
        a size prefix is split across receives)."""
        parts = [self._chunks.popleft()[self._offset:]]
        have = len(parts[0])
        while have < at_least:
            chunk = self._chunks.popleft()
            parts.append(chunk)
            have += len(chunk)
        self._chunks.appendleft(b"".join(parts))
        self._offset = 0

    def next_frame(self) -> bytes | bytearray | Literal[_NeedData.NEED_DATA]:
        """The next whole frame's payload, or NEED_DATA; raises FrameTooLarge for a bad size.
        A frame received in place (`open_frame`) comes as its bytearray."""
        frame = self._open
        if frame is not None:
            if self._filled < len(frame):
                return NEED_DATA
            self._open, self._filled = None, 0
            return frame
        size = self._peek_size()
        if size is None:
            return NEED_DATA
        if size < 0 or size > self.max_frame_size:
            raise FrameTooLarge(
                f"frame size {size} is outside 0..{self.max_frame_size} (socket.request.max.bytes)")
        if self._size < 4 + size:
            return NEED_DATA
        self._take(4)
        self._size -= 4 + size
        return self._take(size)

    def _take(self, n: int) -> bytes:
        if n == 0:
            return b""
        chunks = self._chunks
        first = chunks[0]
        start = self._offset
        if len(first) - start >= n:
            end = start + n
            if end == len(first):
                chunks.popleft()
                self._offset = 0
                return first if start == 0 else first[start:]
            self._offset = end
            with memoryview(first) as view:
                return bytes(view[start:end])
        parts = []
        need = n
        while need:
            chunk = chunks[0]
            avail = len(chunk) - self._offset
            if avail <= need:
                parts.append(memoryview(chunk)[self._offset:])
                chunks.popleft()
                self._offset = 0
                need -= avail
            else:
                parts.append(memoryview(chunk)[self._offset:self._offset + need])
                self._offset += need
                need = 0
        return b"".join(parts)

    def pending_size(self) -> int | None:
        """The declared size of the frame being received, if its size prefix has arrived."""
        return self._peek_size()
