"""Requests and responses as whole frames: the one place where bad bytes become an error.

`decode_request` turns a frame into a header and a decoded body, or raises `ProtocolError`
(whatever went wrong inside: a short read, a bad length, bad UTF-8, trailing bytes).
`UnsupportedVersion` is the ProtocolError for an API key or version we do not declare; it
carries the header so that the broker can still answer (ApiVersions) or close cleanly.
"""
from __future__ import annotations

import struct
from io import BytesIO
from typing import Any, Callable, NamedTuple

from construct import ConstructError, Container

from protocol.api_keys import ApiKey
from protocol.headers import (
    REQUEST_PREFIX, RequestHeader, decode_request_header, decode_response_header,
    encode_request_header, encode_response_header, peek_request_prefix,
    response_header_version,
)
from protocol.messages import APIS
from protocol.fetch_response import MAX_VERSION as FETCH_MAX, MIN_VERSION as FETCH_MIN
from protocol.fetch_response import encode_fetch_parts
from protocol.metadata_response import EncodedBody
from protocol.primitives import FrameReader
from protocol import fetch_request, produce_codec, schema
from protocol.messages.api import Api

_DECODE_ERRORS = (ConstructError, struct.error, UnicodeDecodeError, ValueError, OverflowError,
                  IndexError, KeyError, TypeError, MemoryError, RecursionError)
SIZE = struct.Struct(">i")


class ProtocolError(Exception):
    """Bytes that are not a valid Kafka message. `header` is set once the header was read."""

    def __init__(self, message: str, header: RequestHeader | None = None) -> None:
        super().__init__(message)
        self.header = header


class UnsupportedVersion(ProtocolError):
    """An API key or version this package does not declare."""


class TrailingBytes(ProtocolError):
    """A request whose body decoded completely but was followed by extra bytes. `request`
    holds what was decoded: Kafka ignores such bytes, and librdkafka 2.16 sends three of them
    after a Metadata v12 request for all topics, so a broker may choose to answer it."""

    def __init__(self, message: str, header: RequestHeader, request: "Request") -> None:
        super().__init__(message, header)
        self.request = request


class Request(NamedTuple):
    """A decoded request. A NamedTuple, immutable, as RequestHeader (one a request; a frozen
    dataclass's __init__ cost more than the tuple's)."""

    header: RequestHeader
    body: Container

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version


def decode_request(frame: bytes | bytearray) -> Request:
    """Decode one request frame (without its size prefix). A bytearray frame (received in
    place, protocol.framing) is read without a copy: its record sets come out as writable
    views of it (primitives.FrameReader)."""
    prefix = peek_request_prefix(frame)
    if prefix is None:
        raise ProtocolError(f"frame of {len(frame)} bytes is too short for a request header")
    api_key, version, _ = prefix
    by_hand = _BY_HAND.get(api_key)
    if by_hand is not None and by_hand[0] <= version <= by_hand[1]:
        fast = _decode_by_hand(frame, version, by_hand)
        if fast is not None:
            return fast
    api = APIS.get(api_key)
    io = BytesIO(frame) if isinstance(frame, bytes) else FrameReader(frame)
    flexible = api is not None and version in api.versions and version in api.flexible
    try:
        header = decode_request_header(io, flexible)
    except _DECODE_ERRORS as exc:
        raise ProtocolError(f"malformed request header: {exc}") from None
    if api is None:
        raise UnsupportedVersion(f"unknown API key {api_key}", header)
    if version not in api.versions:
        raise UnsupportedVersion(f"{api.name} v{version} is not supported "
                                 f"(we serve {api.versions})", header)
    body_start = io.tell()
    try:
        body = api.request.decode(io, version, allow_trailing=True)
    except _DECODE_ERRORS as exc:
        raise ProtocolError(_explain(api.request, frame[body_start:], version, exc),
                            header) from None
    extra = len(frame) - io.tell()
    if extra:
        raise TrailingBytes(f"{extra} trailing bytes after {api.request.name} v{version}",
                            header, Request(header, body))
    return Request(header, body)


# The requests decoded by hand, for a busy client's hot path: (lowest version, highest,
# first flexible one, the decoder). Any other request, version or shape, the schema decodes.
_HandDecoder = tuple[int, int, int, Callable[[Any, int, int], "tuple[Container, int] | None"]]
_BY_HAND: dict[int, _HandDecoder] = {
    ApiKey.PRODUCE: (produce_codec.MIN_VERSION, produce_codec.MAX_VERSION,
                     produce_codec.FLEXIBLE_FROM, produce_codec.decode_produce),
    ApiKey.FETCH: (fetch_request.MIN_VERSION, fetch_request.MAX_VERSION,
                   fetch_request.FLEXIBLE_FROM, fetch_request.decode_fetch),
}


def _decode_by_hand(frame: bytes | bytearray, version: int,
                    by_hand: _HandDecoder) -> Request | None:
    """A request decoded by hand (protocol.produce_codec, protocol.fetch_request), or None
    for the schema's path: a header with a tagged field or bad UTF-8, a body the hand decoder
    leaves to the schema, trailing bytes (whose exception the schema's path raises)."""
    if len(frame) < REQUEST_PREFIX.size:
        return None
    prefix = REQUEST_PREFIX.unpack_from(frame, 0)
    n = prefix[3]
    pos = REQUEST_PREFIX.size
    if n == -1:
        client_id = None
    elif n < 0 or pos + n > len(frame):
        return None
    else:
        try:
            client_id = str(frame[pos:pos + n], "utf-8")
        except UnicodeDecodeError:
            return None
        pos += n
    if version >= by_hand[2]:  # request header v2: an empty tag section
        if pos >= len(frame) or frame[pos]:
            return None
        pos += 1
    decoded = by_hand[3](frame, pos, version)
    if decoded is None or decoded[1] != len(frame):
        return None
    request = Request(RequestHeader(prefix[0], version, prefix[2], client_id), decoded[0])
    if schema.STRICT:
        _check_against_schema(frame, request)
    return request


def _check_against_schema(frame: bytes | bytearray, request: Request) -> None:
    """Under STRICT: the schema's decoding of the same frame must be this one, Produce's
    record sets of the same type and bytes."""
    api = APIS[request.api_key]
    io = BytesIO(frame) if isinstance(frame, bytes) else FrameReader(frame)
    header = decode_request_header(io, request.api_version in api.flexible)
    body = api.request.decode(io, request.api_version, allow_trailing=True)
    same = header == request.header and body == request.body
    if same and request.api_key == ApiKey.PRODUCE:
        same = _record_sets(body) == _record_sets(request.body)
    if not same:
        raise AssertionError(f"hand-decoded {api.name} v{request.api_version} request "
                             f"differs from the schema's: {request!r} against {header!r}, "
                             f"{body!r}")


def _record_sets(body: Container) -> list[tuple[type, Any]]:
    return [(type(p["records"]), p["records"]) for t in body["topic_data"]
            for p in t["partition_data"]]


def _explain(message: Any, data: bytes | bytearray, version: int, exc: Exception) -> str:
    """Re-parse with the plain schema to name the field where decoding failed.

    Compiled parsers lose the path of a failure; the plain one reports it (`-> topics -> name`).
    Only runs on the error path, so its cost does not matter.
    """
    detail = str(exc)
    try:
        message.decode_plain(data, version)
    except _DECODE_ERRORS as plain_exc:
        detail = str(plain_exc)
    return f"malformed {message.name} v{version}: {detail}".replace("\n", " ")


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """A whole response frame, size prefix included."""
    api = APIS[api_key]
    payload = api.response.encode(body, version)
    header = encode_response_header(
        correlation_id, response_header_version(api_key, version in api.flexible))
    return SIZE.pack(len(header) + len(payload)) + header + payload


def encode_response_parts(api_key: int, version: int, correlation_id: int,
                          body: Any) -> list[Any]:
    """The same frame as `encode_response`, as buffers for one gathered send: record sets
    are referenced, not copied."""
    api = APIS[api_key]
    # A body a handler encoded itself (protocol.metadata_response) goes out as it is; a Fetch
    # answer is encoded by hand around its record sets (protocol.fetch_response).
    if isinstance(body, EncodedBody):
        parts = [body]
    elif api_key == ApiKey.FETCH and FETCH_MIN <= version <= FETCH_MAX:
        parts = encode_fetch_parts(body, version)
    elif api_key == ApiKey.PRODUCE:
        parts = produce_codec.encode_produce(body, version)
    else:
        parts = api.response.encode_parts(body, version)
    header = encode_response_header(
        correlation_id, response_header_version(api_key, version in api.flexible))
    size = len(header) + sum(len(p) for p in parts)
    return [SIZE.pack(size) + header, *parts]


# -- the client's side ------------------------------------------------------------------------

def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None,
                   body: Any) -> bytes:
    """A whole request frame, size prefix included."""
    api = APIS[api_key]
    flexible = version in api.flexible
    header = encode_request_header(RequestHeader(api_key, version, correlation_id, client_id),
                                   flexible)
    payload = api.request.encode(body, version)
    return SIZE.pack(len(header) + len(payload)) + header + payload


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Container]:
    """correlation id and body of a response frame (without its size prefix)."""
    api: Api = APIS[api_key]
    io = BytesIO(frame)
    try:
        correlation_id = decode_response_header(
            io, response_header_version(api_key, version in api.flexible))
        body = api.response.decode(io, version)
    except _DECODE_ERRORS as exc:
        raise ProtocolError(f"malformed {api.name}Response v{version}: {exc}") from None
    return correlation_id, body


def api_versions_error_body(min_version: int, max_version: int) -> dict[str, Any]:
    """The v0 ApiVersions body Kafka sends for a version it does not serve (KIP-511): the
    range of ApiVersions itself, so the client can retry with one it has."""
    from protocol.errors import ErrorCode
    return {"error_code": int(ErrorCode.UNSUPPORTED_VERSION),
            "api_keys": [{"api_key": int(ApiKey.API_VERSIONS), "min_version": min_version,
                          "max_version": max_version}]}
