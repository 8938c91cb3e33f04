"""Request and response headers, and which header version goes with which message version.

Request header v1 is api_key, api_version, correlation_id and a client id that stays a classic
int16-length string even in v2 (so that any broker can read it); v2 adds a tagged-field section.
Response header v0 is the correlation id; v1 adds tagged fields. A flexible message version uses
request header v2 and response header v1 -- except ApiVersions responses, which always use v0
so a client can read them before it knows what the broker speaks (KIP-511).
"""
from __future__ import annotations

import struct
from io import BytesIO
from types import MappingProxyType
from typing import Mapping, NamedTuple

from protocol import primitives as P
from protocol.api_keys import ApiKey
from protocol.schema import Message, Versions, f, read_tag_section, write_tag_section

# Fixed prefix of request header v1/v2: api_key, api_version, correlation_id, client_id length.
REQUEST_PREFIX = struct.Struct(">hhih")
CORRELATION = struct.Struct(">i")

REQUEST_HEADER = Message("RequestHeader", -1, Versions(0, 2), Versions(2, None), (
    f("request_api_key", "int16"),
    f("request_api_version", "int16"),
    f("correlation_id", "int32"),
    f("client_id", "string", "1+", nullable="1+", default=None, flexible="none"),
))
RESPONSE_HEADER = Message("ResponseHeader", -1, Versions(0, 1), Versions(1, None), (
    f("correlation_id", "int32"),
))


# A header without tagged fields (nearly every one): one shared, read-only, empty mapping.
NO_TAGS: Mapping[int, bytes] = MappingProxyType({})


class RequestHeader(NamedTuple):
    """A request's header. A NamedTuple, immutable: one is built for every request, and a
    frozen dataclass's __init__ (an object.__setattr__ call a field) cost ~9,000 instructions
    to this one's ~3,000 (callgrind)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    unknown_tags: Mapping[int, bytes] = NO_TAGS


def request_header_version(flexible: bool) -> int:
    return 2 if flexible else 1


def response_header_version(api_key: int, flexible: bool) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if flexible else 0


def decode_request_header(io: BytesIO | P.FrameReader, flexible: bool) -> RequestHeader:
    """Read a v1 (or, when `flexible`, v2) request header from the start of a frame."""
    prefix = P.read_exact(io, REQUEST_PREFIX.size)
    api_key, api_version, correlation_id, n = REQUEST_PREFIX.unpack(prefix)
    if n == -1:
        client_id = None
    elif n < -1:
        raise P.WireError(f"negative client id length {n}")
    else:
        try:
            client_id = P.read_exact(io, n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise P.WireError(f"bad UTF-8 in client id: {exc}") from None
    tags: dict[int, bytes] = {}
    if flexible:
        tags = read_tag_section(io)
    return RequestHeader(api_key, api_version, correlation_id, client_id, tags)


def peek_request_prefix(frame: bytes | bytearray) -> tuple[int, int, int] | None:
    """api_key, api_version, correlation_id of a frame, or None if it is too short for them."""
    if len(frame) < 8:
        return None
    return struct.unpack_from(">hhi", frame, 0)


def encode_request_header(header: RequestHeader, flexible: bool) -> bytes:
    cid = None if header.client_id is None else header.client_id.encode("utf-8")
    out = REQUEST_PREFIX.pack(header.api_key, header.api_version, header.correlation_id,
                              -1 if cid is None else len(cid))
    if cid:
        out += cid
    if flexible:
        io = BytesIO()
        write_tag_section(io, header.unknown_tags)
        out += io.getvalue()
    return out


def encode_response_header(correlation_id: int, version: int) -> bytes:
    return CORRELATION.pack(correlation_id) + (b"\x00" if version >= 1 else b"")


def decode_response_header(io: BytesIO, version: int) -> int:
    (correlation_id,) = CORRELATION.unpack(P.read_exact(io, 4))
    if version >= 1:
        read_tag_section(io)
    return correlation_id
