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


# -- a frame received in place (open_frame / receive_into / received) ------------------------

def _fill(fb: FrameBuffer, data: bytes, step: int) -> bytes:
    """Write `data` through receive_into `step` bytes at a time, as a socket read would;
    whatever the open frame cannot take is returned."""
    while data and (into := fb.receive_into()) is not None:
        n = min(step, len(into), len(data))
        into[:n] = data[:n]
        fb.received(n)
        data = data[n:]
    return data


@pytest.mark.parametrize("head", [0, 1, 3, 4, 5, 100])
@pytest.mark.parametrize("step", [1, 7, 4096])
def test_received_in_place_whatever_was_buffered_before(head: int, step: int) -> None:
    payload = bytes(range(256)) * 40
    stream = frame(payload) + frame(b"next")
    fb = FrameBuffer()
    fb.receive_data(stream[:head])
    fb.open_frame()
    if head < 4:  # no size yet: nothing to open, the frame is pushed as before
        assert fb.receive_into() is None
        fb.receive_data(stream[head:4])
        fb.open_frame()
        head = 4
    assert fb.pending_size() == len(payload)
    assert fb.next_frame() is NEED_DATA
    rest = _fill(fb, stream[head:], step)
    assert rest == frame(b"next")  # never read past the frame
    got = fb.next_frame()
    assert type(got) is bytearray and got == payload
    fb.receive_data(rest)
    assert drain(fb) == [b"next"]
    assert fb.buffered == 0


@given(st.binary(min_size=1, max_size=3000), st.lists(st.integers(1, 700), max_size=20))
@settings(max_examples=100, deadline=None)
def test_pushed_bytes_fill_an_open_frame_and_the_rest_waits(payload: bytes,
                                                            cuts: list[int]) -> None:
    """The TLS loop pushes decrypted chunks with receive_data: they fill the open frame, and
    what follows it is framed as before."""
    stream = frame(payload) + frame(b"after") + frame(b"x")
    fb = FrameBuffer()
    fb.receive_data(stream[:4])
    fb.open_frame()
    pos, out = 4, []
    for cut in cuts + [len(stream)]:
        fb.receive_data(stream[pos:pos + cut])
        pos += cut
        while (item := fb.next_frame()) is not NEED_DATA:
            out.append(bytes(item))
    assert out == [payload, b"after", b"x"]


def test_open_frame_leaves_a_whole_frame_and_a_bad_size_alone() -> None:
    fb = FrameBuffer(max_frame_size=10)
    fb.receive_data(frame(b"whole"))
    fb.open_frame()  # already whole: handed out as bytes, joined once
    assert fb.receive_into() is None and fb.next_frame() == b"whole"
    fb.receive_data(struct.pack(">i", 11))
    fb.open_frame()  # over the maximum: next_frame refuses it, nothing is allocated
    assert fb.receive_into() is None
    with pytest.raises(FrameTooLarge):
        fb.next_frame()
