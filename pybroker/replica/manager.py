"""Appending to and reading from the partitions this broker hosts (Kafka's ReplicaManager).

Handlers translate requests; this module holds the rules shared by Produce, Fetch, ListOffsets
and the internal topics: who may write where, what a batch must look like, what a reader may
see (up to the high watermark for consumers, the last stable offset under read_committed, the
log end for replicas). Records stay raw bytes: only the 61-byte batch headers are read.

The manager's other jobs are mixins in their own modules, by job: following the metadata
store (`deltas.py`, Kafka's applyDelta), the follower's side (`follower_logs.py`) and ISR
upkeep as leader (`isr.py`).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

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
from pybroker.cluster.metadata import MetadataStore, MetadataImage, PartitionState
from pybroker.cluster.topic_configs import TopicConfigs
from pybroker.replica.deltas import ReplicaDeltas
from pybroker.replica.follower_logs import FollowerSide
from pybroker.replica.isr import IsrUpkeep
from pybroker.replica.purgatory import Purgatory, Watch
from pybroker.replica.partition import Partition
from pybroker.replica.replica_selector import ClientMetadata, ReplicaSelector, \
    preferred_read_replica
from pybroker.runtime.halt import halt_all_log_dirs_failed
from pybroker.storage.log_manager import LogManager
from pybroker.storage.partition_log import OffsetOutOfRange, PartitionLog
from pybroker.storage.producer_state import InvalidProducerEpoch, OutOfOrderSequence
from pybroker.storage.validator import Rejected, error_code, validate_records

if TYPE_CHECKING:  # a cluster member's only (broker.py): not imported by a single broker
    from pybroker.replica.throttle import ReplicaThrottle
    from pybroker.replica.fetcher import ReplicaFetchers


log = logging.getLogger(__name__)



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
    records: bytes | memoryview | FileRegion = b""
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


class ReplicaManager(ReplicaDeltas, FollowerSide, IsrUpkeep):
    def __init__(self, node_id: int, metadata: MetadataStore, logs: LogManager,
                 topic_configs: TopicConfigs, purgatory: Purgatory,
                 replica_selector: ReplicaSelector | None = None) -> None:
        self.node_id = node_id
        self.metadata = metadata
        self.logs = logs
        self.topic_configs = topic_configs
        self.purgatory = purgatory
        # One function every Partition asks for its topic's min.insync.replicas (KAFKA-15583).
        self.min_isr_of: Callable[[str], int] = \
            lambda topic: topic_configs.topic_config(topic).min_insync_replicas
        # replica.selector.class: None sends every consumer to the leader (Kafka's default).
        self.replica_selector = replica_selector
        # The racks of the brokers reachable on a listener, for the selector: (image,
        # listener, racks), rebuilt when either changes.
        self._racks: tuple[MetadataImage, str | None, Mapping[int, str | None]] | None = None
        self._partitions: dict[TopicPartition, Partition] = {}
        # In a cluster: the fetchers that copy the partitions this broker follows, and the
        # led partitions whose ISR may need to grow (a follower caught up).
        self.fetchers: ReplicaFetchers | None = None
        # In a cluster: this broker's leader.replication.throttled.rate and the partitions
        # it applies to (quota/replication_quota.py); the Fetch handler holds back throttled
        # out-of-sync followers with it.
        self.leader_quota: ReplicaThrottle | None = None
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
        # Set when a log dir fails while others are still online: a cluster member tells
        # the controller (`announce_offline_replicas`).
        self._dirs_failed = trio.Event()
        logs.on_dir_offline = self._dir_offline_from_any_thread

    async def verify_transaction(self, transactional_id: str, producer_id: int,
                                 producer_epoch: int, tp: TopicPartition) -> ErrorCode:
        """NONE if `tp` belongs to the producer's ongoing transaction, else why not
        (the verifier's answer: TRANSACTION_ABORTABLE, INVALID_PRODUCER_EPOCH, why the
        coordinator cannot answer now, INVALID_TXN_STATE when it refuses this broker); NONE
        when no verifier is set."""
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
        if self.logs.is_offline(topic, partition):  # as Kafka's HostedPartition.Offline
            return ErrorCode.KAFKA_STORAGE_ERROR, None
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
            part = Partition(topic, partition, plog, self.node_id, self.min_isr_of)
            self._partitions[(topic, partition)] = part
        if part.make_leader(state.leader_epoch, state.replicas, state.isr,
                            now_ms=int(time.time() * 1000), version=state.version):
            if self.fetchers is not None:
                self.fetchers.unfollow((topic, partition))
            if announce:
                log.info("broker %d leads %s-%d at epoch %d (ISR %s)", self.node_id, topic,
                         partition, state.leader_epoch, list(state.isr))
        return part

    def _is_internal(self, topic: str) -> bool:
        info = self.metadata.image.topics.get(topic)
        return bool(info and info.internal)

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
            return self.log_dir_failed(plog, exc)
        except ValueError as exc:
            return self._closed_by_failed_dir(plog, exc)
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
            return self.log_dir_failed(plog, exc)
        except ValueError as exc:
            return self._closed_by_failed_dir(plog, exc)
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
                    done, code = True, (ErrorCode.KAFKA_STORAGE_ERROR
                                        if self.logs.is_offline(*tp)
                                        else ErrorCode.NOT_LEADER_OR_FOLLOWER)
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

    def is_in_sync(self, topic: str, partition: int, replica_id: int) -> bool:
        """Whether `replica_id` is in the ISR of a partition this broker leads (a replication
        throttle never holds back an in-sync replica)."""
        part = self._partitions.get((topic, partition))
        return part is not None and replica_id in part.isr

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

    def log_dir_failed(self, plog: PartitionLog, exc: OSError) -> AppendResult:
        """A write to a log failed (disk full, an I/O error, the file system remounted
        read-only): its log dir goes offline, and only it (KIP-112, `LogManager.fail_dir`).
        Returns what the writer answers."""
        self.logs.fail_log(plog, exc)
        return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR, message=f"{plog.dir}: {exc}")

    def _closed_by_failed_dir(self, plog: PartitionLog, exc: ValueError) -> AppendResult:
        """A write met its log closed: another thread failed its dir after the append's
        offline check and closed the dir's logs, before the event loop let the partition go
        (only where the close could not be handed to the event loop: no listener set, or the
        broker closing, `_dir_offline_from_any_thread`). KAFKA_STORAGE_ERROR, as Kafka
        answers for a log in an offline dir, so the client goes to the new leader; any other
        ValueError is a bug and goes on up."""
        if not plog.closed or not self.logs.is_offline(plog.topic, plog.partition):
            raise exc
        return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR,
                            message=f"{plog.dir}: its log dir is offline")

    def _dir_offline_from_any_thread(self, log_dir: Path) -> None:
        """`LogManager.on_dir_offline`: called by whichever thread found the failure (a flush
        or checkpoint runs in a worker thread); the partitions are let go on the event
        loop."""
        try:
            trio.lowlevel.current_trio_token()
        except RuntimeError:
            try:
                trio.from_thread.run_sync(self._take_dir_offline, log_dir)
                return
            except RuntimeError:  # no event loop to hand it to: the broker is closing
                pass
        self._take_dir_offline(log_dir)

    def _take_dir_offline(self, log_dir: Path) -> None:
        """Let go of the partitions in a failed dir: no leading, no following, and anyone
        waiting on them wakes to KAFKA_STORAGE_ERROR. A broker whose every dir has failed
        stops at once, as Kafka halts it (pybroker.runtime.halt: exit 1, or a node's worker's
        own code, which its supervisor tells apart from a crash); otherwise the cluster hears of it
        (`announce_offline_replicas`), and then their logs are closed, here on the event
        loop, which may have been holding one of their descriptors when a worker thread
        found the failure (`LogManager.close_failed`)."""
        for tp in self.logs.offline_partitions(log_dir):
            self._partitions.pop(tp, None)
            self._isr_candidates.discard(tp)
            if self.fetchers is not None:
                self.fetchers.unfollow(tp)
            self.purgatory.notify_all(tp)
        offline = self.logs.offline_dirs
        if not self.logs.online_dirs:
            log.critical("Shutdown broker because all log dirs in %s have failed",
                         ", ".join(str(d) for d in offline))
            halt_all_log_dirs_failed()
        self._dirs_failed.set()  # first: whatever the close meets, the controller hears
        self.logs.close_failed(log_dir)

    async def announce_offline_replicas(
            self, announce: Callable[[frozenset[TopicPartition]], Awaitable[None]], *,
            task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """A cluster member's task: after each log dir failure, `announce` every replica now
        offline (the ZooKeeper store lists them in the registration and writes Kafka's
        /log_dir_event_notification), so the controller moves their leaderships and ISR
        memberships to the other replicas. A failed announcement is retried a second later."""
        task_status.started()
        announced: frozenset[TopicPartition] = frozenset()
        while True:
            await self._dirs_failed.wait()
            self._dirs_failed = trio.Event()
            offline = frozenset(self.logs.offline_partitions())
            while offline != announced:
                try:
                    await announce(offline)
                    announced = offline
                except Exception:
                    log.exception("cannot tell the controller of the offline replicas")
                    await trio.sleep(1)
                offline = frozenset(self.logs.offline_partitions())
