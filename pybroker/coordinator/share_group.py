"""Share-group membership (KIP-932 ShareGroupHeartbeat) and the `simple` assignor, pure.

Theory of operation
-------------------
A share group has no rebalance protocol: members never revoke anything, since a partition may
be read by several members at once and the share-partition (`share_partition`) decides which
records each one gets. So the heartbeat is a small table:

    MemberEpoch 0   join (or rejoin): the member and its subscription are stored
    MemberEpoch -1  leave: the member goes, and the owner releases what it holds
    MemberEpoch n   n must be the member's epoch (else FENCED_MEMBER_EPOCH; unknown member:
                    UNKNOWN_MEMBER_ID); a changed subscription is stored

After each, the target assignment is computed from the subscriptions and the topics as they
are now (a topic created or grown later is picked up at the next heartbeat); if it differs
from the last one, the group epoch rises, and a member whose epoch is behind jumps to it and
gets its assignment in the response (null when unchanged). A member that does not heartbeat
within the session timeout is removed as if it had left (`expire`).

The `simple` assignor balances each topic's partitions over the members subscribed to it:
with at least as many partitions as members, partition i goes to member i mod M; with more
members than partitions, member j reads partition j mod P, so each partition has ⌈M/P⌉ or
⌊M/P⌋ readers. Members are ordered by id, so the assignment is stable while membership is.

Membership is durable as in Kafka: the owner writes to `__consumer_offsets` the records
(share_group_records, Kafka's 10-14) that `records_between` derives from the group's durable
view before and after each operation, and `replay`s them at load, so a restart resumes each
group with its epochs, members and assignments. A loaded member's session runs from the load
(`after_load`), so a member that never comes back still expires, as Kafka schedules the
session timers of the members it loads.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping
from uuid import UUID

from protocol.errors import ErrorCode
from pybroker.coordinator.share_group_records import (
    MemberMetadata, ShareCurrentAssignmentRecord, ShareGroupEpochRecord, ShareGroupRecord,
    ShareMemberRecord, ShareTargetEpochRecord, ShareTargetMemberRecord,
)

__all__ = [
    "ShareGroupConfig", "ShareMember", "ShareGroup", "HeartbeatResult", "ShareGroups",
    "simple_assignment", "TopicLookup", "Assignment", "SHARE_GROUP_TYPE", "DurableView",
    "durable_view", "records_between",
]

# topic name -> (topic id, partition count), or None when the topic does not exist
TopicLookup = Callable[[str], "tuple[UUID, int] | None"]
# topic id -> sorted partitions
Assignment = Mapping[UUID, tuple[int, ...]]

ASSIGNOR = "simple"
SHARE_GROUP_TYPE = "share"  # Kafka's GroupType, also the ProtocolType ListGroups shows
LEAVE_EPOCH = -1


@dataclass(frozen=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 200


@dataclass
class ShareMember:
    member_id: str
    member_epoch: int
    subscribed_topic_names: tuple[str, ...]
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    assignment: Assignment = field(default_factory=dict)
    session_deadline_ms: int = 0
    previous_member_epoch: int = 0


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> assignment

    @property
    def state(self) -> str:
        """Kafka's share-group states as ShareGroupDescribe and ListGroups show them."""
        return "Stable" if self.members else "Empty"


@dataclass(frozen=True)
class HeartbeatResult:
    error: ErrorCode
    member_id: str | None = None
    member_epoch: int = 0
    assignment: Assignment | None = None  # None: unchanged since the member's last heartbeat
    left: str | None = None  # a member that left: the owner releases its records
    error_message: str | None = None


def invalid_heartbeat(group_id: str, member_id: str, member_epoch: int,
                      rack_id: str | None, subscribed_topic_names: list[str] | None
                      ) -> str | None:
    """Why a ShareGroupHeartbeat is INVALID_REQUEST, in Kafka 4.1.1's words and order
    (GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid), or None."""
    if not member_id:
        return "MemberId can't be empty."
    if not group_id:
        return "GroupId can't be empty."
    if rack_id == "":
        return "RackId can't be empty."
    if member_epoch == 0 and not subscribed_topic_names:
        return "SubscribedTopicNames must be set in first request."
    if member_epoch < LEAVE_EPOCH:
        return "MemberEpoch is invalid."
    return None


def simple_assignment(members: Mapping[str, tuple[str, ...]],
                      lookup: TopicLookup) -> dict[str, Assignment]:
    """Each member's partitions by topic id; see the module docstring for the rule."""
    out: dict[str, dict[UUID, list[int]]] = {m: {} for m in members}
    topics = sorted({t for subscribed in members.values() for t in subscribed})
    for topic in topics:
        found = lookup(topic)
        if found is None:
            continue
        topic_id, count = found
        readers = sorted(m for m, subscribed in members.items() if topic in subscribed)
        if count <= 0 or not readers:
            continue
        if count >= len(readers):
            for p in range(count):
                out[readers[p % len(readers)]].setdefault(topic_id, []).append(p)
        else:
            for j, member in enumerate(readers):
                out[member].setdefault(topic_id, []).append(j % count)
    return {m: {t: tuple(sorted(ps)) for t, ps in by_topic.items()}
            for m, by_topic in out.items()}


class ShareGroups:
    """Every share group this coordinator owns; operations take the time and return results."""

    def __init__(self, config: ShareGroupConfig) -> None:
        self.config = config
        self.groups: dict[str, ShareGroup] = {}
        # Groups whose own configs (the GROUP config resource) differ from the broker's: set
        # by the owner before each heartbeat, so a change applies from the next one.
        self.group_configs: dict[str, ShareGroupConfig] = {}

    def config_for(self, group_id: str) -> ShareGroupConfig:
        return self.group_configs.get(group_id, self.config)

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                  rack_id: str | None, subscribed_topic_names: list[str] | None,
                  lookup: TopicLookup, now_ms: int, *, client_id: str = "",
                  client_host: str = "") -> HeartbeatResult:
        invalid = invalid_heartbeat(group_id, member_id, member_epoch, rack_id,
                                    subscribed_topic_names)
        if invalid is not None:
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, error_message=invalid)
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member_epoch == LEAVE_EPOCH:
            if group is None or member is None:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
            self._remove(group, member_id, lookup)
            return HeartbeatResult(ErrorCode.NONE, member_id, LEAVE_EPOCH, left=member_id)
        if member_epoch > 0:
            if member is None:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
            if member_epoch != member.member_epoch:
                return HeartbeatResult(ErrorCode.FENCED_MEMBER_EPOCH)
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id)
        joined = member is None or member_epoch == 0
        if member is None:
            if len(group.members) >= self.config.max_size:
                return HeartbeatResult(ErrorCode.GROUP_MAX_SIZE_REACHED)
            member = group.members[member_id] = ShareMember(member_id, 0, ())
        if subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(sorted(set(subscribed_topic_names)))
        if rack_id is not None:
            member.rack_id = rack_id
        member.client_id, member.client_host = client_id, client_host
        member.session_deadline_ms = now_ms + self.config_for(group_id).session_timeout_ms
        self._reassign(group, lookup)
        if joined or member.member_epoch != group.group_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.group_epoch
            member.assignment = group.target.get(member_id, {})
            return HeartbeatResult(ErrorCode.NONE, member_id, member.member_epoch,
                                   member.assignment)
        return HeartbeatResult(ErrorCode.NONE, member_id, member.member_epoch)

    def _reassign(self, group: ShareGroup, lookup: TopicLookup) -> None:
        target = simple_assignment(
            {m.member_id: m.subscribed_topic_names for m in group.members.values()}, lookup)
        if target != group.target or group.group_epoch == 0:
            group.target = target
            group.group_epoch += 1

    def _remove(self, group: ShareGroup, member_id: str, lookup: TopicLookup) -> None:
        del group.members[member_id]
        self._reassign(group, lookup)

    def expire(self, now_ms: int, lookup: TopicLookup) -> list[tuple[str, str]]:
        """Members whose session ran out by `now_ms` are removed: (group, member) of each, for
        the owner to release their records."""
        gone = []
        for group in self.groups.values():
            for member in list(group.members.values()):
                if member.session_deadline_ms <= now_ms:
                    self._remove(group, member.member_id, lookup)
                    gone.append((group.group_id, member.member_id))
        return gone

    def next_deadline(self) -> int | None:
        deadlines = [m.session_deadline_ms for g in self.groups.values()
                     for m in g.members.values()]
        return min(deadlines) if deadlines else None

    def delete(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        del self.groups[group_id]
        return ErrorCode.NONE

    # -- durability ------------------------------------------------------------------------------

    def replay(self, record: ShareGroupRecord) -> None:
        """Apply one record read back from __consumer_offsets (in log order)."""
        group_id = record.group_id
        if isinstance(record, ShareGroupEpochRecord):
            if record.epoch is None:
                self.groups.pop(group_id, None)
            else:
                self.groups.setdefault(group_id, ShareGroup(group_id)).group_epoch = record.epoch
            return
        if isinstance(record, ShareTargetEpochRecord):
            return  # the assignment epoch is the group epoch here; its tombstone comes with 11's
        group = self.groups.get(group_id)
        gone = ((isinstance(record, ShareMemberRecord) and record.metadata is None)
                or (isinstance(record, ShareTargetMemberRecord) and record.partitions is None)
                or (isinstance(record, ShareCurrentAssignmentRecord)
                    and record.member_epoch is None))
        if gone:
            if group is not None:
                if isinstance(record, ShareMemberRecord):
                    group.members.pop(record.member_id, None)
                elif isinstance(record, ShareTargetMemberRecord):
                    group.target.pop(record.member_id, None)
            return
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id)
        if isinstance(record, ShareTargetMemberRecord):
            group.target[record.member_id] = dict(record.partitions or {})
            return
        member = group.members.get(record.member_id)
        if member is None:
            member = group.members[record.member_id] = ShareMember(record.member_id, 0, ())
        if isinstance(record, ShareMemberRecord):
            m = record.metadata
            assert m is not None
            member.rack_id, member.client_id, member.client_host = (
                m.rack_id, m.client_id, m.client_host)
            member.subscribed_topic_names = m.topic_names
        elif isinstance(record, ShareCurrentAssignmentRecord):
            assert record.member_epoch is not None
            member.member_epoch = record.member_epoch
            member.previous_member_epoch = record.previous_member_epoch
            member.assignment = dict(record.assigned or {})

    def after_load(self, now_ms: int, group_ids: Iterable[str] | None = None) -> None:
        """Each loaded member's session (of `group_ids`, by default every group's) runs from
        now: one that never heartbeats again is removed a session timeout after the load, as
        Kafka does."""
        wanted = None if group_ids is None else set(group_ids)
        for group in self.groups.values():
            if wanted is not None and group.group_id not in wanted:
                continue
            timeout = self.config_for(group.group_id).session_timeout_ms
            for member in group.members.values():
                member.session_deadline_ms = now_ms + timeout


@dataclass(frozen=True)
class DurableView:
    """What of a share group the records hold: its epoch, each member's metadata, target
    and current assignment (not the session deadlines, which run from each start)."""
    epoch: int
    members: Mapping[str, MemberMetadata]
    target: Mapping[str, Assignment]
    current: Mapping[str, tuple[int, int, Assignment]]


def durable_view(group: ShareGroup | None) -> DurableView | None:
    if group is None:
        return None
    return DurableView(
        group.group_epoch,
        {m.member_id: MemberMetadata(m.rack_id, m.client_id, m.client_host,
                                     m.subscribed_topic_names)
         for m in group.members.values()},
        dict(group.target),
        {m.member_id: (m.member_epoch, m.previous_member_epoch, dict(m.assignment))
         for m in group.members.values()})


def records_between(group_id: str, before: DurableView | None,
                    after: DurableView | None) -> list[ShareGroupRecord]:
    """The records that take the log from `before` to `after` (None: no group), in Kafka's
    order: a gone member's current assignment, target and metadata tombstones; new or changed
    member metadata; the group epoch; target assignments, then the assignment epoch; current
    assignments; for a gone group, the assignment epoch's and the group epoch's tombstones."""
    old = before or DurableView(-1, {}, {}, {})
    new = after or DurableView(-1, {}, {}, {})
    out: list[ShareGroupRecord] = []
    for member_id in sorted(set(old.members) - set(new.members)):
        out += [ShareCurrentAssignmentRecord(group_id, member_id, None),
                ShareTargetMemberRecord(group_id, member_id, None),
                ShareMemberRecord(group_id, member_id, None)]
    if after is None:
        if before is not None:
            out += [ShareTargetEpochRecord(group_id, None), ShareGroupEpochRecord(group_id, None)]
        return out
    out += [ShareMemberRecord(group_id, m, meta) for m, meta in sorted(new.members.items())
            if old.members.get(m) != meta]
    if new.epoch != old.epoch:
        out.append(ShareGroupEpochRecord(group_id, new.epoch))
    targets = [ShareTargetMemberRecord(group_id, m, a) for m, a in sorted(new.target.items())
               if m in new.members and old.target.get(m) != a]
    out += targets
    if targets or new.epoch != old.epoch:
        out.append(ShareTargetEpochRecord(group_id, new.epoch))
    out += [ShareCurrentAssignmentRecord(group_id, m, epoch, previous, a)
            for m, (epoch, previous, a) in sorted(new.current.items())
            if old.current.get(m) != (epoch, previous, a)]
    return out
