"""The group coordinator as the broker runs it: the pure state machine plus time, waiting and
the log.

One module on purpose (about 560 lines): the façade's timers, waiters and log all serve the one
state machine.

`GroupStateMachine` decides; this façade supplies what it deliberately lacks:
- the clock (wall-clock ms, since timestamps are also persisted) and a nursery task that sleeps
  until the machine's next deadline and then calls `expire`;
- waiting: a JoinGroup or SyncGroup that must wait gets a token and a `trio.Event`, set when
  some later outcome completes that token (a connection that goes away just stops waiting);
- durability: the records of every outcome are appended to `__consumer_offsets` (one batch per
  partition, through the replica manager as leader) and replayed into the machine *before* any
  response or completion is released, so an acknowledged commit is in the log even if the
  process is killed right after; `load()` replays the whole topic at start.
- transactions: a TxnOffsetCommit is written as one transactional batch of its producer and
  stays pending until that producer's COMMIT or ABORT marker lands in the same partition; the
  marker writer reports it through `on_txn_marker`, and loading finds it in the log.

A group lives in partition `abs(javaHashCode(group_id)) % partitions` of `__consumer_offsets`,
exactly as in Kafka, so the topic's contents line up with a Kafka cluster's.
"""
from __future__ import annotations

import itertools
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

import trio

from protocol.errors import ErrorCode
from protocol.messages.topics import GROUP_METADATA_TOPIC
from protocol.records.record import ControlType, build_batch, decode_control_record
from protocol.topic_partition import TopicPartition
from pybroker.cluster.metadata import MetadataDelta, MetadataImage, MetadataStore
from pybroker.config import BrokerConfig
from pybroker.runtime.periodic import run_every
from pybroker.coordinator.group_offsets import GroupDescription, GroupListing
from pybroker.coordinator.group_offsets import FetchedOffset
from pybroker.coordinator.group_records import (
    NO_PRODUCER_ID, GroupRecord, LogEntry, OffsetAndMetadata, TxnMarker, decode_record,
    encode_record, record_group,
)
from pybroker.coordinator.internal_topic import APPEND_ERRORS, InternalTopic
from pybroker.coordinator.verification_errors import produce_error
from pybroker.coordinator.consumer_group_assignor import TopicsView
from pybroker.coordinator.consumer_group_coordinator import ConsumerGroupCoordinator, topics_of
from pybroker.coordinator.consumer_group_state import ConsumerGroupConfig
from pybroker.coordinator.group_config_view import GroupConfigView
from pybroker.coordinator.deadline_loop import DeadlineLoop
from pybroker.coordinator.group_state import (
    GroupConfig, GroupStateMachine, JoinRequest, JoinResult, LeaveResult, LeavingMember,
    Outcome, SyncRequest, SyncResult,
)
from pybroker.replica.manager import ReplicaManager
from pybroker.storage.log_manager import LogManager
from pybroker.storage.partition_log import PartitionLog
from pybroker.controller.topic_admin import TopicAdmin

log = logging.getLogger(__name__)

OFFSETS_TOPIC = GROUP_METADATA_TOPIC
T = TypeVar("T")

# How a failed transactional offset commit is reported (Kafka's maybeConvertOffsetCommitError):
# the verification's errors, then the append's. INVALID_PRODUCER_EPOCH (a newer epoch wrote to
# the partition), INVALID_TXN_STATE and TRANSACTION_ABORTABLE go to the client as they are.
_TXN_COMMIT_ERRORS = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.NETWORK_EXCEPTION: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


@dataclass
class _Waiter:
    event: trio.Event = field(default_factory=trio.Event)
    result: Any = None


def _failed(result: JoinResult | SyncResult, error: ErrorCode) -> JoinResult | SyncResult:
    if isinstance(result, JoinResult):
        return JoinResult(error, result.member_id)
    return SyncResult(error)


class GroupCoordinator:
    def __init__(self, config: BrokerConfig, metadata: MetadataStore, logs: LogManager,
                 replicas: ReplicaManager, topics: TopicAdmin,
                 clock: Callable[[], int] | None = None) -> None:
        self.config = config
        self.metadata = metadata
        self.logs = logs
        self.replicas = replicas
        self.topics = topics
        cfg = config
        self.topic = InternalTopic(
            OFFSETS_TOPIC, metadata, topics, replicas,
            partitions=cfg.offsets_topic_num_partitions,
            replication_factor=cfg.offsets_topic_replication_factor,
            replication_factor_set="offsets.topic.replication.factor" in cfg.explicit,
            configs=lambda replicas: {"cleanup.policy": "compact",
                                      "segment.bytes": str(cfg.offsets_topic_segment_bytes)},
            commit_timeout_ms=cfg.offsets_commit_timeout_ms)
        self.state = GroupStateMachine(GroupConfig(
            min_session_timeout_ms=cfg.group_min_session_timeout_ms,
            max_session_timeout_ms=cfg.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=cfg.group_initial_rebalance_delay_ms,
            max_size=cfg.group_max_size,
            offset_metadata_max_bytes=cfg.offset_metadata_max_bytes,
            offsets_retention_ms=cfg.offsets_retention_minutes * 60_000))
        self._clock = clock or (lambda: int(time.time() * 1000))
        self._tokens = itertools.count(1)
        self._waiters: dict[int, _Waiter] = {}
        self.timers = DeadlineLoop("group coordinator", self.now, self.state.next_deadline,
                                   self._expire)
        # The partitions of __consumer_offsets this broker leads, and whose groups it has
        # loaded: it coordinates exactly their groups (Kafka's ownedPartitions).
        self.owned: set[int] = set()
        # Rebalances completed here (a group's generation moved on: Kafka's classic groups'
        # completed-rebalance count), for /metrics. Counted around the machine's operations
        # (`_counting`), so the machine itself keeps no metrics.
        self.rebalances = 0
        # KIP-848 consumer groups, beside the classic ones in the same partitions.
        self.consumer = ConsumerGroupCoordinator(self, ConsumerGroupConfig(
            session_timeout_ms=cfg.group_consumer_session_timeout_ms,
            heartbeat_interval_ms=cfg.group_consumer_heartbeat_interval_ms,
            max_size=cfg.group_consumer_max_size,
            assignors=cfg.group_consumer_assignors,
            migration_policy=cfg.group_consumer_migration_policy.lower(),
            classic_max_size=cfg.group_max_size), GroupConfigView(cfg, metadata))

    def now(self) -> int:
        return self._clock()

    def topics_view(self) -> TopicsView:
        """What the consumer groups' assignors see of the topics now."""
        return topics_of(self.metadata.image)

    # -- the topic -----------------------------------------------------------------------------
    @property
    def num_partitions(self) -> int:
        """Fixed once the topic exists; until then, offsets.topic.num.partitions."""
        return self.topic.num_partitions

    def partition_for(self, group_id: str) -> int:
        return self.topic.partition_for(group_id)

    async def ensure_topic(self) -> ErrorCode:
        """Create __consumer_offsets on first use (see `InternalTopic.ensure` for the
        replication factor)."""
        return await self.topic.ensure()

    async def coordinator_for(self, group_id: str, listener: str | None = None
                              ) -> tuple[ErrorCode, int, str, int]:
        """(error, node id, host, port) of the leader of the group's partition, as reached
        through `listener` (the one the asking client came in on)."""
        return await self.topic.coordinator_for(group_id, listener)

    # -- loading -------------------------------------------------------------------------------
    def load(self) -> int:
        """Replay every partition of __consumer_offsets; the number of records applied.

        Runs once at start, before the broker listens. A record that cannot be decoded is
        logged and skipped: one bad record must not keep every group from loading.
        """
        info = self.metadata.image.topics.get(OFFSETS_TOPIC)
        count = 0
        if info is not None:
            for p in info.partitions:
                if p.leader == self.config.node_id:
                    count += self._adopt(p.partition, self._records_of(p.partition))
                    count += self.consumer.load_partition(p.partition)
        self.state.after_load(self.now())
        if count:
            log.info("loaded %d record(s) of %s: %d group(s)", count, OFFSETS_TOPIC,
                     len(self.state.groups))
        return count

    @staticmethod
    def _read_records(plog: PartitionLog) -> Iterator[LogEntry]:
        """Every group record and transaction marker of the partition, in log order."""
        for header, rec in InternalTopic.read(plog):
            producer = header.producer_id if header.is_transactional else NO_PRODUCER_ID
            try:
                decoded = (GroupCoordinator._marker(rec.key, rec.value)
                           if header.is_control else decode_record(rec.key, rec.value))
            except Exception as exc:  # construct, struct or UTF-8 errors
                log.warning("skipping undecodable %s record at %s-%d@%d: %s",
                            OFFSETS_TOPIC, plog.topic, plog.partition, rec.offset, exc)
                continue
            if decoded is not None:
                yield LogEntry(decoded, header.base_offset, producer)

    @staticmethod
    def _marker(key: bytes | None, value: bytes | None) -> TxnMarker | None:
        control = decode_control_record(key, value)
        if control.type not in (ControlType.COMMIT, ControlType.ABORT):
            return None
        return TxnMarker(control.type == ControlType.COMMIT)

    # -- persisting and answering --------------------------------------------------------------
    async def _append(self, partition: int, batch: bytes) -> tuple[ErrorCode, int]:
        """Append one batch and wait until it is committed (offsets.commit.timeout.ms): the
        replica manager's error, and where the batch starts in the log."""
        return await self.topic.append(partition, batch)

    async def _persist(self, records: list[GroupRecord]) -> ErrorCode:
        """Append each partition's records as one batch, wait until it is committed (the
        high watermark passed it, within offsets.commit.timeout.ms), then replay it as written
        live (offsets take effect; a group snapshot never undoes membership that moved on
        during the wait): nothing is answered or applied before it would survive the
        leader's loss. The first error
        stops it; partitions already committed stay committed (and replayed). A write that
        timed out is still in the log and may be committed later: loading replays it then, as
        Kafka's does (the client was told its fate is unknown, and retries). On one broker the
        append commits at once and this never yields."""
        code = await self.ensure_topic()
        if code:
            return code
        by_partition: dict[int, list[GroupRecord]] = defaultdict(list)
        for record in records:
            by_partition[self.partition_for(record_group(record))].append(record)
        now = self.now()
        for partition, batch_records in sorted(by_partition.items()):
            batch = build_batch([encode_record(r, now) for r in batch_records])
            error, base_offset = await self._append(partition, batch)
            if error:
                return APPEND_ERRORS.get(error, error)
            for record in batch_records:
                self.state.replay(record, base_offset, loading=False)
        return ErrorCode.NONE

    async def _apply(self, outcome: Outcome[Any]) -> ErrorCode:
        """Persist, then release completions (turned into errors if persisting failed)."""
        error = await self._persist(outcome.records) if outcome.records else ErrorCode.NONE
        if error:
            self._deliver([(t, _failed(r, error)) for t, r in outcome.completions])
            follow_up = self.state.persist_failed({record_group(r) for r in outcome.records},
                                                  self.now())
            if follow_up.records and await self._persist(follow_up.records):
                log.error("giving up persisting group state after %s", error.name)
            self._deliver(follow_up.completions)
        else:
            if outcome.records:
                self.state.written({record_group(r) for r in outcome.records}, self.now())
            self._deliver(outcome.completions)
        self._kick_timers()
        return error

    def deliver(self, completions: Sequence[tuple[int, Any]]) -> None:
        """Answer waiting JoinGroup/SyncGroup requests (the consumer façade's conversions)."""
        self._deliver(completions)

    def _deliver(self, completions: Sequence[tuple[int, Any]]) -> None:
        for token, result in completions:
            waiter = self._waiters.get(token)
            if waiter is not None and not waiter.event.is_set():
                waiter.result = result
                waiter.event.set()

    def _generations(self, group_id: str | None) -> int:
        """The generation of one group (None: the sum over every group)."""
        groups = self.state.groups
        if group_id is None:
            return sum(group.generation for group in groups.values())
        group = groups.get(group_id)
        return 0 if group is None else group.generation

    def _counting(self, group_id: str | None, op: Callable[[], Outcome[T]]) -> Outcome[T]:
        """Run one operation of the machine, counting the rebalances it completed: each step
        of a group's generation is one. `group_id` None for operations that may touch any
        group (the timers): their count costs a pass over the groups, which they make too."""
        before = self._generations(group_id)
        outcome = op()
        self.rebalances += max(0, self._generations(group_id) - before)
        return outcome

    async def _wait_for(self, op: Callable[[int], Outcome[T]], group_id: str) -> T:
        token = next(self._tokens)
        waiter = self._waiters[token] = _Waiter()
        try:
            outcome = self._counting(group_id, lambda: op(token))
            error = await self._apply(outcome)
            if outcome.response is not None:
                response: Any = outcome.response
                # T is JoinResult or SyncResult (join and sync are the only callers), which
                # _failed rebuilds with the append's error; a TypeVar cannot say so, hence Any.
                if error:
                    response = _failed(response, error)
                return response
            await waiter.event.wait()
            return waiter.result
        finally:
            self._waiters.pop(token, None)

    # -- the group protocol --------------------------------------------------------------------
    async def join(self, request: JoinRequest) -> JoinResult:
        if request.reason:  # JoinGroup v8+: why the client (re)joins, logged as Kafka does
            log.info("member %s (group instance id %s) joining group %s; client reason: %s",
                     request.member_id or "(new)", request.group_instance_id,
                     request.group_id, request.reason)
        code = await self._membership_status(request.group_id)
        if code:
            return JoinResult(code, request.member_id)
        live = self.consumer.group(request.group_id)
        if live is not None and not live.members:
            # Kafka's maybeDeleteEmptyConsumerGroup: an empty consumer group gives its id to
            # the classic group, its records tombstoned (the offsets stay), so that the id is
            # listed, described and committed to as classic from now on, and after a restart.
            deleted = await self.consumer.delete(request.group_id)
            if deleted:
                return JoinResult(deleted, request.member_id)
            live = self.consumer.group(request.group_id)  # a heartbeat during the append
        if live is not None:
            # A consumer group with members takes the member in as a classic member, under
            # every migration policy (Kafka's classicGroupJoinToConsumerGroup).
            return await self.consumer.classic_join(request)
        return await self._wait_for(lambda token: self.state.join(request, self.now(), token),
                                    request.group_id)

    async def sync(self, request: SyncRequest) -> SyncResult:
        code = await self._membership_status(request.group_id)
        if code:
            return SyncResult(code)
        if self.consumer.group(request.group_id) is not None:
            return self.consumer.classic_sync(request)
        return await self._wait_for(lambda token: self.state.sync(request, self.now(), token),
                                    request.group_id)

    async def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                        generation_id: int) -> ErrorCode:
        code = await self._membership_status(group_id)
        if code:
            return code
        if self.consumer.group(group_id) is not None:
            return self.consumer.classic_heartbeat(group_id, member_id, group_instance_id,
                                                   generation_id)
        outcome = self._counting(group_id, lambda: self.state.heartbeat(
            group_id, member_id, group_instance_id, generation_id, self.now()))
        await self._apply(outcome)
        assert outcome.response is not None
        return outcome.response

    async def leave(self, group_id: str, members: Sequence[LeavingMember]) -> LeaveResult:
        for member in members:  # LeaveGroup v5+ says why each member leaves; Kafka logs it
            if member.reason:
                log.info("member %s (group instance id %s) leaving group %s through explicit "
                         "LeaveGroup; client reason: %s", member.member_id,
                         member.group_instance_id, group_id, member.reason)
        code = await self._membership_status(group_id)
        if code:
            return LeaveResult(code)
        if self.consumer.group(group_id) is not None:
            return await self.consumer.classic_leave(group_id, members)
        outcome = self._counting(group_id, lambda: self.state.leave(group_id, members,
                                                                     self.now()))
        await self._apply(outcome)
        assert outcome.response is not None
        return outcome.response

    # -- offsets and administration ------------------------------------------------------------
    async def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                             generation_id: int,
                             offsets: Mapping[TopicPartition, OffsetAndMetadata]
                             ) -> dict[TopicPartition, ErrorCode]:
        code = await self._coordinates(group_id)
        if code:
            return {tp: code for tp in offsets}
        outcome = self.state.commit_offsets(group_id, member_id, group_instance_id,
                                            generation_id, offsets, self.now())
        error = await self._apply(outcome)
        assert outcome.response is not None
        if error:
            return {tp: code or error for tp, code in outcome.response.items()}
        return outcome.response

    async def commit_txn_offsets(self, transactional_id: str, group_id: str, producer_id: int,
                                 producer_epoch: int, member_id: str,
                                 group_instance_id: str | None, generation_id: int,
                                 offsets: Mapping[TopicPartition, OffsetAndMetadata]
                                 ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: the offsets, as one transactional batch of the producer, in the
        group's partition; pending until the transaction's marker (`on_txn_marker`).

        The partition must be in the producer's ongoing transaction (AddOffsetsToTxn put it
        there; the transaction coordinator verifies it). `transactional_id` is only logged:
        the producer id and epoch are what the log's producer state checks. TRANSACTION_ABORTABLE
        is returned as it is; the handler turns it into INVALID_TXN_STATE for clients that
        predate it (v0-3).
        """
        if not group_id:
            return {tp: ErrorCode.INVALID_GROUP_ID for tp in offsets}
        code = await self._coordinates(group_id)
        if code:
            return {tp: code for tp in offsets}
        partition = self.partition_for(group_id)
        code, _ = produce_error(await self.replicas.verify_transaction(
            transactional_id, producer_id, producer_epoch, (OFFSETS_TOPIC, partition)))
        if code == ErrorCode.INVALID_TXN_STATE:  # the coordinator refused this broker
            code = ErrorCode.TRANSACTION_ABORTABLE
        if code:
            log.debug("TxnOffsetCommit of %s (producer %d) to group %s refused: %s",
                      transactional_id, producer_id, group_id, code.name)
            return {tp: _TXN_COMMIT_ERRORS.get(code, code) for tp in offsets}
        outcome = self.state.commit_txn_offsets(group_id, member_id, group_instance_id,
                                                generation_id, offsets)
        assert outcome.response is not None
        if not outcome.records:
            return outcome.response
        now = self.now()
        batch = build_batch([encode_record(r, now) for r in outcome.records],
                            producer_id=producer_id, producer_epoch=producer_epoch,
                            transactional=True)
        error, base_offset = await self._append(partition, batch)
        if error:
            mapped = _TXN_COMMIT_ERRORS.get(error, error)
            return {tp: code or mapped for tp, code in outcome.response.items()}
        for record in outcome.records:
            self.state.replay(record, base_offset, producer_id, loading=False)
        return outcome.response

    def on_txn_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT or ABORT marker of `producer_id` was just appended to this partition of
        __consumer_offsets (by the marker writer, on this broker as its leader): the
        producer's offsets pending for the partition's groups take effect or go."""
        self.state.complete_txn(producer_id, commit,
                                lambda group_id: self.partition_for(group_id) == partition)

    def fetch_offsets(self, group_id: str, partitions: Sequence[TopicPartition] | None,
                      require_stable: bool = False
                      ) -> tuple[ErrorCode, list[tuple[str, int, FetchedOffset]]]:
        if (code := self._not_serving(group_id)):
            return code, []
        return self.state.fetch_offsets(group_id, partitions, require_stable)

    async def delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]
                             ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        code = await self._coordinates(group_id)
        if code:
            return code, {}
        outcome = self.state.delete_offsets(group_id, partitions)
        error = await self._apply(outcome)
        assert outcome.response is not None
        top, per_partition = outcome.response
        if error:
            return error, {}
        return top, per_partition

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        codes = {g: await self._coordinates(g) for g in group_ids}
        consumer: dict[str, ErrorCode] = {}  # consumer groups: their own answer first
        for g in group_ids:
            if not codes[g] and (code := await self.consumer.delete(g)) is not None:
                consumer[g] = code
                codes[g] = code if code else codes[g]
        outcome = self.state.delete_groups([g for g in group_ids if not codes[g]])
        error = await self._apply(outcome)
        assert outcome.response is not None
        answers = {g: code or error for g, code in outcome.response.items()} if error \
            else outcome.response
        for g, code in consumer.items():  # deleted, with or without offsets to delete
            if not code and answers.get(g) == ErrorCode.GROUP_ID_NOT_FOUND:
                answers[g] = ErrorCode.NONE
        return {g: codes[g] or answers[g] for g in group_ids}

    def describe_group(self, group_id: str) -> GroupDescription:
        if (code := self._not_serving(group_id)):
            return GroupDescription(group_id, code, "", "", "")
        if self.consumer.group(group_id) is not None:
            # Kafka up to DescribeGroups v5: a consumer group is no classic group, Dead
            # (v6 would say GROUP_ID_NOT_FOUND, "is not a classic group")
            return GroupDescription(group_id, ErrorCode.NONE, "Dead", "", "")
        return self.state.describe_group(group_id)

    def list_groups(self, states: Sequence[str] = (),
                    types: Sequence[str] = ()) -> list[GroupListing]:
        """Classic groups, then consumer groups (whose offsets the classic machine keeps
        under a member-less group of the same id, not listed as classic)."""
        consumer = self.consumer.machine.groups
        return [g for g in self.state.list_groups(states, types)
                if g.group_id not in consumer] + self.consumer.listings(states, types)

    async def apply_delta(self, image: MetadataImage, delta: MetadataDelta) -> None:
        """A metadata store listener: the coordinator follows the leadership of
        __consumer_offsets partitions (loads a partition's groups when this broker becomes
        its leader, Kafka's onElection; forgets them when another does, onResignation), and
        a deleted topic's committed offsets go with it."""
        for index in sorted(delta.changed_partitions.get(OFFSETS_TOPIC, ())):
            state = image.topics[OFFSETS_TOPIC].partitions[index]
            if state.leader == self.config.node_id and index not in self.owned:
                await self._load_partition(index)
            elif state.leader != self.config.node_id and index in self.owned:
                self.owned.discard(index)
                self._deliver(self.state.unload(self._owns).completions)
                self.consumer.unload()
                log.info("resigned as coordinator of %s-%d", OFFSETS_TOPIC, index)
        for topic in delta.deleted_topics:
            await self.on_topic_deleted(topic)

    async def _load_partition(self, index: int) -> None:
        """onElection: the partition's records read off the loop, replayed on it."""
        records = await trio.to_thread.run_sync(lambda: list(self._records_of(index)))
        consumer_records = await trio.to_thread.run_sync(self.consumer.read_partition, index)
        self._adopt(index, records)
        self.consumer.adopt(consumer_records)
        self.state.after_load(self.now())

    def _records_of(self, index: int) -> Iterable[LogEntry]:
        plog = self.logs.get(OFFSETS_TOPIC, index)
        return () if plog is None else self._read_records(plog)

    def _adopt(self, index: int, entries: Iterable[LogEntry]) -> int:
        """Replay a led partition's records and own it; the number of records applied.

        A transaction marker completes what its producer left pending in this partition;
        offsets of a transaction with no marker yet stay pending (it is still open: its
        marker will come through `on_txn_marker`)."""
        count = 0
        for entry in entries:
            if isinstance(entry.record, TxnMarker):
                self.state.complete_txn(entry.producer_id, entry.record.commit,
                                        lambda group_id: self.partition_for(group_id) == index)
            else:
                self.state.replay(entry.record, entry.log_offset, entry.producer_id)
            count += 1
        self.owned.add(index)
        return count

    def _owns(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned

    owns = _owns

    def _availability(self, group_id: str) -> ErrorCode:
        """NONE if this broker serves the group now. COORDINATOR_LOAD_IN_PROGRESS while its
        partition is this broker's but not loaded yet: the image names this broker leader
        (FindCoordinator already answers with it) before the delta's load has replayed the
        partition; and on a cluster another broker may name this one leader of a new
        partition a moment before this one's image has it, or has its leader. All pass; the
        client retries here, as Kafka's clients do on a loading coordinator.
        NOT_COORDINATOR when another broker leads it: the client looks for the coordinator
        again."""
        partition = self.partition_for(group_id)
        if partition in self.owned:
            return ErrorCode.NONE
        state = self.metadata.image.partition(OFFSETS_TOPIC, partition)
        if state is None or state.leader in (self.config.node_id, -1):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def _not_serving(self, group_id: str) -> ErrorCode:
        """For reads, which create nothing: before __consumer_offsets exists there is nothing
        to read (NONE, an empty answer); after, `_availability`."""
        if OFFSETS_TOPIC not in self.metadata.image.topics:
            return ErrorCode.NONE
        return self._availability(group_id)

    async def _coordinates(self, group_id: str) -> ErrorCode:
        """NONE if this broker coordinates the group, else why not (`_availability`). Before
        __consumer_offsets exists it is created, as FindCoordinator would, so a client that
        skips FindCoordinator on one broker is served."""
        if OFFSETS_TOPIC not in self.metadata.image.topics:
            code = await self.ensure_topic()
            if code:
                return code
        return self._availability(group_id)

    async def _membership_status(self, group_id: str) -> ErrorCode:
        """For JoinGroup, SyncGroup, Heartbeat and LeaveGroup: an empty group id is
        INVALID_GROUP_ID before whether this broker coordinates it, as Kafka checks the id
        first (GroupCoordinator.validateGroupStatus; 4.1's GroupCoordinatorService), so that
        every broker of a cluster gives the same answer (a node's too)."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        return await self._coordinates(group_id)

    async def coordinates(self, group_id: str) -> ErrorCode:
        """NONE if this broker coordinates the group (creating __consumer_offsets first, as
        FindCoordinator would), else why not: for the consumer groups' façade and the
        share-group coordinator, which live beside this one and coordinate the same ids."""
        return await self._coordinates(group_id)

    def has_group(self, group_id: str) -> bool:
        """Whether a classic group of that id exists (share groups may not take its id)."""
        return group_id in self.state.groups

    async def on_topic_deleted(self, topic: str) -> None:
        """Committed offsets of a deleted topic go with it (Kafka's onPartitionsDeleted)."""
        await self._apply(self.state.topics_deleted([topic]))

    # -- background work -----------------------------------------------------------------------
    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """The timers (sessions, rebalance and sync deadlines), offset retention, and the
        creation of __consumer_offsets a FindCoordinator asked for."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.topic.run)
            nursery.start_soon(self.timers.run)
            nursery.start_soon(self._run_cleanup)
            nursery.start_soon(self.consumer.timers.run)
            task_status.started()

    def _kick_timers(self) -> None:
        self.timers.kick()

    kick_timers = _kick_timers

    async def _expire(self, now: int) -> None:
        await self._apply(self._counting(None, lambda: self.state.expire(now)))

    async def time_advanced(self) -> None:
        """The clock jumped forward (a test's advance_time): run the timers now due, then wake
        the timer loops, whose sleeps were measured on the clock as it was."""
        await self._expire(self.now())
        await self.consumer.expire(self.now())
        self.timers.wake()
        self.consumer.timers.wake()

    async def _run_cleanup(self) -> None:
        await run_every(self.config.offsets_retention_check_interval_ms, self.cleanup,
                        "offset retention")

    async def cleanup(self) -> None:
        """Expire offsets and empty groups, and drop offsets of topics that are gone."""
        topics = self.metadata.image.topics
        await self._apply(self.state.cleanup(self.now(), lambda t: t in topics))
