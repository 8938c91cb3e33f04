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
gets the records that came back. A session closed with epoch -1 or by its connection's end
releases what the member holds, with the same notification, the delivery taken back, as
Kafka's. A member that leaves the group or times out releases nothing: membership and
share-partitions are apart (on a cluster on different brokers), and Kafka 4.1.1 too hands
such a member's records out again only when their acquisition locks run out (delivery
counted; checked against it).

Durability. Each change to a share-partition's durable view (an acknowledgement, a release, a
lock expiry, the SPSO moving) marks it dirty; `flush()` hands one ShareSnapshot per dirty
share-partition to the key's share coordinator (`share_state_store`, the leader of partition
`abs(javaHash("group:topicId:partition")) % 50` of `__share_group_state`, as Kafka), which
has it committed before the handler answers the acknowledgement. A share-partition is read
back from its coordinator when this broker first serves it: after a start, and after it
becomes the data partition's leader (a failover), so acknowledged records stay done and
acquired ones come back Available. It is dropped when this broker stops leading the
partition, and its writes carry the leader epoch it was read at, so a deposed leader is
fenced. The coordinator is called directly when it is this broker, and through Kafka's
ReadShareGroupState / WriteShareGroupState / DeleteShareGroupState (84-86) otherwise (the
persister, `_at_coordinators`), retried while it moves or loads.

Administration (the offsets admin APIs, DeleteGroups) is the group coordinator's, and acts
at the share coordinators, as Kafka's: summaries read (87), state started afresh at the next
state epoch (83) or deleted (86) at each key's coordinator, wherever the data partition is
led. Having no record 15, it asks for every partition the metadata knows when it needs all of
a group's share-partitions. A data partition's leader checks its share-partitions against
their coordinator when a new share session of the group names them (`revalidate`), and drops
one whose state was started afresh or deleted there.

Membership is written too, to `__consumer_offsets` beside the group's other records (Kafka's
records 10-14, share_group_records): each heartbeat's changes are appended to the group's
partition and committed before it is answered, a session expiry's and a DeleteGroups' with
the next flush or at once; they are replayed when this broker becomes the leader of the
group's partition (at start, or later at a failover) and dropped when it stops leading it,
so a restart or a failover resumes each group with its epochs and assignments, and the
loaded members' sessions run from the load.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import replace
from typing import Any, Callable, Iterable
from uuid import UUID

import trio

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.records.record import Record, build_batch
from pybroker.cluster.image import MetadataDelta, MetadataImage
from pybroker.cluster.metadata import MetadataStore
from pybroker.config.broker import BrokerConfig
from pybroker.coordinator.group_offsets import GroupListing
from pybroker.coordinator.share_group import (
    SHARE_GROUP_TYPE, DurableView, HeartbeatResult, ShareGroup, ShareGroupConfig, ShareGroups,
    durable_view, records_between,
)
from pybroker.coordinator import share_group_records
from pybroker.coordinator.group_config_view import GroupConfigView
from pybroker.coordinator.internal_topic import APPEND_ERRORS, InternalTopic
from pybroker.coordinator.broker_channels import BrokerChannels
from pybroker.coordinator.share_partition import (
    OffsetReset, RecordState, SharePartition, SharePartitionConfig, StateBatch,
)
from pybroker.coordinator.share_records import ShareSnapshot
from pybroker.coordinator.share_session import ShareSessionCache
from pybroker.coordinator.share_state_store import (
    SHARE_STATE_TOPIC, UNINITIALIZED, ShareStateStore,
)
from pybroker.controller.topic_admin import TopicAdmin
from pybroker.replica.manager import ReplicaManager
from pybroker.storage.log_manager import LogManager
from pybroker.replica.purgatory import Purgatory, Watch

__all__ = ["ShareCoordinator", "SharePartitionKey", "SHARE_STATE_TOPIC"]

log = logging.getLogger(__name__)

SharePartitionKey = tuple[str, UUID, int]  # group id, topic id, partition

# What a share coordinator answers while it moves or loads: the persister looks it up again
# and retries, a few times with a doubling backoff, as Kafka's persister does.
_RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
_ATTEMPTS = 6
# Topics no share group reads, left out when the group coordinator looks for a group's state.
_INTERNAL_TOPICS = frozenset({SHARE_STATE_TOPIC, "__consumer_offsets", "__transaction_state"})
_FIRST_BACKOFF_S = 0.1
# How a ShareFetch or ShareAcknowledge partition is answered when its state cannot be read
# or written (Kafka's SharePartition.fetchPersisterError); anything else: UNKNOWN_SERVER_ERROR.
_PERSISTER_ERRORS = {
    ErrorCode.NOT_COORDINATOR: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.GROUP_ID_NOT_FOUND: ErrorCode.GROUP_ID_NOT_FOUND,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.FENCED_STATE_EPOCH: ErrorCode.FENCED_STATE_EPOCH,
    ErrorCode.FENCED_LEADER_EPOCH: ErrorCode.NOT_LEADER_OR_FOLLOWER,
}


class ShareCoordinator:
    def __init__(self, config: BrokerConfig, metadata: MetadataStore, logs: LogManager,
                 replicas: ReplicaManager, topics: TopicAdmin, purgatory: Purgatory,
                 offsets: InternalTopic, *, clock: Callable[[], int] | None = None,
                 channels: BrokerChannels | None = None) -> None:
        """`channels`: connections to the other brokers, for the share coordinators there
        (None: a single broker, whose coordinator is always itself)."""
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
        # each share-partition's data partition leader epoch when it was read (its writes
        # carry it) and state epoch; the reads under way, which a second request waits on
        self._leader_epochs: dict[SharePartitionKey, int] = {}
        self._state_epochs: dict[SharePartitionKey, int] = {}
        self._reading: dict[SharePartitionKey, trio.Event] = {}
        self.channels = channels
        # the partitions of __consumer_offsets whose share groups are loaded here
        self.membership_owned: set[int] = set()
        # __consumer_offsets (the group coordinator's), where membership is written, and the
        # membership records (of expired members) not written yet.
        self.offsets = offsets
        self._group_records: list[share_group_records.ShareGroupRecord] = []
        self.store = ShareStateStore(self.node_id, metadata, logs, InternalTopic(
            SHARE_STATE_TOPIC, metadata, topics, replicas,
            partitions=config.share_coordinator_state_topic_num_partitions,
            replication_factor=config.share_coordinator_state_topic_replication_factor,
            replication_factor_set=(
                "share.coordinator.state.topic.replication.factor" in config.explicit),
            configs=lambda replicas: {
                "cleanup.policy": "compact",
                "min.insync.replicas": str(min(config.share_coordinator_state_topic_min_isr,
                                               replicas))},
            commit_timeout_ms=config.offsets_commit_timeout_ms))
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
        if self.offsets.partition_for(group_id) not in self.membership_owned:
            return HeartbeatResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)  # loading next
        config = self._adopt_group_config(group_id)
        before = durable_view(self.groups.groups.get(group_id))
        result = self.groups.heartbeat(group_id, member_id, member_epoch, rack_id,
                                       subscribed_topic_names, self.lookup, self.now(),
                                       client_id=client_id, client_host=client_host)
        if result.left is None and result.error == ErrorCode.NONE:  # its session runs from now
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

    async def share_partition(self, group_id: str, topic_id: UUID, topic: str, partition: int
                              ) -> tuple[ErrorCode, SharePartition | None]:
        """The group's share-partition, read from its share coordinator when this broker
        first serves it as the partition's leader (at this leader epoch); or why this broker
        cannot serve it (not the leader, no such partition, the state not to be had)."""
        code, part = self.replicas.leader_partition(topic, partition)
        if part is None:
            return code, None
        key = (group_id, topic_id, partition)
        if key in self.partitions and self._leader_epochs.get(key) != part.leader_epoch:
            self._forget([key])  # led again since: another leader may have changed it
        sp = self.partitions.get(key)
        if sp is None:
            return await self._read_share_partition(key, topic, partition)
        sp.config = self.partition_config_for(group_id)  # a new lock duration applies next
        start = sp.start_offset
        sp.update_log_start(part.log.log_start_offset)
        if sp.start_offset != start:
            self._dirty.add(key)
        return ErrorCode.NONE, sp

    async def _read_share_partition(self, key: SharePartitionKey, topic: str, partition: int
                                    ) -> tuple[ErrorCode, SharePartition | None]:
        """Kafka's SharePartition.maybeInitialize: the state read from the coordinator (one
        read at a time per key; a second request waits for it), or, when it has none, the
        share-partition started where `share.auto.offset.reset` says and written."""
        reading = self._reading.get(key)
        if reading is not None:
            await reading.wait()
            sp = self.partitions.get(key)
            return (ErrorCode.NONE, sp) if sp is not None else (
                ErrorCode.COORDINATOR_NOT_AVAILABLE, None)
        self._reading[key] = done = trio.Event()
        try:
            code, part = self.replicas.leader_partition(topic, partition)
            if part is None:
                return code, None
            epoch = part.leader_epoch
            answer = await self._at_coordinators(
                ApiKey.READ_SHARE_GROUP_STATE, [key],
                lambda keys: self._local_read(keys, epoch),
                lambda k: {"partition": k[2], "leader_epoch": epoch},
                lambda p: ShareSnapshot(p.state_epoch, p.start_offset, tuple(
                    StateBatch(b.first_offset, b.last_offset, RecordState(b.delivery_state),
                               b.delivery_count) for b in p.state_batches)))
            code, snapshot = answer[key]
            if code:
                log.warning("share-partition %s not read from its coordinator: %s", key,
                            code.name)
                return _PERSISTER_ERRORS.get(code, ErrorCode.UNKNOWN_SERVER_ERROR), None
            code, part = self.replicas.leader_partition(topic, partition)
            if part is None or part.leader_epoch != epoch:  # deposed while reading
                return code or ErrorCode.NOT_LEADER_OR_FOLLOWER, None
            config = self.partition_config_for(key[0])
            plog = part.log
            assert isinstance(snapshot, ShareSnapshot)
            if snapshot.start_offset >= 0:
                sp = SharePartition(config, snapshot.start_offset, snapshot.batches)
                sp.update_log_start(plog.log_start_offset)
            else:
                duration = self.settings(key[0]).share_reset_duration_ms()
                if duration is None:
                    sp = SharePartition.initialize(config, plog.log_start_offset,
                                                   plog.high_watermark)
                else:  # by_duration: the first record at most that old, else the HWM
                    found = plog.offset_for_timestamp(self.now() - duration,
                                                      max_offset=plog.high_watermark)
                    sp = SharePartition(config,
                                        plog.high_watermark if found is None else found[0])
                # The start chosen is written before any record is handed out from it: a
                # restart that found no state would choose again (latest: the high
                # watermark then), and what was delivered and not yet acknowledged
                # in between would never come back.
                written = await self._write_snapshots({key: ShareSnapshot(
                    snapshot.state_epoch, sp.start_offset, tuple(sp.state_batches()), epoch)})
                code = written[key]
                if code:
                    log.warning("share-partition %s: its start not written to its "
                                "coordinator: %s", key, code.name)
                    return _PERSISTER_ERRORS.get(code, ErrorCode.UNKNOWN_SERVER_ERROR), None
                code, part = self.replicas.leader_partition(topic, partition)
                if part is None or part.leader_epoch != epoch:  # deposed while writing
                    return code or ErrorCode.NOT_LEADER_OR_FOLLOWER, None
            self.partitions[key] = sp
            self._leader_epochs[key] = epoch
            self._state_epochs[key] = snapshot.state_epoch
            self._kick()
            return ErrorCode.NONE, sp
        finally:
            del self._reading[key]
            done.set()

    async def revalidate(self, group_id: str, partitions: Iterable[tuple[UUID, int]]) -> None:
        """A new share session of the group names these partitions: a share-partition this
        broker holds is checked against its share coordinator, and dropped (read again when
        served) when its state was started afresh there (a newer state epoch: an alter) or is
        gone (a delete), as the group coordinator, maybe on another broker, changes the state
        of an empty group only at the coordinators. Without this, the leader would serve its
        old view until its next write is fenced. Under the flush lock and for written
        share-partitions only, so that a write of this broker's own is never taken for a
        delete; a coordinator that does not answer leaves the share-partition as it is."""
        async with self._flush_lock:
            keys = [k for t, p in partitions
                    if (k := (group_id, t, p)) in self.partitions and k not in self._dirty]
            if not keys:
                return
            summaries = await self._summaries(keys)
            for key in keys:
                code, found = summaries[key]
                if code or key not in self.partitions or key in self._dirty:
                    continue
                state_epoch, start = found
                if start < 0 or state_epoch > self._state_epochs.get(key, 0):
                    log.info("share-partition %s changed at its coordinator: read again", key)
                    self._forget([key])

    def _forget(self, keys: Iterable[SharePartitionKey]) -> None:
        """Drop share-partitions from memory (not from their coordinator): this broker no
        longer leads their partition, or leads it at a new epoch."""
        for key in list(keys):
            self.partitions.pop(key, None)
            self._dirty.discard(key)
            self._leader_epochs.pop(key, None)
            self._state_epochs.pop(key, None)

    def connection_closed(self, connection: object) -> None:
        """A client connection closed: the share sessions last used on it close, and their
        members' acquired records come back at once (Kafka's ConnectionDisconnectListener),
        written by the timer task's next flush (a connection's end cannot wait on the log)."""
        released = 0
        for session in self.sessions.close_connection(connection):
            released += self.release_member(session.group_id, session.member_id)
        if released and self._wakeup is not None:
            self._flush_soon = True
            self._wakeup.set()

    def release_member(self, group_id: str, member_id: str) -> int:
        """A member closed its share session (epoch -1, or its connection's end): its
        records come back with their delivery taken back (`SharePartition.release_member`,
        Kafka's releaseAcquiredRecords); how many."""
        released = 0
        for key, sp in self.partitions.items():
            if key[0] == group_id:
                count = sp.release_member(member_id, undo_delivery=True)
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
        self.groups.expire(now_ms, self.lookup)  # what they hold comes back with its locks
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

    def start_offsets(self, group_id: str) -> dict[SharePartitionKey, int]:
        """The start offset (SPSO) of each share-partition of the group known here: those
        this broker serves (live), then those whose state it coordinates."""
        starts = {k: s.start_offset for k in self.store.keys_of(group_id)
                  if (s := self.store.states[k]).start_offset >= 0}
        starts.update((k, sp.start_offset) for k, sp in self.partitions.items()
                      if k[0] == group_id)
        return starts

    # -- durability ----------------------------------------------------------------------------

    async def flush(self) -> ErrorCode:
        """Write a snapshot of every dirty share-partition and wait until each is committed;
        the first failure is returned (as Kafka's SharePartition answers a persister error:
        COORDINATOR_NOT_AVAILABLE while the coordinator moves or loads), and what did not get
        written stays dirty for the next flush. Membership records of expired
        members go first, to __consumer_offsets."""
        async with self._flush_lock:
            return await self._flush()

    async def _flush(self) -> ErrorCode:
        if self._group_records:
            code = await self._append_group_records([])
            if code:
                return code
        keys = sorted(k for k in self._dirty if k in self.partitions)
        self._dirty.clear()
        if not keys:
            return ErrorCode.NONE
        written = await self._write_snapshots({k: self._snapshot(k) for k in keys})
        first = ErrorCode.NONE
        for key in keys:
            code = written[key]
            if not code:
                continue
            first = first or _PERSISTER_ERRORS.get(code, ErrorCode.UNKNOWN_SERVER_ERROR)
            if code in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH):
                self._forget([key])  # taken over, or started afresh: read again next time
            elif key in self.partitions:
                self._dirty.add(key)  # written by the next flush
        return first

    async def _write_snapshots(self, snapshots: dict[SharePartitionKey, ShareSnapshot]
                               ) -> dict[SharePartitionKey, ErrorCode]:
        """WriteShareGroupState of each snapshot at its share coordinator; each key's code."""
        answers = await self._at_coordinators(
            ApiKey.WRITE_SHARE_GROUP_STATE, list(snapshots),
            lambda ks: self._local_write({k: snapshots[k] for k in ks}),
            lambda k: {"partition": k[2], "state_epoch": snapshots[k].state_epoch,
                       "leader_epoch": snapshots[k].leader_epoch,
                       "start_offset": snapshots[k].start_offset,
                       "state_batches": [
                           {"first_offset": b.first_offset, "last_offset": b.last_offset,
                            "delivery_state": int(b.delivery_state),
                            "delivery_count": b.delivery_count}
                           for b in snapshots[k].batches]},
            lambda p: None)
        return {key: answer[0] for key, answer in answers.items()}

    def _snapshot(self, key: SharePartitionKey) -> ShareSnapshot:
        sp = self.partitions[key]
        return ShareSnapshot(self._state_epochs.get(key, 0), sp.start_offset,
                             tuple(sp.state_batches()), self._leader_epochs.get(key, -1))

    # -- the persister: the share coordinator of each key, here or on another broker ----------

    async def _at_coordinators(self, api_key: ApiKey, keys: Iterable[SharePartitionKey],
                               local: Callable[[list[SharePartitionKey]], Any],
                               entry: Callable[[SharePartitionKey], dict],
                               result: Callable[[Any], Any]
                               ) -> dict[SharePartitionKey, tuple[ErrorCode, Any]]:
        """One share coordinator API for each key at its coordinator: `local(keys)` (an
        awaitable of {key: (code, result)}) where that is this broker, else the request
        (`entry(key)` is a key's partition entry, `result(partition)` reads its answer) to the
        broker that is, one request per broker and group. A key whose coordinator moves or
        loads is looked up and tried again, `_ATTEMPTS` times in all; the topic is created on
        first use. Each key's (code, result)."""
        out: dict[SharePartitionKey, tuple[ErrorCode, Any]] = {}
        pending = list(keys)
        for attempt in range(_ATTEMPTS):
            if attempt:
                await trio.sleep(_FIRST_BACKOFF_S * 2 ** (attempt - 1))
            code = await self.store.topic.ensure()
            by_node: dict[tuple[int, str], list[SharePartitionKey]] = {}
            for key in pending:
                node = -1 if code else self.store.coordinator_of(key)
                by_node.setdefault((node, key[0]), []).append(key)
            for (node, group_id), node_keys in by_node.items():
                if node == self.node_id:
                    out.update(await local(node_keys))
                elif node < 0 or self.channels is None:
                    out.update((k, (code or ErrorCode.COORDINATOR_NOT_AVAILABLE, None))
                               for k in node_keys)
                else:
                    out.update(await self._remote(node, api_key, group_id, node_keys,
                                                  entry, result))
            pending = [k for k in pending if out[k][0] in _RETRIABLE]
            if not pending:
                break
        return out

    async def _remote(self, node: int, api_key: ApiKey, group_id: str,
                      keys: list[SharePartitionKey], entry: Callable[[SharePartitionKey], dict],
                      result: Callable[[Any], Any]
                      ) -> dict[SharePartitionKey, tuple[ErrorCode, Any]]:
        """One request to the share coordinator on broker `node` for `keys` of one group."""
        assert self.channels is not None
        by_topic: dict[UUID, list[dict]] = {}
        for key in keys:
            by_topic.setdefault(key[1], []).append(entry(key))
        body = {"group_id": group_id, "topics": [
            {"topic_id": tid, "partitions": parts} for tid, parts in by_topic.items()]}
        out: dict[SharePartitionKey, tuple[ErrorCode, Any]] = {
            k: (ErrorCode.COORDINATOR_NOT_AVAILABLE, None) for k in keys}
        try:
            response = await self.channels.request(node, api_key, body, version=0)
        except KafkaError as exc:  # the broker does not serve the API (share.version 0)
            log.warning("share coordinator %d refused %s: %s", node, api_key.name, exc)
            return out
        for topic in () if response is None else response.results:
            for p in topic.partitions:
                key = (group_id, topic.topic_id, p.partition)
                if key in out:
                    code = ErrorCode(p.error_code)
                    out[key] = (code, None if code else result(p))
        return out

    async def _local_read(self, keys: list[SharePartitionKey], leader_epoch: int
                          ) -> dict[SharePartitionKey, tuple[ErrorCode, Any]]:
        return {k: self.store.read(k, leader_epoch) for k in keys}

    async def _local_write(self, snapshots: dict[SharePartitionKey, ShareSnapshot]
                           ) -> dict[SharePartitionKey, tuple[ErrorCode, Any]]:
        return {k: (code, None) for k, code in (await self.store.write(snapshots)).items()}

    async def _local_summary(self, keys: list[SharePartitionKey]
                             ) -> dict[SharePartitionKey, tuple[ErrorCode, Any]]:
        answers = {k: self.store.summary(k) for k in keys}
        return {k: (code, (snapshot.state_epoch, snapshot.start_offset))
                for k, (code, snapshot) in answers.items()}

    async def _local_initialize(self, snapshots: dict[SharePartitionKey, ShareSnapshot]
                                ) -> dict[SharePartitionKey, tuple[ErrorCode, Any]]:
        return {k: (code, None) for k, code in
                (await self.store.write(snapshots, initialize=True)).items()}

    async def _local_delete(self, keys: list[SharePartitionKey]
                            ) -> dict[SharePartitionKey, tuple[ErrorCode, Any]]:
        return {k: (code, None) for k, code in (await self.store.delete(keys)).items()}

    def is_share_group(self, group_id: str) -> bool:
        """A share group of that id lives here: its membership (durable since its records are
        written), or share-partition state alone (a group an AlterShareGroupOffsets named)."""
        return group_id in self.groups.groups or bool(self.start_offsets(group_id))

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
        ids = (set(self.groups.groups) | {k[0] for k in self.partitions}
               | {k[0] for k in self.store.states})
        return [GroupListing(g, SHARE_GROUP_TYPE, state, SHARE_GROUP_TYPE)
                for g in sorted(ids) if owns(g)
                for state in [self.group_state(g)]
                if not wanted_states or state.lower() in wanted_states]

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups for a share group: refused while it has members (NON_EMPTY_GROUP);
        else the state of its share-partitions goes first, a tombstone at each key's share
        coordinator whichever broker that is, then its membership records (the group epoch's and
        assignment epoch's tombstones). As Kafka's deleteShareGroups, the state that could be
        deleted goes and a group some of whose state could not be stays, with that error: here
        that includes a key whose coordinator could not say whether it holds any (no record
        15 names the group's share-partitions), lest a new group of that id find it."""
        if self.has_members(group_id):
            return ErrorCode.NON_EMPTY_GROUP
        keys, unknown = await self._keys_with_state(group_id)
        if group_id not in self.groups.groups and not keys and not unknown:
            return ErrorCode.GROUP_ID_NOT_FOUND
        code = await self._tombstone(keys) if keys else ErrorCode.NONE
        code = code or next(iter(unknown.values()), ErrorCode.NONE)
        if code:
            return code
        before = durable_view(self.groups.groups.get(group_id))
        if self.groups.delete(group_id) == ErrorCode.NONE:
            written = await self._write_group(group_id, before)
            if written:
                return written
        for session_key in [k for k in self.sessions.sessions if k[0] == group_id]:
            self.sessions.close(*session_key)
        return ErrorCode.NONE

    async def _tombstone(self, keys: Iterable[SharePartitionKey]) -> ErrorCode:
        """Drop share-partitions, each deleted at its coordinator (a tombstone in
        __share_group_state) before it goes; the first error is returned (what was not
        deleted stays)."""
        keys = list(keys)
        answers = await self._at_coordinators(
            ApiKey.DELETE_SHARE_GROUP_STATE, keys, self._local_delete,
            lambda k: {"partition": k[2]}, lambda p: None)
        first = ErrorCode.NONE
        for key in keys:
            code = answers[key][0]
            if code:
                first = first or code
            else:
                self._forget([key])
        return first

    # -- the offsets admin APIs (DescribeShareGroupOffsets, Alter..., Delete...) --------------

    def has_members(self, group_id: str) -> bool:
        group = self.groups.groups.get(group_id)
        return group is not None and bool(group.members)

    async def alter_start_offsets(self, group_id: str, offsets: dict[tuple[UUID, int], int]
                                  ) -> dict[tuple[UUID, int], ErrorCode]:
        """Start each share-partition afresh at its offset, for a group without members (the
        caller checks), as Kafka's group coordinator does: the key's state epoch read from
        its share coordinator, then InitializeShareGroupState there at the next state epoch
        (nothing in flight, no delivery counts), whichever broker coordinates the key or
        leads the partition, written before the answer. The partition's leader, here or
        elsewhere, is fenced by the new state epoch at its next write and reads the state
        again; here it drops the share-partition at once. A group id no group holds becomes
        an empty share group (its epoch record written), as Kafka creates it. Each
        partition's code."""
        codes: dict[tuple[UUID, int], ErrorCode] = {}
        if not offsets:
            return codes
        if group_id not in self.groups.groups:
            self.groups.groups[group_id] = ShareGroup(group_id)
            code = await self._write_group(group_id, None)
            if code:
                return {tp: code for tp in offsets}
        keys = [(group_id, t, p) for t, p in offsets]
        summaries = await self._summaries(keys)
        initialize: dict[SharePartitionKey, ShareSnapshot] = {}
        for key in keys:
            code, found = summaries[key]
            if code:
                codes[key[1:]] = code
            else:
                state_epoch = max(found[0], self._state_epochs.get(key, 0))
                initialize[key] = ShareSnapshot(state_epoch + 1, offsets[key[1:]], ())
        answers = await self._at_coordinators(
            ApiKey.INITIALIZE_SHARE_GROUP_STATE, list(initialize),
            lambda ks: self._local_initialize({k: initialize[k] for k in ks}),
            lambda k: {"partition": k[2], "state_epoch": initialize[k].state_epoch,
                       "start_offset": initialize[k].start_offset},
            lambda p: None)
        for key in initialize:
            codes[key[1:]] = answers[key][0]
            if not answers[key][0]:
                self._forget([key])  # read again, at the new state epoch, next time
        return codes

    async def delete_offsets(self, group_id: str, topic_id: UUID) -> ErrorCode:
        """Drop the group's state for every partition of the topic (the caller checks that the
        group has no members), at each key's share coordinator: UNKNOWN_TOPIC_OR_PARTITION
        when there is none, as Kafka. A partition whose coordinator cannot answer does not
        stop the others: as Kafka's persister, each is deleted apart, and the topic gets the
        error of one that failed (its state may be there: the request can be sent again)."""
        keys, unknown = await self._keys_with_state(group_id, topic_id)
        if not keys and not unknown:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        code = await self._tombstone(keys) if keys else ErrorCode.NONE
        return code or next(iter(unknown.values()), ErrorCode.NONE)

    # -- the group coordinator's view of a group's state, at every share coordinator -----------

    def _candidate_keys(self, group_id: str, topic_id: UUID | None = None
                        ) -> list[SharePartitionKey]:
        """Every key the group may have state for (of one topic, or of every topic a share
        group can read): with no record 15 (Kafka's list of the group's initialized
        share-partitions) the group coordinator asks every partition's share coordinator."""
        return [(group_id, info.topic_id, p.partition)
                for info in self.metadata.image.topics.values()
                if (info.topic_id == topic_id if topic_id is not None
                    else not (info.internal or info.name in _INTERNAL_TOPICS))
                for p in info.partitions]

    async def group_start_offsets(self, group_id: str,
                                  asked: Iterable[tuple[UUID, int]] | None = None
                                  ) -> dict[SharePartitionKey, tuple[ErrorCode, int]]:
        """The start offset (SPSO; -1: no state) of the group's share-partitions `asked`
        (None: every one the metadata knows), from each key's share coordinator by
        ReadShareGroupStateSummary, whichever broker that is; a share-partition this broker
        serves answers from memory, which is newer than its last write."""
        keys = (self._candidate_keys(group_id) if asked is None
                else [(group_id, t, p) for t, p in asked])
        summaries = await self._summaries(keys)
        out = {k: (code, -1 if code else found[1]) for k, (code, found) in summaries.items()}
        out.update((k, (ErrorCode.NONE, self.partitions[k].start_offset))
                   for k in keys if k in self.partitions)
        return out

    async def _keys_with_state(self, group_id: str, topic_id: UUID | None = None
                               ) -> tuple[list[SharePartitionKey],
                                          dict[SharePartitionKey, ErrorCode]]:
        """The group's keys (of one topic, or all) that have state at their coordinator or
        here, and those whose coordinator could not say, with its error."""
        starts = await self.group_start_offsets(group_id, None if topic_id is None else [
            k[1:] for k in self._candidate_keys(group_id, topic_id)])
        unknown = {k: code for k, (code, _) in sorted(starts.items()) if code}
        return sorted(k for k, (code, start) in starts.items()
                      if not code and start >= 0), unknown

    async def _summaries(self, keys: list[SharePartitionKey]
                         ) -> dict[SharePartitionKey, tuple[ErrorCode, tuple[int, int]]]:
        """(state epoch, start offset) of each key at its share coordinator; (0, -1) for
        every key while the state topic does not exist (no state anywhere)."""
        if SHARE_STATE_TOPIC not in self.metadata.image.topics:
            return {k: (ErrorCode.NONE, (0, -1)) for k in keys}
        return await self._at_coordinators(
            ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, keys, self._local_summary,
            lambda k: {"partition": k[2], "leader_epoch": -1},
            lambda p: (p.state_epoch, p.start_offset))

    def load(self) -> int:
        """At start, before the broker listens: the share groups of the partitions of
        __consumer_offsets this broker leads, and the state of the partitions of
        __share_group_state it leads (as their share coordinator); the number of records
        and share-partitions loaded."""
        info = self.metadata.image.topics.get(self.offsets.name)
        count = 0
        for p in () if info is None else info.partitions:
            if p.leader == self.node_id:
                count += self.load_membership(p.partition)
        return count + self.store.load()

    def load_membership(self, index: int) -> int:
        """Replay the share group records of partition `index` of __consumer_offsets, which
        this broker leads now (at start, or later: Kafka's onElection); the number replayed.
        Each loaded member's session runs from now."""
        self.membership_owned.add(index)
        plog = self.logs.get(self.offsets.name, index)
        count = 0
        loaded: set[str] = set()
        for header, rec in () if plog is None else InternalTopic.read(plog):
            if header.is_control or rec.key is None:
                continue
            try:
                record = share_group_records.decode(rec.key, rec.value)
            except Exception as exc:  # struct, UTF-8 or construct errors
                log.warning("skipping undecodable share group record at %s-%d@%d: %s",
                            self.offsets.name, index, rec.offset, exc)
                continue
            if record is not None:
                self.groups.replay(record)
                loaded.add(record.group_id)
                count += 1
        loaded &= set(self.groups.groups)
        for group_id in loaded:
            self._adopt_group_config(group_id)
        self.groups.after_load(self.now(), loaded)
        if loaded:
            log.info("loaded %d share group(s) from %s-%d", len(loaded), self.offsets.name,
                     index)
            self._kick()
        return count

    def unload_membership(self, index: int) -> None:
        """Another broker leads partition `index` of __consumer_offsets now (onResignation):
        its share groups go from here."""
        self.membership_owned.discard(index)
        for group_id in [g for g in self.groups.groups
                         if self.offsets.partition_for(g) == index]:
            del self.groups.groups[group_id]
            self.groups.group_configs.pop(group_id, None)
        self._group_records = [r for r in self._group_records
                               if self.offsets.partition_for(r.group_id) != index]

    async def apply_delta(self, image: MetadataImage, delta: MetadataDelta) -> None:
        """A metadata store listener, after the group coordinator's: follow the leadership
        of __consumer_offsets partitions (membership, loaded without a pause, so no
        heartbeat is served between the group coordinator's load and this one), drop the
        share-partitions of partitions this broker no longer leads (or that are gone; their
        next leader reads them from the coordinator), and let the share coordinator follow
        __share_group_state."""
        offsets = image.topics.get(self.offsets.name)
        for index in sorted(delta.changed_partitions.get(self.offsets.name, ())):
            if offsets is None or index >= len(offsets.partitions):
                continue
            leader = offsets.partitions[index].leader
            if leader == self.node_id and index not in self.membership_owned:
                self.load_membership(index)
            elif leader != self.node_id and index in self.membership_owned:
                self.unload_membership(index)
        gone: set[tuple[UUID, int]] = set()
        for topic, changed in delta.changed_partitions.items():
            info = image.topics.get(topic)
            for p in changed:
                if info is None or p >= len(info.partitions):
                    continue
                if info.partitions[p].leader != self.node_id:
                    gone.add((info.topic_id, p))
        deleted = {t.topic_id for t in delta.deleted_topics.values()}
        self._forget([k for k in self.partitions if (k[1], k[2]) in gone or k[1] in deleted])
        await self.store.apply_delta(image, delta)
