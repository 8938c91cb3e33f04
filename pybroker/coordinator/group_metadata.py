"""One classic consumer group and its members: the data the group state machine works on.

A group moves through Kafka's five states; the table `VALID_PREVIOUS` says which state may
follow which, and `Group.transition` refuses anything else, so a logic error surfaces as an
exception at the faulty step instead of as a group that silently misbehaves later:

    Empty ──join──▶ PreparingRebalance ──all joined──▶ CompletingRebalance ──leader sync──▶ Stable
      ▲                 │    ▲                              │                               │
      └──no members─────┘    └──────member joins, leaves or times out────────────────────────┘
    any state ──deleted──▶ Dead

Nothing here knows about time, waiting or I/O: a member awaiting a JoinGroup or SyncGroup
response holds only the opaque token of that request, which the caller resolves.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from protocol.errors import ErrorCode
from pybroker.coordinator.group_records import (
    GroupSnapshot, MemberSnapshot, consumer_subscription_topics,
)

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(str, Enum):
    """Kafka's names, as DescribeGroups and ListGroups report them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.DEAD: frozenset(GroupState),
}
# States from which a join, leave or expiry starts a new rebalance (Kafka's `canRebalance`).
CAN_REBALANCE = frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY})

Protocols = tuple[tuple[str, bytes], ...]


class IllegalTransition(RuntimeError):
    """A state change the table forbids: a bug in the state machine, never bad input."""


@dataclass(eq=False)
class Member:
    """A member as the coordinator sees it. `protocols` are in the member's preference order."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    awaiting_join: int | None = None  # token of the JoinGroup request waiting for the rebalance
    awaiting_sync: int | None = None  # token of the SyncGroup request waiting for the leader
    is_new: bool = False  # joined in the current rebalance and has not yet been answered

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Protocols) -> bool:
        return tuple(self.protocols) == tuple(protocols)

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def snapshot(self, protocol: str | None) -> MemberSnapshot:
        return MemberSnapshot(
            self.member_id, self.group_instance_id, self.client_id, self.client_host,
            self.rebalance_timeout_ms, self.session_timeout_ms,
            self.metadata(protocol) if protocol else b"", self.assignment)


@dataclass(eq=False)
class Group:
    """A classic group. Members are kept in join order; the first becomes leader."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp: int = -1
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)  # told MEMBER_ID_REQUIRED
    pending_sync: set[str] = field(default_factory=set)  # joined, SyncGroup not yet received
    # Answered by the leader's SyncGroup, the answer held until its snapshot is written.
    sync_answers_held: set[str] = field(default_factory=set)
    subscribed_topics: frozenset[str] | None = None
    # The initial delayed join of a new group: (current delay, remaining budget) or None.
    initial_join: tuple[int, int] | None = None
    new_member_added: bool = False

    # -- state -------------------------------------------------------------------------------
    def transition(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalTransition(f"group {self.group_id}: {self.state.value} -> "
                                    f"{target.value}")
        self.state = target
        self.state_timestamp = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    # -- membership --------------------------------------------------------------------------
    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        self.sync_answers_held.discard(member_id)
        return member

    def replace_static_member(self, instance_id: str, new_member_id: str) -> Member:
        """Give a restarted static member a new id, keeping its place, assignment and role."""
        old_id = self.static_members[instance_id]
        member = self.members.pop(old_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_member_id)
        return member

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's rule: a static id must map to this member id, else it is fenced."""
        if instance_id is not None:
            known = self.static_members.get(instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return ErrorCode.NONE
        return ErrorCode.NONE if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    def has_all_members_joined(self) -> bool:
        return (not self.pending_members
                and all(m.awaiting_join is not None for m in self.members.values()))

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined; otherwise pick any member that did. False if none did."""
        leader = self.members.get(self.leader_id or "")
        if leader is None:
            return False
        if leader.awaiting_join is not None:
            return True
        for member_id, member in self.members.items():
            if member.awaiting_join is not None:
                self.leader_id = member_id
                return True
        return False

    # -- protocols ---------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        counts: Counter[str] = Counter()
        for member in self.members.values():
            counts.update({name for name, _ in member.protocols})
        return {name for name, n in counts.items() if n == len(self.members)}

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """Whether a member with these protocols may join: same type, one protocol in common
        with all current members (Kafka's `supportsProtocols`)."""
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Each member votes for its favourite common protocol; the most votes win.

        Ties go to the protocol the earliest-joined member prefers, so the choice is stable.
        """
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id} has no protocol all members support")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        first = next(iter(self.members.values()))
        for name, _ in first.protocols:
            if votes.get(name) == best:
                return name
        return max(votes, key=lambda n: votes[n])  # pragma: no cover - first votes for a winner

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Union of the members' subscriptions for consumer groups; None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                found = consumer_subscription_topics(member.metadata(self.protocol_name))
            except KeyError:
                return None
            if found is None:
                return None
            topics |= found
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    # -- persistence -------------------------------------------------------------------------
    def snapshot(self) -> GroupSnapshot:
        return GroupSnapshot(
            self.protocol_type or "", self.generation, self.protocol_name,
            self.leader_id if self.members else None, self.state_timestamp,
            tuple(m.snapshot(self.protocol_name) for m in self.members.values()))

    @classmethod
    def from_snapshot(cls, group_id: str, snap: GroupSnapshot) -> "Group":
        """A group as loaded: Stable with its last members, or Empty (Kafka's loadGroup)."""
        group = cls(group_id, generation=snap.generation,
                    protocol_type=snap.protocol_type or None,
                    state_timestamp=snap.current_state_timestamp)
        if snap.members and snap.protocol:
            group.state = GroupState.STABLE
            group.protocol_name = snap.protocol
            for m in snap.members:
                group.add(Member(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host,
                    m.rebalance_timeout, m.session_timeout, snap.protocol_type,
                    ((snap.protocol, m.subscription),), m.assignment))
            if snap.leader in group.members:
                group.leader_id = snap.leader
            group.subscribed_topics = group.compute_subscribed_topics()
        return group
