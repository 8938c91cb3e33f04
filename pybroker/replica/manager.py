"""Appending to and reading from the partitions this broker hosts (Kafka's ReplicaManager).

Handlers translate requests; this module holds the rules shared by Produce, Fetch, ListOffsets
and the internal topics: who may write where, what a batch must look like, what a reader may
see (up to the high watermark for consumers, the last stable offset under read_committed, the
log end for replicas). Records stay raw bytes: only the 61-byte batch headers are read.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, NoReturn

import trio

from protocol.errors import ErrorCode
from protocol.messages.fetch import READ_COMMITTED
from protocol.messages.list_offsets import (
    EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP, LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)
from protocol.primitives import FileRegion
from protocol.records.types import RecordError
from protocol.topic_partition import TopicPartition
from pybroker.cluster.metadata import MetadataStore, MetadataDelta, MetadataImage, \
    PartitionState, TopicInfo
from pybroker.cluster.topic_configs import TopicConfigs
from pybroker.replica.purgatory import Purgatory, Watch
from pybroker.replica.partition import Partition
from pybroker.replica.replica_selector import ClientMetadata, ReplicaSelector, \
    preferred_read_replica
from pybroker.storage.log_manager import LogManager, remove_dirs
from pybroker.storage.partition_log import OffsetOutOfRange, PartitionLog
from pybroker.storage.producer_state import InvalidProducerEpoch, OutOfOrderSequence
from pybroker.storage.validator import Rejected, error_code, validate_records

if TYPE_CHECKING:  # a cluster member's only (broker.py): not imported by a single broker
    from pybroker.replica.fetcher import ReplicaFetchers


log = logging.getLogger(__name__)
# From this many new logs in one change, their files are made durable by one syncfs per log
# dir instead of a fsync each.
SYNCFS_MIN_NEW_LOGS = 64



@dataclass
class AppendResult:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    # The offset after the batch: what the high watermark must reach for acks=all.
    end_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_errors: list[tuple[int, str]] = field(default_factory=list)  # (batch index, why)


@dataclass
class ReadResult:
    error: ErrorCode
    records: bytes | FileRegion = b""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    # For a follower whose log has diverged from the leader's: (epoch, end offset) to
    # truncate to (Fetch v12's DivergingEpoch); None otherwise.
    diverging_epoch: tuple[int, int] | None = None
    # Under read_committed: (producer id, first offset) of each aborted transaction the
    # records overlap, for the consumer to drop; None under read_uncommitted (Kafka sends
    # null there, and a client given a list would drop records it must show).
    aborted_transactions: list[tuple[int, int]] | None = None
    # The follower a consumer should fetch this partition from instead (KIP-392); -1: here.
    preferred_read_replica: int = -1


class ReplicaManager:
    def __init__(self, node_id: int, metadata: MetadataStore, logs: LogManager,
                 topic_configs: TopicConfigs, purgatory: Purgatory,
                 replica_selector: ReplicaSelector | None = None) -> None:
        self.node_id = node_id
        self.metadata = metadata
        self.logs = logs
        self.topic_configs = topic_configs
        self.purgatory = purgatory
        # replica.selector.class: None sends every consumer to the leader (Kafka's default).
        self.replica_selector = replica_selector
        # The racks of the brokers reachable on a listener, for the selector: (image,
        # listener, racks), rebuilt when either changes.
        self._racks: tuple[MetadataImage, str | None, Mapping[int, str | None]] | None = None
        self._partitions: dict[TopicPartition, Partition] = {}
        # In a cluster: the fetchers that copy the partitions this broker follows, and the
        # led partitions whose ISR may need to grow (a follower caught up).
        self.fetchers: ReplicaFetchers | None = None
        self._isr_candidates: set[TopicPartition] = set()
        self._isr_wakeup = trio.Event()
        # ISR changes this broker made as leader (Kafka's IsrShrinksPerSec and
        # IsrExpandsPerSec), for /metrics; one change that drops one replica and adds another
        # counts once each.
        self.isr_shrinks = 0
        self.isr_expands = 0
        # Set by the broker once its transaction coordinator exists: which of the partitions
        # are not in the ongoing transaction of (transactional id, producer id, epoch), and
        # why (Kafka's KIP-890 verification, `coordinator/txn_verifier.py`: asking the
        # coordinator in process or on another broker).
        self.txn_verifier: Callable[[str, int, int, list[TopicPartition]],
                                    Awaitable[dict[TopicPartition, ErrorCode]]] | None = None

    async def verify_transaction(self, transactional_id: str, producer_id: int,
                                 producer_epoch: int, tp: TopicPartition) -> ErrorCode:
        """NONE if `tp` belongs to the producer's ongoing transaction, else why not
        (INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH, NOT_ENOUGH_REPLICAS while the coordinator
        cannot answer); NONE when no verifier is set."""
        verifier = self.txn_verifier
        if verifier is None:
            return ErrorCode.NONE
        return (await verifier(transactional_id, producer_id, producer_epoch, [tp])).get(
            tp, ErrorCode.NONE)

    def in_ongoing_transaction(self, tp: TopicPartition, producer_id: int,
                               producer_epoch: int) -> bool:
        """Whether the producer's transaction at this epoch is open in `tp`, led here: its
        first batch there was verified, and the marker that ends it has not been written
        (Kafka's hasOngoingTransaction, which spares a produce the coordinator's round
        trip)."""
        part = self._partitions.get(tp)
        if part is None or not part.is_leader:
            return False
        entry = part.log.producer_state.producers.get(producer_id)
        return entry is not None and entry.producer_epoch == producer_epoch \
            and entry.current_txn_first_offset >= 0

    def verification_guard(self, tp: TopicPartition) -> tuple[int, int] | None:
        """What must not change while a transactional batch for `tp` waits on its
        coordinator's answer (Kafka's VerificationGuard): the partition's producer state and
        the markers written to it. None where this broker does not lead `tp`."""
        part = self._partitions.get(tp)
        if part is None or not part.is_leader:
            return None
        state = part.log.producer_state
        return id(state), state.markers_written

    # -- the partitions this broker hosts ------------------------------------------------------
    def leader_partition(self, topic: str, partition: int, current_leader_epoch: int = -1
                         ) -> tuple[ErrorCode, Partition | None]:
        """The partition, if this broker leads it at the epoch the client names, or why not
        (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
        UNKNOWN_LEADER_EPOCH): the check every request addressed to a leader starts with.

        The partition follows the metadata image: a leadership the image gives this broker
        is taken up here (make_leader) when the log exists, a log replaced by a new topic of
        the same name gets a new partition.
        """
        state = self.metadata.image.partition(topic, partition)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        if state.leader != self.node_id or not self.metadata.session_valid:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        part = self._partitions.get((topic, partition))
        if part is None or part.leader_epoch != state.leader_epoch or not part.is_leader:
            part = self._become_leader(topic, partition, state)
            if part is None:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        code = part.check_leader_epoch(current_leader_epoch)
        if code != ErrorCode.NONE:
            return code, None
        return ErrorCode.NONE, part

    def _become_leader(self, topic: str, partition: int, state: PartitionState,
                       announce: bool = True) -> Partition | None:
        plog = self.logs.get(topic, partition)
        if plog is None:  # not created yet (in a worker thread): clients retry
            return None
        part = self._partitions.get((topic, partition))
        if part is None or part.log is not plog:
            part = Partition(topic, partition, plog, self.node_id)
            self._partitions[(topic, partition)] = part
        if part.make_leader(state.leader_epoch, state.replicas, state.isr,
                            now_ms=int(time.time() * 1000)):
            if self.fetchers is not None:
                self.fetchers.unfollow((topic, partition))
            if announce:
                log.info("broker %d leads %s-%d at epoch %d (ISR %s)", self.node_id, topic,
                         partition, state.leader_epoch, list(state.isr))
        return part

    def _is_internal(self, topic: str) -> bool:
        info = self.metadata.image.topics.get(topic)
        return bool(info and info.internal)

    # -- following the metadata store (Kafka's applyDelta) ---------------------------------------
    def _create_logs(self, info: TopicInfo, partitions: Iterable[int], *,
                     sync_once: bool = False) -> None:
        """This broker's logs of `partitions` of the topic, created where missing. Thread-safe
        (the log manager locks), so a new topic's logs are made in a worker thread: a
        directory and three files each, ~0.65 ms a partition, which for 1,000 partitions
        stalled every client for as long. With `sync_once` (in a worker thread) their files
        are made durable by one sync of each log dir rather than a fsync each."""
        config = self.topic_configs.log_config(info.name)
        for index in partitions:
            p = info.partitions[index]
            if self.node_id in p.replicas:
                self.logs.get_or_create(
                    info.name, index, config,
                    leader_epoch=p.leader_epoch if p.leader == self.node_id else None,
                    sync=not sync_once)
        if sync_once:
            self.logs.sync()

    def _take_up(self, info: TopicInfo, partitions: Iterable[int],
                 announce: bool = True) -> None:
        """`announce`: log each leadership taken (without, the caller sums them up)."""
        for index in partitions:
            state = info.partitions[index]
            tp = (info.name, index)
            if state.leader == self.node_id:
                was_leading = tp in self._partitions and self._partitions[tp].is_leader
                self._become_leader(info.name, index, state, announce)
                if not was_leading:
                    self.purgatory.notify_all(tp)
                continue
            part = self._partitions.get(tp)
            if part is None and self.node_id in state.replicas:
                plog = self.logs.get(info.name, index)
                if plog is not None:
                    part = self._partitions[tp] = Partition(info.name, index, plog,
                                                            self.node_id)
            if part is None:
                continue
            if part.make_follower(state.leader, state.leader_epoch, state.replicas):
                # Waiting acks=all produces and fetches learn they are not at the leader.
                self.purgatory.notify_all(tp)
            if self.fetchers is not None:
                if state.leader >= 0 and self.node_id in state.replicas:
                    self.fetchers.follow(tp, state.leader, state.leader_epoch)
                else:
                    self.fetchers.unfollow(tp)

    def load_image(self, image: MetadataImage) -> None:
        """At start (blocking, before the broker listens): every hosted partition's log,
        created where missing, and its leadership taken up, so that a leader's high watermark
        covers its whole log before anyone reads (Kafka's makeLeader). Without this the high
        watermark read back from a stale checkpoint after an unclean shutdown would hide
        acknowledged records until the next write."""
        for info in image.topics.values():
            indexes = range(len(info.partitions))
            self._create_logs(info, indexes)
            # One line a topic, not one a partition: 10,000 lines to stderr were a tenth of
            # a start with 10,000 partitions on disk (issue #15 §3).
            self._take_up(info, indexes, announce=False)
            led = [p for p in indexes if info.partitions[p].leader == self.node_id]
            if led:
                log.info("broker %d leads %d of the %d partitions of %s", self.node_id,
                         len(led), len(info.partitions), info.name)

    async def apply_delta(self, image: MetadataImage, delta: MetadataDelta) -> None:
        """A store listener: this broker's logs and leaderships follow each change. Until a
        new partition's log exists it answers NOT_LEADER_OR_FOLLOWER, which clients retry, as
        in Kafka while a new leader creates its log."""
        for name, old in delta.deleted_topics.items():
            detached = []
            for p in old.partitions:
                path = self.logs.detach(name, p.partition)
                if path is not None:
                    detached.append(path)
                self.forget(name, p.partition)
                self.purgatory.notify_all((name, p.partition))
            if detached:  # removing a gigabyte of segments took ~240 ms: not on the loop
                await trio.to_thread.run_sync(remove_dirs, detached)
        for name, indexes in delta.changed_partitions.items():
            info = image.topics[name]
            # Replicas moved off this broker (a reassignment done): Kafka's StopReplica with
            # delete — stop following and remove the log.
            detached = []
            for i in sorted(indexes):
                if (self.node_id in info.partitions[i].replicas
                        or self.logs.get(name, i) is None):
                    continue
                log.info("replica %s-%d moved off broker %d: removing its log", name, i,
                         self.node_id)
                self.forget(name, i)
                self.purgatory.notify_all((name, i))
                path = self.logs.detach(name, i)
                if path is not None:
                    detached.append(path)
            if detached:
                await trio.to_thread.run_sync(remove_dirs, detached)
            # Many new logs: one syncfs of each log dir beats a fsync per file (10,000 took
            # 10 s); a few: their own fsyncs, since syncfs also waits for every other dirty
            # page of the filesystem (a 1-partition topic after a large write waited seconds).
            await trio.to_thread.run_sync(partial(
                self._create_logs, info, sorted(indexes),
                sync_once=len(indexes) >= SYNCFS_MIN_NEW_LOGS))
            self._take_up(info, indexes)
        for name in delta.changed_configs:
            config = self.topic_configs.log_config(name)
            for p in image.topics[name].partitions:
                plog = self.logs.get(name, p.partition)
                if plog is not None:
                    plog.config = config

    def forget(self, topic: str, partition: int) -> None:
        """The partition's log is gone (topic deleted)."""
        self._partitions.pop((topic, partition), None)
        if self.fetchers is not None:
            self.fetchers.unfollow((topic, partition))

    def hosted(self) -> list[Partition]:
        """Every partition this broker holds a replica of, leader or follower (/metrics)."""
        return list(self._partitions.values())

    def hosted_partition(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def leader_log(self, topic: str, partition: int, current_leader_epoch: int = -1
                   ) -> tuple[ErrorCode, PartitionLog | None]:
        """The log of a partition this broker leads, or why not (see `leader_partition`)."""
        code, part = self.leader_partition(topic, partition, current_leader_epoch)
        return code, None if part is None else part.log

    def append(self, topic: str, partition: int, records: bytes | None, *,
               produce_version: int = 11, internal: bool = False,
               acks: int = 1) -> AppendResult:
        """Validate and append one partition's records as the leader."""
        code, part = self.leader_partition(topic, partition)
        if part is None:
            return AppendResult(code)
        plog = part.log
        if acks == -1:  # as Kafka: with too small an ISR nothing is written
            code, message = part.check_min_isr(
                self.topic_configs.topic_config(topic).min_insync_replicas)
            if code != ErrorCode.NONE:
                return AppendResult(code, message=message)
        if not internal and topic.startswith("__") and self._is_internal(topic):
            return AppendResult(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                message=f"Cannot append to internal topic {topic}")
        tconfig = self.topic_configs.topic_config(topic)
        now = int(time.time() * 1000)
        try:
            valid = validate_records(records, tconfig, produce_version=produce_version,
                                     internal=internal, now_ms=now,
                                     topic_partition=(topic, partition))
        except Rejected as rejected:
            # As Kafka: a rejection naming its records (a timestamp out of range) reports
            # the log start offset; the others (CRC, size, no records) -1.
            return AppendResult(rejected.code, message=rejected.message,
                                log_start_offset=plog.log_start_offset
                                if rejected.record_errors else -1,
                                record_errors=rejected.record_errors)
        append_time = now if tconfig.log_append_time else None
        try:
            info = plog.append(valid.records, leader_epoch=part.leader_epoch,
                               log_append_time=append_time, batches=valid.batches)
        except RecordError as exc:
            return AppendResult(error_code(exc), message=str(exc))
        except (OutOfOrderSequence, InvalidProducerEpoch) as exc:
            # Kafka reports the log start offset with the producer-state errors.
            return AppendResult(error_code(exc), log_start_offset=plog.log_start_offset,
                                message=str(exc))
        except OSError as exc:
            self.log_dir_failed(plog, exc)
        purgatory = self.purgatory
        purgatory.notify((topic, partition), Watch.LOG_END)
        # With the leader the only in-sync replica (one broker), the append commits at once.
        if part.maybe_increment_high_watermark():
            purgatory.notify((topic, partition), Watch.HIGH_WATERMARK)
        return AppendResult(ErrorCode.NONE, info.first_offset, info.last_offset + 1,
                            append_time if append_time is not None else -1,
                            plog.log_start_offset)

    def write_txn_marker(self, topic: str, partition: int, producer_id: int,
                         producer_epoch: int, coordinator_epoch: int,
                         commit: bool) -> AppendResult:
        """Append a transaction's COMMIT or ABORT marker as the partition's leader (the
        WriteTxnMarkers path); the caller waits for it to be replicated like an acks=all
        produce. INVALID_PRODUCER_EPOCH for a marker older than the producer's epoch here,
        TRANSACTION_COORDINATOR_FENCED for one from an older coordinator."""
        code, part = self.leader_partition(topic, partition)
        if part is None:
            return AppendResult(code)
        # As Kafka's marker append (acks=all): not with too small an ISR; the writer retries.
        code, message = part.check_min_isr(
            self.topic_configs.topic_config(topic).min_insync_replicas)
        if code != ErrorCode.NONE:
            return AppendResult(code, message=message)
        plog = part.log
        try:
            info = plog.append_control_marker(producer_id, producer_epoch, coordinator_epoch,
                                              commit, leader_epoch=part.leader_epoch)
        except OSError as exc:
            self.log_dir_failed(plog, exc)
        except Exception as exc:
            code = error_code(exc)
            if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("marker for %s-%d failed", topic, partition)
            return AppendResult(code, message=str(exc))
        purgatory = self.purgatory
        purgatory.notify((topic, partition), Watch.LOG_END)
        if part.maybe_increment_high_watermark():
            purgatory.notify((topic, partition), Watch.HIGH_WATERMARK)
        return AppendResult(ErrorCode.NONE, info.first_offset, info.last_offset + 1, -1,
                            plog.log_start_offset)

    async def wait_for_commit(self, appended: list[tuple[TopicPartition, AppendResult]],
                              timeout_ms: int) -> None:
        """acks=all: wait until the high watermark passes each successful append, for at most
        `timeout_ms` (Kafka's DelayedProduce). Each result's error becomes what the wait
        decided: NONE, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND (the ISR shrank
        below min.insync.replicas), NOT_LEADER_OR_FOLLOWER (leadership moved). Returns at
        once, without yielding, when every batch is already committed (one broker)."""
        pending = [(tp, r) for tp, r in appended if r.error == ErrorCode.NONE]
        deadline = None
        while True:
            waiting = []
            for tp, result in pending:
                part = self._partitions.get(tp)
                if part is None:
                    done, code = True, ErrorCode.NOT_LEADER_OR_FOLLOWER
                else:
                    done, code = part.check_enough_replicas_reach_offset(
                        result.end_offset, self.topic_configs.topic_config(tp[0]).min_insync_replicas)
                if done:
                    result.error = code
                else:
                    waiting.append((tp, result))
            pending = waiting
            if not pending:
                return
            now = trio.current_time()
            if deadline is None:
                deadline = now + max(0, timeout_ms) / 1000
            if now >= deadline or not await self.purgatory.wait_any(
                    [tp for tp, _ in pending], deadline - now, Watch.HIGH_WATERMARK,
                    "Produce"):
                break
        for _, result in pending:
            result.error = ErrorCode.REQUEST_TIMED_OUT

    def read(self, topic: str, partition: int, offset: int, max_bytes: int, *,
             replica_id: int = -1, isolation_level: int = 0,
             min_one_message: bool = True, region_min_batch: int = 0,
             current_leader_epoch: int = -1, last_fetched_epoch: int = -1,
             replica_log_start_offset: int = -1,
             client_metadata: ClientMetadata | None = None) -> ReadResult:
        """`region_min_batch`: see `PartitionLog.read` (records as a FileRegion for sendfile
        when they start with a batch at least that large). A follower's read (`replica_id`
        >= 0) up to the log end also says it has everything below `offset`, which may commit
        data: waiting consumers and acks=all produces are woken then.

        `client_metadata` (a consumer's Fetch v11+, KIP-392): the leader may answer with a
        preferred read replica and no records, and a follower serves the consumer up to the
        high watermark it knows; without it a consumer reads from the leader only."""
        if replica_id >= 0:
            client_metadata = None
        code, part = self.leader_partition(topic, partition, current_leader_epoch)
        if part is None:
            if client_metadata is None or code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                return ReadResult(code)
            code, part = self._follower_for_consumer(topic, partition, current_leader_epoch)
            if part is None:
                return ReadResult(code)
        elif (client_metadata is not None and self.replica_selector is not None
              and part.followers):  # alone, the leader is the only choice
            preferred = preferred_read_replica(
                self.replica_selector, part, client_metadata, offset,
                int(time.time() * 1000), self._reachable_racks(client_metadata.listener))
            if preferred >= 0:  # as Kafka: the leader's offsets, no records, no read
                plog = part.log
                return ReadResult(ErrorCode.NONE, b"", plog.high_watermark,
                                  plog.last_stable_offset, plog.log_start_offset,
                                  preferred_read_replica=preferred)
        plog = part.log
        if last_fetched_epoch >= 0:
            # As Kafka's Partition.readRecords: the fetcher's last epoch must end, in this
            # log, at or after where it fetches from; else it truncates first.
            epoch, end = plog.end_offset_for_epoch(last_fetched_epoch)
            if epoch < 0:  # older than any epoch here: the fetcher starts over
                return ReadResult(ErrorCode.OFFSET_OUT_OF_RANGE, b"", plog.high_watermark,
                                  plog.last_stable_offset, plog.log_start_offset)
            if epoch < last_fetched_epoch or end < offset:
                return ReadResult(ErrorCode.NONE, b"", plog.high_watermark,
                                  plog.last_stable_offset, plog.log_start_offset,
                                  diverging_epoch=(epoch, end))
        if replica_id >= 0:
            if part.update_follower_fetch(replica_id, offset, int(time.time() * 1000),
                                          replica_log_start_offset):
                self.purgatory.notify((topic, partition), Watch.HIGH_WATERMARK)
            if replica_id not in part.isr and part.can_join_isr(replica_id):
                self._isr_candidates.add((topic, partition))
                self._isr_wakeup.set()
            upper = plog.log_end_offset
        elif isolation_level == READ_COMMITTED:
            upper = plog.last_stable_offset
        else:
            upper = plog.high_watermark
        try:
            data = plog.read(offset, max_bytes, max_offset=upper,
                             min_one_message=min_one_message,
                             region_min_batch=region_min_batch)
        except OffsetOutOfRange:
            return ReadResult(ErrorCode.OFFSET_OUT_OF_RANGE, b"", plog.high_watermark,
                              plog.last_stable_offset, plog.log_start_offset)
        aborted = None
        if isolation_level == READ_COMMITTED and replica_id < 0:
            aborted = plog.aborted_transactions(offset, data.next_offset) \
                if data.records else []
        return ReadResult(ErrorCode.NONE, data.records, plog.high_watermark,
                          plog.last_stable_offset, plog.log_start_offset,
                          aborted_transactions=aborted)

    def _follower_for_consumer(self, topic: str, partition: int, current_leader_epoch: int
                               ) -> tuple[ErrorCode, Partition | None]:
        """A partition this broker follows, for a consumer allowed to read from followers
        (Kafka's getLocalLog without requireLeader): fenced by leader epoch as at the leader,
        NOT_LEADER_OR_FOLLOWER where this broker holds no replica (or, its ZooKeeper session
        lost, knows nothing current)."""
        state = self.metadata.image.partition(topic, partition)
        part = self._partitions.get((topic, partition))
        if (state is None or part is None or part.is_leader or part.log.closed
                or self.node_id not in state.replicas or not self.metadata.session_valid):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        code = part.check_leader_epoch(current_leader_epoch)
        if code != ErrorCode.NONE:
            return code, None
        return ErrorCode.NONE, part

    def _reachable_racks(self, listener: str | None) -> Mapping[int, str | None]:
        """The rack of each live broker a client on `listener` can reach (Kafka's
        getPartitionReplicaEndpoints): a broker gone from the image, or without that
        listener, is never a preferred read replica."""
        image = self.metadata.image
        cached = self._racks
        if cached is None or cached[0] is not image or cached[1] != listener:
            racks = {b.node_id: b.rack for b in image.brokers.values()
                     if b.endpoint(listener) is not None}
            self._racks = cached = (image, listener, racks)
        return cached[2]

    def list_offset(self, topic: str, partition: int, timestamp: int,
                    isolation_level: int, current_leader_epoch: int = -1
                    ) -> tuple[ErrorCode, int, int, int]:
        """(error, offset, timestamp, leader epoch) as ListOffsets reports them."""
        code, part = self.leader_partition(topic, partition, current_leader_epoch)
        if part is None:
            return code, -1, -1, -1
        plog, epoch = part.log, part.leader_epoch
        if plog.high_watermark < part.epoch_start_offset:
            # A new leader whose high watermark has not yet reached where its epoch began
            # (followers not caught up): it cannot say what is committed (Kafka's rule).
            return ErrorCode.OFFSET_NOT_AVAILABLE, -1, -1, -1
        # No tiered storage: the local log start is the log start, and nothing is tiered.
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return ErrorCode.NONE, plog.log_start_offset, -1, epoch
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return ErrorCode.NONE, -1, -1, -1
        if timestamp == LATEST_TIMESTAMP:
            upper = (plog.last_stable_offset if isolation_level == READ_COMMITTED
                     else plog.high_watermark)
            return ErrorCode.NONE, upper, -1, epoch
        if timestamp == MAX_TIMESTAMP:
            found = plog.offset_of_max_timestamp()
        elif timestamp < 0:
            return ErrorCode.INVALID_REQUEST, -1, -1, -1
        else:
            found = plog.offset_for_timestamp(timestamp)
        if found is None:
            return ErrorCode.NONE, -1, -1, -1
        offset, ts = found
        return ErrorCode.NONE, offset, ts, epoch

    # -- following (a cluster) -------------------------------------------------------------------
    def fetch_position(self, tp: TopicPartition) -> tuple[int, int, int] | None:
        """Where the fetcher of a followed partition fetches from: (the log end, the epoch of
        the last batch, the log start); None while the log does not exist."""
        part = self._partitions.get(tp)
        if part is None or part.is_leader or part.log.closed:
            return None
        plog = part.log
        return plog.log_end_offset, plog.latest_epoch, plog.log_start_offset

    def apply_fetched(self, tp: TopicPartition, leader_epoch: int, data: Any) -> ErrorCode:
        """One partition of a fetch response from the leader at `leader_epoch`: truncate where
        the logs diverge, append the batches unchanged, and move the follower's high
        watermark to min(the leader's, this log's end). Returns the error the fetcher backs
        off on (NONE when it can fetch again at once)."""
        part = self._partitions.get(tp)
        if part is None or part.is_leader or part.leader_epoch != leader_epoch:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        plog = part.log
        code = ErrorCode(data.error_code)
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            return self._out_of_range(part, data)
        if code != ErrorCode.NONE:
            return code
        diverging = data.get("diverging_epoch")
        if diverging is not None and diverging.end_offset >= 0:
            self._truncate_diverging(part, diverging.epoch, diverging.end_offset)
            return ErrorCode.NONE
        records = data.records
        if records:
            try:
                plog.append_as_follower(records)
            except OSError as exc:
                self.log_dir_failed(plog, exc)
            except Exception as exc:  # a torn or unexpected batch: fetch it again
                log.warning("replica %s-%d: cannot append fetched batches: %s", tp[0], tp[1],
                            exc)
                return ErrorCode.CORRUPT_MESSAGE
        if part.follow_leader_high_watermark(data.high_watermark):
            self.purgatory.notify(tp, Watch.HIGH_WATERMARK)  # consumers reading here
        return ErrorCode.NONE

    def log_dir_failed(self, plog: PartitionLog, exc: OSError) -> NoReturn:
        """A write to a log failed (disk full, the dir gone or read-only): its log dir can
        no longer be trusted. Kafka takes the dir offline and halts a broker whose dirs have
        all failed; pybroker, which cannot serve a partition elsewhere on the same broker,
        halts at once, as a kill -9 would: what was written stays in the page cache, the
        next start recovers it, and the other replicas go on without this broker (it leaves
        their ISRs)."""
        log.critical("log dir of %s failed: %s; stopping this broker (as Kafka halts a broker "
                     "whose log dirs have failed)", plog.dir, exc)
        logging.shutdown()
        os._exit(1)

    def _truncate_diverging(self, part: Partition, epoch: int, end_offset: int) -> None:
        """Kafka's getOffsetTruncationState: truncate to the leader's end of `epoch`, or, if
        this log's history of that epoch is shorter or differs, to where ours ends (the next
        fetch asks again with the earlier epoch)."""
        plog = part.log
        ours_epoch, ours_end = plog.end_offset_for_epoch(epoch)
        if ours_epoch == epoch:
            target = min(end_offset, ours_end, plog.log_end_offset)
        elif ours_epoch >= 0:
            target = min(ours_end, plog.log_end_offset)
        else:
            target = min(end_offset, plog.log_end_offset)
        if plog.truncate_to(target):
            log.info("replica %s-%d truncated to %d (leader epoch %d ends at %d there)",
                     part.topic, part.partition, target, epoch, end_offset)
        # An epoch entry with no batches (left from leading) must go too, or the next
        # fetch names it again.
        plog.leader_epoch_cache.truncate_from_end(plog.log_end_offset)

    def _out_of_range(self, part: Partition, data: Any) -> ErrorCode:
        """The leader has nothing this log can continue from (it starts after our end, or
        knows none of our epochs): start over, empty, at the leader's log start. Only this
        replica's copy is dropped; the leader has everything committed."""
        plog = part.log
        log.warning("replica %s-%d has no history in common with the leader: starting over "
                    "at offset %d", part.topic, part.partition, data.log_start_offset)
        plog.truncate_fully_and_start_at(max(0, data.log_start_offset))
        return ErrorCode.NONE

    # -- the ISR (as leader) ---------------------------------------------------------------------
    async def run_isr_maintenance(self, lag_time_max_ms: int, *,
                                  task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Shrink the ISR of led partitions whose followers fell behind for longer than
        replica.lag.time.max.ms (checked every half of it, as Kafka), and grow it when a
        follower caught up (at once). The new ISR is written to the store by this broker as
        leader, conditionally on the state it read; only then is it used."""
        interval = max(lag_time_max_ms, 20) / 2000
        next_shrink = trio.current_time() + interval
        task_status.started()
        while True:
            with trio.move_on_at(next_shrink):
                await self._isr_wakeup.wait()
            self._isr_wakeup = trio.Event()
            now = trio.current_time()
            if now >= next_shrink:
                candidates = [tp for tp, p in self._partitions.items() if p.is_leader
                              and len(p.replicas) > 1]
                next_shrink = now + interval
            else:
                candidates = list(self._isr_candidates)
            self._isr_candidates.clear()
            for tp in candidates:
                try:
                    await self._maybe_change_isr(tp, lag_time_max_ms)
                except Exception:  # never take the broker down; the next round retries
                    log.exception("ISR change of %s-%d failed", tp[0], tp[1])

    async def _maybe_change_isr(self, tp: TopicPartition, lag_time_max_ms: int) -> None:
        part = self._partitions.get(tp)
        if part is None or not part.is_leader:
            return
        now_ms = int(time.time() * 1000)
        isr = set(part.isr) & set(part.replicas)  # a replica moved away leaves the ISR too
        isr -= part.out_of_sync_replicas(now_ms, lag_time_max_ms)
        # Only replicas outside the current ISR may join: one just found out of sync still
        # "has" the high watermark (it is what holds it back).
        isr |= {r for r in part.replicas if r not in part.isr and part.can_join_isr(r)}
        if isr == set(part.isr) or not isr:
            return
        new_isr = tuple(r for r in part.replicas if r in isr)
        alter = getattr(self.metadata, "alter_isr", None)
        if alter is None:
            return
        old = sorted(part.isr)
        if await alter(tp[0], tp[1], part.leader_epoch, new_isr):
            self.isr_shrinks += bool(set(old) - set(new_isr))
            self.isr_expands += bool(set(new_isr) - set(old))
            log.info("ISR of %s-%d %s from %s to %s", tp[0], tp[1],
                     "expands" if len(new_isr) > len(old) else "shrinks", old, list(new_isr))
