"""Transaction markers: the COMMIT or ABORT control batch that ends a transaction on each of
its partitions (Kafka's TransactionMarkerChannelManager and the leader's side of
WriteTxnMarkers).

Theory of operation. Once the coordinator has made PrepareCommit or PrepareAbort durable, the
outcome is decided; what remains is to tell every partition the transaction wrote to. Each
partition's leader appends one marker batch with the producer's id and epoch and the
coordinator's epoch, waits until it is replicated (acks=all, as Kafka's WriteTxnMarkers
handler), and only then is the partition done: a marker lost with a leader that had not
replicated it must be written again. Partitions this broker leads are written in-process; the
others get WriteTxnMarkers v1 from a connection kept per leader. Failures are retried with a
backoff, following leadership through the metadata image, until every partition is done or
the coordinator stops coordinating the transaction (another broker took over
`__transaction_state`, which then resends the markers itself when it loads). A partition whose
topic was deleted is done: there is nothing left to end.

A marker written to `__consumer_offsets` also tells the group coordinator, which makes the
transaction's offset commits visible (commit) or drops them (abort).
"""
from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import trio

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.topics import GROUP_METADATA_TOPIC
from protocol.topic_partition import TopicPartition
from pybroker.cluster.metadata import MetadataStore
from pybroker.coordinator.broker_channels import BrokerChannels
from pybroker.coordinator.group_coordinator import GroupCoordinator
from pybroker.coordinator.txn_state import MarkerJob
from pybroker.replica.manager import AppendResult, ReplicaManager

if TYPE_CHECKING:
    from pybroker.client.security import ClientSecurity

__all__ = ["MarkerWriter"]

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
MAX_BACKOFF_S = 2.0
# As Kafka's marker channel: a partition whose leader answers these is tried again later.
_RETRIABLE = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.UNKNOWN_SERVER_ERROR,
}


class MarkerWriter:
    def __init__(self, node_id: int, metadata: MetadataStore, replicas: ReplicaManager,
                 groups: GroupCoordinator, *, commit_timeout_ms: int = 30000,
                 endpoint_of: Callable[[int], tuple[str, int] | None] | None = None,
                 security: ClientSecurity | None = None) -> None:
        self.node_id = node_id
        self.metadata = metadata
        self.replicas = replicas
        self.groups = groups
        self.commit_timeout_ms = commit_timeout_ms
        # Leaders elsewhere, reached on the inter-broker listener (pybroker.security.inter_broker).
        self.channels = BrokerChannels(node_id, "txn-marker-sender",
                                       endpoint_of or (lambda node: None), security)

    # -- this broker as the partitions' leader (also the WriteTxnMarkers handler) --------------
    async def write_local(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                          commit: bool, partitions: Iterable[TopicPartition]
                          ) -> dict[TopicPartition, ErrorCode]:
        """Append the marker to each partition this broker leads and wait until it is
        replicated; the error of each (NOT_LEADER_OR_FOLLOWER where another broker leads)."""
        appended: list[tuple[TopicPartition, AppendResult]] = []
        for tp in partitions:
            result = self.replicas.write_txn_marker(tp[0], tp[1], producer_id, producer_epoch,
                                                    coordinator_epoch, commit)
            appended.append((tp, result))
        await self.replicas.wait_for_commit(appended, self.commit_timeout_ms)
        for tp, result in appended:
            if result.error == ErrorCode.NONE and tp[0] == GROUP_METADATA_TOPIC:
                self.groups.on_txn_marker(tp[1], producer_id, commit)
        return {tp: result.error for tp, result in appended}

    # -- the coordinator's side ------------------------------------------------------------------
    async def write(self, job: MarkerJob, still_coordinating: Callable[[], bool]) -> bool:
        """Write `job`'s markers on every partition, retrying until all are written (True) or
        `still_coordinating()` turns false (False)."""
        left = set(job.partitions)
        backoff = RETRY_BACKOFF_S
        while left:
            if not still_coordinating():
                return False
            image = self.metadata.image
            by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp in sorted(left):
                if tp[0] not in image.topics:  # deleted: nothing to end there
                    left.discard(tp)
                    continue
                state = image.partition(*tp)
                by_leader[state.leader if state is not None else -1].append(tp)
            results: dict[TopicPartition, ErrorCode] = {}
            for leader, tps in by_leader.items():
                if leader == self.node_id:
                    results.update(await self.write_local(
                        job.producer_id, job.producer_epoch, job.coordinator_epoch,
                        job.commit, tps))
                elif leader >= 0:
                    results.update(await self._write_remote(leader, job, tps))
            for tp, code in results.items():
                if code == ErrorCode.NONE:
                    left.discard(tp)
                elif code not in _RETRIABLE:
                    # Kafka drops a partition whose leader refuses the marker for good (an
                    # epoch older than the partition's: a newer marker already ended it).
                    log.warning("transaction %s: marker for %s-%d refused: %s; giving up "
                                "on that partition", job.transactional_id, tp[0], tp[1],
                                code.name)
                    left.discard(tp)
            if left:
                await trio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
        return True

    async def _write_remote(self, leader: int, job: MarkerJob,
                            tps: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        failed = {tp: ErrorCode.NOT_LEADER_OR_FOLLOWER for tp in tps}
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in tps:
            by_topic[topic].append(partition)
        request = {"markers": [{
            "producer_id": job.producer_id, "producer_epoch": job.producer_epoch,
            "transaction_result": job.commit, "coordinator_epoch": job.coordinator_epoch,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}]}
        response: Any = await self.channels.request(leader, ApiKey.WRITE_TXN_MARKERS, request)
        if response is None:
            return failed
        out = dict(failed)
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    out[(topic.name, p.partition_index)] = ErrorCode(p.error_code)
        return out

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Holds the connections to other leaders (their readers run here)."""
        await self.channels.run(task_status=task_status)
