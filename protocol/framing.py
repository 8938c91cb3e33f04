"""Splitting a byte stream into Kafka frames (a 4-byte big-endian size, then the payload).

Sans-I/O, in h11's manner: push bytes in with `receive_data`, pull whole frames out with
`next_frame`, which returns `NEED_DATA` until one is complete. A declared size that is negative
or over the maximum is refused as soon as its 4 bytes arrive, before anything is buffered for it.
"""
from __future__ import annotations

import struct
from typing import Final

from protocol.codec import ProtocolError

SIZE = struct.Struct(">i")


class _NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()


class FrameTooLarge(ProtocolError):
    """The peer declared a frame larger than we accept (or a negative size)."""


class FrameBuffer:
    def __init__(self, max_frame_size: int = 104857600) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._pos = 0

    def receive_data(self, data: bytes) -> None:
        if self._pos and self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def next_frame(self) -> bytes | _NeedData:
        """The next whole frame's payload, or NEED_DATA; raises FrameTooLarge for a bad size."""
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 4:
            return NEED_DATA
        (size,) = SIZE.unpack_from(buf, pos)
        if size < 0 or size > self.max_frame_size:
            raise FrameTooLarge(
                f"frame size {size} is outside 0..{self.max_frame_size} (socket.request.max.bytes)")
        end = pos + 4 + size
        if len(buf) < end:
            return NEED_DATA
        frame = bytes(buf[pos + 4:end])
        if end == len(buf):
            buf.clear()
            self._pos = 0
        elif end > 1 << 16:
            del buf[:end]
            self._pos = 0
        else:
            self._pos = end
        return frame

    def pending_size(self) -> int | None:
        """The declared size of the frame being received, if its size prefix has arrived."""
        if len(self._buf) - self._pos < 4:
            return None
        return SIZE.unpack_from(self._buf, self._pos)[0]
