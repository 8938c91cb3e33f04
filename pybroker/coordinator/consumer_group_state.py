"""KIP-848 consumer groups: the pure state machine behind ConsumerGroupHeartbeat.

Theory of operation (Kafka's GroupMetadataManager.consumerGroupHeartbeat and
CurrentAssignmentBuilder). Three epochs:
- the *group* epoch moves on whenever membership or a subscription changes;
- the *assignment* epoch is that of the target assignment, recomputed by the `uniform`
  assignor (consumer_group_assignor.py) when it is behind the group epoch;
- each *member* epoch catches up with the assignment epoch by reconciliation.

Reconciliation revokes before it assigns, and a partition moves only once it is free. A member
whose current assignment holds partitions its target does not stays at its epoch in
UNREVOKED_PARTITIONS, told to keep only current ∩ target, until a heartbeat's owned partitions
show it dropped the rest (or its rebalance timeout fences it). Then it takes the new epoch;
partitions of its target still held by another member wait (UNRELEASED_PARTITIONS) and are
handed over at a later heartbeat, once released. A member whose current assignment already
equals its target is STABLE.

Every change of state is a record (consumer_group_records.py), applied by `replay`: the
heartbeat computes records, replays each at once, and returns them for the façade to append to
`__consumer_offsets`; loading replays the same records, so a restart resumes each member with
its epoch. Timers (session, and rebalance while revoking) are deadlines the façade asks for
with `next_deadline` and fires with `expire`.

The assignor is `uniform` unless most members ask for `range` (ServerAssignor); any other name
is UNSUPPORTED_ASSIGNOR. A regex subscription (consumer_group_regex.py) is resolved against the
topics at each heartbeat; a pattern RE2 refuses is INVALID_REGULAR_EXPRESSION.

Static membership (InstanceId): a -2 leave keeps the member and its partitions at epoch -2
until a new member id of the same instance replaces it (taking its epoch and assignment, no
rebalance) or its session times out; a join for an instance whose member is still active is
UNRELEASED_INSTANCE_ID, and the replaced member id is FENCED_INSTANCE_ID.
"""
from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from protocol.errors import ErrorCode
from pybroker.coordinator.consumer_group_assignor import (
    ASSIGN, ASSIGNORS, UNIFORM, Assignment, TopicsView,
)
from pybroker.coordinator.consumer_group_regex import InvalidRegex, compile_re2, matching
from pybroker.coordinator.consumer_group_records import (
    ConsumerGroupRecord, CurrentAssignmentRecord, GroupEpochRecord, MemberRecord,
    MemberSubscription, TargetEpochRecord, TargetMemberRecord,
)

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(IntEnum):
    """Kafka's MemberState, as record 8 keeps it."""
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ASSIGNORS
    # group.consumer.migration.policy (lower case) and the classic groups' group.max.size,
    # which a downgraded group must fit (consumer_group_migration.py).
    migration_policy: str = "bidirectional"
    classic_max_size: int = 2**31 - 1


@dataclass
class Member:
    member_id: str
    subscription: MemberSubscription
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    pending_revocation: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    session_deadline: int = 0
    # Set while revoking: the member is fenced if it has not revoked by then.
    rebalance_deadline: int | None = None
    # A classic-protocol member only: fenced unless it joins (after REBALANCE_IN_PROGRESS)
    # or syncs (after its join) by then (Kafka's join and sync timeouts).
    classic_deadline: int | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.subscription.classic is not None


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    metadata_hash: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    target: dict[str, dict[uuid.UUID, frozenset[int]]] = field(default_factory=dict)

    def assignor(self, default: str) -> str:
        """The server assignor most of the members ask for (Kafka's preferred server
        assignor; ties to the smaller name), else `default`."""
        asked = [m.subscription.server_assignor for m in self.members.values()
                 if m.subscription.server_assignor]
        if not asked:
            return default
        return min(set(asked), key=lambda name: (-asked.count(name), name))

    @property
    def state(self) -> str:
        """Kafka's ConsumerGroupState names."""
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"


@dataclass(frozen=True)
class HeartbeatRequest:
    """ConsumerGroupHeartbeat v0-1; None is "unchanged since the last heartbeat"."""
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: Sequence[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class HeartbeatResponse:
    error: ErrorCode
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # None: unchanged since the last response (the client keeps what it has).
    assignment: dict[uuid.UUID, frozenset[int]] | None = None
    error_message: str | None = None


def validate(request: HeartbeatRequest, version: int) -> str | None:
    """Why the request is INVALID_REQUEST (Kafka's throwIfConsumerGroupHeartbeatRequestIs-
    Invalid), or None."""
    if not request.group_id:
        return "GroupId can't be empty."
    if request.instance_id == "":
        return "InstanceId can't be empty."
    if request.rack_id == "":
        return "RackId can't be empty."
    if version >= 1 and not request.member_id:
        return "MemberId can't be empty."
    if request.member_epoch == 0:
        if request.rebalance_timeout_ms == -1:
            return "RebalanceTimeoutMs must be provided in first request."
        if request.owned is None or any(request.owned.values()):
            return "TopicPartitions must be empty when (re-)joining."
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
    elif request.member_epoch == STATIC_LEAVE_EPOCH:
        if request.instance_id is None:
            return "InstanceId can't be null."
    elif request.member_epoch < STATIC_LEAVE_EPOCH:
        return f"MemberEpoch is {request.member_epoch}, but must be greater than or equal to -2."
    return None


def subscribed(member: Member, topics: TopicsView) -> set[str]:
    """The topic names the member subscribes to: its list, and what its regex matches now."""
    names = set(member.subscription.topic_names)
    if member.subscription.topic_regex:
        names |= matching(member.subscription.topic_regex, topics)
    return names


def metadata_hash(group: ConsumerGroup, topics: TopicsView) -> int:
    """A hash (int64) of what the assignor sees of the group's subscribed topics: their names,
    ids and partition counts. Stable across processes (not Python's salted `hash`)."""
    names = sorted({n for m in group.members.values() for n in subscribed(m, topics)})
    text = "|".join(f"{n}:{topics[n][0]}:{topics[n][1]}" for n in names if n in topics)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big",
                          signed=True)


def _subset(owned: Assignment, of: Assignment) -> bool:
    return all(set(parts) <= set(of.get(t, ())) for t, parts in owned.items())


def _minus(a: Assignment, b: Assignment) -> dict[uuid.UUID, frozenset[int]]:
    out = {t: frozenset(set(parts) - set(b.get(t, ()))) for t, parts in a.items()}
    return {t: parts for t, parts in out.items() if parts}


def _meet(a: Assignment, b: Assignment) -> dict[uuid.UUID, frozenset[int]]:
    out = {t: frozenset(set(parts) & set(b.get(t, ()))) for t, parts in a.items()}
    return {t: parts for t, parts in out.items() if parts}


class ConsumerGroupStateMachine:
    """Every consumer group of this coordinator; no clock of its own (`now` is passed in)."""

    def __init__(self, config: ConsumerGroupConfig | None = None) -> None:
        self.config = config or ConsumerGroupConfig()
        self.groups: dict[str, ConsumerGroup] = {}
        # Groups whose own configs (the GROUP config resource) differ from the broker's: set
        # by the façade before each heartbeat, so a change applies from the next one.
        self.group_configs: dict[str, ConsumerGroupConfig] = {}

    def config_for(self, group_id: str) -> ConsumerGroupConfig:
        return self.group_configs.get(group_id, self.config)

    def session_timeout_ms(self, group_id: str, subscription: MemberSubscription) -> int:
        """A classic-protocol member keeps the session timeout of its JoinGroup."""
        if subscription.classic is not None:
            return subscription.classic.session_timeout_ms
        return self.config_for(group_id).session_timeout_ms

    # -- replay: the one way state changes ------------------------------------------------------
    def replay(self, record: ConsumerGroupRecord, now: int = 0) -> None:
        group = self.groups.get(record.group_id)
        if group is None:
            group = self.groups[record.group_id] = ConsumerGroup(record.group_id)
        if isinstance(record, GroupEpochRecord):
            if record.epoch is None:
                del self.groups[record.group_id]
            else:
                group.group_epoch = record.epoch
                group.metadata_hash = record.metadata_hash
        elif isinstance(record, TargetEpochRecord):
            if record.epoch is not None:
                group.assignment_epoch = record.epoch
        elif isinstance(record, MemberRecord):
            if record.subscription is None:
                group.members.pop(record.member_id, None)
            elif record.member_id in group.members:
                group.members[record.member_id].subscription = record.subscription
            else:
                group.members[record.member_id] = Member(
                    record.member_id, record.subscription,
                    session_deadline=now + self.session_timeout_ms(record.group_id,
                                                                   record.subscription))
        elif isinstance(record, TargetMemberRecord):
            if record.partitions is None:
                group.target.pop(record.member_id, None)
            else:
                group.target[record.member_id] = dict(record.partitions)
        elif isinstance(record, CurrentAssignmentRecord):
            member = group.members.get(record.member_id)
            if member is not None and record.member_epoch is not None:
                member.member_epoch = record.member_epoch
                member.previous_member_epoch = record.previous_member_epoch
                member.state = MemberState(record.state)
                member.assigned = dict(record.assigned)
                member.pending_revocation = dict(record.pending_revocation)

    def _apply(self, records: list[ConsumerGroupRecord], record: ConsumerGroupRecord,
               now: int) -> None:
        self.replay(record, now)
        records.append(record)

    # -- the heartbeat ---------------------------------------------------------------------------
    def heartbeat(self, request: HeartbeatRequest, version: int, topics: TopicsView, now: int,
                  new_member_id: str | None = None
                  ) -> tuple[HeartbeatResponse, list[ConsumerGroupRecord]]:
        """One ConsumerGroupHeartbeat: its response and the records it wrote. `topics` is the
        metadata the assignor sees; `new_member_id` names a v0 joiner (the server picks it)."""
        invalid = validate(request, version)
        if invalid is not None:
            return HeartbeatResponse(ErrorCode.INVALID_REQUEST, error_message=invalid), []
        if request.subscribed_topic_regex:  # "" clears a regex (librdkafka sends it)
            try:
                compile_re2(request.subscribed_topic_regex)
            except InvalidRegex as exc:
                return HeartbeatResponse(ErrorCode.INVALID_REGULAR_EXPRESSION, error_message=(
                    f"SubscribedTopicRegex `{request.subscribed_topic_regex}` is not a valid "
                    f"regular expression: {exc}.")), []
        if request.server_assignor is not None and (
                request.server_assignor not in self.config.assignors):
            return HeartbeatResponse(ErrorCode.UNSUPPORTED_ASSIGNOR, error_message=(
                f"Assignor {request.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self.config.assignors)}.")), []
        records: list[ConsumerGroupRecord] = []
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(request, now, records), records
        group = self.groups.get(request.group_id)
        member_id = request.member_id or new_member_id or ""
        member = group.members.get(member_id) if group is not None else None
        static = self._instance_owner(group, request.instance_id)
        if static is not None and static.member_id != member_id:
            if request.member_epoch != 0:  # replaced by a newer member of the instance
                return HeartbeatResponse(ErrorCode.FENCED_INSTANCE_ID, error_message=(
                    f"Static member {member_id} with instance id {request.instance_id} was "
                    f"replaced by member {static.member_id}.")), []
            if static.member_epoch != STATIC_LEAVE_EPOCH:
                return HeartbeatResponse(ErrorCode.UNRELEASED_INSTANCE_ID, error_message=(
                    f"Static member {static.member_id} with instance id "
                    f"{request.instance_id} is still active: it must leave before "
                    f"{member_id} takes its place.")), []
            assert group is not None
            member = self._replace_static(group, static, member_id, now, records)
        elif request.member_epoch == 0:
            if member is None and group is not None and \
                    len(group.members) >= self.config.max_size:
                return HeartbeatResponse(ErrorCode.GROUP_MAX_SIZE_REACHED, error_message=(
                    f"The consumer group has reached its maximum capacity of "
                    f"{self.config.max_size} members.")), []
        elif member is None:
            return HeartbeatResponse(ErrorCode.UNKNOWN_MEMBER_ID, error_message=(
                f"Member {member_id} is not a member of group {request.group_id}.")), []
        elif member.uses_classic_protocol:
            return HeartbeatResponse(ErrorCode.UNKNOWN_MEMBER_ID, error_message=(
                f"Member {member_id} uses the classic protocol.")), []
        else:
            fenced = self._epoch_error(member, request)
            if fenced is not None:
                return HeartbeatResponse(fenced), []
        self._update_member(request, member_id, member, now, records)
        group = self.groups[request.group_id]
        member = group.members[member_id]
        member.session_deadline = now + self.config_for(group.group_id).session_timeout_ms
        self._advance(group, topics, now, records)
        before = (member.member_epoch, dict(member.assigned))
        self._reconcile(group, member, request.owned, now, records,
                        rejoin=request.member_epoch == 0)
        full = request.rebalance_timeout_ms != -1 and request.owned is not None and (
            request.subscribed_topic_names is not None)
        changed = before != (member.member_epoch, member.assigned)
        return HeartbeatResponse(
            ErrorCode.NONE, member_id, member.member_epoch,
            self.config_for(group.group_id).heartbeat_interval_ms,
            dict(member.assigned) if full or changed or request.member_epoch == 0 else None
        ), records

    def _advance(self, group: ConsumerGroup, topics: TopicsView, now: int,
                 records: list[ConsumerGroupRecord]) -> None:
        """After a member's update: the group epoch follows the subscribed topics' metadata,
        and a new target is computed when the group epoch is ahead of it."""
        digest = metadata_hash(group, topics)
        if digest != group.metadata_hash:  # a subscribed topic appeared, went or grew
            moved = any(isinstance(r, GroupEpochRecord) for r in records)  # by this request
            epoch = group.group_epoch if moved else group.group_epoch + 1
            self._apply(records, GroupEpochRecord(group.group_id, epoch, digest), now)
        if group.group_epoch > group.assignment_epoch:
            self._new_target(group, topics, now, records)

    @staticmethod
    def _instance_owner(group: ConsumerGroup | None, instance_id: str | None) -> Member | None:
        if group is None or instance_id is None:
            return None
        return next((m for m in group.members.values()
                     if m.subscription.instance_id == instance_id), None)

    def _replace_static(self, group: ConsumerGroup, old: Member, member_id: str, now: int,
                        records: list[ConsumerGroupRecord], epoch: int | None = None
                        ) -> Member:
        """A static member that left (-2) comes back under a new member id: the new one takes
        its subscription, target and current assignment at its epoch (or at `epoch`: a
        classic JoinGroup's replacement starts from 0, as Kafka's), and the group epoch stays
        (Kafka: no rebalance for a static member's bounce)."""
        gid = group.group_id
        target = group.target.get(old.member_id)
        self._apply(records, CurrentAssignmentRecord(gid, old.member_id, None), now)
        self._apply(records, TargetMemberRecord(gid, old.member_id, None), now)
        self._apply(records, MemberRecord(gid, old.member_id, None), now)
        self._apply(records, MemberRecord(gid, member_id, old.subscription), now)
        if target is not None:
            self._apply(records, TargetMemberRecord(gid, member_id, target), now)
        if epoch is None:
            epoch = old.previous_member_epoch
        self._apply(records, CurrentAssignmentRecord(
            gid, member_id, epoch, epoch, old.state, old.assigned, old.pending_revocation), now)
        return group.members[member_id]

    @staticmethod
    def _epoch_error(member: Member, request: HeartbeatRequest) -> ErrorCode | None:
        """FENCED_MEMBER_EPOCH for an epoch the member does not hold, unless it is the
        previous one and what it owns is still its (the response to it was lost)."""
        if request.member_epoch == member.member_epoch:
            return None
        if request.member_epoch == member.previous_member_epoch and (
                request.owned is not None and _subset(request.owned, member.assigned)):
            return None
        return ErrorCode.FENCED_MEMBER_EPOCH

    def _update_member(self, request: HeartbeatRequest, member_id: str, member: Member | None,
                       now: int, records: list[ConsumerGroupRecord]) -> None:
        old = member.subscription if member is not None else None
        new = MemberSubscription(
            instance_id=request.instance_id if request.instance_id is not None else (
                old.instance_id if old else None),
            rack_id=request.rack_id if request.rack_id is not None else (
                old.rack_id if old else None),
            client_id=request.client_id, client_host=request.client_host,
            topic_names=tuple(sorted(request.subscribed_topic_names))
            if request.subscribed_topic_names is not None else (old.topic_names if old else ()),
            rebalance_timeout_ms=request.rebalance_timeout_ms
            if request.rebalance_timeout_ms != -1 else (old.rebalance_timeout_ms if old else -1),
            server_assignor=request.server_assignor if request.server_assignor is not None
            else (old.server_assignor if old else None),
            topic_regex=(request.subscribed_topic_regex or None)
            if request.subscribed_topic_regex is not None else (old.topic_regex if old else None))
        if new == old:
            return
        group = self.groups.get(request.group_id)
        self._apply(records, MemberRecord(request.group_id, member_id, new), now)
        if old is None or new.topic_names != old.topic_names or \
                new.topic_regex != old.topic_regex or new.server_assignor != old.server_assignor:
            epoch = (group.group_epoch if group is not None else 0) + 1
            digest = group.metadata_hash if group is not None else 0
            self._apply(records, GroupEpochRecord(request.group_id, epoch, digest), now)

    def _new_target(self, group: ConsumerGroup, topics: TopicsView, now: int,
                    records: list[ConsumerGroupRecord]) -> None:
        assign = ASSIGN[group.assignor(self.config.assignors[0])]
        target = assign({m.member_id: subscribed(m, topics)
                         for m in group.members.values()}, topics, group.target)
        for member_id, partitions in sorted(target.items()):
            if group.target.get(member_id) != partitions:
                self._apply(records, TargetMemberRecord(group.group_id, member_id, partitions),
                            now)
        self._apply(records, TargetEpochRecord(group.group_id, group.group_epoch), now)

    def _owner_of(self, group: ConsumerGroup, topic_id: uuid.UUID, partition: int,
                  but: str) -> str | None:
        for other in group.members.values():
            if other.member_id != but and (
                    partition in other.assigned.get(topic_id, ()) or
                    partition in other.pending_revocation.get(topic_id, ())):
                return other.member_id
        return None

    def _reconcile(self, group: ConsumerGroup, member: Member, owned: Assignment | None,
                   now: int, records: list[ConsumerGroupRecord], *, rejoin: bool) -> None:
        """CurrentAssignmentBuilder: the member's next current assignment, one step."""
        target = group.target.get(member.member_id, {})
        current = member.assigned
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if not _subset(member.assigned, target) or _meet(member.pending_revocation, target):
                # the target moved on while it revoked: start again from all it may still
                # hold, so what the new target lacks is revoked again, never handed out
                current = {t: frozenset(member.assigned.get(t, frozenset()) |
                                        member.pending_revocation.get(t, frozenset()))
                           for t in set(member.assigned) | set(member.pending_revocation)}
            elif owned is None or _meet(owned, member.pending_revocation):
                return  # still holds partitions it must give up: wait
        elif member.state is MemberState.STABLE and \
                member.member_epoch == group.assignment_epoch and not rejoin:
            return
        kept = _meet(current, target)
        revoke = _minus(current, target)
        # Kafka's computeNextAssignment: a member whose owned partitions (when it sent them)
        # already lack the revoked ones skips UNREVOKED_PARTITIONS (a classic member that
        # revoked everything before it rejoined, or a member that lost its partitions).
        if revoke and (owned is None or _meet(owned, revoke)):
            self._apply(records, CurrentAssignmentRecord(
                group.group_id, member.member_id, member.member_epoch,
                member.previous_member_epoch, MemberState.UNREVOKED_PARTITIONS, kept, revoke),
                now)
            member.rebalance_deadline = now + max(member.subscription.rebalance_timeout_ms, 0)
            return
        free: dict[uuid.UUID, set[int]] = {}
        waiting = False
        for topic_id, parts in target.items():
            for p in parts:
                if p in current.get(topic_id, ()) or \
                        self._owner_of(group, topic_id, p, member.member_id) is None:
                    free.setdefault(topic_id, set()).add(p)
                else:
                    waiting = True
        assigned = {t: frozenset(ps) for t, ps in free.items()}
        state = MemberState.UNRELEASED_PARTITIONS if waiting else MemberState.STABLE
        epoch = group.assignment_epoch
        previous = member.member_epoch if epoch != member.member_epoch \
            else member.previous_member_epoch
        member.rebalance_deadline = None
        if (epoch, previous, state, assigned) != (member.member_epoch,
                                                  member.previous_member_epoch, member.state,
                                                  member.assigned) or member.pending_revocation:
            self._apply(records, CurrentAssignmentRecord(
                group.group_id, member.member_id, epoch, previous, state, assigned, {}), now)

    # -- leaving and timers ----------------------------------------------------------------------
    def _leave(self, request: HeartbeatRequest, now: int,
               records: list[ConsumerGroupRecord]) -> HeartbeatResponse:
        group = self.groups.get(request.group_id)
        if group is None or request.member_id not in group.members:
            return HeartbeatResponse(ErrorCode.UNKNOWN_MEMBER_ID, error_message=(
                f"Member {request.member_id} is not a member of group {request.group_id}."))
        member = group.members[request.member_id]
        if request.instance_id is not None and \
                member.subscription.instance_id != request.instance_id:
            return HeartbeatResponse(ErrorCode.FENCED_INSTANCE_ID, error_message=(
                f"Member {request.member_id} is not the member of instance id "
                f"{request.instance_id}."))
        if request.member_epoch == STATIC_LEAVE_EPOCH:
            # A static member leaves for a while: it keeps its partitions (nobody else gets
            # them) until it comes back, or until its session times out.
            self._apply(records, CurrentAssignmentRecord(
                group.group_id, member.member_id, STATIC_LEAVE_EPOCH, member.member_epoch,
                member.state, member.assigned, member.pending_revocation), now)
            return HeartbeatResponse(ErrorCode.NONE, request.member_id, STATIC_LEAVE_EPOCH,
                                     self.config_for(group.group_id).heartbeat_interval_ms)
        self._remove(group, request.member_id, now, records)
        return HeartbeatResponse(ErrorCode.NONE, request.member_id, LEAVE_EPOCH,
                                 self.config_for(group.group_id).heartbeat_interval_ms)

    def _remove(self, group: ConsumerGroup, member_id: str, now: int,
                records: list[ConsumerGroupRecord]) -> None:
        """A leave or a fence: tombstones 8, 7, 5, then the group epoch moves on."""
        gid = group.group_id
        self._apply(records, CurrentAssignmentRecord(gid, member_id, None), now)
        self._apply(records, TargetMemberRecord(gid, member_id, None), now)
        self._apply(records, MemberRecord(gid, member_id, None), now)
        self._apply(records, GroupEpochRecord(gid, group.group_epoch + 1, group.metadata_hash),
                    now)

    def delete(self, group_id: str) -> tuple[ErrorCode, list[ConsumerGroupRecord]]:
        """DeleteGroups of a consumer group: only an empty one (NON_EMPTY_GROUP); its target
        epoch and its epoch are tombstoned (the offsets are the classic side's)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, []
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP, []
        records: list[ConsumerGroupRecord] = []
        self._apply(records, TargetEpochRecord(group_id, None), 0)
        self._apply(records, GroupEpochRecord(group_id, None), 0)
        return ErrorCode.NONE, records

    def next_deadline(self) -> int | None:
        deadlines = [d for g in self.groups.values() for m in g.members.values()
                     for d in (m.session_deadline, m.rebalance_deadline, m.classic_deadline)
                     if d is not None]
        return min(deadlines, default=None)

    def expire(self, now: int) -> list[ConsumerGroupRecord]:
        """Fence every member past its session timeout, past its rebalance timeout while it
        still holds partitions to revoke, or (a classic member) past its join or sync
        timeout. A fence may turn the group into a classic one (`_remove`): its other
        members are then the classic group's."""
        records: list[ConsumerGroupRecord] = []
        for group in list(self.groups.values()):
            for member in list(group.members.values()):
                late = member.session_deadline <= now or any(
                    d is not None and d <= now
                    for d in (member.rebalance_deadline, member.classic_deadline))
                if late and self.groups.get(group.group_id) is group:
                    self._remove(group, member.member_id, now, records)
        return records

    def after_load(self, now: int) -> None:
        """Every loaded member gets a full session from now (Kafka's scheduling at load)."""
        for group in self.groups.values():
            for member in group.members.values():
                member.session_deadline = now + self.session_timeout_ms(group.group_id,
                                                                        member.subscription)


__all__ = ["ConsumerGroup", "ConsumerGroupConfig", "ConsumerGroupStateMachine",
           "HeartbeatRequest", "HeartbeatResponse", "Member", "MemberState", "UNIFORM",
           "validate"]
