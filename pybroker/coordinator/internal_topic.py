"""The internal topic a coordinator keeps its state in: `__consumer_offsets` for groups,
`__transaction_state` for transactions.

Both coordinators use their topic the same way, Kafka's: a key (group id, transactional id)
lives in partition `abs(javaHashCode(key)) % partitions`; the topic is created on first use
(the first FindCoordinator); the coordinator of a key is the leader of its partition; a
write is appended as that leader and answered only once the ISR has it (acks=all); loading
reads a partition back from its log start. One piece serves both, so the rules cannot drift
apart.

FindCoordinator does not wait for the creation, as Kafka 4.1.1 does not (its KafkaApis
hands the topic to the AutoTopicCreationManager): while the topic does not exist it answers
COORDINATOR_NOT_AVAILABLE at once and `run` creates the topic in the background; once the
key's partition has a leader it names that broker (which may still be loading the partition:
the group and transaction requests say so). Every client retries COORDINATOR_NOT_AVAILABLE.
Measured on Kafka 4.1.1 (one node): the first FindCoordinator answered 15 in about 0.03 s,
and a group's coordinator was named about 0.08 s later, a transactional id's 0.8 to 1.1 s
later (50 partitions each).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import trio

from protocol.errors import ErrorCode
from protocol.records.batch import BatchHeader, iter_batches
from protocol.records.record import DecodedRecord, decode_batch
from pybroker.cluster.metadata import MetadataStore
from pybroker.replica.manager import ReplicaManager
from pybroker.storage.partition_log import PartitionLog
from pybroker.controller.topic_admin import TopicAdmin

__all__ = ["InternalTopic", "APPEND_ERRORS", "java_string_hash", "partition_for"]

log = logging.getLogger(__name__)

_LOAD_READ_BYTES = 1 << 20

# How a failed append to the topic is reported to the client (Kafka's mapping in both
# coordinators): the client retries or looks for the coordinator again.
APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode`: over UTF-16 code units, wrapping at 32 bits, signed."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    """Kafka's `Utils.abs(key.hashCode) % partitions` (abs of MIN_VALUE is 0 there)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class InternalTopic:
    def __init__(self, name: str, metadata: MetadataStore, topics: TopicAdmin,
                 replicas: ReplicaManager, *, partitions: int, replication_factor: int,
                 replication_factor_set: bool,
                 configs: Callable[[int], Mapping[str, str]], commit_timeout_ms: int) -> None:
        """`configs(replication factor)` gives the topic configs it is created with."""
        self.name = name
        self.metadata = metadata
        self.topics = topics
        self.replicas = replicas
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.replication_factor_set = replication_factor_set
        self.configs = configs
        self.commit_timeout_ms = commit_timeout_ms
        # Set when a FindCoordinator found no topic: `run` creates it.
        self._wanted = trio.Event()

    @property
    def num_partitions(self) -> int:
        """Fixed once the topic exists; until then, the configured count."""
        info = self.metadata.image.topics.get(self.name)
        return len(info.partitions) if info else self.partitions

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions)

    @property
    def exists(self) -> bool:
        return self.name in self.metadata.image.topics

    async def ensure(self) -> ErrorCode:
        """Create the topic on first use (Kafka does so on the first FindCoordinator).

        A replication factor that is set is applied as Kafka applies it: while fewer brokers
        exist the topic is not created and clients get COORDINATOR_NOT_AVAILABLE (and retry).
        Left unset, it is Kafka's default of 3 capped at the number of brokers, a deliberate
        difference: with Kafka's behaviour a single broker with no configuration (the
        embedded default) could serve no group and no transaction at all.
        """
        image = self.metadata.image
        if self.name in image.topics:
            return ErrorCode.NONE
        replicas = self.replication_factor
        if not self.replication_factor_set:
            replicas = max(1, min(replicas, len(image.brokers)))
        code, message = await self.topics.create_topic(
            self.name, self.partitions, replicas, dict(self.configs(replicas)), internal=True)
        if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            log.error("cannot create %s: %s %s", self.name, code.name, message)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Create the topic whenever a FindCoordinator found none (`coordinator_for`), one
        creation at a time; asks that come meanwhile are served by the next round (which
        finds the topic, or tries again where the creation failed, as Kafka's next ask
        does)."""
        task_status.started()
        while True:
            await self._wanted.wait()
            self._wanted = trio.Event()
            try:
                await self.ensure()
            except Exception:  # the next ask tries again; the broker serves on
                log.exception("creating %s failed", self.name)

    async def coordinator_for(self, key: str, listener: str | None = None
                              ) -> tuple[ErrorCode, int, str, int]:
        """(error, node id, host, port) of the leader of the key's partition, as reached
        through `listener` (the one the asking client came in on); COORDINATOR_NOT_AVAILABLE
        while the topic does not exist (its creation started) or the partition has no
        leader."""
        image = self.metadata.image
        if self.name not in image.topics:
            self._wanted.set()
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        state = image.partition(self.name, self.partition_for(key))
        node = image.brokers.get(state.leader) if state is not None else None
        endpoint = node.endpoint(listener) if node is not None else None
        if node is None or endpoint is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        return ErrorCode.NONE, node.node_id, endpoint[0], endpoint[1]

    async def append(self, partition: int, batch: bytes) -> tuple[ErrorCode, int]:
        """Append one batch as the partition's leader and wait until it is committed (the
        high watermark passed it, within the commit timeout): the replica manager's error,
        and where the batch starts in the log. On one broker the append commits at once and
        this never yields."""
        try:
            result = self.replicas.append(self.name, partition, batch, internal=True, acks=-1)
            if result.error == ErrorCode.NONE:
                await self.replicas.wait_for_commit([((self.name, partition), result)],
                                                    self.commit_timeout_ms)
        except Exception:
            log.exception("append to %s-%d failed", self.name, partition)
            return ErrorCode.KAFKA_STORAGE_ERROR, -1
        if result.error:
            log.warning("append to %s-%d failed: %s", self.name, partition, result.error.name)
        return result.error, result.base_offset

    @staticmethod
    def read(plog: PartitionLog) -> Iterator[tuple[BatchHeader, DecodedRecord]]:
        """Every record of the partition from its log start to its end, in log order, with
        its batch's header (control batches included); compaction's gaps are skipped."""
        offset, end = plog.log_start_offset, plog.log_end_offset
        while offset < end:
            data = plog.read(offset, _LOAD_READ_BYTES, max_offset=end)
            if not data.records:
                # Nothing readable from here in this segment (compaction may leave gaps).
                later = [s.base_offset for s in plog.segments if s.base_offset > offset]
                if not later:
                    break
                offset = later[0]
                continue
            # Asked without region_min_batch, read() gives the bytes, never a FileRegion.
            assert isinstance(data.records, bytes)
            view = memoryview(data.records)
            for pos, header in iter_batches(view):
                for rec in decode_batch(view[pos:pos + header.size]):
                    if rec.offset >= offset:
                        yield header, rec
                offset = max(offset, header.next_offset)
            offset = max(offset, data.next_offset)
