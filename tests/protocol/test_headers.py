"""Request and response headers: the struct fast path, the DSL declaration, and which header
version goes with which message version."""
from __future__ import annotations

from io import BytesIO

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import primitives as P
from protocol.api_keys import ApiKey
from protocol.headers import (
    REQUEST_HEADER, REQUEST_PREFIX, RESPONSE_HEADER, RequestHeader,
    decode_request_header, decode_response_header, encode_request_header,
    encode_response_header, peek_request_prefix, request_header_version,
    response_header_version,
)
from protocol.messages import APIS

CLIENT_IDS = [None, "", "producer-1", "prodücer-ß-名前-🚀"]


def _dsl_request_header(header: RequestHeader, flexible: bool) -> bytes:
    """The same header through the DSL declaration (v2 when flexible, else v1)."""
    value = {"request_api_key": header.api_key, "request_api_version": header.api_version,
             "correlation_id": header.correlation_id, "client_id": header.client_id,
             "_unknown_tags": header.unknown_tags}
    return REQUEST_HEADER.encode(value, 2 if flexible else 1)


@pytest.mark.parametrize("client_id", CLIENT_IDS)
@pytest.mark.parametrize("flexible", [False, True])
def test_request_header_round_trip(client_id: str | None, flexible: bool) -> None:
    header = RequestHeader(3, 12 if flexible else 8, 0x01020304, client_id)
    data = encode_request_header(header, flexible)
    assert data == _dsl_request_header(header, flexible)
    io = BytesIO(data + b"BODY")
    assert decode_request_header(io, flexible) == header
    assert io.read() == b"BODY"


def test_request_header_v1_bytes() -> None:
    header = RequestHeader(18, 0, 7, "ab")
    assert encode_request_header(header, False) == b"\x00\x12\x00\x00\x00\x00\x00\x07\x00\x02ab"
    null = RequestHeader(18, 0, 7, None)
    assert encode_request_header(null, False) == b"\x00\x12\x00\x00\x00\x00\x00\x07\xff\xff"


def test_request_header_v2_client_id_stays_classic() -> None:
    """KIP-482: the client id keeps its int16 length in v2, so any broker can read it."""
    data = encode_request_header(RequestHeader(18, 3, 1, "abc"), True)
    assert data == b"\x00\x12\x00\x03\x00\x00\x00\x01\x00\x03abc\x00"


def test_request_header_v2_unknown_tags_kept() -> None:
    raw = b"\x00\x12\x00\x03\x00\x00\x00\x01\xff\xff" + b"\x02\x05\x01X\x07\x02YZ"
    header = decode_request_header(BytesIO(raw), True)
    assert header.client_id is None
    assert header.unknown_tags == {5: b"X", 7: b"YZ"}
    assert encode_request_header(header, True) == raw


def test_request_header_one_byte_at_a_time() -> None:
    """Every proper prefix of a header is a short read, never a wrong header."""
    raw = encode_request_header(RequestHeader(0, 9, 42, "clïent", {3: b"t"}), True)
    for cut in range(len(raw)):
        with pytest.raises(P.WireError):
            decode_request_header(BytesIO(raw[:cut]), True)
    assert decode_request_header(BytesIO(raw), True).unknown_tags == {3: b"t"}


@pytest.mark.parametrize("bad", [b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80"])
def test_request_header_bad_utf8(bad: bytes) -> None:
    raw = REQUEST_PREFIX.pack(18, 0, 1, len(bad)) + bad
    with pytest.raises(P.WireError):
        decode_request_header(BytesIO(raw), False)


def test_request_header_negative_client_id_length() -> None:
    with pytest.raises(P.WireError):
        decode_request_header(BytesIO(REQUEST_PREFIX.pack(18, 0, 1, -2) + b"xx"), False)


@settings(max_examples=100, deadline=None)
@given(api_key=st.integers(-(2**15), 2**15 - 1), api_version=st.integers(-(2**15), 2**15 - 1),
       correlation_id=st.integers(-(2**31), 2**31 - 1),
       client_id=st.one_of(st.none(), st.text(st.characters(codec="utf-8"), max_size=20)),
       tags=st.dictionaries(st.integers(0, 300), st.binary(max_size=5), max_size=3),
       flexible=st.booleans())
def test_fast_path_agrees_with_dsl(api_key: int, api_version: int, correlation_id: int,
                                   client_id: str | None, tags: dict[int, bytes],
                                   flexible: bool) -> None:
    """The struct prefix fast path and the REQUEST_HEADER declaration give the same bytes and
    the same values, both ways."""
    header = RequestHeader(api_key, api_version, correlation_id, client_id,
                           tags if flexible else {})
    data = encode_request_header(header, flexible)
    assert data == _dsl_request_header(header, flexible)
    dsl = REQUEST_HEADER.decode(data[:_v1_len(data)], 1)
    assert (dsl.request_api_key, dsl.request_api_version, dsl.correlation_id, dsl.client_id) \
        == (api_key, api_version, correlation_id, client_id)
    assert decode_request_header(BytesIO(data), flexible) == header
    assert peek_request_prefix(data) == (api_key, api_version, correlation_id)


def _v1_len(data: bytes) -> int:
    n = REQUEST_PREFIX.unpack_from(data)[3]
    return REQUEST_PREFIX.size + max(n, 0)


def test_prefix_struct_matches_declared_widths() -> None:
    """`REQUEST_PREFIX` is the DSL's first four fields: int16, int16, int32, int16 length."""
    kinds = [fl.type for fl in REQUEST_HEADER.fields]
    assert kinds == ["int16", "int16", "int32", "string"]
    assert REQUEST_PREFIX.format == ">hhih"


def test_peek_short_frame() -> None:
    assert peek_request_prefix(b"\x00" * 7) is None


# -- response headers ------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1])
def test_response_header_round_trip(version: int) -> None:
    data = encode_response_header(-5, version)
    assert data == RESPONSE_HEADER.encode({"correlation_id": -5}, version)
    io = BytesIO(data + b"rest")
    assert decode_response_header(io, version) == -5
    assert io.read() == b"rest"


def test_response_header_v1_skips_unknown_tags() -> None:
    io = BytesIO(b"\x00\x00\x00\x09" + b"\x01\x02\x01Q" + b"body")
    assert decode_response_header(io, 1) == 9
    assert io.read() == b"body"


@pytest.mark.parametrize("key", sorted(APIS))
def test_header_versions_follow_flexibility(key: int) -> None:
    api = APIS[key]
    assert api.versions.high is not None
    for version in range(api.versions.low, api.versions.high + 1):
        flexible = version in api.flexible
        assert request_header_version(flexible) == (2 if flexible else 1)
        expected = 0 if key == ApiKey.API_VERSIONS else (1 if flexible else 0)
        assert response_header_version(key, flexible) == expected


def test_api_versions_response_is_always_header_v0() -> None:
    """KIP-511: a client reads the ApiVersions response before it knows what we speak."""
    assert response_header_version(ApiKey.API_VERSIONS, True) == 0
    assert response_header_version(ApiKey.API_VERSIONS, False) == 0
    assert 3 in APIS[ApiKey.API_VERSIONS].flexible


def test_dsl_request_header_v2_keeps_client_id_classic() -> None:
    """Kafka's RequestHeader.json gives ClientId `"flexibleVersions": "none"`."""
    header = RequestHeader(18, 3, 1, "abc")
    value = {"request_api_key": 18, "request_api_version": 3, "correlation_id": 1,
             "client_id": "abc"}
    assert REQUEST_HEADER.encode(value, 2) == encode_request_header(header, True)
