"""Metadata responses encoded by hand: a fast path beside the schema in messages/metadata.py.

Why: a Metadata answer for a topic of 1,000 partitions cost the broker 2.8-4.1 ms through
construct (~3-4 us per partition), and clients ask for it on every connection and refresh.
Here each piece is a few `struct` packs, and the broker caches a topic's encoded entry
(`encode_topic`) until its metadata changes, so a wide answer is mostly one bytes join.

The bytes are the schema's, version by version (0-12, flexible from 9): tests/protocol/
test_metadata_response.py holds every version to `METADATA.response.encode` byte for byte.
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

from protocol.primitives import uvarint_bytes

__all__ = ["EncodedBody", "encode_partitions", "encode_topic", "encode_metadata_response",
           "FLEXIBLE_FROM", "UNKNOWN_AUTHORIZED_OPERATIONS"]

FLEXIBLE_FROM = 9
UNKNOWN_AUTHORIZED_OPERATIONS = -2147483648

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">hii")  # error_code, partition_index, leader_id
_PARTITION_HEAD_EPOCH = struct.Struct(">hiii")  # ... and leader_epoch (v7+)
_NO_TAGS = b"\x00"
_ZERO_UUID = b"\x00" * 16


class EncodedBody(bytes):
    """A response body already encoded for the request's version (protocol.codec sends it
    as it is instead of building it from a dict)."""


# (partition_index, leader_id, leader_epoch, replica_nodes, isr_nodes), optionally followed by
# (error_code, offline_replicas); without them: error 0, none offline.
PartitionRow = tuple


def _length(n: int, flexible: bool) -> bytes:
    return uvarint_bytes(n + 1) if flexible else _I32.pack(n)


def _int32s(values: Sequence[int], flexible: bool) -> bytes:
    return _length(len(values), flexible) + struct.pack(f">{len(values)}i", *values)


def _string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    data = value.encode()
    return (uvarint_bytes(len(data) + 1) if flexible else _I16.pack(len(data))) + data


def encode_partitions(rows: Sequence[PartitionRow], version: int) -> bytes:
    """The `partitions` array of a topic entry."""
    flexible = version >= FLEXIBLE_FROM
    none_offline = _length(0, flexible) if version >= 5 else b""
    tail = _NO_TAGS if flexible else b""
    out = [_length(len(rows), flexible)]
    append = out.append
    with_epoch = version >= 7
    head = _PARTITION_HEAD_EPOCH.pack if with_epoch else _PARTITION_HEAD.pack
    for row in rows:
        index, leader, epoch, replicas, isr = row[:5]
        error, offline = (row[5], row[6]) if len(row) > 5 else (0, ())
        append(head(error, index, leader, epoch) if with_epoch else head(error, index, leader))
        append(_int32s(replicas, flexible))
        append(_int32s(isr, flexible))
        if version >= 5:
            append(_int32s(offline, flexible) if offline else none_offline)
        append(tail)
    return b"".join(out)


def encode_topic(version: int, error_code: int, name: str | None, topic_id: uuid.UUID | None,
                 is_internal: bool, partitions: bytes | None = None,
                 authorized_operations: int = UNKNOWN_AUTHORIZED_OPERATIONS) -> bytes:
    """One entry of the `topics` array; `partitions` from `encode_partitions` (None: empty)."""
    flexible = version >= FLEXIBLE_FROM
    out = [_I16.pack(error_code), _string(name, flexible)]
    if version >= 10:
        out.append(_ZERO_UUID if topic_id is None else topic_id.bytes)
    if version >= 1:
        out.append(b"\x01" if is_internal else b"\x00")
    out.append(_length(0, flexible) if partitions is None else partitions)
    if version >= 8:
        out.append(_I32.pack(authorized_operations))
    if flexible:
        out.append(_NO_TAGS)
    return b"".join(out)


def encode_metadata_response(version: int, brokers: Sequence[tuple[int, str, int, str | None]],
                             cluster_id: str | None, controller_id: int,
                             topics: Sequence[bytes], throttle_time_ms: int = 0,
                             cluster_authorized_operations: int = UNKNOWN_AUTHORIZED_OPERATIONS,
                             ) -> EncodedBody:
    """A whole Metadata response body; `brokers` as (node_id, host, port, rack) and `topics`
    as entries from `encode_topic`."""
    flexible = version >= FLEXIBLE_FROM
    out = []
    if version >= 3:
        out.append(_I32.pack(throttle_time_ms))
    out.append(_length(len(brokers), flexible))
    for node_id, host, port, rack in brokers:
        out.append(_I32.pack(node_id))
        out.append(_string(host, flexible))
        out.append(_I32.pack(port))
        if version >= 1:
            out.append(_string(rack, flexible))
        if flexible:
            out.append(_NO_TAGS)
    if version >= 2:
        out.append(_string(cluster_id, flexible))
    if version >= 1:
        out.append(_I32.pack(controller_id))
    out.append(_length(len(topics), flexible))
    out.extend(topics)
    if 8 <= version <= 10:
        out.append(_I32.pack(cluster_authorized_operations))
    if flexible:
        out.append(_NO_TAGS)
    return EncodedBody(b"".join(out))
