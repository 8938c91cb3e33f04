"""The KIP-848 consumer group records of `__consumer_offsets`, in Kafka 4.1's layouts.

A key is an int16 record type then the key body (version 0, not flexible); a value is an int16
version 0 then a flexible body; a null value is a tombstone:

    3  ConsumerGroupMetadata            GroupId            -> Epoch, tag 0 MetadataHash
    5  ConsumerGroupMemberMetadata      GroupId, MemberId  -> InstanceId, RackId, ClientId,
                                        ClientHost, SubscribedTopicNames, SubscribedTopicRegex,
                                        RebalanceTimeoutMs, ServerAssignor, tag 0
                                        ClassicMemberMetadata (SessionTimeoutMs,
                                        SupportedProtocols[Name, Metadata]): set for a classic
                                        member of a consumer group (online migration)
    6  ConsumerGroupTargetAssignmentMetadata  GroupId      -> AssignmentEpoch
    7  ConsumerGroupTargetAssignmentMember    GroupId, MemberId -> TopicPartitions
    8  ConsumerGroupCurrentMemberAssignment   GroupId, MemberId -> MemberEpoch,
                                        PreviousMemberEpoch, State, AssignedPartitions,
                                        PartitionsPendingRevocation

The dataclasses are what the state machine (consumer_group_state.py) writes and replays; the
bodies are declared with the project's message DSL, the facts Kafka's. MetadataHash (KIP-1101)
is this broker's own hash of the subscribed topics (names, ids, partition counts), not Kafka's
murmur3 of the topic metadata: it serves the same purpose, comparing only with itself.
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from io import BytesIO
from typing import Any, Union

from protocol.schema import Field, Message, StructOf, Versions, f

GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = \
    3, 5, 6, 7, 8
RECORD_TYPES = frozenset({GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER,
                          CURRENT_ASSIGNMENT})

_I16 = struct.Struct(">h")
Partitions = Mapping[uuid.UUID, frozenset[int]]


def data_message(name: str, flexible: str, fields: list[Field]) -> Message:
    return Message(name, -1, Versions.parse("0"), Versions.parse(flexible), tuple(fields))


GROUP_KEY = data_message("ConsumerGroupKey", "none", [f("group_id", "string")])
MEMBER_KEY = data_message("ConsumerGroupMemberKey", "none",
                    [f("group_id", "string"), f("member_id", "string")])
TOPIC_PARTITIONS = [f("topic_id", "uuid"), f("partitions", "[]int32")]
_VALUES: dict[int, Message] = {
    GROUP_METADATA: data_message("ConsumerGroupMetadataValue", "0+", [
        f("epoch", "int32"), f("metadata_hash", "int64", tag=0, default=0)]),
    MEMBER_METADATA: data_message("ConsumerGroupMemberMetadataValue", "0+", [
        f("instance_id", "string", nullable="0+"),
        f("rack_id", "string", nullable="0+"),
        f("client_id", "string"),
        f("client_host", "string"),
        f("subscribed_topic_names", "[]string"),
        f("subscribed_topic_regex", "string", nullable="0+"),
        f("rebalance_timeout_ms", "int32", default=-1),
        f("server_assignor", "string", nullable="0+"),
        f("classic_member_metadata", StructOf((
            f("session_timeout_ms", "int32"),
            f("supported_protocols", [f("name", "string"), f("metadata", "bytes")]),
        )), nullable="0+", tag=0, default=None),
    ]),
    TARGET_METADATA: data_message("ConsumerGroupTargetAssignmentMetadataValue", "0+", [
        f("assignment_epoch", "int32")]),
    TARGET_MEMBER: data_message("ConsumerGroupTargetAssignmentMemberValue", "0+", [
        f("topic_partitions", TOPIC_PARTITIONS)]),
    CURRENT_ASSIGNMENT: data_message("ConsumerGroupCurrentMemberAssignmentValue", "0+", [
        f("member_epoch", "int32"),
        f("previous_member_epoch", "int32"),
        f("state", "int8"),
        f("assigned_partitions", TOPIC_PARTITIONS),
        f("partitions_pending_revocation", TOPIC_PARTITIONS),
    ]),
}


@dataclass(frozen=True)
class ClassicMetadata:
    """What a member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) in a
    consumer group keeps besides a consumer-protocol member's fields: its session timeout
    and its JoinGroup protocols (name, subscription bytes), in its order of preference. The
    subscriptions are needed to turn the group back into a classic one (downgrade) and to
    answer SyncGroup in the version the member wrote."""
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class MemberSubscription:
    """The body of record 5."""
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    topic_names: tuple[str, ...]
    rebalance_timeout_ms: int
    server_assignor: str | None
    topic_regex: str | None = None
    # Set for a member of the classic protocol (record 5's tag 0, ClassicMemberMetadata).
    classic: ClassicMetadata | None = None


@dataclass(frozen=True)
class GroupEpochRecord:  # 3; epoch None: the group is gone
    group_id: str
    epoch: int | None
    # KIP-1101: a hash of the subscribed topics' metadata; a change moves the epoch on.
    metadata_hash: int = 0


@dataclass(frozen=True)
class MemberRecord:  # 5
    group_id: str
    member_id: str
    subscription: MemberSubscription | None


@dataclass(frozen=True)
class TargetEpochRecord:  # 6; epoch None: a tombstone (the group is deleted)
    group_id: str
    epoch: int | None


@dataclass(frozen=True)
class TargetMemberRecord:  # 7
    group_id: str
    member_id: str
    partitions: Partitions | None


@dataclass(frozen=True)
class CurrentAssignmentRecord:  # 8; member_epoch None: a tombstone
    group_id: str
    member_id: str
    member_epoch: int | None
    previous_member_epoch: int = 0
    state: int = 0
    assigned: Partitions = None  # type: ignore[assignment]
    pending_revocation: Partitions = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.member_epoch is not None:
            object.__setattr__(self, "assigned", dict(self.assigned or {}))
            object.__setattr__(self, "pending_revocation", dict(self.pending_revocation or {}))


ConsumerGroupRecord = Union[GroupEpochRecord, MemberRecord, TargetEpochRecord,
                            TargetMemberRecord, CurrentAssignmentRecord]


def partitions_out(parts: Mapping[uuid.UUID, Collection[int]]) -> list[dict[str, Any]]:
    return [{"topic_id": t, "partitions": sorted(ps)}
            for t, ps in sorted(parts.items(), key=lambda kv: str(kv[0])) if ps]


def partitions_in(items: Any) -> dict[uuid.UUID, frozenset[int]]:
    return {i.topic_id: frozenset(i.partitions) for i in items}


def _classic_in(body: Any) -> ClassicMetadata | None:
    if body is None:
        return None
    return ClassicMetadata(body.session_timeout_ms, tuple(
        (p.name, bytes(p.metadata or b"")) for p in body.supported_protocols))


def _record_type(record: ConsumerGroupRecord) -> int:
    return {GroupEpochRecord: GROUP_METADATA, MemberRecord: MEMBER_METADATA,
            TargetEpochRecord: TARGET_METADATA, TargetMemberRecord: TARGET_MEMBER,
            CurrentAssignmentRecord: CURRENT_ASSIGNMENT}[type(record)]


def _value_body(record: ConsumerGroupRecord) -> dict[str, Any] | None:
    if isinstance(record, GroupEpochRecord):
        return None if record.epoch is None else {"epoch": record.epoch,
                                                  "metadata_hash": record.metadata_hash}
    if isinstance(record, TargetEpochRecord):
        return None if record.epoch is None else {"assignment_epoch": record.epoch}
    if isinstance(record, MemberRecord):
        s = record.subscription
        return None if s is None else {
            "instance_id": s.instance_id, "rack_id": s.rack_id, "client_id": s.client_id,
            "client_host": s.client_host, "subscribed_topic_names": list(s.topic_names),
            "subscribed_topic_regex": s.topic_regex,
            "rebalance_timeout_ms": s.rebalance_timeout_ms, "server_assignor": s.server_assignor,
            "classic_member_metadata": None if s.classic is None else {
                "session_timeout_ms": s.classic.session_timeout_ms,
                "supported_protocols": [{"name": n, "metadata": m}
                                        for n, m in s.classic.protocols]}}
    if isinstance(record, TargetMemberRecord):
        return None if record.partitions is None else {
            "topic_partitions": partitions_out(record.partitions)}
    return None if record.member_epoch is None else {
        "member_epoch": record.member_epoch,
        "previous_member_epoch": record.previous_member_epoch, "state": record.state,
        "assigned_partitions": partitions_out(record.assigned),
        "partitions_pending_revocation": partitions_out(record.pending_revocation)}


def encode_parts(kind: int, group_id: str, member_id: str | None,
                 body: dict[str, Any] | None, values: Mapping[int, Message]
                 ) -> tuple[bytes, bytes | None]:
    """A KIP-848-style coordinator record (the consumer and share groups' alike): the key of
    type `kind`, keyed by the group alone when `member_id` is None, and the value of `body`
    at version 0 in `values[kind]` (None: a tombstone)."""
    if member_id is None:
        key = GROUP_KEY.encode({"group_id": group_id}, 0)
    else:
        key = MEMBER_KEY.encode({"group_id": group_id, "member_id": member_id}, 0)
    value = None if body is None else _I16.pack(0) + values[kind].encode(body, 0)
    return _I16.pack(kind) + key, value


def decode_parts(key: bytes, value: bytes | None, values: Mapping[int, Message],
                 group_keyed: frozenset[int]) -> tuple[int, str, str, Any] | None:
    """(type, group id, member id ("" for a group-keyed type), value body or None for a
    tombstone) of a record whose type is a key of `values`; None for any other type.
    ValueError (or a construct error) for bytes that do not decode."""
    if len(key) < 2:
        raise ValueError("record key shorter than its type")
    kind = _I16.unpack_from(key)[0]
    if kind not in values:
        return None
    io = BytesIO(key[2:])
    if kind in group_keyed:
        group_id, member_id = GROUP_KEY.decode(io, 0).group_id, ""
    else:
        k = MEMBER_KEY.decode(io, 0)
        group_id, member_id = k.group_id, k.member_id
    body = None
    if value is not None:
        if len(value) < 2:
            raise ValueError("record value shorter than its version")
        body = values[kind].decode(BytesIO(value[2:]), 0)
    return kind, group_id, member_id, body


def encode(record: ConsumerGroupRecord) -> tuple[bytes, bytes | None]:
    """The key and value (None: a tombstone) to append to __consumer_offsets."""
    kind = _record_type(record)
    member_id = None if kind in (GROUP_METADATA, TARGET_METADATA) \
        else record.member_id  # type: ignore[union-attr]
    return encode_parts(kind, record.group_id, member_id, _value_body(record), _VALUES)


def decode(key: bytes, value: bytes | None) -> ConsumerGroupRecord | None:
    """The record of a key whose type is one of RECORD_TYPES; None for any other key.
    ValueError (or a construct error) for bytes that do not decode."""
    parts = decode_parts(key, value, _VALUES, frozenset({GROUP_METADATA, TARGET_METADATA}))
    if parts is None:
        return None
    kind, group_id, member_id, body = parts
    if kind == GROUP_METADATA:
        if body is None:
            return GroupEpochRecord(group_id, None)
        return GroupEpochRecord(group_id, body.epoch, body.metadata_hash)
    if kind == TARGET_METADATA:
        return TargetEpochRecord(group_id, None if body is None else body.assignment_epoch)
    if kind == MEMBER_METADATA:
        return MemberRecord(group_id, member_id, None if body is None else MemberSubscription(
            body.instance_id, body.rack_id, body.client_id, body.client_host,
            tuple(body.subscribed_topic_names), body.rebalance_timeout_ms,
            body.server_assignor, body.subscribed_topic_regex,
            _classic_in(body.classic_member_metadata)))
    if kind == TARGET_MEMBER:
        return TargetMemberRecord(group_id, member_id, None if body is None
                                  else partitions_in(body.topic_partitions))
    if body is None:
        return CurrentAssignmentRecord(group_id, member_id, None)
    return CurrentAssignmentRecord(group_id, member_id, body.member_epoch,
                                   body.previous_member_epoch, body.state,
                                   partitions_in(body.assigned_partitions),
                                   partitions_in(body.partitions_pending_revocation))
