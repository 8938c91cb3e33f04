"""The classic group coordinator (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) as a state machine.

One module on purpose (about 550 lines): one state machine (its offsets are a mixin already),
whose transitions read best side by side.

Theory of operation
-------------------
`GroupStateMachine` holds every group this coordinator owns and the offsets committed to them.
It never reads a clock, sleeps, or does I/O: each operation takes `now_ms` and returns an
`Outcome` — the response for the caller (or None if the caller must wait), the records to
persist to `__consumer_offsets` *before* anything is answered, and `completions`: responses for
other requests that were waiting. Timer deadlines are data too: `next_deadline()` says when the
owner should next call `expire(now_ms)`. A test drives the whole protocol by calling methods
with chosen times; the trio façade (`group_coordinator`) adds the clock, sleeps, events and
the log.

Waiting requests. A JoinGroup waits until the rebalance completes and a follower's SyncGroup
waits for the leader's assignment. The caller passes a token identifying its request; the
machine stores it on the member, and later hands back `(token, response)` in some outcome's
completions — from another member's join, the leader's sync, a leave, or a timer. The owner
calls `written(groups, now)` once an outcome's records are written, as it sends the answers:
a member answered by the leader's sync is kept alive until then, and its session runs from it.

Rebalance. A join, leave or expiry in Empty, CompletingRebalance or Stable moves the group to
PreparingRebalance (table `CAN_REBALANCE`). It completes when every member has rejoined (the
rebalance timeout evicts dynamic members that do not); a new group waits
`group.initial.rebalance.delay.ms` first. Completion bumps the generation, picks the protocol
by vote, answers every waiting join (the leader gets all members' metadata), and moves to
CompletingRebalance; the leader's SyncGroup stores the assignment (one GroupMetadata record)
and moves to Stable. Members that do not sync within the rebalance timeout are removed.

Durability. Offsets and group deletion change only through `replay(record)`, which the owner
calls after the records of an outcome are written — and which loading at start uses on every
record of the log, so live and loaded state cannot diverge. Membership changes live (it is not
persisted step by step, as in Kafka); the GroupMetadata record is its snapshot, which `replay`
adopts only when loading: live, the group in memory made it and may have moved on while it was
being written (a leave during an acks=all write on a cluster), and newer state must stand.

Offsets, admin operations and retention live in `group_offsets.OffsetOperations`, mixed in here.
"""
from __future__ import annotations

import uuid
from typing import Callable, Sequence, TypeVar

from protocol.errors import ErrorCode
from pybroker.coordinator.group_metadata import (
    CAN_REBALANCE, Group, GroupState, Member,
)
from pybroker.coordinator.group_offsets import OffsetOperations
from pybroker.coordinator.group_records import GroupMetadataRecord, GroupRecord
from pybroker.coordinator.group_types import (
    Completion, GroupConfig, JoinedMember, JoinRequest, JoinResult, LeaveResult, LeavingMember,
    Outcome, SyncRequest, SyncResult,
)
from pybroker.coordinator.timers import TimerKind, Timers

__all__ = [
    "GroupConfig", "JoinRequest", "JoinResult", "JoinedMember", "SyncRequest", "SyncResult",
    "LeavingMember", "LeaveResult", "Outcome", "GroupStateMachine", "Timers", "TimerKind",
    "NEW_MEMBER_JOIN_TIMEOUT_MS",
]

# KIP-394: a new member waiting in a JoinGroup that never completes is dropped after this.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

_S = GroupState
T = TypeVar("T")


# What a valid member's heartbeat gets in each state (Empty has no members to be valid).
HEARTBEAT_BY_STATE: dict[GroupState, ErrorCode] = {
    _S.EMPTY: ErrorCode.UNKNOWN_MEMBER_ID,
    _S.PREPARING_REBALANCE: ErrorCode.REBALANCE_IN_PROGRESS,
    _S.COMPLETING_REBALANCE: ErrorCode.NONE,
    _S.STABLE: ErrorCode.NONE,
}


class GroupStateMachine(OffsetOperations):
    def __init__(self, config: GroupConfig | None = None,
                 new_member_id: Callable[[str], str] | None = None) -> None:
        self.config = config or GroupConfig()
        self.groups: dict[str, Group] = {}
        self.timers = Timers()
        self._new_member_id = new_member_id or (lambda prefix: f"{prefix}-{uuid.uuid4()}")
        self._records: list[GroupRecord] = []
        self._completions: list[Completion] = []
        OffsetOperations.__init__(self)

    def _finish(self, response: T | None) -> Outcome[T]:
        out: Outcome[T] = Outcome(response, self._records, self._completions)
        self._records, self._completions = [], []
        return out

    def _complete(self, token: int | None, result: JoinResult | SyncResult) -> None:
        if token is not None:
            self._completions.append((token, result))

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    # -- JoinGroup -----------------------------------------------------------------------------
    def join(self, req: JoinRequest, now_ms: int, token: int) -> Outcome[JoinResult]:
        result = self._join(req, now_ms, token)
        group = self.groups.get(req.group_id)
        if group is not None:
            self._try_complete_join(group, now_ms)
        return self._finish(result)

    def _join(self, req: JoinRequest, now: int, token: int) -> JoinResult | None:
        if not req.group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, req.member_id)
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id)
        group = self.groups.get(req.group_id)
        is_new = req.member_id == ""
        if group is None:
            if not is_new:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id)
            group = self.groups[req.group_id] = Group(req.group_id, state_timestamp=now)
        if not self._accepts_joining_member(group, req.member_id):
            known = group.members.get(req.member_id)
            if known is not None:
                self._remove_member_and_update_group(group, known, now)
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, req.member_id)
        result = (self._join_new_member(group, req, now, token) if is_new
                  else self._join_known_member(group, req, now, token))
        if (result is not None and result.error and not group.members
                and not group.pending_members and not self.has_offsets(group.group_id)
                and group.generation == 0):
            del self.groups[group.group_id]  # a group this failed join created: forget it
        return result

    def _accepts_joining_member(self, group: Group, member_id: str) -> bool:
        limit = self.config.max_size
        if group.is_in(_S.EMPTY, _S.DEAD):
            return True
        member = group.members.get(member_id)
        if group.state is _S.PREPARING_REBALANCE:
            awaiting = sum(1 for m in group.members.values() if m.awaiting_join is not None)
            return (member is not None and member.awaiting_join is not None) or awaiting < limit
        return member is not None or len(group.members) < limit

    def _join_new_member(self, group: Group, req: JoinRequest, now: int,
                         token: int) -> JoinResult | None:
        if group.state is _S.DEAD:
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, {n for n, _ in req.protocols}):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if req.group_instance_id is not None:
            member_id = self._new_member_id(req.group_instance_id)
            return self._join_static_member(group, req, member_id, now, token)
        member_id = self._new_member_id(req.client_id)
        if req.require_known_member_id:
            group.pending_members.add(member_id)
            self.timers.schedule((TimerKind.PENDING, group.group_id, member_id),
                                 now + req.session_timeout_ms)
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        self._add_member_and_rebalance(group, req, member_id, now, token)
        return None

    def _join_static_member(self, group: Group, req: JoinRequest, member_id: str, now: int,
                            token: int) -> JoinResult | None:
        """A static member (re)joins with a fresh member id; a known instance id replaces the
        old member in place, fencing anything still waiting under the old id (KIP-345)."""
        assert req.group_instance_id is not None
        old_id = group.static_members.get(req.group_instance_id)
        if old_id is None:
            self._add_member_and_rebalance(group, req, member_id, now, token)
            return None
        member = group.members[old_id]
        self._complete(member.awaiting_join, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        self._complete(member.awaiting_sync, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.awaiting_join = member.awaiting_sync = None
        self.timers.cancel((TimerKind.HEARTBEAT, group.group_id, old_id))
        group.replace_static_member(req.group_instance_id, member_id)
        self._update_member(member, req)
        member.client_id, member.client_host = req.client_id, req.client_host
        self._schedule_heartbeat(group, member, now)
        if group.state is _S.STABLE:
            if group.protocol_name == group.select_protocol():
                # Same protocol, same assignment: persist the new id, no rebalance (KIP-345).
                self._records.append(GroupMetadataRecord(group.group_id, group.snapshot()))
                is_leader = group.leader_id == member_id
                return self._current_join_result(group, member_id, with_members=is_leader,
                                                 skip_assignment=is_leader)
            member.awaiting_join = token
            self._maybe_prepare_rebalance(group, now)
            return None
        member.awaiting_join = token
        if group.state is _S.COMPLETING_REBALANCE:
            # The leader may be assigning to the old id: rebalance so the new id gets a share.
            self._prepare_rebalance(group, now)
        return None

    def _join_known_member(self, group: Group, req: JoinRequest, now: int,
                           token: int) -> JoinResult | None:
        member_id = req.member_id
        if group.state is _S.DEAD:
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports_protocols(req.protocol_type, {n for n, _ in req.protocols}):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if member_id in group.pending_members:
            if req.group_instance_id is not None:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            self.timers.cancel((TimerKind.PENDING, group.group_id, member_id))
            self._add_member_and_rebalance(group, req, member_id, now, token)
            return None
        error = group.validate_member(member_id, req.group_instance_id)
        if error:
            return JoinResult(error, member_id)
        member = group.members[member_id]
        state = group.state
        if state is _S.EMPTY:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        unchanged = member.matches(req.protocols)
        if state is _S.COMPLETING_REBALANCE and unchanged:
            # A retried join after the response was lost: answer it again.
            return self._current_join_result(group, member_id,
                                             with_members=member_id == group.leader_id)
        if state is _S.STABLE and unchanged and member_id != group.leader_id:
            return self._current_join_result(group, member_id, with_members=False)
        self._update_member(member, req)
        if member.awaiting_join not in (None, token):
            self._complete(member.awaiting_join,
                           JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id))
        member.awaiting_join = token
        self._maybe_prepare_rebalance(group, now)
        return None

    @staticmethod
    def _update_member(member: Member, req: JoinRequest) -> None:
        member.protocols = tuple(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms

    def _current_join_result(self, group: Group, member_id: str, *, with_members: bool,
                             skip_assignment: bool = False) -> JoinResult:
        return JoinResult(ErrorCode.NONE, member_id, group.generation, group.protocol_type,
                          group.protocol_name, group.leader_id or "",
                          self._member_list(group) if with_members else (), skip_assignment)

    @staticmethod
    def _member_list(group: Group) -> tuple[JoinedMember, ...]:
        assert group.protocol_name is not None
        return tuple(JoinedMember(m.member_id, m.group_instance_id,
                                  m.metadata(group.protocol_name))
                     for m in group.members.values())

    def _add_member_and_rebalance(self, group: Group, req: JoinRequest, member_id: str,
                                  now: int, token: int) -> None:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                        tuple(req.protocols), awaiting_join=token, is_new=True)
        if group.state is _S.PREPARING_REBALANCE and group.generation == 0:
            group.new_member_added = True
        group.add(member)
        self.timers.schedule((TimerKind.HEARTBEAT, group.group_id, member_id),
                             now + NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, now)

    # -- rebalancing ---------------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: Group, now: int) -> None:
        if group.state in CAN_REBALANCE:
            self._prepare_rebalance(group, now)

    def _prepare_rebalance(self, group: Group, now: int) -> None:
        if group.state is _S.COMPLETING_REBALANCE:
            self._propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS, now)
        group.pending_sync.clear()
        self.timers.cancel((TimerKind.SYNC, group.group_id, ""))
        if group.state is _S.EMPTY:
            delay = self.config.initial_rebalance_delay_ms
            group.initial_join = (delay, max(group.rebalance_timeout_ms() - delay, 0))
            group.new_member_added = False
            deadline = now + delay
        else:
            group.initial_join = None
            deadline = now + group.rebalance_timeout_ms()
        group.transition(_S.PREPARING_REBALANCE, now)
        self.timers.schedule((TimerKind.JOIN, group.group_id, ""), deadline)
        self._try_complete_join(group, now)

    def _try_complete_join(self, group: Group, now: int) -> None:
        """Complete the rebalance if it may: everyone rejoined, or an initial delay is due."""
        if group.state is not _S.PREPARING_REBALANCE:
            return
        if group.initial_join is not None:
            deadline = self.timers.deadline((TimerKind.JOIN, group.group_id, ""))
            if deadline is not None and deadline <= now:
                self.timers.cancel((TimerKind.JOIN, group.group_id, ""))
                self._on_join_deadline(group, now)
        elif group.has_all_members_joined():
            self._complete_join(group, now)

    def _on_join_deadline(self, group: Group, now: int) -> None:
        if group.state is not _S.PREPARING_REBALANCE:
            return
        if group.initial_join is not None:
            delay, remaining = group.initial_join
            if group.new_member_added and remaining > 0:
                # Members keep arriving: wait another delay, within the rebalance timeout.
                group.new_member_added = False
                next_delay = min(self.config.initial_rebalance_delay_ms, remaining)
                group.initial_join = (next_delay, max(remaining - delay, 0))
                self.timers.schedule((TimerKind.JOIN, group.group_id, ""), now + next_delay)
                return
        self._complete_join(group, now)

    def _complete_join(self, group: Group, now: int) -> None:
        gid = group.group_id
        self.timers.cancel((TimerKind.JOIN, gid, ""))
        group.initial_join = None
        for member in list(group.members.values()):
            if member.awaiting_join is None and member.group_instance_id is None:
                self._remove_member(group, member)  # did not rejoin in time
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined remain: give them another timeout.
            self.timers.schedule((TimerKind.JOIN, gid, ""), now + group.rebalance_timeout_ms())
            return
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.subscribed_topics = frozenset()
            group.transition(_S.EMPTY, now)
            self._records.append(GroupMetadataRecord(gid, group.snapshot()))
            return
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        group.transition(_S.COMPLETING_REBALANCE, now)
        everyone = self._member_list(group)
        for member in group.members.values():
            if member.awaiting_join is not None:
                is_leader = member.member_id == group.leader_id
                self._complete(member.awaiting_join, JoinResult(
                    ErrorCode.NONE, member.member_id, group.generation, group.protocol_type,
                    group.protocol_name, group.leader_id or "", everyone if is_leader else ()))
                member.awaiting_join = None
            member.is_new = False
            self._schedule_heartbeat(group, member, now)
        group.pending_sync = set(group.members)
        self.timers.schedule((TimerKind.SYNC, gid, ""), now + group.rebalance_timeout_ms())

    def _propagate_assignment(self, group: Group, error: ErrorCode, now: int) -> None:
        """Answer every waiting SyncGroup: the assignment, or `error` with none."""
        for member in group.members.values():
            if error:
                member.assignment = b""
            if member.awaiting_sync is not None:
                self._complete(member.awaiting_sync, SyncResult(
                    error, group.protocol_type, group.protocol_name, member.assignment))
                member.awaiting_sync = None
                self._schedule_heartbeat(group, member, now)

    def _schedule_heartbeat(self, group: Group, member: Member, now: int) -> None:
        self.timers.schedule((TimerKind.HEARTBEAT, group.group_id, member.member_id),
                             now + member.session_timeout_ms)

    def _remove_member(self, group: Group, member: Member) -> None:
        """Drop a member; anything it still waits on is told it is unknown, so it rejoins."""
        self._complete(member.awaiting_join,
                       JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        self._complete(member.awaiting_sync, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        member.awaiting_join = member.awaiting_sync = None
        group.remove(member.member_id)
        self.timers.cancel((TimerKind.HEARTBEAT, group.group_id, member.member_id))

    def _remove_member_and_update_group(self, group: Group, member: Member, now: int) -> None:
        self._remove_member(group, member)
        if group.is_in(_S.STABLE, _S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, now)
        elif group.state is _S.PREPARING_REBALANCE:
            self._try_complete_join(group, now)

    # -- SyncGroup -----------------------------------------------------------------------------
    def sync(self, req: SyncRequest, now_ms: int, token: int) -> Outcome[SyncResult]:
        return self._finish(self._sync(req, now_ms, token))

    def _sync(self, req: SyncRequest, now: int, token: int) -> SyncResult | None:
        if not req.group_id:
            return SyncResult(ErrorCode.INVALID_GROUP_ID)
        group = self.groups.get(req.group_id)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state is _S.DEAD:
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = group.validate_member(req.member_id, req.group_instance_id)
        if error:
            return SyncResult(error)
        if req.generation_id != group.generation:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if ((req.protocol_type is not None and req.protocol_type != group.protocol_type)
                or (req.protocol_name is not None and req.protocol_name != group.protocol_name)):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[req.member_id]
        if group.state is _S.EMPTY:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state is _S.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        self._sync_received(group, req.member_id)
        if group.state is _S.STABLE:
            self._schedule_heartbeat(group, member, now)
            return SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name,
                              member.assignment)
        # CompletingRebalance: wait for the leader; the leader's own request completes it.
        if member.awaiting_sync not in (None, token):
            self._complete(member.awaiting_sync, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = token
        if req.member_id == group.leader_id:
            # Only the leader's assignments count; a follower's are ignored, as in Kafka.
            for m in group.members.values():
                m.assignment = req.assignments.get(m.member_id, b"")
            group.transition(_S.STABLE, now)
            self._records.append(GroupMetadataRecord(group.group_id, group.snapshot()))
            # The answers go out once the snapshot is written (`written`); until then the
            # members cannot heartbeat, as their SyncGroup still waits.
            group.sync_answers_held |= {m.member_id for m in group.members.values()
                                        if m.awaiting_sync is not None}
            self._propagate_assignment(group, ErrorCode.NONE, now)
        return None

    def _sync_received(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.timers.cancel((TimerKind.SYNC, group.group_id, ""))

    # -- Heartbeat and LeaveGroup --------------------------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int, now_ms: int) -> Outcome[ErrorCode]:
        return self._finish(self._heartbeat(group_id, member_id, group_instance_id,
                                            generation_id, now_ms))

    def _heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                   generation_id: int, now: int) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is _S.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error:
            return error
        if generation_id != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is not _S.EMPTY:
            self._schedule_heartbeat(group, group.members[member_id], now)
        return HEARTBEAT_BY_STATE[group.state]

    def leave(self, group_id: str, members: Sequence[LeavingMember],
              now_ms: int) -> Outcome[LeaveResult]:
        if not group_id:
            return self._finish(LeaveResult(ErrorCode.INVALID_GROUP_ID))
        group = self.groups.get(group_id)
        if group is None:
            return self._finish(LeaveResult(ErrorCode.NONE, tuple(
                (m, ErrorCode.UNKNOWN_MEMBER_ID) for m in members)))
        if group.state is _S.DEAD:
            return self._finish(LeaveResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        results = tuple((m, self._leave_one(group, m, now_ms)) for m in members)
        return self._finish(LeaveResult(ErrorCode.NONE, results))

    def _leave_one(self, group: Group, leaving: LeavingMember, now: int) -> ErrorCode:
        member_id = leaving.member_id
        if leaving.group_instance_id is not None:
            known = group.static_members.get(leaving.group_instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id and member_id != known:
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = known
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.timers.cancel((TimerKind.PENDING, group.group_id, member_id))
            self._try_complete_join(group, now)
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._remove_member_and_update_group(group, member, now)
        return ErrorCode.NONE

    # -- timers --------------------------------------------------------------------------------
    def expire(self, now_ms: int) -> Outcome[None]:
        """Run every timer due at `now_ms`: sessions, pending members, rebalance and sync
        deadlines. Timers of groups or members that are gone are ignored."""
        while (key := self.timers.pop_due(now_ms)) is not None:
            kind, group_id, member_id = key
            group = self.groups.get(group_id)
            if group is None:
                continue
            if kind is TimerKind.HEARTBEAT:
                self._on_session_expired(group, member_id, now_ms)
            elif kind is TimerKind.PENDING:
                if member_id in group.pending_members:
                    group.pending_members.discard(member_id)
                    self._try_complete_join(group, now_ms)
            elif kind is TimerKind.JOIN:
                self._on_join_deadline(group, now_ms)
            elif kind is TimerKind.SYNC:
                self._on_sync_deadline(group, now_ms)
        return self._finish(None)

    def _on_session_expired(self, group: Group, member_id: str, now: int) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        # A member blocked in JoinGroup or SyncGroup is alive: its request is the heartbeat,
        # until its answer is sent (a SyncGroup's answer may wait for the snapshot's write).
        # A new member stuck in a join for NEW_MEMBER_JOIN_TIMEOUT_MS is dropped (KIP-394).
        if (member.awaiting_sync is not None or member_id in group.sync_answers_held
                or (member.awaiting_join is not None and not member.is_new)):
            self._schedule_heartbeat(group, member, now)
            return
        self._remove_member_and_update_group(group, member, now)

    def _on_sync_deadline(self, group: Group, now: int) -> None:
        if not group.is_in(_S.COMPLETING_REBALANCE, _S.STABLE) or not group.pending_sync:
            return
        for member_id in list(group.pending_sync):
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member(group, member)
        group.pending_sync.clear()
        self._maybe_prepare_rebalance(group, now)

    # -- online migration (consumer_group_migration.py) ---------------------------------------
    def hand_over(self, group_id: str) -> Outcome[None]:
        """A live classic group became a consumer group (upgrade): its members are the
        consumer group's now. A JoinGroup or SyncGroup still waiting here is answered
        REBALANCE_IN_PROGRESS, so its member joins again (as a classic member of the consumer
        group); the group's metadata is tombstoned, and its committed offsets stay, under a
        member-less group as a consumer group's offsets are kept."""
        group = self.groups.get(group_id)
        if group is None:
            return self._finish(None)
        for member in list(group.members.values()):
            self._complete(member.awaiting_join,
                           JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
            self._complete(member.awaiting_sync, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            member.awaiting_join = member.awaiting_sync = None
        for member_id in group.pending_members:
            self.timers.cancel((TimerKind.PENDING, group_id, member_id))
        self.timers.cancel((TimerKind.JOIN, group_id, ""))
        self.timers.cancel((TimerKind.SYNC, group_id, ""))
        self._forget(group)
        if self.has_offsets(group_id):
            self.groups[group_id] = Group(group_id)
        self._records.append(GroupMetadataRecord(group_id, None))
        return self._finish(None)

    def adopt_downgraded(self, group: Group, now_ms: int, rebalance: bool = True
                         ) -> Outcome[None]:
        """A consumer group became this classic group (downgrade): Stable at the consumer
        group's epoch with each member's last target as its assignment. Its snapshot is
        written and it rebalances at once, so that its members join and a leader assigns
        (not when a static member's replacement turned it: the members keep what they
        have, as Kafka)."""
        old = self.groups.get(group.group_id)
        if old is not None and old is not group:
            assert not old.members, "a downgraded group's id held a classic group with members"
        self.groups[group.group_id] = group
        self._records.append(GroupMetadataRecord(group.group_id, group.snapshot()))
        for member in group.members.values():
            self._schedule_heartbeat(group, member, now_ms)
        if rebalance:
            self._prepare_rebalance(group, now_ms)
        return self._finish(None)

    def after_load(self, now_ms: int) -> None:
        """Start the session clock of every loaded member: one that does not come back within
        its session timeout is removed, as after any coordinator move in Kafka."""
        for group in self.groups.values():
            for member in group.members.values():
                self._schedule_heartbeat(group, member, now_ms)

    def unload(self, owned: Callable[[str], bool]) -> Outcome[None]:
        """Forget every group, and its offsets, that `owned(group_id)` no longer covers: its
        partition of __consumer_offsets is led elsewhere now (Kafka's onResignation). A
        request waiting in a join or a sync is answered NOT_COORDINATOR, so that its client
        looks the coordinator up again; the groups' timers fire into nothing."""
        for group_id in [g for g in self.groups if not owned(g)]:
            group = self.groups.pop(group_id)
            for member in group.members.values():
                self._complete(member.awaiting_join,
                               JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
                self._complete(member.awaiting_sync, SyncResult(ErrorCode.NOT_COORDINATOR))
        for group_id in [g for g in self.offsets if not owned(g)]:
            del self.offsets[group_id]
            self._committed_at.pop(group_id, None)
        for group_id in {g for g in self.pending.groups() if not owned(g)}:
            self.pending.remove_group(group_id)
        return self._finish(None)

    def written(self, group_ids: set[str], now_ms: int) -> None:
        """The records of an outcome are written and its answers go out now: members whose
        SyncGroup answer waited for the write start their session from now, as Kafka
        schedules a member's next heartbeat when it propagates the assignment, after the
        write. Timing them from the leader's SyncGroup expired every member of a group
        whose write outlasted session.timeout.ms (a follower slow on a cluster)."""
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                continue
            for member_id in group.sync_answers_held:
                member = group.members.get(member_id)
                if member is not None:
                    self._schedule_heartbeat(group, member, now_ms)
            group.sync_answers_held.clear()

    def persist_failed(self, group_ids: set[str], now_ms: int) -> Outcome[None]:
        """The records of an outcome could not be written. Membership already moved on in
        memory, so make every affected group rebalance: its members rejoin and the next
        snapshot is written then (Kafka resets the assignment and rebalances likewise)."""
        self.written(group_ids, now_ms)  # the answers go out now, as errors
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is not None and group.is_in(_S.STABLE, _S.COMPLETING_REBALANCE):
                self._prepare_rebalance(group, now_ms)
        return self._finish(None)
