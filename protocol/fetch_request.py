"""Fetch requests decoded by hand (issue #28 item 3), the pair of fetch_response.py.

Why: a consumer's Fetch is ~70 us of Python whatever it returns, and its decoding through
the schema (construct's compiled parser over a BytesIO: 21 reads, each a Python call and a
bytes object) was ~120,000 instructions of a ~500,000-instruction request. Here the frame is
read in place with a few `struct.unpack_from` calls (protocol.hand_decode).

Only the common shape is done here (v4-v12, the versions the broker serves, without tagged
fields): anything else, a tagged field (v12's cluster_id), a bad length, bad UTF-8, a short
frame, gives None and the caller decodes the frame through the schema, which decides and
explains as before. The body is the schema's: every declared field, those the version lacks
at their defaults. tests/protocol/test_fetch_request.py holds every version to the schema,
and under `schema.STRICT` (every test broker) each request is also decoded by the schema and
compared (protocol.codec).
"""
from __future__ import annotations

import struct
from operator import itemgetter

from construct import Container

from protocol.hand_decode import (
    IRREGULAR, Irregular, count_at, length_at, no_tags_at, string_at,
)
from protocol.primitives import UUID

__all__ = ["decode_fetch", "MIN_VERSION", "MAX_VERSION", "FLEXIBLE_FROM"]

MIN_VERSION = 4
MAX_VERSION = 12
FLEXIBLE_FROM = 12

_I32 = struct.Struct(">i")
# replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level (v4+), session_id and
# session_epoch (v7+)
_TOP_V4 = struct.Struct(">iiiib")
_TOP_V7 = struct.Struct(">iiiibii")
# partition, current_leader_epoch (v9+), fetch_offset, last_fetched_epoch (v12+),
# log_start_offset (v5+), partition_max_bytes
_PART_V4 = struct.Struct(">iqi")
_PART_V5 = struct.Struct(">iqqi")
_PART_V9 = struct.Struct(">iiqqi")
_PART_V12 = struct.Struct(">iiqiqi")
_NO_ID = UUID.default  # topic_id, replica_directory_id: v13+ and v17+


class FetchTopicEntry(Container):
    """A request's topic entry, a Container whose fields the handler reads as attributes
    (a fetch session's topics are objects read the same way) through C properties: a plain
    Container's attribute read first fails as an attribute, formatting an AttributeError,
    then calls its Python __getattr__ (~5,000 instructions; ~300 this way)."""

    __slots__ = ()
    topic = property(itemgetter("topic"))
    partitions = property(itemgetter("partitions"))


class FetchPartitionEntry(Container):
    """A request's partition entry; see FetchTopicEntry."""

    __slots__ = ()
    partition = property(itemgetter("partition"))
    current_leader_epoch = property(itemgetter("current_leader_epoch"))
    fetch_offset = property(itemgetter("fetch_offset"))
    last_fetched_epoch = property(itemgetter("last_fetched_epoch"))
    log_start_offset = property(itemgetter("log_start_offset"))
    partition_max_bytes = property(itemgetter("partition_max_bytes"))


def decode_fetch(frame: bytes | bytearray, pos: int, version: int,
                 ) -> tuple[Container, int] | None:
    """The Fetch request body starting at `pos` of `frame` and the position after it, or
    None when the schema must decode it (see the module's docstring)."""
    try:
        return _decode(frame, pos, version)
    except IRREGULAR:
        return None


def _decode(frame: bytes | bytearray, pos: int, version: int) -> tuple[Container, int]:
    flexible = version >= FLEXIBLE_FROM
    end = len(frame)
    session_id, session_epoch = 0, -1
    if version >= 7:
        (replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id,
         session_epoch) = _TOP_V7.unpack_from(frame, pos)
        pos += _TOP_V7.size
    else:
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level = \
            _TOP_V4.unpack_from(frame, pos)
        pos += _TOP_V4.size
    count, pos = count_at(frame, pos, flexible)
    topics = []
    for _ in range(count):
        topic, pos = string_at(frame, pos, flexible)
        partitions_count, pos = count_at(frame, pos, flexible)
        partitions = []
        for _ in range(partitions_count):
            leader_epoch, last_fetched_epoch, log_start_offset = -1, -1, -1
            if version >= 12:
                (partition, leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset,
                 partition_max_bytes) = _PART_V12.unpack_from(frame, pos)
                pos = no_tags_at(frame, pos + _PART_V12.size)
            elif version >= 9:
                (partition, leader_epoch, fetch_offset, log_start_offset,
                 partition_max_bytes) = _PART_V9.unpack_from(frame, pos)
                pos += _PART_V9.size
            elif version >= 5:
                partition, fetch_offset, log_start_offset, partition_max_bytes = \
                    _PART_V5.unpack_from(frame, pos)
                pos += _PART_V5.size
            else:
                partition, fetch_offset, partition_max_bytes = _PART_V4.unpack_from(frame, pos)
                pos += _PART_V4.size
            partitions.append(FetchPartitionEntry(
                partition=partition, current_leader_epoch=leader_epoch,
                fetch_offset=fetch_offset, last_fetched_epoch=last_fetched_epoch,
                log_start_offset=log_start_offset, partition_max_bytes=partition_max_bytes,
                replica_directory_id=_NO_ID))
        if flexible:
            pos = no_tags_at(frame, pos)
        topics.append(FetchTopicEntry(topic=topic, partitions=partitions, topic_id=_NO_ID))
    forgotten = []
    if version >= 7:
        count, pos = count_at(frame, pos, flexible)
        for _ in range(count):
            topic, pos = string_at(frame, pos, flexible)
            n, pos = length_at(frame, pos, flexible, _I32)
            if n < 0 or 4 * n > end - pos:
                raise Irregular
            ids = list(struct.unpack_from(f">{n}i", frame, pos))
            pos += 4 * n
            if flexible:
                pos = no_tags_at(frame, pos)
            forgotten.append(Container(topic=topic, partitions=ids, topic_id=_NO_ID))
    rack_id: str | None = ""
    if version >= 11:
        rack_id, pos = string_at(frame, pos, flexible)  # not nullable: never None
    if flexible:
        pos = no_tags_at(frame, pos)
    return Container(
        replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
        max_bytes=max_bytes, isolation_level=isolation_level, session_id=session_id,
        session_epoch=session_epoch, topics=topics, forgotten_topics_data=forgotten,
        rack_id=rack_id, cluster_id=None,
        replica_state=Container(replica_id=-1, replica_epoch=-1)), pos
