"""Fetch responses encoded by hand, as parts: header bytes between the record sets, which are
never copied (issue #28 item 4).

Why: a Fetch answer is mostly its records. Through the schema (construct's compiled builder
writing into a `GatherIO`) each partition costs a dozen Python calls and a record set under
4 KB is copied into the header buffer; here each partition's fixed fields are one `struct`
pack and every record set, whatever its size, is a part of its own (bytes, a memoryview of
what the log read, or a `FileRegion` that the plaintext connection sends with os.sendfile and
the TLS one reads in pieces). The parts go out with one gathered write per run of buffers.

The bytes are the schema's, version by version (4-12, flexible from 12, the versions the
broker serves): tests/protocol/test_fetch_response.py holds every version to
`FETCH.response.encode_parts` byte for byte, and under `schema.STRICT` (every test broker)
each response is also built by the schema and compared, so a field the hand encoder does not
know is an error in the tests rather than a silently dropped field.
"""
from __future__ import annotations

import struct
from typing import Any, Sequence

from protocol import schema
from protocol.primitives import FileRegion, uvarint_bytes

__all__ = ["encode_fetch_parts", "MIN_VERSION", "MAX_VERSION", "FLEXIBLE_FROM"]

MIN_VERSION = 4
MAX_VERSION = 12
FLEXIBLE_FROM = 12

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_TOP_V4 = struct.Struct(">i")  # throttle_time_ms
_TOP_V7 = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
# partition_index, error_code, high_watermark, last_stable_offset (v4), log_start_offset (v5+)
_PART_V4 = struct.Struct(">ihqq")
_PART_V5 = struct.Struct(">ihqqq")
_ABORTED = struct.Struct(">qq")
_EPOCH_END = struct.Struct(">iq")  # diverging_epoch: epoch, end_offset
_LEADER = struct.Struct(">ii")  # current_leader: leader_id, leader_epoch
_SNAPSHOT = struct.Struct(">qi")  # snapshot_id: end_offset, epoch
_NO_TAGS = b"\x00"
_NULL_CLASSIC = _I32.pack(-1)


def encode_fetch_parts(body: Any, version: int) -> list[Any]:
    """The Fetch response body `body` (a mapping, as the handler builds it) for `version`, as
    buffers for one gathered send: header bytes, then each non-empty record set as it is."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Fetch v{version} is not encoded by hand (v{MIN_VERSION}-"
                         f"v{MAX_VERSION})")
    parts = _encode(body, version)
    if schema.STRICT:
        _check_against_schema(body, version, parts)
    return parts


def _encode(body: Any, version: int) -> list[Any]:
    flexible = version >= FLEXIBLE_FROM
    length = _compact_length if flexible else _I32.pack
    parts: list[Any] = []
    head = bytearray()
    get = body.get
    if version >= 7:
        head += _TOP_V7.pack(get("throttle_time_ms", 0), get("error_code", 0),
                             get("session_id", 0))
    else:
        head += _TOP_V4.pack(get("throttle_time_ms", 0))
    responses = get("responses") or ()
    head += length(len(responses))
    part_head = _PART_V5.pack if version >= 5 else _PART_V4.pack
    with_replica = version >= 11
    for topic in responses:
        name = topic["topic"].encode()
        head += (uvarint_bytes(len(name) + 1) if flexible else _I16.pack(len(name)))
        head += name
        partitions = topic.get("partitions") or ()
        head += length(len(partitions))
        for p in partitions:
            pget = p.get
            if version >= 5:
                head += part_head(pget("partition_index", 0), pget("error_code", 0),
                                  pget("high_watermark", 0), pget("last_stable_offset", -1),
                                  pget("log_start_offset", -1))
            else:
                head += part_head(pget("partition_index", 0), pget("error_code", 0),
                                  pget("high_watermark", 0), pget("last_stable_offset", -1))
            aborted = pget("aborted_transactions", ())  # absent: [] (the schema's default)
            if aborted is None:
                head += b"\x00" if flexible else _NULL_CLASSIC
            else:
                head += length(len(aborted))
                for txn in aborted:
                    head += _ABORTED.pack(txn["producer_id"], txn["first_offset"])
                    if flexible:
                        head += _tags(txn, ())
            if with_replica:
                head += _I32.pack(pget("preferred_read_replica", -1))
            records = pget("records")
            if records is None:
                head += b"\x00" if flexible else _NULL_CLASSIC
            else:
                size = len(records)
                head += length(size)
                if size:
                    parts.append(bytes(head))
                    head.clear()
                    parts.append(records)
            if flexible:
                head += _tags(p, _partition_tags(pget))
        if flexible:
            head += _tags(topic, ())
    if flexible:
        head += _tags(body, ())
    if head:
        parts.append(bytes(head))
    return parts


def _compact_length(n: int) -> bytes:
    return uvarint_bytes(n + 1)


def _partition_tags(pget: Any) -> Sequence[tuple[int, bytes]]:
    """A v12 partition's tagged fields, in tag order: each one given (not None) is written,
    defaults or not (a tagged struct's default is None, so the schema writes it too)."""
    tags = []
    diverging = pget("diverging_epoch")
    if diverging is not None:
        tags.append((0, _EPOCH_END.pack(diverging.get("epoch", -1),
                                        diverging.get("end_offset", -1)) + _tags(diverging, ())))
    leader = pget("current_leader")
    if leader is not None:
        tags.append((1, _LEADER.pack(leader.get("leader_id", -1),
                                     leader.get("leader_epoch", -1)) + _tags(leader, ())))
    snapshot = pget("snapshot_id")
    if snapshot is not None:
        tags.append((2, _SNAPSHOT.pack(snapshot.get("end_offset", -1),
                                       snapshot.get("epoch", -1)) + _tags(snapshot, ())))
    return tags


def _tags(obj: Any, known: Sequence[tuple[int, bytes]]) -> bytes:
    """A tagged-field section: `known` fields and any `_unknown_tags` carried through, in
    tag order (as schema._build_tags)."""
    unknown = obj.get("_unknown_tags")
    if not known and not unknown:
        return _NO_TAGS
    entries = list(known)
    if unknown:
        entries.extend(unknown.items())
        entries.sort(key=lambda e: e[0])
    out = [uvarint_bytes(len(entries))]
    for tag, data in entries:
        out.append(uvarint_bytes(tag))
        out.append(uvarint_bytes(len(data)))
        out.append(data)
    return b"".join(out)


def _flatten(parts: list[Any]) -> list[Any]:
    """Parts as comparable pieces: buffers joined, regions kept as (source, offset, length)."""
    out: list[Any] = []
    buf = bytearray()
    for part in parts:
        if type(part) is FileRegion:
            if buf:
                out.append(bytes(buf))
                buf.clear()
            out.append((id(part.source), part.offset, part.length))
        else:
            buf += part
    if buf:
        out.append(bytes(buf))
    return out


def _check_against_schema(body: Any, version: int, parts: list[Any]) -> None:
    """Under STRICT: the schema's bytes for the same body must be these (and the schema
    refuses a key it does not declare)."""
    from protocol.messages import APIS  # here: protocol.messages imports the codec's users

    expected = APIS[1].response.encode_parts(body, version)
    if _flatten(parts) != _flatten(expected):
        raise AssertionError(f"hand-encoded Fetch v{version} response differs from the "
                             f"schema's for {body!r}")
