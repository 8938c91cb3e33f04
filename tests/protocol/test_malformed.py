"""Bad bytes become `ProtocolError` -- always that, never another exception, never a crash.

`protocol.codec.decode_request` is the broker's only door for request bytes, so these tests
knock on it: every truncation of real frames, random bytes, random mutations, hostile lengths
and counts (which must fail at once, not allocate by them), trailing bytes, unknown APIs and
versions, and bad UTF-8.
"""
from __future__ import annotations

import struct
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.codec import ProtocolError, Request, UnsupportedVersion, decode_request
from protocol.headers import REQUEST_PREFIX
from protocol.messages import APIS
from tests.protocol.samples import FRAMES, REQUESTS

FUZZ = settings(max_examples=300, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])


def _v1_header(key: int, version: int, correlation_id: int = 99, client_id: bytes = b"c") -> bytes:
    return REQUEST_PREFIX.pack(key, version, correlation_id, len(client_id)) + client_id


def _v2_header(key: int, version: int, correlation_id: int = 99) -> bytes:
    return _v1_header(key, version, correlation_id) + b"\x00"


def _decodes_or_refuses(frame: bytes) -> None:
    try:
        result = decode_request(frame)
    except ProtocolError:
        return
    assert isinstance(result, Request)


@pytest.mark.parametrize("name", FRAMES)
def test_samples_decode(name: str) -> None:
    request = decode_request(FRAMES[name])
    assert request.header.correlation_id == 7 and request.header.client_id == "tests"


# A large frame is received in place and decoded from its bytearray (primitives.FrameReader):
# the same door, the same refusals.
KINDS = pytest.mark.parametrize("kind", [bytes, bytearray])


@KINDS
@pytest.mark.parametrize("name", FRAMES)
def test_every_truncation_is_a_protocol_error(name: str, kind: type) -> None:
    frame = FRAMES[name]
    for cut in range(len(frame)):
        with pytest.raises(ProtocolError):
            decode_request(kind(frame[:cut]))


@KINDS
@pytest.mark.parametrize("name", FRAMES)
def test_trailing_bytes_are_a_protocol_error(name: str, kind: type) -> None:
    for extra in (b"\x00", b"\x01", b"garbage"):
        with pytest.raises(ProtocolError) as info:
            decode_request(kind(FRAMES[name] + extra))
        assert info.value.header is not None and info.value.header.correlation_id == 7


@FUZZ
@given(st.binary(max_size=256))
def test_random_bytes(frame: bytes) -> None:
    _decodes_or_refuses(frame)
    _decodes_or_refuses(bytearray(frame))


_ALL_VERSIONS = [(key, v) for key, api in APIS.items()
                 for v in range(api.versions.low, (api.versions.high or 0) + 1)]


@FUZZ
@given(st.sampled_from(_ALL_VERSIONS), st.binary(max_size=200))
def test_random_body_behind_a_valid_header(key_version: tuple[int, int], body: bytes) -> None:
    """Random bodies reach the body decoders, which a random header almost never does."""
    key, version = key_version
    header = _v2_header(key, version) if version in APIS[key].flexible else _v1_header(key, version)
    _decodes_or_refuses(header + body)


@FUZZ
@given(st.sampled_from(sorted(FRAMES)), st.data())
def test_mutated_frames(name: str, data: st.DataObject) -> None:
    frame = bytearray(FRAMES[name])
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF,
                                              data.draw(st.integers(0, 255))]))
    _decodes_or_refuses(bytes(frame))


# -- hostile lengths and counts --------------------------------------------------------------

_METADATA_V4 = _v1_header(3, 4)


@pytest.mark.parametrize("count", [-2, -3, -(2**31)])
def test_negative_array_count(count: int) -> None:
    with pytest.raises(ProtocolError):
        decode_request(_METADATA_V4 + struct.pack(">i", count) + b"\x01")


def test_null_array_allowed_only_where_nullable() -> None:
    """Metadata v4 topics are nullable (null = all topics); Metadata v0's are not."""
    assert decode_request(_METADATA_V4 + struct.pack(">i", -1) + b"\x01").body.topics is None
    with pytest.raises(ProtocolError):
        decode_request(_v1_header(3, 0) + struct.pack(">i", -1))


@pytest.mark.parametrize("length", [-1, -2, -(2**15)])
def test_negative_string_length(length: int) -> None:
    """Topic names are not nullable before v10: -1 is as wrong as -2 there."""
    with pytest.raises(ProtocolError):
        decode_request(_METADATA_V4 + struct.pack(">ih", 1, length) + b"\x01")


def test_null_compact_array_in_non_nullable_field() -> None:
    """Compact count 0 means null; Fetch v12 topics may not be null."""
    body = struct.pack(">iiiibii", -1, 500, 1, 1024, 0, 0, -1) + b"\x00" + b"\x01\x01\x00"
    with pytest.raises(ProtocolError):
        decode_request(_v2_header(1, 12) + body)


def _fails_fast(frame: bytes) -> None:
    """Refused in well under 10 ms of this thread's CPU, allocating nothing near the
    declared size. The thread's CPU clock, not the wall clock: on a loaded machine a
    preempted decode was charged other processes' time (32 ms once, under two workers)."""
    with pytest.raises(ProtocolError):
        decode_request(frame)  # warm: the schema is compiled on first use
    start = time.thread_time()
    with pytest.raises(ProtocolError):
        decode_request(frame)
    assert time.thread_time() - start < 0.010
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError):
            decode_request(frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, f"peak {peak} bytes for a {len(frame)}-byte frame"


def test_huge_array_count_in_a_tiny_frame() -> None:
    frame = _METADATA_V4 + struct.pack(">i", 2**31 - 1)
    frame += b"\x00" * (20 - len(frame))
    assert len(frame) == 20
    _fails_fast(frame)


def test_huge_compact_count_in_a_tiny_frame() -> None:
    frame = _v2_header(3, 12) + b"\xff\xff\xff\xff\x07"
    frame += b"\x00" * (20 - len(frame))
    _fails_fast(frame)


def test_huge_bytes_length_in_a_tiny_frame() -> None:
    """Produce v8 records: int32 length 2**31-1 with a handful of bytes behind it."""
    body = struct.pack(">hhii", -1, 1, 1000, 1) + b"\x00\x01t" + struct.pack(">iii", 1, 0,
                                                                            2**31 - 1)
    _fails_fast(_v1_header(0, 8) + body + b"\x00" * 4)


def test_huge_string_length_in_a_tiny_frame() -> None:
    _fails_fast(_METADATA_V4 + struct.pack(">ih", 1, 2**15 - 1) + b"ab")


def test_overlong_varint() -> None:
    with pytest.raises(ProtocolError):
        decode_request(_v2_header(3, 12) + b"\xff" * 20)


def test_huge_tag_size() -> None:
    """A tagged field claiming more bytes than the frame holds."""
    body = b"\x01" + b"\x01" + b"\x00" + b"\x01\x00\xff\xff\xff\xff\x0f"
    with pytest.raises(ProtocolError):
        decode_request(_v2_header(3, 12) + body)


def test_tags_out_of_order() -> None:
    frame = FRAMES["ApiVersions-v3"][:-1] + b"\x02\x05\x00\x03\x00"
    with pytest.raises(ProtocolError):
        decode_request(frame)


# -- unknown APIs and versions ---------------------------------------------------------------

@pytest.mark.parametrize("key", [34, 999, -1, 32767])
def test_unknown_api_key(key: int) -> None:
    assert key not in APIS
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(_v1_header(key, 0, correlation_id=1234) + b"\x00\x00")
    assert info.value.header is not None
    assert info.value.header.correlation_id == 1234


@pytest.mark.parametrize("version", [99, 5, -1])
def test_api_versions_unsupported_version(version: int) -> None:
    """The broker answers this one (error 35 in a v0 body), so it needs the correlation id."""
    frame = _v2_header(18, version, correlation_id=4321) + b"\x05hello\x041.0\x00"
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(frame)
    header = info.value.header
    assert header is not None
    assert (header.api_key, header.api_version, header.correlation_id) == (18, version, 4321)


def test_too_short_for_a_header() -> None:
    for frame in (b"", b"\x00", b"\x00\x12\x00\x03\x00\x00\x00"):
        with pytest.raises(ProtocolError) as info:
            decode_request(frame)
        assert not isinstance(info.value, UnsupportedVersion)


# -- bad UTF-8 -------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"a\x80"])
def test_bad_utf8_classic_string(bad: bytes) -> None:
    frame = _METADATA_V4 + struct.pack(">ih", 1, len(bad)) + bad + b"\x01"
    with pytest.raises(ProtocolError) as info:
        decode_request(frame)
    assert info.value.header is not None


@pytest.mark.parametrize("bad", [b"\xff", b"\xc3\x28"])
def test_bad_utf8_compact_string(bad: bytes) -> None:
    body = b"\x02" + b"\x00" * 16 + bytes([len(bad) + 1]) + bad + b"\x00" + b"\x01\x00\x00"
    with pytest.raises(ProtocolError):
        decode_request(_v2_header(3, 12) + body)
    good = body.replace(bad, b"ok"[:len(bad)])
    assert decode_request(_v2_header(3, 12) + good).body.topics[0].name == "ok"[:len(bad)]


def test_bad_utf8_client_id() -> None:
    frame = REQUEST_PREFIX.pack(18, 0, 1, 2) + b"\xc3\x28"
    with pytest.raises(ProtocolError):
        decode_request(frame)


def test_sample_names_match_requests() -> None:
    assert [r[0] for r in REQUESTS] == list(FRAMES)
