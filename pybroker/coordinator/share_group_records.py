"""The KIP-932 share group records of `__consumer_offsets`, in Kafka 4.1's layouts, so a
broker restart resumes a share group's membership (epochs, members, assignments).

A key is an int16 record type then the key body (version 0, not flexible; the same bodies as
the consumer group records'); a value is an int16 version 0 then a flexible body; a null value
is a tombstone:

    10  ShareGroupMemberMetadata          GroupId, MemberId -> RackId, ClientId, ClientHost,
                                          SubscribedTopicNames
    11  ShareGroupMetadata                GroupId           -> Epoch, MetadataHash
    12  ShareGroupTargetAssignmentMetadata  GroupId         -> AssignmentEpoch
    13  ShareGroupTargetAssignmentMember    GroupId, MemberId -> TopicPartitions
    14  ShareGroupCurrentMemberAssignment   GroupId, MemberId -> MemberEpoch,
                                          PreviousMemberEpoch, State, AssignedPartitions

Record 15 (ShareGroupStatePartitionMetadata, which share-partitions Kafka's share coordinator
has initialized) is neither written nor read: here a share-partition's state is created by
its leader at first use (share_coordinator.py), and the group coordinator, which sends
InitializeShareGroupState only for an AlterShareGroupOffsets, finds a group's share-partitions
by asking the share coordinators for every partition. MetadataHash
is written 0: this coordinator recomputes the assignment from the topics at every heartbeat,
so it has no use for a hash of them.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Mapping, Union

from protocol.schema import Message, f
from pybroker.coordinator.consumer_group_records import (
    TOPIC_PARTITIONS, data_message, decode_parts, encode_parts, partitions_in, partitions_out,
)

__all__ = [
    "SHARE_RECORD_TYPES", "ShareMemberRecord", "ShareGroupEpochRecord",
    "ShareTargetEpochRecord", "ShareTargetMemberRecord", "ShareCurrentAssignmentRecord",
    "ShareGroupRecord", "encode", "decode", "MEMBER_STABLE",
]

MEMBER_METADATA, GROUP_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = \
    10, 11, 12, 13, 14
SHARE_RECORD_TYPES = frozenset({MEMBER_METADATA, GROUP_METADATA, TARGET_METADATA,
                                TARGET_MEMBER, CURRENT_ASSIGNMENT})
# Kafka's MemberState STABLE: a share member never revokes, so it is always stable.
MEMBER_STABLE = 0

Partitions = Mapping[uuid.UUID, tuple[int, ...]]

_VALUES: dict[int, Message] = {
    MEMBER_METADATA: data_message("ShareGroupMemberMetadataValue", "0+", [
        f("rack_id", "string", nullable="0+"),
        f("client_id", "string"),
        f("client_host", "string"),
        f("subscribed_topic_names", "[]string")]),
    GROUP_METADATA: data_message("ShareGroupMetadataValue", "0+", [
        f("epoch", "int32"), f("metadata_hash", "int64")]),
    TARGET_METADATA: data_message("ShareGroupTargetAssignmentMetadataValue", "0+", [
        f("assignment_epoch", "int32")]),
    TARGET_MEMBER: data_message("ShareGroupTargetAssignmentMemberValue", "0+", [
        f("topic_partitions", TOPIC_PARTITIONS)]),
    CURRENT_ASSIGNMENT: data_message("ShareGroupCurrentMemberAssignmentValue", "0+", [
        f("member_epoch", "int32"),
        f("previous_member_epoch", "int32"),
        f("state", "int8"),
        f("assigned_partitions", TOPIC_PARTITIONS)]),
}


@dataclass(frozen=True)
class MemberMetadata:
    """The body of record 10: what a member told the coordinator about itself."""
    rack_id: str | None
    client_id: str
    client_host: str
    topic_names: tuple[str, ...]


@dataclass(frozen=True)
class ShareMemberRecord:  # 10; metadata None: the member is gone
    group_id: str
    member_id: str
    metadata: MemberMetadata | None


@dataclass(frozen=True)
class ShareGroupEpochRecord:  # 11; epoch None: the group is gone
    group_id: str
    epoch: int | None


@dataclass(frozen=True)
class ShareTargetEpochRecord:  # 12; epoch None: a tombstone (the group is gone)
    group_id: str
    epoch: int | None


@dataclass(frozen=True)
class ShareTargetMemberRecord:  # 13; partitions None: a tombstone
    group_id: str
    member_id: str
    partitions: Partitions | None


@dataclass(frozen=True)
class ShareCurrentAssignmentRecord:  # 14; member_epoch None: a tombstone
    group_id: str
    member_id: str
    member_epoch: int | None
    previous_member_epoch: int = 0
    assigned: Partitions | None = None


ShareGroupRecord = Union[ShareMemberRecord, ShareGroupEpochRecord, ShareTargetEpochRecord,
                         ShareTargetMemberRecord, ShareCurrentAssignmentRecord]

_TYPES: dict[type, int] = {
    ShareMemberRecord: MEMBER_METADATA, ShareGroupEpochRecord: GROUP_METADATA,
    ShareTargetEpochRecord: TARGET_METADATA, ShareTargetMemberRecord: TARGET_MEMBER,
    ShareCurrentAssignmentRecord: CURRENT_ASSIGNMENT,
}


def _sorted_partitions(items: Any) -> dict[uuid.UUID, tuple[int, ...]]:
    return {t: tuple(sorted(ps)) for t, ps in partitions_in(items).items()}


def _value_body(record: ShareGroupRecord) -> dict[str, Any] | None:
    if isinstance(record, ShareMemberRecord):
        m = record.metadata
        return None if m is None else {
            "rack_id": m.rack_id, "client_id": m.client_id, "client_host": m.client_host,
            "subscribed_topic_names": list(m.topic_names)}
    if isinstance(record, ShareGroupEpochRecord):
        return None if record.epoch is None else {"epoch": record.epoch, "metadata_hash": 0}
    if isinstance(record, ShareTargetEpochRecord):
        return None if record.epoch is None else {"assignment_epoch": record.epoch}
    if isinstance(record, ShareTargetMemberRecord):
        return None if record.partitions is None else {
            "topic_partitions": partitions_out(record.partitions)}
    return None if record.member_epoch is None else {
        "member_epoch": record.member_epoch,
        "previous_member_epoch": record.previous_member_epoch, "state": MEMBER_STABLE,
        "assigned_partitions": partitions_out(record.assigned or {})}


def encode(record: ShareGroupRecord) -> tuple[bytes, bytes | None]:
    """The key and value (None: a tombstone) to append to __consumer_offsets."""
    member_id = None if isinstance(record, (ShareGroupEpochRecord, ShareTargetEpochRecord)) \
        else record.member_id
    return encode_parts(_TYPES[type(record)], record.group_id, member_id,
                        _value_body(record), _VALUES)


def decode(key: bytes, value: bytes | None) -> ShareGroupRecord | None:
    """The record of a key whose type is one of SHARE_RECORD_TYPES; None for any other key.
    ValueError (or a construct error) for bytes that do not decode."""
    parts = decode_parts(key, value, _VALUES, frozenset({GROUP_METADATA, TARGET_METADATA}))
    if parts is None:
        return None
    kind, group_id, member_id, body = parts
    if kind == GROUP_METADATA:
        return ShareGroupEpochRecord(group_id, None if body is None else body.epoch)
    if kind == TARGET_METADATA:
        return ShareTargetEpochRecord(group_id,
                                      None if body is None else body.assignment_epoch)
    if kind == MEMBER_METADATA:
        return ShareMemberRecord(group_id, member_id, None if body is None else MemberMetadata(
            body.rack_id, body.client_id, body.client_host,
            tuple(body.subscribed_topic_names)))
    if kind == TARGET_MEMBER:
        return ShareTargetMemberRecord(group_id, member_id, None if body is None
                                       else _sorted_partitions(body.topic_partitions))
    if body is None:
        return ShareCurrentAssignmentRecord(group_id, member_id, None)
    return ShareCurrentAssignmentRecord(group_id, member_id, body.member_epoch,
                                        body.previous_member_epoch,
                                        _sorted_partitions(body.assigned_partitions))
