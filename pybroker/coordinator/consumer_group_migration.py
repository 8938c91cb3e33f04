"""Online migration between classic and consumer groups (`group.consumer.migration.policy`):
the consumer group state machine extended with members that speak the classic protocol.

Kafka 4.1's GroupMetadataManager does the same (validateOnlineUpgrade, convertToConsumerGroup,
classicGroupJoinToConsumerGroup and its Sync/Heartbeat/Leave siblings, validateOnlineDowngrade-
WithFencedMember, convertToClassicGroup); this is our reading of it, kept pure like the machine.

Upgrade (`upgrade`). A classic group with members converts when a ConsumerGroupHeartbeat
member joins it, if the policy is `upgrade` or `bidirectional`, its protocol type is
`consumer`, its members' subscriptions and assignments parse, and it has no more members than
group.consumer.max.size (else the heartbeat gets GROUP_ID_NOT_FOUND). Each classic member
becomes a STABLE member at the group's generation, its target and current assignment what the
leader last gave it; group epoch and assignment epoch are the generation. The joining member
then bumps the epoch as any joiner does, so a new target is computed.

Classic members of a consumer group are served from the consumer group's state:
- Heartbeat: ILLEGAL_GENERATION unless at its member epoch; REBALANCE_IN_PROGRESS while the
  group epoch is ahead, while it has partitions to revoke, or when partitions it waits for
  are free, and it must then JoinGroup again within its rebalance timeout;
- JoinGroup: the subscription (and, for cooperative clients, the owned partitions) update the
  member as a heartbeat would, one reconciliation step runs, and the answer comes at once
  with the member epoch as generation and no leader (nobody assigns: the server did);
- SyncGroup: the member's current assignment, as a ConsumerProtocolAssignment of the version
  its subscription was written in; it must come within the rebalance timeout of the join;
- LeaveGroup: the member is removed (tombstones 8, 7, 5) and the group epoch bumped.
A classic JoinGroup into a consumer group is served under every policy, as in Kafka.

Downgrade (`_remove`). When a consumer-protocol member leaves or is fenced and only classic
members remain, the policy allows it (`downgrade`, `bidirectional`) and they fit
group.max.size, the group becomes a classic group: its consumer records are tombstoned and
`downgrades` holds the classic group (Stable at the group epoch, each member's target as its
assignment), which the façade hands to the classic machine to write and rebalance.
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from protocol.errors import ErrorCode
from pybroker.client.consumer_protocol import (
    decode_assignment, decode_subscription, encode_assignment,
)
from pybroker.coordinator.consumer_group_assignor import TopicsView
from pybroker.coordinator.consumer_group_records import (
    ClassicMetadata, ConsumerGroupRecord, CurrentAssignmentRecord, GroupEpochRecord,
    MemberRecord, MemberSubscription, TargetEpochRecord, TargetMemberRecord,
)
from pybroker.coordinator.consumer_group_state import (
    ConsumerGroup, ConsumerGroupConfig, ConsumerGroupStateMachine, Member, MemberState,
)
from pybroker.coordinator.group_metadata import (
    CONSUMER_PROTOCOL_TYPE, Group as ClassicGroup, GroupState, Member as ClassicMember,
)
from pybroker.coordinator.group_types import (
    JoinRequest, JoinResult, LeaveResult, LeavingMember, SyncRequest, SyncResult,
)

UPGRADE_POLICIES = frozenset({"upgrade", "bidirectional"})
DOWNGRADE_POLICIES = frozenset({"downgrade", "bidirectional"})
_I16 = struct.Struct(">h")
# ConsumerProtocolAssignment versions 0-3 share one layout; a newer subscription gets 3.
_MAX_ASSIGNMENT_VERSION = 3


class MalformedClassicGroup(ValueError):
    """A classic group whose subscriptions or assignments do not parse: not upgraded."""


@dataclass
class Downgrade:
    """A consumer group turned classic: the classic machine adopts `group` (Stable, each
    member's assignment encoded from `targets` by `take_downgrades`) and rebalances it unless
    a static member's replacement turned it (`rebalance` False)."""
    group: ClassicGroup
    targets: dict[str, dict[uuid.UUID, frozenset[int]]]
    rebalance: bool = True


def _ids(partitions: Sequence[tuple[str, int]] | dict[str, list[int]],
         topics: TopicsView) -> dict[uuid.UUID, frozenset[int]]:
    """Topic names to ids, dropping topics that no longer exist."""
    by_topic: dict[str, set[int]] = {}
    items = partitions.items() if isinstance(partitions, dict) else [
        (t, [p]) for t, p in partitions]
    for topic, parts in items:
        by_topic.setdefault(topic, set()).update(parts)
    return {topics[t][0]: frozenset(ps) for t, ps in by_topic.items() if t in topics and ps}


def _names(partitions: dict[uuid.UUID, frozenset[int]], topics: TopicsView
           ) -> dict[str, list[int]]:
    names = {topic_id: name for name, (topic_id, _) in topics.items()}
    return {names[t]: sorted(ps) for t, ps in partitions.items() if t in names}


def classic_assignment(partitions: dict[uuid.UUID, frozenset[int]], subscription: bytes,
                       topics: TopicsView) -> bytes:
    """A ConsumerProtocolAssignment of these partitions, in the version the member's
    subscription was written in (Kafka's prepareAssignment)."""
    try:
        version = _I16.unpack_from(subscription)[0]
    except struct.error:
        version = 0
    body = encode_assignment(_names(partitions, topics))[2:]
    return _I16.pack(min(max(version, 0), _MAX_ASSIGNMENT_VERSION)) + body


class MigratingConsumerGroupStateMachine(ConsumerGroupStateMachine):
    """Consumer groups whose members may speak either protocol, converting between group
    kinds as the policy allows. Downgrades decided by `_remove` wait in `downgrades` for the
    façade."""

    def __init__(self, config: ConsumerGroupConfig | None = None) -> None:
        super().__init__(config)
        self.downgrades: list[Downgrade] = []

    # -- upgrade ----------------------------------------------------------------------------------
    def upgrade_refusal(self, classic: ClassicGroup) -> str | None:
        """Why a live classic group may not become a consumer group now (None: it may)."""
        if self.config.migration_policy not in UPGRADE_POLICIES:
            return "the online upgrade is disabled"
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return "the group does not use the consumer embedded protocol"
        if len(classic.members) > self.config.max_size:
            return "the group size exceeds the consumer group maximum size"
        return None

    def upgrade(self, classic: ClassicGroup, topics: TopicsView, now: int
                ) -> list[ConsumerGroupRecord]:
        """Turn a live classic group into a consumer group (Kafka's fromClassicGroup and
        createConsumerGroupRecords): the records, already replayed. MalformedClassicGroup if
        a member's subscription or assignment does not parse (nothing is changed then)."""
        gid, generation = classic.group_id, classic.generation
        if classic.protocol_name is None:
            raise MalformedClassicGroup("the group has not chosen a protocol yet")
        members: list[tuple[ClassicMember, MemberSubscription, dict]] = []
        for m in classic.members.values():
            try:
                metadata = m.metadata(classic.protocol_name)
                parsed = decode_subscription(metadata)
                assigned = _ids(decode_assignment(m.assignment).by_topic(), topics)
            except (ValueError, KeyError, UnicodeDecodeError) as exc:
                raise MalformedClassicGroup(str(exc)) from exc
            members.append((m, MemberSubscription(
                instance_id=m.group_instance_id, rack_id=parsed.rack_id,
                client_id=m.client_id, client_host=m.client_host,
                topic_names=tuple(sorted(parsed.topics)),
                rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=None,
                classic=ClassicMetadata(m.session_timeout_ms, tuple(m.protocols))), assigned))
        records: list[ConsumerGroupRecord] = []
        for m, subscription, _ in members:
            self._apply(records, MemberRecord(gid, m.member_id, subscription), now)
        self._apply(records, GroupEpochRecord(gid, generation), now)
        for m, _, assigned in members:
            self._apply(records, TargetMemberRecord(gid, m.member_id, assigned), now)
        self._apply(records, TargetEpochRecord(gid, generation), now)
        for m, _, assigned in members:
            self._apply(records, CurrentAssignmentRecord(
                gid, m.member_id, generation, generation, MemberState.STABLE, assigned, {}),
                now)
        return records

    def abandon(self, group_id: str) -> None:
        """Forget a conversion whose joining heartbeat then failed: the classic group stays."""
        self.groups.pop(group_id, None)

    # -- classic members: JoinGroup -----------------------------------------------------------
    def classic_join(self, req: JoinRequest, topics: TopicsView, now: int
                     ) -> tuple[JoinResult, list[ConsumerGroupRecord]]:
        """A JoinGroup into a consumer group (Kafka's classicGroupJoinToConsumerGroup)."""
        group = self.groups[req.group_id]
        member_id = req.member_id or str(uuid.uuid4())
        member = group.members.get(member_id)
        if member is None and len(group.members) >= self.config.max_size:
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, req.member_id), []
        if not self._supports(group, req):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id), []
        if not req.member_id and req.require_known_member_id and req.group_instance_id is None:
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id), []
        static = self._instance_owner(group, req.group_instance_id)
        replaced: Member | None = None
        if req.group_instance_id is not None and req.member_id:
            if static is None:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id), []
            if static.member_id != req.member_id:
                return JoinResult(ErrorCode.FENCED_INSTANCE_ID, req.member_id), []
        elif static is not None:
            replaced = static  # a restarted static member takes its place, of either protocol
        if member is not None and replaced is None and not member.uses_classic_protocol:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id), []
        try:
            subscription = decode_subscription(req.protocols[0][1])
        except (ValueError, UnicodeDecodeError):
            # Kafka: an IllegalStateException ("Malformed embedded consumer protocol").
            return JoinResult(ErrorCode.UNKNOWN_SERVER_ERROR, req.member_id), []
        records: list[ConsumerGroupRecord] = []
        if replaced is not None:
            member = self._replace_static(group, replaced, member_id, now, records, epoch=0)
        old = member.subscription if member is not None else None
        new = MemberSubscription(
            instance_id=req.group_instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else (
                old.rack_id if old else None),
            client_id=req.client_id, client_host=req.client_host,
            topic_names=tuple(sorted(subscription.topics)),
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            server_assignor=old.server_assignor if old else None,
            classic=ClassicMetadata(req.session_timeout_ms, tuple(req.protocols)))
        if new != old:
            self._apply(records, MemberRecord(group.group_id, member_id, new), now)
            if old is None or new.topic_names != old.topic_names:
                self._apply(records, GroupEpochRecord(
                    group.group_id, group.group_epoch + 1, group.metadata_hash), now)
        member = group.members[member_id]
        self._advance(group, topics, now, records)
        owned = _ids([(tp.topic, tp.partition) for tp in subscription.owned_partitions], topics)
        self._reconcile(group, member, owned, now, records, rejoin=False)
        member.session_deadline = now + req.session_timeout_ms
        member.classic_deadline = now + max(req.rebalance_timeout_ms, 0)  # to SyncGroup
        if replaced is not None and not replaced.uses_classic_protocol and \
                self._may_downgrade([m for m in group.members.values()
                                     if m.member_id != member_id], member):
            # The last consumer-protocol member was a static one, replaced by this classic
            # member: the group turns classic at once, without a rebalance (Kafka's
            # validateOnlineDowngradeWithReplacedMemberId).
            self._downgrade(group, list(group.members.values()), now, records,
                            rebalance=False)
        return JoinResult(ErrorCode.NONE, member_id, member.member_epoch,
                          CONSUMER_PROTOCOL_TYPE, req.protocols[0][0], ""), records

    @staticmethod
    def _supports(group: ConsumerGroup, req: JoinRequest) -> bool:
        """Kafka's supportsClassicProtocols: type `consumer`, and a protocol every classic
        member supports (any, when it would be the first)."""
        if req.protocol_type != CONSUMER_PROTOCOL_TYPE or not req.protocols:
            return False
        classic = [m.subscription.classic for m in group.members.values()
                   if m.subscription.classic is not None]
        return any(all(name in {n for n, _ in c.protocols} for c in classic)
                   for name, _ in req.protocols)

    # -- classic members: SyncGroup, Heartbeat, LeaveGroup --------------------------------------
    def _classic_member(self, group_id: str, member_id: str, instance_id: str | None
                        ) -> Member | ErrorCode:
        group = self.groups[group_id]
        if instance_id is not None:
            member = self._instance_owner(group, instance_id)
            if member is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member.member_id != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        else:
            found = group.members.get(member_id)
            if found is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            member = found
        if not member.uses_classic_protocol:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return member

    def _must_rejoin(self, group: ConsumerGroup, member: Member) -> bool:
        """Kafka's classic heartbeat rule: the group moved on, partitions to revoke, or
        partitions it waited for are free now."""
        if member.member_epoch < group.group_epoch or \
                member.state is MemberState.UNREVOKED_PARTITIONS:
            return True
        if member.state is MemberState.UNRELEASED_PARTITIONS:
            target = group.target.get(member.member_id, {})
            return not any(p not in member.assigned.get(t, ()) and
                           self._owner_of(group, t, p, member.member_id) is not None
                           for t, parts in target.items() for p in parts)
        return False

    def classic_sync(self, req: SyncRequest, topics: TopicsView, now: int) -> SyncResult:
        found = self._classic_member(req.group_id, req.member_id, req.group_instance_id)
        if isinstance(found, ErrorCode):
            return SyncResult(found)
        member, group = found, self.groups[req.group_id]
        if req.generation_id != member.member_epoch:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        assert member.subscription.classic is not None
        name, metadata = member.subscription.classic.protocols[0]
        if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or \
                (req.protocol_name is not None and req.protocol_name != name):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.group_epoch > member.member_epoch and \
                member.state is not MemberState.UNREVOKED_PARTITIONS:
            if member.classic_deadline is None:
                member.classic_deadline = now + max(member.subscription.rebalance_timeout_ms, 0)
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        member.classic_deadline = None
        member.session_deadline = now + member.subscription.classic.session_timeout_ms
        return SyncResult(ErrorCode.NONE, req.protocol_type, req.protocol_name,
                          classic_assignment(member.assigned, metadata, topics))

    def classic_heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                          generation_id: int, now: int) -> ErrorCode:
        found = self._classic_member(group_id, member_id, instance_id)
        if isinstance(found, ErrorCode):
            return found
        member, group = found, self.groups[group_id]
        if generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        assert member.subscription.classic is not None
        member.session_deadline = now + member.subscription.classic.session_timeout_ms
        if self._must_rejoin(group, member):
            if member.classic_deadline is None:  # to JoinGroup again
                member.classic_deadline = now + max(member.subscription.rebalance_timeout_ms, 0)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def classic_leave(self, group_id: str, leaving: Sequence[LeavingMember], now: int
                      ) -> tuple[LeaveResult, list[ConsumerGroupRecord]]:
        group = self.groups[group_id]
        records: list[ConsumerGroupRecord] = []
        results: list[tuple[LeavingMember, ErrorCode]] = []
        for one in leaving:
            if one.group_instance_id is not None:
                member = self._instance_owner(group, one.group_instance_id)
                if member is None:
                    code = ErrorCode.UNKNOWN_MEMBER_ID
                elif one.member_id and one.member_id != member.member_id:
                    code = ErrorCode.FENCED_INSTANCE_ID
                else:
                    code = ErrorCode.NONE if member.uses_classic_protocol \
                        else ErrorCode.UNKNOWN_MEMBER_ID
            else:
                member = group.members.get(one.member_id)
                code = ErrorCode.NONE if member is not None and member.uses_classic_protocol \
                    else ErrorCode.UNKNOWN_MEMBER_ID
            if not code and member is not None:
                gid = group.group_id
                self._apply(records, CurrentAssignmentRecord(gid, member.member_id, None), now)
                self._apply(records, TargetMemberRecord(gid, member.member_id, None), now)
                self._apply(records, MemberRecord(gid, member.member_id, None), now)
            results.append((one, code))
        if records:
            self._apply(records, GroupEpochRecord(group.group_id, group.group_epoch + 1,
                                                  group.metadata_hash), now)
        return LeaveResult(ErrorCode.NONE, tuple(results)), records

    # -- downgrade --------------------------------------------------------------------------------
    def _remove(self, group: ConsumerGroup, member_id: str, now: int,
                records: list[ConsumerGroupRecord]) -> None:
        """A leave or a fence; when it leaves only classic members and the policy allows it,
        the group turns classic instead (Kafka's validateOnlineDowngradeWithFencedMember)."""
        leaving = group.members.get(member_id)
        others = [m for m in group.members.values() if m.member_id != member_id]
        if leaving is None or leaving.uses_classic_protocol or not others or \
                not self._may_downgrade(others, None):
            super()._remove(group, member_id, now, records)
            return
        self._downgrade(group, others, now, records, rebalance=True)

    def _may_downgrade(self, others: list[Member], joining: Member | None) -> bool:
        """Whether the group may turn classic with these members (and `joining`) in it."""
        return (all(m.uses_classic_protocol for m in others)
                and self.config.migration_policy in DOWNGRADE_POLICIES
                and len(others) + (joining is not None) <= self.config.classic_max_size)

    def _downgrade(self, group: ConsumerGroup, members: list[Member], now: int,
                   records: list[ConsumerGroupRecord], *, rebalance: bool) -> None:
        """Tombstone the consumer group; `members` form the classic group (`downgrades`)."""
        self.downgrades.append(Downgrade(self._classic_group(group, members, now), {
            m.member_id: dict(group.target.get(m.member_id, {})) for m in members},
            rebalance))
        gid = group.group_id
        for kind in (CurrentAssignmentRecord, TargetMemberRecord):
            for m in group.members.values():
                self._apply(records, kind(gid, m.member_id, None), now)
        self._apply(records, TargetEpochRecord(gid, None), now)
        for m in list(group.members.values()):
            self._apply(records, MemberRecord(gid, m.member_id, None), now)
        self._apply(records, GroupEpochRecord(gid, None), now)

    def _classic_group(self, group: ConsumerGroup, members: list[Member], now: int
                       ) -> ClassicGroup:
        """The classic group the remaining members form (Kafka's fromConsumerGroup): Stable at
        the group epoch, the protocol voted as a classic group votes. The assignments are
        set by `take_downgrades`, which knows the topics' names."""
        classic = ClassicGroup(group.group_id, state=GroupState.STABLE, state_timestamp=now,
                               generation=group.group_epoch,
                               protocol_type=CONSUMER_PROTOCOL_TYPE)
        for m in members:
            assert m.subscription.classic is not None
            classic.add(ClassicMember(
                m.member_id, m.subscription.instance_id, m.subscription.client_id,
                m.subscription.client_host, m.subscription.rebalance_timeout_ms,
                m.subscription.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE,
                m.subscription.classic.protocols))
        classic.protocol_name = classic.select_protocol()
        classic.subscribed_topics = classic.compute_subscribed_topics()
        return classic

    def take_downgrades(self, group_id: str, topics: TopicsView) -> list[Downgrade]:
        """The group turned classic since the last call (if it was), each member's assignment
        encoded from its target (topic ids to the names `topics` knows)."""
        out = [d for d in self.downgrades if d.group.group_id == group_id]
        self.downgrades = [d for d in self.downgrades if d.group.group_id != group_id]
        for d in out:
            name = d.group.protocol_name or ""
            for m in d.group.members.values():
                m.assignment = classic_assignment(d.targets.get(m.member_id, {}),
                                                  m.metadata(name), topics)
        return out


__all__ = ["Downgrade", "MalformedClassicGroup", "MigratingConsumerGroupStateMachine",
           "classic_assignment"]
