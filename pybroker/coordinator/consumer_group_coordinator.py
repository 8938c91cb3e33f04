"""KIP-848 consumer groups as the broker runs them: the pure machine
(consumer_group_state.py) with time, the log and the classic coordinator beside it.

The classic `GroupCoordinator` owns `__consumer_offsets` (which partitions this broker leads
and has loaded, the appends, the committed offsets); this façade borrows all of it:
- a heartbeat is answered by the machine, whose records are then appended to the group's
  partition and committed before the response leaves (the machine has already replayed them:
  should the append fail, the member gets the append's error and the state it saw is kept in
  memory until the next restart, which reloads what the log holds);
- loading replays records 3, 5, 6, 7 and 8 of each partition as it is loaded (the classic
  decoder skips them);
- the timers (sessions, rebalance timeouts while revoking) run in a task of the coordinator's
  nursery;
- offsets of a consumer group are stored by the classic coordinator as an admin commit
  would be, once `validate_commit` / `validate_fetch` have checked the member's epoch.

A group id is either classic or consumer at a time, and a live group changes kind online as
`group.consumer.migration.policy` allows (consumer_group_migration.py decides):
- upgrade: a joining heartbeat into a classic group with members converts it (else
  GROUP_ID_NOT_FOUND, "not a consumer group"): the classic group's metadata tombstone and the
  consumer group's records go in one batch, so a restart finds one kind or the other; its
  classic members are then served here (`classic_join`, `classic_sync`, `classic_heartbeat`,
  `classic_leave`, which `GroupCoordinator` routes to for a consumer group's id, under every
  policy as Kafka);
- downgrade: the last consumer-protocol member leaving (or fenced) with classic members left
  tombstones the consumer group and writes the classic group's snapshot in one batch; the
  classic machine then holds the group and rebalances it.
An empty group of either kind changes kind freely, as in Kafka under every policy: a classic
JoinGroup deletes an empty consumer group first (`delete`). Share groups keep their ids apart
(tests/integration/test_group_types.py).
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from typing import Any, Callable, Iterable, Protocol, Sequence

from protocol.errors import ErrorCode
from protocol.records.record import Record, build_batch
from pybroker.cluster.metadata import MetadataImage
from pybroker.coordinator.consumer_group_migration import (
    MalformedClassicGroup, MigratingConsumerGroupStateMachine,
)
from pybroker.coordinator.consumer_group_records import ConsumerGroupRecord, decode, encode
from pybroker.coordinator.consumer_group_state import (
    ConsumerGroup, ConsumerGroupConfig, HeartbeatRequest, HeartbeatResponse,
)
from pybroker.coordinator.consumer_group_assignor import TopicsView
from pybroker.coordinator.deadline_loop import DeadlineLoop
from pybroker.config.group import GroupSettings
from pybroker.coordinator.internal_topic import APPEND_ERRORS, InternalTopic
from pybroker.coordinator.group_offsets import GroupListing
from pybroker.coordinator.group_records import GroupRecord, encode_record
from pybroker.coordinator.group_state import GroupStateMachine
from pybroker.coordinator.group_types import (
    JoinRequest, JoinResult, LeaveResult, LeavingMember, Outcome, SyncRequest, SyncResult,
)
from pybroker.storage.log_manager import LogManager

log = logging.getLogger(__name__)

CONSUMER_GROUP_TYPE = "consumer"
CONSUMER_PROTOCOL_TYPE = "consumer"


class ClassicCoordinator(Protocol):
    """What this façade uses of the classic GroupCoordinator (which builds it: named by a
    protocol so that the two modules do not import each other)."""

    state: GroupStateMachine
    topic: InternalTopic
    logs: LogManager

    def now(self) -> int: ...

    def topics_view(self) -> TopicsView: ...

    def deliver(self, completions: Sequence[tuple[int, Any]]) -> None: ...

    def kick_timers(self) -> None: ...

    def owns(self, group_id: str) -> bool: ...

    def partition_for(self, group_id: str) -> int: ...

    async def coordinates(self, group_id: str) -> ErrorCode: ...


class ConsumerGroupCoordinator:
    def __init__(self, classic: ClassicCoordinator, config: ConsumerGroupConfig,
                 settings: Callable[[str], GroupSettings] | None = None) -> None:
        self.classic = classic
        self.machine = MigratingConsumerGroupStateMachine(config)
        # A group's own session timeout and heartbeat interval (its GROUP configs).
        self.settings = settings
        self.timers = DeadlineLoop("consumer group", classic.now, self.machine.next_deadline,
                                   self.expire)

    def group(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group of this id, if this broker serves it."""
        group = self.machine.groups.get(group_id)
        return group if group is not None and self.classic.owns(group_id) else None

    # -- the heartbeat ---------------------------------------------------------------------------
    async def heartbeat(self, request: HeartbeatRequest, version: int,
                        topics: TopicsView) -> HeartbeatResponse:
        code = await self.classic.coordinates(request.group_id)
        if code:
            return HeartbeatResponse(code)
        gid, now = request.group_id, self.classic.now()
        classic = self.classic.state.groups.get(gid)
        upgrade: list[ConsumerGroupRecord] = []
        if classic is not None and classic.members:
            refusal = "only a joining member may convert it" if request.member_epoch != 0 \
                else self.machine.upgrade_refusal(classic)
            if refusal is None:
                try:
                    upgrade = self.machine.upgrade(classic, topics, now)
                except MalformedClassicGroup as exc:
                    refusal = f"its embedded consumer protocol is malformed: {exc}"
            if refusal is not None:
                log.info("cannot upgrade classic group %s to a consumer group: %s", gid,
                         refusal)
                return HeartbeatResponse(ErrorCode.GROUP_ID_NOT_FOUND, error_message=(
                    f"Group {gid} is not a consumer group."))
        self._adopt_group_config(gid)
        response, records = self.machine.heartbeat(
            request, version, topics, now,
            new_member_id=str(uuid.uuid4()) if version == 0 else None)
        handed: Outcome[None] = Outcome()
        if upgrade:
            if response.error:  # the joiner is refused: the classic group stays as it was
                self.machine.abandon(gid)
                return response
            log.info("classic group %s upgraded to a consumer group", gid)
            handed = self.classic.state.hand_over(gid)
        error = await self._write(gid, handed.records, upgrade + records, topics)
        self.classic.deliver(handed.completions)
        return HeartbeatResponse(error) if error else response

    async def _write(self, group_id: str, before: list[GroupRecord],
                     records: list[ConsumerGroupRecord], topics: TopicsView) -> ErrorCode:
        """Persist a request's records, with the classic records of a conversion: `before`
        (an upgrade's tombstone) ahead of them, a downgrade's snapshot after them."""
        after: list[GroupRecord] = []
        completions: list[tuple[int, Any]] = []
        for downgrade in self.machine.take_downgrades(group_id, topics):
            log.info("consumer group %s downgraded to a classic group",
                     downgrade.group.group_id)
            adopted = self.classic.state.adopt_downgraded(downgrade.group, self.classic.now(),
                                                          rebalance=downgrade.rebalance)
            after += adopted.records
            completions += adopted.completions
        error = ErrorCode.NONE
        if records or before or after:
            error = await self._persist(group_id, records, before, after)
        self.classic.deliver(completions)
        self.timers.kick()
        if after:
            self.classic.kick_timers()
        return error

    # -- classic members of consumer groups ------------------------------------------------------
    async def classic_join(self, request: JoinRequest) -> JoinResult:
        topics = self.classic.topics_view()
        result, records = self.machine.classic_join(request, topics, self.classic.now())
        error = await self._write(request.group_id, [], records, topics)
        return JoinResult(error, request.member_id) if error else result

    def classic_sync(self, request: SyncRequest) -> SyncResult:
        result = self.machine.classic_sync(request, self.classic.topics_view(), self.classic.now())
        self.timers.kick()
        return result

    def classic_heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                          generation_id: int) -> ErrorCode:
        code = self.machine.classic_heartbeat(group_id, member_id, instance_id, generation_id,
                                              self.classic.now())
        self.timers.kick()
        return code

    async def classic_leave(self, group_id: str, members: Sequence[LeavingMember]
                            ) -> LeaveResult:
        result, records = self.machine.classic_leave(group_id, members, self.classic.now())
        error = await self._write(group_id, [], records, self.classic.topics_view())
        return LeaveResult(error) if error else result

    def _adopt_group_config(self, group_id: str) -> None:
        """The group's configs as they are now, for this heartbeat and the timers after it
        (a member's running session keeps the deadline it was given)."""
        if self.settings is None:
            return
        found = self.settings(group_id)
        base = self.machine.config
        own = replace(base, session_timeout_ms=found.consumer_session_timeout_ms,
                      heartbeat_interval_ms=found.consumer_heartbeat_interval_ms)
        if own == base:
            self.machine.group_configs.pop(group_id, None)
        else:
            self.machine.group_configs[group_id] = own

    async def _persist(self, group_id: str, records: list[ConsumerGroupRecord],
                       before: Sequence[GroupRecord] = (), after: Sequence[GroupRecord] = ()
                       ) -> ErrorCode:
        """One batch: classic records `before`, the consumer group records, classic records
        `after`; the classic ones are replayed once written, as the classic façade does."""
        now = self.classic.now()
        batch = build_batch([encode_record(r, now) for r in before] +
                            [Record(*encode(r), timestamp=now) for r in records] +
                            [encode_record(r, now) for r in after])
        error, base_offset = await self.classic.topic.append(
            self.classic.partition_for(group_id), batch)
        if error:
            log.warning("consumer group %s: records not written: %s", group_id, error.name)
            return APPEND_ERRORS.get(error, error)
        for record in (*before, *after):
            self.classic.state.replay(record, base_offset, loading=False)
        return ErrorCode.NONE

    async def delete(self, group_id: str) -> ErrorCode | None:
        """None when `group_id` is no consumer group here; else DeleteGroups' answer for the
        group's own records (its offsets are then deleted by the classic coordinator)."""
        if self.group(group_id) is None:
            return None
        code, records = self.machine.delete(group_id)
        if records:
            return await self._persist(group_id, records)
        return code

    # -- offsets ---------------------------------------------------------------------------------
    def validate_commit(self, group_id: str, member_id: str | None, member_epoch: int,
                        version: int) -> ErrorCode | None:
        """None when `group_id` is no consumer group here (the classic rules apply); else
        NONE or why the commit is refused (Kafka's ConsumerGroup.validateOffsetCommit)."""
        group = self.group(group_id)
        if group is None:
            return None
        if member_epoch < 0 and not group.members:
            return ErrorCode.NONE  # the admin client, or a consumer without a group
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.uses_classic_protocol:  # its generation is its member epoch
            return ErrorCode.NONE if member_epoch == member.member_epoch \
                else ErrorCode.ILLEGAL_GENERATION
        if version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def validate_txn_commit(self, group_id: str, member_id: str, generation_id: int
                            ) -> ErrorCode | None:
        """TxnOffsetCommit: None when `group_id` is no consumer group here; else NONE or
        why not. Its generation is the member epoch, and a stale one is ILLEGAL_GENERATION
        (as Kafka); a producer naming no member (generation -1, member "") is let through,
        as it is for classic groups."""
        group = self.group(group_id)
        if group is None:
            return None
        if generation_id < 0 and not member_id:
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def validate_fetch(self, group_id: str, member_id: str | None,
                       member_epoch: int) -> ErrorCode:
        """OffsetFetch v9 (ConsumerGroup.validateOffsetFetch): a null member id with epoch
        -1 is the admin client; a member must be known and at its epoch."""
        group = self.group(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return ErrorCode.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol \
                else ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    # -- listing ---------------------------------------------------------------------------------
    def listings(self, states: Iterable[str], types: Iterable[str]) -> list[GroupListing]:
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and CONSUMER_GROUP_TYPE not in wanted_types:
            return []
        return [GroupListing(g.group_id, CONSUMER_PROTOCOL_TYPE, g.state, CONSUMER_GROUP_TYPE)
                for g in self.machine.groups.values()
                if self.classic.owns(g.group_id)
                and (not wanted_states or g.state.lower() in wanted_states)]

    # -- loading -----------------------------------------------------------------------------------
    def load_partition(self, index: int) -> int:
        """Replay the consumer group records of one loaded partition; how many."""
        return self.adopt(self.read_partition(index))

    def adopt(self, records: list[ConsumerGroupRecord]) -> int:
        """Replay records read by `read_partition` (on the loop); how many."""
        for record in records:
            self.machine.replay(record)
        for group_id in self.machine.groups:
            self._adopt_group_config(group_id)
        self.machine.after_load(self.classic.now())
        return len(records)

    def read_partition(self, index: int) -> list[ConsumerGroupRecord]:
        """The consumer group records of one partition, in log order: reading only, so a
        worker thread may do it while the loop serves."""
        plog = self.classic.logs.get(self.classic.topic.name, index)
        found: list[ConsumerGroupRecord] = []
        if plog is None:
            return found
        for header, rec in InternalTopic.read(plog):
            if header.is_control or rec.key is None:
                continue
            try:
                record = decode(rec.key, rec.value)
            except Exception as exc:  # construct, struct or UTF-8 errors
                log.warning("skipping undecodable consumer group record at %s-%d@%d: %s",
                            plog.topic, plog.partition, rec.offset, exc)
                continue
            if record is not None:
                found.append(record)
        return found

    def unload(self) -> None:
        """Forget the groups of partitions this broker no longer leads."""
        for group_id in [g for g in self.machine.groups if not self.classic.owns(g)]:
            del self.machine.groups[group_id]

    # -- timers (run by `timers`, a DeadlineLoop) ------------------------------------------------
    async def expire(self, now: int) -> None:
        """Fence the members past their deadlines, and write what that changed (a fence may
        downgrade a group: its classic snapshot is written with its tombstones)."""
        records = self.machine.expire(now)
        by_group: dict[str, list[ConsumerGroupRecord]] = {}
        for record in records:
            by_group.setdefault(record.group_id, []).append(record)
        topics = self.classic.topics_view()
        for group_id, group_records in by_group.items():
            log.info("consumer group %s: fenced member(s) past their session or rebalance "
                     "timeout", group_id)
            await self._write(group_id, [], group_records, topics)


def topics_of(image: MetadataImage) -> TopicsView:
    """What the assignors see of the cluster: each topic's id and partition count."""
    return {name: (info.topic_id, len(info.partitions)) for name, info in image.topics.items()}
