"""The transaction coordinator as the broker runs it: the pure state machine plus the clock,
the log, producer ids and the markers.

`TxnStateMachine` (`txn_state`) decides; this façade supplies what it deliberately lacks:
- durability: the records of every outcome are appended to `__transaction_state` (acks=all)
  and replayed into the machine before anything is answered or any marker is sent, so a
  decision a client was told about survives the coordinator's loss;
- the markers: a job per decided transaction, run by `MarkerWriter` as a task of this
  coordinator; when every partition has its marker the CompleteCommit/CompleteAbort record is
  written. EndTxn answers once the markers are written (or, if a leader is unreachable, after
  a bounded wait: the outcome is durable and the markers keep being retried), so a client
  that committed can read its records at once;
- time: the sweep every `transaction.abort.timed.out.transaction.cleanup.interval.ms` that
  aborts transactions older than their timeout (fencing their producer) and forgets
  transactional ids unused for `transactional.id.expiration.ms`;
- leadership: a transactional id lives in partition `abs(javaHashCode(id)) % partitions` of
  `__transaction_state`, as in Kafka; this broker coordinates the ids of the partitions it
  leads, loads a partition when it becomes its leader (and resends the markers of decided but
  unfinished transactions), forgets it when another broker does. The coordinator epoch that
  markers carry is that partition's leader epoch.
"""
from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any, Callable, Sequence, TypeVar

import trio

from protocol.errors import ErrorCode
from protocol.messages.topics import TRANSACTION_STATE_TOPIC
from protocol.records.record import build_batch
from protocol.topic_partition import TopicPartition
from pybroker.cluster.metadata import MetadataDelta, MetadataImage, MetadataStore
from pybroker.config import BrokerConfig
from pybroker.runtime.periodic import run_every
from pybroker.coordinator.group_coordinator import OFFSETS_TOPIC, GroupCoordinator
from pybroker.coordinator.internal_topic import APPEND_ERRORS, InternalTopic
from pybroker.coordinator.producer_ids import ProducerIds
from pybroker.coordinator.txn_markers import MAX_BACKOFF_S, RETRY_BACKOFF_S, MarkerWriter
from pybroker.coordinator.txn_records import TxnLogValue, decode_txn_record, encode_txn_record
from pybroker.coordinator.txn_state import (
    MarkerJob, TxnConfig, TxnMetadata, TxnOutcome, TxnStateMachine,
)
from pybroker.replica.manager import ReplicaManager
from pybroker.storage.log_manager import LogManager
from pybroker.storage.partition_log import PartitionLog
from pybroker.controller.topic_admin import TopicAdmin

__all__ = ["TransactionCoordinator", "TXN_TOPIC"]

log = logging.getLogger(__name__)

TXN_TOPIC = TRANSACTION_STATE_TOPIC
# How long EndTxn waits for its markers before answering anyway (the outcome is durable).
END_TXN_MARKER_WAIT_S = 10.0
T = TypeVar("T")


class TransactionCoordinator:
    def __init__(self, config: BrokerConfig, metadata: MetadataStore, logs: LogManager,
                 replicas: ReplicaManager, topics: TopicAdmin, groups: GroupCoordinator,
                 producer_ids: ProducerIds, markers: MarkerWriter,
                 clock: Callable[[], int] | None = None) -> None:
        self.config = config
        self.metadata = metadata
        self.logs = logs
        self.replicas = replicas
        self.topics = topics
        self.groups = groups
        self.producer_ids = producer_ids
        self.markers = markers
        self.topic = InternalTopic(
            TXN_TOPIC, metadata, topics, replicas,
            partitions=config.transaction_state_log_num_partitions,
            replication_factor=config.transaction_state_log_replication_factor,
            replication_factor_set="transaction.state.log.replication.factor" in config.explicit,
            configs=lambda replicas: {
                "cleanup.policy": "compact", "compression.type": "uncompressed",
                "min.insync.replicas": str(min(config.transaction_state_log_min_isr, replicas)),
                "segment.bytes": str(config.transaction_state_log_segment_bytes)},
            commit_timeout_ms=config.offsets_commit_timeout_ms)
        self.state = TxnStateMachine(TxnConfig(
            max_timeout_ms=config.transaction_max_timeout_ms,
            id_expiration_ms=config.transactional_id_expiration_ms))
        self._clock = clock or (lambda: int(time.time() * 1000))
        # The partitions of __transaction_state this broker leads and has loaded, with the
        # coordinator epoch (their leader epoch) its markers carry.
        self.owned: dict[int, int] = {}
        # Marker jobs running, by transactional id: EndTxn waits on their event.
        self._jobs: dict[str, trio.Event] = {}
        self._nursery: trio.Nursery | None = None
        self._pending_jobs: list[MarkerJob] = []

    def now(self) -> int:
        return self._clock()

    # -- the topic -----------------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return self.topic.partition_for(transactional_id)

    async def ensure_topic(self) -> ErrorCode:
        """Create __transaction_state on first use (see `InternalTopic.ensure` for the
        replication factor); its min.insync.replicas is capped at the replication factor."""
        return await self.topic.ensure()

    async def coordinator_for(self, transactional_id: str, listener: str | None = None
                              ) -> tuple[ErrorCode, int, str, int]:
        """(error, node id, host, port) of the leader of the id's partition."""
        return await self.topic.coordinator_for(transactional_id, listener)

    def _coordinates(self, transactional_id: str) -> ErrorCode:
        """NONE if this broker coordinates the id now; COORDINATOR_LOAD_IN_PROGRESS while its
        partition is this broker's but not loaded yet (the image names this broker leader,
        and FindCoordinator answers with it, before the delta's load has replayed the
        partition; or, on a cluster, another broker's image already names this one leader
        where this one's has no leader yet): the client retries here, as on Kafka's loading
        coordinator. NOT_COORDINATOR when another broker leads it, or no __transaction_state
        is known here (the client looks for the coordinator again)."""
        partition = self.partition_for(transactional_id)
        if partition in self.owned:
            return ErrorCode.NONE
        state = self.metadata.image.partition(TXN_TOPIC, partition)
        if state is not None and state.leader in (self.config.node_id, -1):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def _epoch_of(self, transactional_id: str) -> tuple[int, int]:
        partition = self.partition_for(transactional_id)
        return partition, self.owned[partition]

    # -- loading -------------------------------------------------------------------------------
    def load(self) -> int:
        """At start, before the broker listens: replay every led partition. Their unfinished
        markers are sent once `run` starts."""
        info = self.metadata.image.topics.get(TXN_TOPIC)
        count = 0
        if info is not None:
            for p in info.partitions:
                if p.leader == self.config.node_id:
                    count += self._adopt(p.partition, p.leader_epoch,
                                         self._records_of(p.partition))
        if count:
            log.info("loaded %d record(s) of %s: %d transactional id(s)", count, TXN_TOPIC,
                     len(self.state))
        return count

    def _records_of(self, index: int) -> Iterable[tuple[str, TxnLogValue | None]]:
        plog = self.logs.get(TXN_TOPIC, index)
        return () if plog is None else self._read_records(plog)

    @staticmethod
    def _read_records(plog: PartitionLog) -> Iterator[tuple[str, TxnLogValue | None]]:
        for header, rec in InternalTopic.read(plog):
            if header.is_control:
                continue
            try:
                decoded = decode_txn_record(rec.key, rec.value)
            except Exception as exc:  # construct, struct or UTF-8 errors
                log.warning("skipping undecodable %s record at %s-%d@%d: %s",
                            TXN_TOPIC, plog.topic, plog.partition, rec.offset, exc)
                continue
            if decoded is not None:
                yield decoded

    def _adopt(self, index: int, coordinator_epoch: int,
               records: Iterable[tuple[str, TxnLogValue | None]]) -> int:
        count = 0
        for transactional_id, value in records:
            self.state.replay(transactional_id, value, index, coordinator_epoch)
            count += 1
        self.owned[index] = coordinator_epoch
        for job in self.state.pending_markers(index):
            self._start_markers(job)
        return count

    async def apply_delta(self, image: MetadataImage, delta: MetadataDelta) -> None:
        """A metadata store listener: follow the leadership of __transaction_state
        partitions (Kafka's onElection / onResignation)."""
        for index in sorted(delta.changed_partitions.get(TXN_TOPIC, ())):
            state = image.topics[TXN_TOPIC].partitions[index]
            mine = state.leader == self.config.node_id
            if mine and self.owned.get(index) != state.leader_epoch:
                if self.owned.pop(index, None) is not None:  # loading again: not served meanwhile
                    self.state.unload(index)
                records = await trio.to_thread.run_sync(
                    lambda: list(self._records_of(index)))
                self._adopt(index, state.leader_epoch, records)
                log.info("coordinating the transactions of %s-%d (coordinator epoch %d)",
                         TXN_TOPIC, index, state.leader_epoch)
            elif not mine and index in self.owned:
                del self.owned[index]
                self.state.unload(index)
                log.info("resigned as coordinator of %s-%d", TXN_TOPIC, index)

    # -- persisting ----------------------------------------------------------------------------
    async def _persist(self, records: Sequence[tuple[str, TxnLogValue | None]]) -> ErrorCode:
        """Append the records (one batch per partition), wait until the ISR has them, then
        replay them; the first error stops it and the records not replayed are forgotten by
        the machine (`persist_failed`)."""
        by_partition: dict[int, list[tuple[str, TxnLogValue | None]]] = defaultdict(list)
        for record in records:
            by_partition[self.partition_for(record[0])].append(record)
        now = self.now()
        for partition, batch_records in sorted(by_partition.items()):
            epoch = self.owned.get(partition)
            error = ErrorCode.NOT_COORDINATOR if epoch is None else ErrorCode.NONE
            if not error:
                batch = build_batch([encode_txn_record(t, v, now) for t, v in batch_records])
                error, _ = await self.topic.append(partition, batch)
            if epoch is None or error or self.owned.get(partition) != epoch:
                code = APPEND_ERRORS.get(error, error) or ErrorCode.NOT_COORDINATOR
                log.warning("append to %s-%d failed: %s", TXN_TOPIC, partition, code.name)
                for transactional_id, _ in records:
                    self.state.persist_failed(transactional_id)
                return code
            for transactional_id, value in batch_records:
                self.state.replay(transactional_id, value, partition, epoch)
        return ErrorCode.NONE

    async def _apply(self, outcome: TxnOutcome[Any]) -> ErrorCode:
        """Persist the outcome's records, then start its marker jobs."""
        error = await self._persist(outcome.records) if outcome.records else ErrorCode.NONE
        if not error:
            for job in outcome.markers:
                self._start_markers(job)
        return error

    def _start_markers(self, job: MarkerJob) -> None:
        done = self._jobs.get(job.transactional_id)
        if done is None or done.is_set():
            self._jobs[job.transactional_id] = trio.Event()
        if self._nursery is None:
            self._pending_jobs.append(job)
        else:
            self._nursery.start_soon(self._run_markers, job)

    async def _run_markers(self, job: MarkerJob) -> None:
        partition = self.partition_for(job.transactional_id)
        try:
            def still_coordinating() -> bool:
                return self.owned.get(partition) == job.coordinator_epoch
            if await self.markers.write(job, still_coordinating):
                await self._complete(job, partition, still_coordinating)
        except Exception:
            log.exception("markers of transaction %s failed", job.transactional_id)
        finally:
            done = self._jobs.get(job.transactional_id)
            if done is not None:
                done.set()

    async def _complete(self, job: MarkerJob, partition: int,
                        still_coordinating: Callable[[], bool]) -> None:
        """CompleteCommit or CompleteAbort, once every marker is written. An append the log
        cannot take now (COORDINATOR_NOT_AVAILABLE: fewer in-sync replicas than
        min.insync.replicas, as on a node whose other worker is not back yet after a
        restart) is tried again while this broker coordinates the id, as Kafka's marker
        channel does (its txnLogAppendRetryQueue): left undone, the transaction would stay
        Prepare* here, and its id's InitProducerId answer CONCURRENT_TRANSACTIONS, until
        another broker took the partition over."""
        backoff = RETRY_BACKOFF_S
        while True:
            code = await self._apply(self.state.markers_written(job, self.now()))
            if code != ErrorCode.COORDINATOR_NOT_AVAILABLE or not still_coordinating():
                break
            await trio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)
        if code:
            log.warning("transaction %s: completion not written (%s); the next coordinator "
                        "of %s-%d completes it", job.transactional_id, code.name, TXN_TOPIC,
                        partition)

    async def _wait_markers(self, transactional_id: str) -> None:
        done = self._jobs.get(transactional_id)
        if done is not None:
            with trio.move_on_after(END_TXN_MARKER_WAIT_S):
                await done.wait()

    # -- the APIs ------------------------------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected_producer_id: int = -1, expected_epoch: int = -1
                               ) -> tuple[ErrorCode, int, int]:
        """InitProducerId with a transactional id: (error, producer id, epoch)."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, -1, -1
        code = await self.ensure_topic()
        if code or (code := self._coordinates(transactional_id)):
            return code, -1, -1
        new_pid = None
        if self.state.needs_producer_id(transactional_id):
            new_pid = await self.producer_ids.next_id()
            if (code := self._coordinates(transactional_id)):
                return code, -1, -1
        partition, epoch = self._epoch_of(transactional_id)
        outcome = self.state.init_producer_id(
            transactional_id, timeout_ms, partition, epoch, self.now(),
            new_producer_id=new_pid, expected_producer_id=expected_producer_id,
            expected_epoch=expected_epoch)
        error = await self._apply(outcome)
        if error:
            return error, -1, -1
        return outcome.response

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Sequence[TopicPartition]) -> ErrorCode:
        if (code := self._coordinates(transactional_id)):
            return code
        outcome = self.state.add_partitions(transactional_id, producer_id, producer_epoch,
                                            partitions, self.now())
        return await self._apply(outcome) or outcome.response

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> ErrorCode:
        """AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction."""
        code = await self.groups.ensure_topic()
        if code:
            return code
        tp = (OFFSETS_TOPIC, self.groups.partition_for(group_id))
        return await self.add_partitions(transactional_id, producer_id, producer_epoch, [tp])

    async def end_transaction(self, transactional_id: str, producer_id: int,
                              producer_epoch: int, commit: bool) -> ErrorCode:
        if (code := self._coordinates(transactional_id)):
            return code
        outcome = self.state.end_transaction(transactional_id, producer_id, producer_epoch,
                                             commit, self.now())
        error = await self._apply(outcome)
        if error:
            return error
        if outcome.markers:
            await self._wait_markers(transactional_id)
        return outcome.response

    async def fence_producer(self, transactional_id: str, attempts: int = 20
                             ) -> tuple[ErrorCode, int, int]:
        """What a new producer's InitProducerId does to the current one, for a test: bump the
        id's epoch, aborting its open transaction, so the current producer's next request is
        fenced. As a client would, it retries CONCURRENT_TRANSACTIONS (answered while the
        abort's markers are written) until the bump is done: (error, producer id, new
        epoch). TRANSACTIONAL_ID_NOT_FOUND for an id no producer initialised."""
        if (code := self._coordinates(transactional_id)):
            return code, -1, -1
        for _ in range(attempts):
            txn = self.state.describe(transactional_id)
            if txn is None:
                return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, -1, -1
            result = await self.init_producer_id(transactional_id, txn.timeout_ms)
            if result[0] != ErrorCode.CONCURRENT_TRANSACTIONS:
                return result
            await self._wait_markers(transactional_id)
            await trio.sleep(0.01)  # a persist of the completion may still be in flight
        return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Sequence[TopicPartition]
                          ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn verify-only (another broker's produce verification): this
        broker's answer for each partition, or why it cannot answer (NOT_COORDINATOR,
        COORDINATOR_LOAD_IN_PROGRESS, INVALID_REQUEST for an empty id) for all of them."""
        code = ErrorCode.INVALID_REQUEST if not transactional_id \
            else self._coordinates(transactional_id)
        if code:
            return {tp: code for tp in partitions}
        return self.state.verify_partitions(transactional_id, producer_id, producer_epoch,
                                            partitions)

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        if (code := self._coordinates(transactional_id)):
            return code, None
        txn = self.state.describe(transactional_id)
        if txn is None:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, txn

    def list(self, states: Iterable[str], producer_ids: Iterable[int],
             duration_ms: int = -1) -> list[TxnMetadata]:
        return self.state.list(set(states), set(producer_ids), duration_ms, self.now())

    # -- background work -----------------------------------------------------------------------
    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """The marker jobs, the timeout sweep, transactional-id expiry, and the creation of
        __transaction_state a FindCoordinator asked for."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.topic.run)
            await nursery.start(self.markers.run)
            self._nursery = nursery
            pending, self._pending_jobs = self._pending_jobs, []
            for job in pending:
                nursery.start_soon(self._run_markers, job)
            nursery.start_soon(self._run_sweep)
            task_status.started()

    async def _run_sweep(self) -> None:
        await run_every(
            self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            self.sweep, "transaction timeout sweep")

    async def sweep(self) -> None:
        """Abort transactions older than their timeout (fencing their producers) and forget
        transactional ids unused for transactional.id.expiration.ms."""
        outcome = self.state.expire(self.now())
        if outcome.records or outcome.markers:
            for job in outcome.markers:
                log.info("aborting transaction %s (producer id %d): older than its timeout",
                         job.transactional_id, job.producer_id)
            await self._apply(outcome)
