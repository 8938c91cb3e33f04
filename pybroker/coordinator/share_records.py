"""The records of `__share_group_state`: one ShareSnapshot per share-partition.

Kafka's share coordinator writes ShareSnapshot (key type 0) and ShareUpdate (key type 1)
records and prunes them; here every change writes a whole ShareSnapshot under the
share-partition's key and the topic is compacted, so the latest snapshot of each key is what
loading adopts. The fields are Kafka's (GroupId, TopicId, Partition; StartOffset and the
StateBatches with DeliveryState 0/2/4 and DeliveryCount); the byte layout is this broker's
own (nothing but pybroker reads the topic), each part led by an int16 version:

    key   version 0 | group string | topic id (16 bytes) | partition int32
    value version 1 | state epoch int32 | leader epoch int32 | start offset int64 |
          batch count int32 |
          per batch: first offset int64 | last offset int64 | state int8 | count int16

Version 0 of the value had no leader epoch (read as -1). The leader epoch is that of the data
partition's leader that wrote the snapshot: the share coordinator refuses a write or read
from an older one (FENCED_LEADER_EPOCH), as Kafka's does, so a deposed leader cannot
overwrite what its successor wrote, even across a coordinator failover.

Acquired records are written as Available (share_partition.state_batches), since locks do not
outlive the leader. A null value is a tombstone: the group's state for that partition is gone.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from uuid import UUID

from protocol.topic_id import format_topic_id
from pybroker.coordinator.share_partition import RecordState, StateBatch

__all__ = ["ShareSnapshot", "ShareStateKey", "encode_key", "decode_key", "encode_value",
           "decode_value", "state_key_text"]

SNAPSHOT_KEY_VERSION = 0
SNAPSHOT_VALUE_VERSION = 1
_I16 = struct.Struct(">h")
_PARTITION = struct.Struct(">i")
_VALUE_HEAD_V0 = struct.Struct(">hiqi")
_VALUE_HEAD = struct.Struct(">hiiqi")
_BATCH = struct.Struct(">qqbh")


@dataclass(frozen=True)
class ShareStateKey:
    group_id: str
    topic_id: UUID
    partition: int


@dataclass(frozen=True)
class ShareSnapshot:
    state_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    leader_epoch: int = -1


def state_key_text(key: ShareStateKey) -> str:
    """Kafka's partitioning key for `__share_group_state`: "group:topicId:partition", the
    topic id as Kafka's Uuid.toString writes it (URL-safe base64), so a key's partition,
    and its share coordinator, are Kafka's."""
    return f"{key.group_id}:{format_topic_id(key.topic_id)}:{key.partition}"


def encode_key(key: ShareStateKey) -> bytes:
    group = key.group_id.encode()
    return (_I16.pack(SNAPSHOT_KEY_VERSION) + _I16.pack(len(group)) + group
            + key.topic_id.bytes + _PARTITION.pack(key.partition))


def decode_key(data: bytes) -> ShareStateKey | None:
    """None for a key version this broker does not know (a later layout): skipped on load."""
    (version,) = _I16.unpack_from(data, 0)
    if version != SNAPSHOT_KEY_VERSION:
        return None
    (size,) = _I16.unpack_from(data, 2)
    group = data[4:4 + size].decode()
    pos = 4 + size
    topic_id = UUID(bytes=bytes(data[pos:pos + 16]))
    (partition,) = _PARTITION.unpack_from(data, pos + 16)
    if pos + 20 != len(data):
        raise ValueError("trailing bytes after a share-state key")
    return ShareStateKey(group, topic_id, partition)


def encode_value(snapshot: ShareSnapshot) -> bytes:
    parts = [_VALUE_HEAD.pack(SNAPSHOT_VALUE_VERSION, snapshot.state_epoch,
                              snapshot.leader_epoch, snapshot.start_offset,
                              len(snapshot.batches))]
    parts += [_BATCH.pack(b.first_offset, b.last_offset, int(b.delivery_state),
                          b.delivery_count) for b in snapshot.batches]
    return b"".join(parts)


def decode_value(data: bytes) -> ShareSnapshot:
    (version,) = _I16.unpack_from(data, 0)
    if version == 0:
        _, state_epoch, start, count = _VALUE_HEAD_V0.unpack_from(data, 0)
        leader_epoch, head = -1, _VALUE_HEAD_V0.size
    elif version == SNAPSHOT_VALUE_VERSION:
        _, state_epoch, leader_epoch, start, count = _VALUE_HEAD.unpack_from(data, 0)
        head = _VALUE_HEAD.size
    else:
        raise ValueError(f"share-state value version {version} is not known")
    if len(data) != head + count * _BATCH.size:
        raise ValueError("a share-state value's length does not match its batch count")
    batches = []
    for i in range(count):
        first, last, state, delivered = _BATCH.unpack_from(data, head + i * _BATCH.size)
        batches.append(StateBatch(first, last, RecordState(state), delivered))
    return ShareSnapshot(state_epoch, start, tuple(batches), leader_epoch)
