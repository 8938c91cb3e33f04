"""Share groups (KIP-932) as the broker runs them: the pure membership, session and
share-partition machines plus the clock, the timers and the metadata.

Theory of operation
-------------------
Membership (`share_group.ShareGroups`) is served by the broker that coordinates the group id,
as for classic groups; sessions (`share_session`) and share-partitions (`share_partition`)
live on the leader of each partition, where ShareFetch and ShareAcknowledge go. On one broker
both are here; in a cluster each broker keeps the share-partitions of the partitions it leads.

A share-partition is created at the first ShareFetch of the group for that partition,
starting where `share.auto.offset.reset` says (latest: the high watermark then). One timer
task sleeps until the earliest acquisition-lock or member-session deadline; when locks expire,
the purgatory is notified for their partitions, so a ShareFetch waiting there reads again and
gets the records that came back. A member that leaves or times out, and a session closed with
epoch -1 or by its connection's end, release what the member holds, with the same
notification; a closed session's records with their delivery taken back, as Kafka's.

Durability. Each change to a share-partition's durable view (an acknowledgement, a release, a
lock expiry, the SPSO moving) marks it dirty; `flush()` writes one ShareSnapshot record per
dirty share-partition to `__share_group_state` (`share_records`; partition
`abs(javaHash("group:topicId:partition")) % 50`, as Kafka), appended as leader and committed
before the handler answers the acknowledgement. `load()` at start adopts the latest snapshot
of each key from the partitions this broker leads, so acknowledged records stay done and
acquired ones come back Available. This broker must lead the state partition of a key to
write it: on one broker it always does; on a cluster a write whose partition another broker
leads fails with NOT_COORDINATOR (Kafka's share coordinator RPCs, 83-87, are not built).

Membership is written too, to `__consumer_offsets` beside the group's other records (Kafka's
records 10-14, share_group_records): each heartbeat's changes are appended to the group's
partition and committed before it is answered, a session expiry's and a DeleteGroups' with
the next flush or at once; `load()` replays them from the partitions this broker leads, so a
restart resumes each group with its epochs and assignments, and the loaded members' sessions
run from the load.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import replace
from typing import Any, Callable, Iterable
from uuid import UUID

import trio

from protocol.errors import ErrorCode
from protocol.records.record import Record, build_batch
from pybroker.cluster.metadata import MetadataStore
from pybroker.config.broker import BrokerConfig
from pybroker.coordinator.group_offsets import GroupListing
from pybroker.coordinator.share_group import (
    SHARE_GROUP_TYPE, DurableView, HeartbeatResult, ShareGroupConfig, ShareGroups,
    durable_view, records_between,
)
from pybroker.coordinator import share_group_records
from pybroker.coordinator.group_config_view import GroupConfigView
from pybroker.coordinator.internal_topic import APPEND_ERRORS, InternalTopic
from pybroker.coordinator.share_partition import OffsetReset, SharePartition, SharePartitionConfig
from pybroker.coordinator.share_records import (
    ShareSnapshot, ShareStateKey, decode_key, decode_value, encode_key, encode_value,
    state_key_text,
)
from pybroker.coordinator.share_session import ShareSessionCache
from pybroker.controller.topic_admin import TopicAdmin
from pybroker.replica.manager import ReplicaManager
from pybroker.storage.log_manager import LogManager
from pybroker.replica.purgatory import Purgatory, Watch

__all__ = ["ShareCoordinator", "SharePartitionKey", "SHARE_STATE_TOPIC"]

SHARE_STATE_TOPIC = "__share_group_state"

log = logging.getLogger(__name__)

SharePartitionKey = tuple[str, UUID, int]  # group id, topic id, partition


class ShareCoordinator:
    def __init__(self, config: BrokerConfig, metadata: MetadataStore, logs: LogManager,
                 replicas: ReplicaManager, topics: TopicAdmin, purgatory: Purgatory,
                 offsets: InternalTopic, *, clock: Callable[[], int] | None = None) -> None:
        self.node_id = config.node_id
        self.metadata = metadata
        self.logs = logs
        self.replicas = replicas
        self.purgatory = purgatory
        self._clock = clock or (lambda: int(time.time() * 1000))
        self.groups = ShareGroups(ShareGroupConfig(
            session_timeout_ms=config.group_share_session_timeout_ms,
            heartbeat_interval_ms=config.group_share_heartbeat_interval_ms,
            max_size=config.group_share_max_size))
        self.sessions = ShareSessionCache(config.group_share_max_share_sessions)
        self.partition_config = SharePartitionConfig(
            record_lock_duration_ms=config.group_share_record_lock_duration_ms,
            delivery_count_limit=config.group_share_delivery_count_limit,
            max_record_locks=config.group_share_partition_max_record_locks)
        # Each group's own configs (the GROUP config resource) over the values above.
        self.settings = GroupConfigView(config, metadata)
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self._dirty: set[SharePartitionKey] = set()
        # __consumer_offsets (the group coordinator's), where membership is written, and the
        # membership records (of expired members) not written yet.
        self.offsets = offsets
        self._group_records: list[share_group_records.ShareGroupRecord] = []
        self.topic = InternalTopic(
            SHARE_STATE_TOPIC, metadata, topics, replicas,
            partitions=config.share_coordinator_state_topic_num_partitions,
            replication_factor=config.share_coordinator_state_topic_replication_factor,
            replication_factor_set=(
                "share.coordinator.state.topic.replication.factor" in config.explicit),
            configs=lambda replicas: {
                "cleanup.policy": "compact",
                "min.insync.replicas": str(min(config.share_coordinator_state_topic_min_isr,
                                               replicas))},
            commit_timeout_ms=config.offsets_commit_timeout_ms)
        self._wakeup: trio.Event | None = None
        self._sleeping_until = math.inf
        self._flush_soon = False  # changes made outside a request: the timer task writes them
        # One flush at a time: the timer task's and the handlers' would otherwise race to
        # create the state topic and write the same keys.
        self._flush_lock = trio.Lock()
        self._group_lock = trio.Lock()  # membership records are appended in change order

    def now(self) -> int:
        return self._clock()

    # -- metadata ------------------------------------------------------------------------------

    def lookup(self, name: str) -> tuple[UUID, int] | None:
        info = self.metadata.image.topics.get(name)
        return None if info is None else (info.topic_id, len(info.partitions))

    def topic_name(self, topic_id: UUID) -> str | None:
        info = self.metadata.image.topic_by_id(topic_id)
        return None if info is None else info.name

    # -- membership ----------------------------------------------------------------------------

    def _adopt_group_config(self, group_id: str) -> ShareGroupConfig:
        """The group's session timeout and heartbeat interval (its own configs over the
        broker's), applied from now."""
        own = self.settings(group_id)
        config = replace(self.groups.config, session_timeout_ms=own.share_session_timeout_ms,
                         heartbeat_interval_ms=own.share_heartbeat_interval_ms)
        if config == self.groups.config:
            self.groups.group_configs.pop(group_id, None)
        else:
            self.groups.group_configs[group_id] = config
        return config

    async def heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                        rack_id: str | None, subscribed_topic_names: list[str] | None, *,
                        client_id: str, client_host: str) -> HeartbeatResult:
        """The membership machine's answer, its records written first (an append's error is
        answered instead; the change stays in memory, as the consumer groups')."""
        config = self._adopt_group_config(group_id)
        before = durable_view(self.groups.groups.get(group_id))
        result = self.groups.heartbeat(group_id, member_id, member_epoch, rack_id,
                                       subscribed_topic_names, self.lookup, self.now(),
                                       client_id=client_id, client_host=client_host)
        if result.left is not None:
            self.release_member(group_id, result.left)
        elif result.error == ErrorCode.NONE:  # the member's session runs from now
            self._kick(self.now() + config.session_timeout_ms)
        if result.error == ErrorCode.NONE:
            code = await self._write_group(group_id, before)
            if code:
                return HeartbeatResult(code)
        return result

    async def _write_group(self, group_id: str, before: DurableView | None) -> ErrorCode:
        """Append what changed in the group's durable view since `before` to its partition
        of __consumer_offsets, committed before this returns."""
        records = records_between(group_id, before,
                                  durable_view(self.groups.groups.get(group_id)))
        return await self._append_group_records(records)

    async def _append_group_records(self, records: list[share_group_records.ShareGroupRecord]
                                    ) -> ErrorCode:
        """Append `records` after those still pending (of expiries, or of an append that
        failed), in the order the changes were made: each record is a difference from the
        state before it, so the log must hold them in that order. The lock keeps it: the
        records are derived with no wait before it is asked for, and it is fair."""
        async with self._group_lock:
            pending, self._group_records = self._group_records + records, []
            by_partition: dict[int, list[share_group_records.ShareGroupRecord]] = {}
            for record in pending:
                by_partition.setdefault(self.offsets.partition_for(record.group_id),
                                        []).append(record)
            now = self.now()
            for partition, part_records in sorted(by_partition.items()):
                batch = build_batch([Record(*share_group_records.encode(r), timestamp=now)
                                     for r in part_records])
                error, _ = await self.offsets.append(partition, batch)
                if error:
                    log.warning("share group records not written to %s-%d: %s",
                                self.offsets.name, partition, error.name)
                    # kept, to go first next time (a partition written is written again:
                    # replaying a difference twice in a row is harmless)
                    self._group_records = pending + self._group_records
                    return APPEND_ERRORS.get(error, error)
            return ErrorCode.NONE

    # -- share-partitions ----------------------------------------------------------------------

    def share_partition(self, group_id: str, topic_id: UUID, topic: str, partition: int
                        ) -> tuple[ErrorCode, SharePartition | None]:
        """The group's share-partition, created at its first use; or why this broker cannot
        serve it (not the leader, no such partition)."""
        code, part = self.replicas.leader_partition(topic, partition)
        if part is None:
            return code, None
        key = (group_id, topic_id, partition)
        sp = self.partitions.get(key)
        config = self.partition_config_for(group_id)
        if sp is None:
            plog = part.log
            duration = self.settings(group_id).share_reset_duration_ms()
            if duration is None:
                sp = SharePartition.initialize(config, plog.log_start_offset,
                                               plog.high_watermark)
            else:  # by_duration: the first record at most that old, else the high watermark
                found = plog.offset_for_timestamp(self.now() - duration,
                                                  max_offset=plog.high_watermark)
                sp = SharePartition(config, plog.high_watermark if found is None else found[0])
            self.partitions[key] = sp
            self._dirty.add(key)
            self._kick()
        else:
            sp.config = config  # a new lock duration applies to the next acquisition
            start = sp.start_offset
            sp.update_log_start(part.log.log_start_offset)
            if sp.start_offset != start:
                self._dirty.add(key)
        return ErrorCode.NONE, sp

    def connection_closed(self, connection: object) -> None:
        """A client connection closed: the share sessions last used on it close, and their
        members' acquired records come back at once (Kafka's ConnectionDisconnectListener),
        written by the timer task's next flush (a connection's end cannot wait on the log)."""
        released = 0
        for session in self.sessions.close_connection(connection):
            released += self.release_member(session.group_id, session.member_id,
                                            undo_delivery=True)
        if released and self._wakeup is not None:
            self._flush_soon = True
            self._wakeup.set()

    def release_member(self, group_id: str, member_id: str, *,
                       undo_delivery: bool = False) -> int:
        """A member left, timed out or closed its session: its records come back (a closed
        session's with their delivery taken back, `SharePartition.release_member`); how
        many."""
        released = 0
        for key, sp in self.partitions.items():
            if key[0] == group_id:
                count = sp.release_member(member_id, undo_delivery=undo_delivery)
                if count:
                    self.changed(key)
                    released += count
        return released

    def changed(self, key: SharePartitionKey) -> None:
        """The share-partition's records changed state: written at the next `flush`, and a
        ShareFetch waiting on the partition reads again (records may have come back)."""
        self._dirty.add(key)
        self._notify(key[1], key[2])

    def partition_config_for(self, group_id: str) -> SharePartitionConfig:
        """The broker's share-partition settings under the group's own lock duration and
        offset reset (by_duration is resolved where the share-partition is created)."""
        own = self.settings(group_id)
        reset = (OffsetReset.EARLIEST if own.share_auto_offset_reset == "earliest"
                 else OffsetReset.LATEST)
        config = replace(self.partition_config,
                         record_lock_duration_ms=own.share_record_lock_duration_ms,
                         auto_offset_reset=reset)
        return self.partition_config if config == self.partition_config else config

    def acquired(self, now_ms: int, group_id: str) -> None:
        """A ShareFetch of `group_id` acquired records at `now_ms`: their locks run out at now
        + the group's lock duration, which the timer may have to wake for (no scan of every
        lock)."""
        self._kick(now_ms + self.partition_config_for(group_id).record_lock_duration_ms)

    def _notify(self, topic_id: UUID, partition: int) -> None:
        topic = self.topic_name(topic_id)
        if topic is not None:
            self.purgatory.notify((topic, partition), Watch.HIGH_WATERMARK)

    # -- timers --------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        deadlines = [d for d in (sp.next_deadline() for sp in self.partitions.values())
                     if d is not None]
        member = self.groups.next_deadline()
        if member is not None:
            deadlines.append(member)
        return min(deadlines) if deadlines else None

    def expire(self, now_ms: int) -> None:
        for key, sp in self.partitions.items():
            if sp.expire(now_ms):
                self.changed(key)
        due = {g.group_id: durable_view(g) for g in self.groups.groups.values()
               if any(m.session_deadline_ms <= now_ms for m in g.members.values())}
        for group_id, member_id in self.groups.expire(now_ms, self.lookup):
            self.release_member(group_id, member_id)
        for group_id, before in due.items():  # written at the next flush
            self._group_records += records_between(
                group_id, before, durable_view(self.groups.groups.get(group_id)))

    def _kick(self, deadline: int | None = None) -> None:
        """Wake the timer task if `deadline` (by default the earliest of all) comes before
        the one it sleeps until."""
        if self._wakeup is None:
            return
        if deadline is None:
            deadline = self.next_deadline()
        if deadline is not None and deadline < self._sleeping_until:
            self._wakeup.set()

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Sleeps until the next lock or session deadline, then expires what is due."""
        task_status.started()
        while True:
            self._wakeup = trio.Event()
            now = self.now()
            deadline = self.next_deadline()
            if (deadline is not None and deadline <= now) or self._flush_soon:
                self._flush_soon = False
                self._sleeping_until = math.inf
                try:
                    self.expire(now)
                    await self.flush()
                except Exception:
                    log.exception("share-group timers failed")
                await trio.sleep(0)
                continue
            self._sleeping_until = math.inf if deadline is None else deadline
            with trio.move_on_after(math.inf if deadline is None else (deadline - now) / 1000):
                await self._wakeup.wait()

    async def time_advanced(self) -> None:
        """The clock jumped forward (a test's advance_time): expire what is due now."""
        self.expire(self.now())
        await self.flush()
        if self._wakeup is not None:
            self._wakeup.set()

    def partitions_of(self, group_id: str) -> Iterable[tuple[SharePartitionKey, SharePartition]]:
        return ((k, sp) for k, sp in self.partitions.items() if k[0] == group_id)

    # -- durability ----------------------------------------------------------------------------

    async def flush(self) -> ErrorCode:
        """Write a snapshot of every dirty share-partition and wait until each is committed;
        the first failure is returned (as the coordinators map append errors), and what did
        not get written stays dirty for the next flush. Membership records of expired
        members go first, to __consumer_offsets."""
        async with self._flush_lock:
            return await self._flush()

    async def _flush(self) -> ErrorCode:
        if self._group_records:
            code = await self._append_group_records([])
            if code:
                return code
        if not self._dirty:
            return ErrorCode.NONE
        code = await self.topic.ensure()
        if code:
            return code
        by_partition: dict[int, list[SharePartitionKey]] = {}
        for key in sorted(self._dirty):
            state_key = ShareStateKey(*key)
            by_partition.setdefault(self.topic.partition_for(state_key_text(state_key)),
                                    []).append(key)
        for partition, keys in sorted(by_partition.items()):
            records = []
            for key in keys:
                sp = self.partitions[key]
                snapshot = ShareSnapshot(0, sp.start_offset, tuple(sp.state_batches()))
                records.append(Record(encode_key(ShareStateKey(*key)), encode_value(snapshot)))
            self._dirty.difference_update(keys)
            error, _ = await self.topic.append(partition, build_batch(records))
            if error:
                self._dirty.update(keys)
                return APPEND_ERRORS.get(error, error)
        return ErrorCode.NONE

    def is_share_group(self, group_id: str) -> bool:
        """A share group of that id lives here: its membership (durable since its records are
        written), or share-partition state alone (a group an AlterShareGroupOffsets named)."""
        return group_id in self.groups.groups or any(k[0] == group_id for k in self.partitions)

    def group_state(self, group_id: str) -> str:
        """Stable with members, else Empty: a group known only by its share-partitions is
        Empty, as Kafka shows a group whose members are gone."""
        group = self.groups.groups.get(group_id)
        return group.state if group is not None else "Empty"

    def listings(self, states: Iterable[str], types: Iterable[str],
                 owns: Callable[[str], bool]) -> list[GroupListing]:
        """The share groups whose id this broker coordinates (`owns`), as ListGroups shows
        them: ProtocolType and GroupType "share", filtered by state and type names
        (case-insensitive; empty means any)."""
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and SHARE_GROUP_TYPE not in wanted_types:
            return []
        ids = set(self.groups.groups) | {k[0] for k in self.partitions}
        return [GroupListing(g, SHARE_GROUP_TYPE, state, SHARE_GROUP_TYPE)
                for g in sorted(ids) if owns(g)
                for state in [self.group_state(g)]
                if not wanted_states or state.lower() in wanted_states]

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups for a share group: refused while it has members (NON_EMPTY_GROUP);
        else its share-partitions go, each with a tombstone in __share_group_state, so a
        restart does not bring them back; so do its membership records (the group epoch's and
        assignment epoch's tombstones)."""
        before = durable_view(self.groups.groups.get(group_id))
        code = self.groups.delete(group_id)
        if code == ErrorCode.NON_EMPTY_GROUP:
            return code
        if code == ErrorCode.NONE:
            written = await self._write_group(group_id, before)
            if written:
                return written
        keys = [k for k in self.partitions if k[0] == group_id]
        if code == ErrorCode.GROUP_ID_NOT_FOUND and not keys:
            return code
        code = await self._tombstone(keys)
        if code:
            return code
        for session_key in [k for k in self.sessions.sessions if k[0] == group_id]:
            self.sessions.close(*session_key)
        return ErrorCode.NONE

    async def _tombstone(self, keys: Iterable[SharePartitionKey]) -> ErrorCode:
        """Drop share-partitions, each with a tombstone in __share_group_state written
        before it goes; the first append error is returned (what was not written stays)."""
        by_partition: dict[int, list[SharePartitionKey]] = {}
        for key in keys:
            by_partition.setdefault(
                self.topic.partition_for(state_key_text(ShareStateKey(*key))), []).append(key)
        for partition, part_keys in sorted(by_partition.items()):
            batch = build_batch([Record(encode_key(ShareStateKey(*k)), None) for k in part_keys])
            error, _ = await self.topic.append(partition, batch)
            if error:
                return APPEND_ERRORS.get(error, error)
            for key in part_keys:
                del self.partitions[key]
                self._dirty.discard(key)
        return ErrorCode.NONE

    # -- the offsets admin APIs (DescribeShareGroupOffsets, Alter..., Delete...) --------------

    def has_members(self, group_id: str) -> bool:
        group = self.groups.groups.get(group_id)
        return group is not None and bool(group.members)

    async def alter_start_offsets(self, group_id: str, offsets: dict[tuple[UUID, int], int]
                                  ) -> tuple[ErrorCode, dict[tuple[UUID, int], ErrorCode]]:
        """Start each share-partition afresh at its offset, for a group without members (the
        caller checks): nothing in flight, no delivery counts, as Kafka re-initializes the
        share-partition state. A partition this broker does not lead is refused
        (NOT_LEADER_OR_FOLLOWER: the state lives with the leader). The snapshots are written
        before the answer: (the write's error, each partition's code)."""
        codes: dict[tuple[UUID, int], ErrorCode] = {}
        for (topic_id, partition), offset in offsets.items():
            name = self.topic_name(topic_id)
            code, part = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None) if name is None else \
                self.replicas.leader_partition(name, partition)
            codes[(topic_id, partition)] = code
            if part is None:
                continue
            key = (group_id, topic_id, partition)
            self.partitions[key] = SharePartition(self.partition_config, offset)
            self._dirty.add(key)
        return await self.flush(), codes

    async def delete_offsets(self, group_id: str, topic_id: UUID) -> ErrorCode:
        """Drop the group's state for every partition of the topic (the caller checks that the
        group has no members): UNKNOWN_TOPIC_OR_PARTITION when there is none, as Kafka."""
        keys = [k for k in self.partitions if k[0] == group_id and k[1] == topic_id]
        if not keys:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return await self._tombstone(keys)

    def load(self) -> int:
        """`load_membership`, then `load_state`; the number of records and share-partitions
        loaded."""
        return self.load_membership() + self.load_state()

    def load_membership(self) -> int:
        """Replay the share group records of the partitions of __consumer_offsets this broker
        leads; the number replayed. Each loaded member's session runs from now."""
        info = self.metadata.image.topics.get(self.offsets.name)
        count = 0
        if info is None:
            return 0
        for p in info.partitions:
            plog = self.logs.get(self.offsets.name, p.partition)
            if p.leader != self.node_id or plog is None:
                continue
            for header, rec in InternalTopic.read(plog):
                if header.is_control or rec.key is None:
                    continue
                try:
                    record = share_group_records.decode(rec.key, rec.value)
                except Exception as exc:  # struct, UTF-8 or construct errors
                    log.warning("skipping undecodable share group record at %s-%d@%d: %s",
                                self.offsets.name, p.partition, rec.offset, exc)
                    continue
                if record is not None:
                    self.groups.replay(record)
                    count += 1
        for group_id in self.groups.groups:
            self._adopt_group_config(group_id)
        self.groups.after_load(self.now())
        if self.groups.groups:
            log.info("loaded %d share group(s) from %s", len(self.groups.groups),
                     self.offsets.name)
        return count

    def load_state(self) -> int:
        """Adopt the latest snapshot of each share-partition from the partitions of
        __share_group_state this broker leads; the number of share-partitions loaded. Runs
        once at start, before the broker listens; an undecodable record is logged and
        skipped."""
        info = self.metadata.image.topics.get(SHARE_STATE_TOPIC)
        latest: dict[SharePartitionKey, ShareSnapshot | None] = {}
        if info is None:
            return 0
        for p in info.partitions:
            plog = self.logs.get(SHARE_STATE_TOPIC, p.partition)
            if p.leader != self.node_id or plog is None:
                continue
            for _, rec in InternalTopic.read(plog):
                try:
                    key = decode_key(rec.key or b"")
                    if key is None:
                        continue
                    latest[(key.group_id, key.topic_id, key.partition)] = (
                        None if rec.value is None else decode_value(rec.value))
                except Exception as exc:  # struct, UTF-8 or value errors
                    log.warning("skipping undecodable %s record at %d-%d: %s",
                                SHARE_STATE_TOPIC, p.partition, rec.offset, exc)
        for sp_key, snapshot in latest.items():
            if snapshot is not None:
                self.partitions[sp_key] = SharePartition(self.partition_config,
                                                      snapshot.start_offset, snapshot.batches)
        if self.partitions:
            log.info("loaded %d share-partition(s) from %s", len(self.partitions),
                     SHARE_STATE_TOPIC)
        return len(self.partitions)
