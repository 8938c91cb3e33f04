"""Produce requests decoded, and Produce responses encoded, by hand (issue #28 item 3).

Why: a Produce request is one per ~1 MB of records from a busy producer, and its fixed cost
is paid per request whatever its size. Through the schema (construct's compiled parser over a
`FrameReader`) decoding one took ~160,000 instructions (21 reads, each a Python call and a
`bytes` object) and encoding its answer ~65,000 (`GatherIO`, a dozen builder calls a
partition): together a fifth of the broker's instructions for a 1,000-record request. Here the
frame is read in place with `struct.unpack_from` and the answer is a few `struct` packs.

Only the common shape is done here; anything else goes to the schema, which stays the one
that decides what a malformed frame is and says why: `decode_produce` answers None for a
length out of range, a null where none is allowed, bad UTF-8, a tagged field, a short frame,
and the caller decodes the frame through the schema. `encode_produce` hands a body with
tagged fields (current_leader, node_endpoints, unknown tags) to the schema too.

The results are the schema's: a body of the same Containers (a record set a writable view
of a bytearray frame, a copy of a bytes one, as `primitives.read_records` gives), and the
same response bytes. tests/protocol/test_produce_codec.py holds every version to the schema,
and under `schema.STRICT` (every test broker) each request is also decoded, and each answer
encoded, by the schema and compared, so the whole suite checks both.
"""
from __future__ import annotations

import struct
from typing import Any

from construct import Container

from protocol import schema
from protocol.hand_decode import (
    IRREGULAR, Irregular, count_at, length_at, no_tags_at, string_at,
)
from protocol.primitives import WireError, uvarint_bytes

__all__ = ["decode_produce", "encode_produce", "MIN_VERSION", "MAX_VERSION"]

# The versions the broker serves (v0-2 are answered UNSUPPORTED_VERSION per partition).
MIN_VERSION = 3
MAX_VERSION = 11
FLEXIBLE_FROM = 9

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
# index, error_code, base_offset, log_append_time_ms (v2+), log_start_offset (v5+)
_PART_V3 = struct.Struct(">ihqq")
_PART_V5 = struct.Struct(">ihqqq")


def decode_produce(frame: bytes | bytearray, pos: int, version: int,
                   ) -> tuple[Container, int] | None:
    """The Produce request body starting at `pos` of `frame` and the position after it, or
    None when the schema must decode it (see the module's docstring)."""
    try:
        return _decode(frame, pos, version)
    except IRREGULAR:
        return None


def _decode(frame: bytes | bytearray, pos: int, version: int) -> tuple[Container, int]:
    flexible = version >= FLEXIBLE_FROM
    end = len(frame)
    transactional_id, pos = string_at(frame, pos, flexible, nullable=True)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(frame, pos)
    pos += 6
    view = memoryview(frame)
    in_place = type(frame) is not bytes  # a frame received in place: views, no copies
    count, pos = count_at(frame, pos, flexible)
    topics = []
    for _ in range(count):
        name, pos = string_at(frame, pos, flexible)
        partitions_count, pos = count_at(frame, pos, flexible)
        partitions = []
        for _ in range(partitions_count):
            (index,) = _I32.unpack_from(frame, pos)
            n, pos = length_at(frame, pos + 4, flexible, _I32)
            if n == -1:
                records: Any = None
            elif n < 0 or pos + n > end:
                raise Irregular
            else:
                records = view[pos:pos + n] if in_place else bytearray(view[pos:pos + n])
                pos += n
            if flexible:
                pos = no_tags_at(frame, pos)
            partitions.append(Container(index=index, records=records))
        if flexible:
            pos = no_tags_at(frame, pos)
        topics.append(Container(name=name, partition_data=partitions))
    if flexible:
        pos = no_tags_at(frame, pos)
    return Container(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms,
                     topic_data=topics), pos


def encode_produce(body: Any, version: int) -> list[Any]:
    """The Produce response body `body` (a mapping, as the handler builds it) for `version`,
    as buffers for one gathered send."""
    if not MIN_VERSION <= version <= MAX_VERSION or _has_tags(body):
        from protocol.messages import APIS  # here: protocol.messages imports the codec's users
        return APIS[0].response.encode_parts(body, version)
    parts = [_encode(body, version)]
    if schema.STRICT:
        _check_against_schema(body, version, parts)
    return parts


def _has_tags(body: Any) -> bool:
    """Whether the body carries a tagged field (which the schema writes)."""
    if body.get("node_endpoints") or body.get("_unknown_tags"):
        return True
    for topic in body.get("responses") or ():
        if topic.get("_unknown_tags"):
            return True
        for p in topic.get("partition_responses") or ():
            if p.get("current_leader") is not None or p.get("_unknown_tags"):
                return True
            for error in p.get("record_errors") or ():
                if error.get("_unknown_tags"):
                    return True
    return False


def _encode(body: Any, version: int) -> bytes:
    flexible = version >= FLEXIBLE_FROM
    length = _compact_length if flexible else _I32.pack
    string = _compact_string if flexible else _classic_string
    part_head = _PART_V5.pack if version >= 5 else _PART_V3.pack
    with_errors = version >= 8
    out = bytearray()
    responses = body.get("responses") or ()
    out += length(len(responses))
    for topic in responses:
        out += string(topic.get("name", ""))
        partitions = topic.get("partition_responses") or ()
        out += length(len(partitions))
        for p in partitions:
            get = p.get
            if version >= 5:
                out += part_head(get("index", 0), get("error_code", 0), get("base_offset", 0),
                                 get("log_append_time_ms", -1), get("log_start_offset", -1))
            else:
                out += part_head(get("index", 0), get("error_code", 0), get("base_offset", 0),
                                 get("log_append_time_ms", -1))
            if with_errors:
                errors = get("record_errors") or ()
                out += length(len(errors))
                for error in errors:
                    out += _I32.pack(error.get("batch_index", 0))
                    out += string(error.get("batch_index_error_message"))
                    if flexible:
                        out += b"\x00"
                out += string(get("error_message"))
            if flexible:
                out += b"\x00"
        if flexible:
            out += b"\x00"
    out += _I32.pack(body.get("throttle_time_ms", 0))
    if flexible:
        out += b"\x00"
    return bytes(out)


def _compact_length(n: int) -> bytes:
    return uvarint_bytes(n + 1)


def _compact_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    data = value.encode("utf-8")
    return uvarint_bytes(len(data) + 1) + data


def _classic_string(value: str | None) -> bytes:
    if value is None:
        return b"\xff\xff"
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise WireError("string longer than 32767 bytes")
    return _I16.pack(len(data)) + data


def _check_against_schema(body: Any, version: int, parts: list[Any]) -> None:
    """Under STRICT: the schema's bytes for the same body must be these (and the schema
    refuses a key it does not declare)."""
    from protocol.messages import APIS

    expected = b"".join(bytes(p) for p in APIS[0].response.encode_parts(body, version))
    if b"".join(parts) != expected:
        raise AssertionError(f"hand-encoded Produce v{version} response differs from the "
                             f"schema's for {body!r}")
