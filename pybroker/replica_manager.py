"""Appending to and reading from the partitions this broker hosts (Kafka's ReplicaManager).

Handlers translate requests; this module holds the rules shared by Produce, Fetch, ListOffsets
and the internal topics: who may write where, what a batch must look like, what a reader may
see (up to the high watermark for consumers, the last stable offset under read_committed, the
log end for replicas). Records stay raw bytes: only the 61-byte batch headers are read.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from collections.abc import Iterable
from functools import partial

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
from pybroker.cluster.metadata import LocalMetadataStore, MetadataDelta, MetadataImage, \
    PartitionState, TopicInfo
from pybroker.cluster.topic_configs import TopicConfigs
from pybroker.purgatory import Purgatory, Watch
from pybroker.replica.partition import Partition
from pybroker.storage.log_manager import LogManager, remove_dirs
from pybroker.storage.partition_log import OffsetOutOfRange, PartitionLog
from pybroker.storage.producer_state import InvalidProducerEpoch, OutOfOrderSequence
from pybroker.storage.validator import Rejected, error_code, validate_records


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


class ReplicaManager:
    def __init__(self, node_id: int, metadata: LocalMetadataStore, logs: LogManager,
                 topic_configs: TopicConfigs, purgatory: Purgatory) -> None:
        self.node_id = node_id
        self.metadata = metadata
        self.logs = logs
        self.topic_configs = topic_configs
        self.purgatory = purgatory
        self._partitions: dict[TopicPartition, Partition] = {}

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
        if state.leader != self.node_id:
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

    def _become_leader(self, topic: str, partition: int,
                       state: PartitionState) -> Partition | None:
        plog = self.logs.get(topic, partition)
        if plog is None:  # not created yet (in a worker thread): clients retry
            return None
        part = self._partitions.get((topic, partition))
        if part is None or part.log is not plog:
            part = Partition(topic, partition, plog, self.node_id)
            self._partitions[(topic, partition)] = part
        part.make_leader(state.leader_epoch, state.replicas, state.isr)
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

    def _take_up(self, info: TopicInfo, partitions: Iterable[int]) -> None:
        for index in partitions:
            state = info.partitions[index]
            if state.leader == self.node_id:
                self._become_leader(info.name, index, state)
            else:
                part = self._partitions.get((info.name, index))
                if part is not None:
                    part.make_follower(state.leader, state.leader_epoch, state.replicas)

    def load_image(self, image: MetadataImage) -> None:
        """At start (blocking, before the broker listens): every hosted partition's log,
        created where missing, and its leadership taken up, so that a leader's high watermark
        covers its whole log before anyone reads (Kafka's makeLeader). Without this the high
        watermark read back from a stale checkpoint after an unclean shutdown would hide
        acknowledged records until the next write."""
        for info in image.topics.values():
            indexes = range(len(info.partitions))
            self._create_logs(info, indexes)
            self._take_up(info, indexes)

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
                                     internal=internal, now_ms=now)
        except Rejected as rejected:
            return AppendResult(rejected.code, message=rejected.message,
                                record_errors=rejected.record_errors)
        append_time = now if tconfig.log_append_time else None
        try:
            info = plog.append(valid.records, leader_epoch=part.leader_epoch,
                               log_append_time=append_time, batches=valid.batches)
        except (RecordError, OutOfOrderSequence, InvalidProducerEpoch) as exc:
            return AppendResult(error_code(exc), message=str(exc))
        purgatory = self.purgatory
        purgatory.notify((topic, partition), Watch.LOG_END)
        # With the leader the only in-sync replica (one broker), the append commits at once.
        if part.maybe_increment_high_watermark():
            purgatory.notify((topic, partition), Watch.HIGH_WATERMARK)
        return AppendResult(ErrorCode.NONE, info.first_offset, info.last_offset + 1,
                            append_time if append_time is not None else -1,
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
                    [tp for tp, _ in pending], deadline - now, Watch.HIGH_WATERMARK):
                break
        for _, result in pending:
            result.error = ErrorCode.REQUEST_TIMED_OUT

    def read(self, topic: str, partition: int, offset: int, max_bytes: int, *,
             replica_id: int = -1, isolation_level: int = 0,
             min_one_message: bool = True, region_min_batch: int = 0,
             current_leader_epoch: int = -1) -> ReadResult:
        """`region_min_batch`: see `PartitionLog.read` (records as a FileRegion for sendfile
        when they start with a batch at least that large). A follower's read (`replica_id`
        >= 0) up to the log end also says it has everything below `offset`, which may commit
        data: waiting consumers and acks=all produces are woken then."""
        code, part = self.leader_partition(topic, partition, current_leader_epoch)
        if part is None:
            return ReadResult(code)
        plog = part.log
        if replica_id >= 0:
            if part.update_follower_fetch(replica_id, offset, int(time.time() * 1000)):
                self.purgatory.notify((topic, partition), Watch.HIGH_WATERMARK)
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
        return ReadResult(ErrorCode.NONE, data.records, plog.high_watermark,
                          plog.last_stable_offset, plog.log_start_offset)

    def list_offset(self, topic: str, partition: int, timestamp: int,
                    isolation_level: int, current_leader_epoch: int = -1
                    ) -> tuple[ErrorCode, int, int, int]:
        """(error, offset, timestamp, leader epoch) as ListOffsets reports them."""
        code, part = self.leader_partition(topic, partition, current_leader_epoch)
        if part is None:
            return code, -1, -1, -1
        plog, epoch = part.log, part.leader_epoch
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
