"""The records of `__consumer_offsets`, in Kafka's own formats, so the topic reads like Kafka's.

Every record has a key and (except tombstones) a value, each starting with an int16 version:

    key v0/v1   OffsetCommitKey:    group string | topic string | partition int32
    key v2      GroupMetadataKey:   group string
    value       OffsetCommitValue   v0-4 (v1 carries an explicit expire timestamp; v4 flexible)
    value       GroupMetadataValue  v0-4 (v3 adds member group_instance_id; v4 flexible)
    null value  a tombstone: the offset, or the whole group, is gone

Writing follows Kafka: offset keys at v1, values at v3 (v1 when the commit named a retention,
as OffsetCommit v2-4 may), group keys at v2 and group values at v3. Reading accepts every
version up to 4, and newer flexible versions as long as their known fields come first; keys of
record types this broker does not know (Kafka's KIP-848 records, key versions 3+) decode to
None so that replay skips them instead of failing to load the topic.

The bodies are declared with the project's message DSL, like the wire messages; the facts are
Kafka's, the declarations ours.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from io import BytesIO
from typing import Any, Union

from protocol.records.record import Record
from protocol.schema import Field, Message, Versions, f

__all__ = [
    "OffsetKey", "OffsetAndMetadata", "MemberSnapshot", "GroupSnapshot",
    "OffsetCommitRecord", "GroupMetadataRecord", "GroupRecord", "TxnMarker", "LogEntry",
    "encode_record", "decode_record", "consumer_subscription_topics", "UnknownRecordVersion",
]

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3

_I16 = struct.Struct(">h")


def _data(name: str, versions: str, flexible: str, fields: list[Field]) -> Message:
    """A record body declared like a message (no API key: these never travel as requests)."""
    return Message(name, -1, Versions.parse(versions), Versions.parse(flexible), tuple(fields))


_OFFSET_KEY = _data("OffsetCommitKey", "0-1", "none", [
    f("group", "string"), f("topic", "string"), f("partition", "int32"),
])
_GROUP_KEY = _data("GroupMetadataKey", "2", "none", [f("group", "string")])
_OFFSET_VALUE = _data("OffsetCommitValue", "0-4", "4+", [
    f("offset", "int64"),
    f("leader_epoch", "int32", "3+", default=-1),
    f("metadata", "string"),
    f("commit_timestamp", "int64"),
    f("expire_timestamp", "int64", "1", default=-1),
])
_GROUP_VALUE = _data("GroupMetadataValue", "0-4", "4+", [
    f("protocol_type", "string"),
    f("generation", "int32"),
    f("protocol", "string", nullable="0+"),
    f("leader", "string", nullable="0+"),
    f("current_state_timestamp", "int64", "2+", default=-1),
    f("members", [
        f("member_id", "string"),
        f("group_instance_id", "string", "3+", nullable="3+", default=None),
        f("client_id", "string"),
        f("client_host", "string"),
        f("rebalance_timeout", "int32", "1+", default=-1),
        f("session_timeout", "int32"),
        f("subscription", "bytes"),
        f("assignment", "bytes"),
    ]),
])


class UnknownRecordVersion(ValueError):
    """A value version newer than any this broker can read (a key version is skipped instead)."""


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class OffsetAndMetadata:
    """One committed offset as stored. `expire_timestamp` is set only by old-style commits."""

    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int | None = None


@dataclass(frozen=True)
class MemberSnapshot:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSnapshot:
    """What Kafka persists of a classic group: enough to resume it as Empty or Stable."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberSnapshot, ...] = ()


@dataclass(frozen=True)
class OffsetCommitRecord:
    key: OffsetKey
    value: OffsetAndMetadata | None  # None: tombstone


@dataclass(frozen=True)
class GroupMetadataRecord:
    group: str
    value: GroupSnapshot | None  # None: tombstone

    @property
    def group_id(self) -> str:
        return self.group


GroupRecord = Union[OffsetCommitRecord, GroupMetadataRecord]

NO_PRODUCER_ID = -1


@dataclass(frozen=True)
class TxnMarker:
    """A COMMIT or ABORT control record in __consumer_offsets: it ends, in that partition,
    the transaction of its batch's producer, so that producer's pending offsets take effect
    or are dropped."""

    commit: bool


@dataclass(frozen=True)
class LogEntry:
    """A record as read back from __consumer_offsets, with what replay needs beside its key
    and value: where its batch starts (Kafka orders a transactional commit against a plain one
    by it) and the producer of a transactional batch (NO_PRODUCER_ID for any other)."""

    record: GroupRecord | TxnMarker
    log_offset: int
    producer_id: int = NO_PRODUCER_ID


def record_group(record: GroupRecord) -> str:
    """The group a record belongs to, which decides its __consumer_offsets partition."""
    return record.key.group if isinstance(record, OffsetCommitRecord) else record.group


# -- encoding ----------------------------------------------------------------------------------

def _versioned(message: Message, version: int, body: dict[str, Any]) -> bytes:
    return _I16.pack(version) + message.encode(body, version)


def encode_key(record: GroupRecord) -> bytes:
    if isinstance(record, OffsetCommitRecord):
        k = record.key
        return _versioned(_OFFSET_KEY, OFFSET_KEY_VERSION,
                          {"group": k.group, "topic": k.topic, "partition": k.partition})
    return _versioned(_GROUP_KEY, GROUP_KEY_VERSION, {"group": record.group})


def encode_offset_value(value: OffsetAndMetadata) -> bytes:
    version = OFFSET_VALUE_WITH_EXPIRY if value.expire_timestamp is not None \
        else OFFSET_VALUE_VERSION
    return _versioned(_OFFSET_VALUE, version, {
        "offset": value.offset, "leader_epoch": value.leader_epoch,
        "metadata": value.metadata, "commit_timestamp": value.commit_timestamp,
        "expire_timestamp": -1 if value.expire_timestamp is None else value.expire_timestamp,
    })


def encode_group_value(value: GroupSnapshot) -> bytes:
    return _versioned(_GROUP_VALUE, GROUP_VALUE_VERSION, {
        "protocol_type": value.protocol_type, "generation": value.generation,
        "protocol": value.protocol, "leader": value.leader,
        "current_state_timestamp": value.current_state_timestamp,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                     "client_id": m.client_id, "client_host": m.client_host,
                     "rebalance_timeout": m.rebalance_timeout,
                     "session_timeout": m.session_timeout, "subscription": m.subscription,
                     "assignment": m.assignment} for m in value.members],
    })


def encode_record(record: GroupRecord, timestamp: int | None = None) -> Record:
    """The key/value record to append to __consumer_offsets."""
    if isinstance(record, OffsetCommitRecord):
        value = None if record.value is None else encode_offset_value(record.value)
    else:
        value = None if record.value is None else encode_group_value(record.value)
    return Record(encode_key(record), value, timestamp=timestamp)


# -- decoding ----------------------------------------------------------------------------------

def _split(data: bytes) -> tuple[int, BytesIO]:
    if len(data) < 2:
        raise ValueError("record shorter than its version")
    return _I16.unpack_from(data)[0], BytesIO(data[2:])


def _decode_body(message: Message, version: int, io: BytesIO) -> Any:
    """Decode one body. A version newer than we know is read as the newest we know: since
    KIP-915 these records grow only by tagged fields, which the flexible layout skips."""
    assert message.valid.high is not None
    return message.decode(io, min(version, message.valid.high))


def decode_key(data: bytes) -> OffsetKey | str | None:
    """OffsetKey for an offset commit, the group id for group metadata, None if unknown."""
    version, io = _split(data)
    if version in (0, 1):
        body = _OFFSET_KEY.decode(io, version)
        return OffsetKey(body.group, body.topic, body.partition)
    if version == 2:
        group: str = _GROUP_KEY.decode(io, version).group
        return group
    return None


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    version, io = _split(data)
    if version < 0:
        raise UnknownRecordVersion(f"OffsetCommitValue version {version}")
    body = _decode_body(_OFFSET_VALUE, version, io)
    expire = body.expire_timestamp if version == 1 and body.expire_timestamp >= 0 else None
    return OffsetAndMetadata(body.offset, body.metadata, body.commit_timestamp,
                             body.leader_epoch, expire)


def decode_group_value(data: bytes) -> GroupSnapshot:
    version, io = _split(data)
    if version < 0:
        raise UnknownRecordVersion(f"GroupMetadataValue version {version}")
    body = _decode_body(_GROUP_VALUE, version, io)
    members = tuple(
        MemberSnapshot(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                       m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout,
                       m.session_timeout, bytes(m.subscription), bytes(m.assignment))
        for m in body.members)
    return GroupSnapshot(body.protocol_type, body.generation, body.protocol, body.leader,
                         body.current_state_timestamp, members)


def decode_record(key: bytes | None, value: bytes | None) -> GroupRecord | None:
    """A record read back from __consumer_offsets; None for record types we do not know.

    ValueError (or a construct error) for bytes that are not a valid record of a known type.
    """
    if key is None:
        return None
    decoded = decode_key(key)
    if decoded is None:
        return None
    if isinstance(decoded, OffsetKey):
        return OffsetCommitRecord(decoded, None if value is None else decode_offset_value(value))
    return GroupMetadataRecord(decoded, None if value is None else decode_group_value(value))


# -- the consumer protocol's subscription -------------------------------------------------------

_I32 = struct.Struct(">i")


def consumer_subscription_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics in a "consumer" protocol subscription (ConsumerProtocolSubscription).

    Every version starts `version int16 | topics [string]`, and that prefix is all the
    coordinator needs (OffsetDelete refuses subscribed topics; retention keeps their offsets).
    None when the bytes are not a subscription, meaning "assume subscribed to everything".
    """
    try:
        pos = 2
        (count,) = _I32.unpack_from(metadata, pos)
        pos += 4
        if count < 0 or count > len(metadata):
            return None
        topics = []
        for _ in range(count):
            (size,) = _I16.unpack_from(metadata, pos)
            pos += 2
            if size < 0 or pos + size > len(metadata):
                return None
            topics.append(metadata[pos:pos + size].decode("utf-8"))
            pos += size
        return frozenset(topics)
    except (struct.error, UnicodeDecodeError):
        return None
