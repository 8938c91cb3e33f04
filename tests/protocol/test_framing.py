"""`FrameBuffer`, driven as h11's tests drive its parsers: the whole stream at once, one byte at
a time, and with a partial frame left over; plus the size guard on both sides of its edge."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.codec import ProtocolError
from protocol.framing import NEED_DATA, FrameBuffer, FrameTooLarge

PAYLOADS = [b"", b"a", b"\x00\x01\x02" * 100, bytes(range(256)) * 3, b"last"]


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def drain(fb: FrameBuffer) -> list[bytes]:
    out = []
    while (item := fb.next_frame()) is not NEED_DATA:
        assert isinstance(item, bytes)
        out.append(item)
    return out


def test_whole_stream() -> None:
    fb = FrameBuffer()
    fb.receive_data(b"".join(frame(p) for p in PAYLOADS))
    assert drain(fb) == PAYLOADS
    assert fb.buffered == 0
    assert fb.next_frame() is NEED_DATA


def test_one_byte_at_a_time() -> None:
    fb = FrameBuffer()
    got: list[bytes] = []
    for b in b"".join(frame(p) for p in PAYLOADS):
        fb.receive_data(bytes([b]))
        got += drain(fb)
    assert got == PAYLOADS
    assert fb.buffered == 0


@pytest.mark.parametrize("cut", [1, 3, 4, 5, 50])
def test_trailing_partial_frame_waits(cut: int) -> None:
    """Whole frames come out; a partial one stays buffered until its last byte arrives."""
    fb = FrameBuffer()
    tail = frame(b"x" * 60)
    fb.receive_data(b"".join(frame(p) for p in PAYLOADS) + tail[:cut])
    assert drain(fb) == PAYLOADS
    assert fb.buffered == cut
    assert fb.pending_size() == (60 if cut >= 4 else None)
    fb.receive_data(tail[cut:])
    assert drain(fb) == [b"x" * 60]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=6), st.data())
def test_any_chunking(payloads: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(frame(p) for p in payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    fb = FrameBuffer()
    got: list[bytes] = []
    for a, b in zip([0] + cuts, cuts + [len(stream)]):
        fb.receive_data(stream[a:b])
        got += drain(fb)
    assert got == payloads


def test_consumed_chunks_are_released() -> None:
    """Chunks whose bytes have all been handed out are dropped (no unbounded growth)."""
    fb = FrameBuffer()
    big = b"y" * 70_000
    fb.receive_data(frame(big) + frame(b"z")[:3])
    assert fb.next_frame() == big
    assert fb.buffered == 3
    fb.receive_data(frame(b"z")[3:])
    assert fb.next_frame() == b"z"
    assert fb.buffered == 0 and not fb._chunks


def test_size_at_maximum_is_accepted() -> None:
    fb = FrameBuffer(max_frame_size=100)
    fb.receive_data(struct.pack(">i", 100))
    assert fb.next_frame() is NEED_DATA
    fb.receive_data(b"p" * 100)
    assert fb.next_frame() == b"p" * 100


def test_one_byte_over_is_refused_before_the_payload() -> None:
    fb = FrameBuffer(max_frame_size=100)
    fb.receive_data(struct.pack(">i", 101))
    with pytest.raises(FrameTooLarge):
        fb.next_frame()


def test_huge_size_refused_from_its_four_bytes() -> None:
    fb = FrameBuffer()
    fb.receive_data(b"\x7f\xff")
    assert fb.next_frame() is NEED_DATA
    fb.receive_data(b"\xff\xff")
    with pytest.raises(FrameTooLarge):
        fb.next_frame()


@pytest.mark.parametrize("size", [-1, -2, -(2**31)])
def test_negative_size_refused(size: int) -> None:
    fb = FrameBuffer()
    fb.receive_data(struct.pack(">i", size))
    with pytest.raises(FrameTooLarge) as info:
        fb.next_frame()
    assert isinstance(info.value, ProtocolError)


def test_frame_too_large_is_a_protocol_error() -> None:
    """The connection loop catches one exception type for every kind of bad input."""
    assert issubclass(FrameTooLarge, ProtocolError)
