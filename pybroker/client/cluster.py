"""What the client knows about the cluster: brokers, topics, partitions and their leaders.

Built from Metadata responses; frozen values, so a caller can hold one while the client
refreshes. Topic ids print the way Kafka prints them (`Uuid.toString`: URL-safe base64 of the
16 bytes, without padding), so tool output matches Kafka's.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

from construct import Container

from protocol.errors import ErrorCode
from protocol.topic_id import format_topic_id
from protocol.messages.topics import INTERNAL_TOPICS

__all__ = ["TopicPartition", "BrokerNode", "PartitionMetadata", "TopicMetadata",
           "ClusterMetadata", "format_topic_id", "ZERO_UUID", "is_internal_topic"]

ZERO_UUID = uuid.UUID(int=0)


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:  # Kafka's TopicPartition.toString
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error: ErrorCode = ErrorCode.NONE

    @property
    def has_leader(self) -> bool:
        return self.leader >= 0


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    internal: bool
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)
    error: ErrorCode = ErrorCode.NONE

    @property
    def replication_factor(self) -> int:
        """Replicas of the lowest partition, as kafka-topics reports it."""
        if not self.partitions:
            return 0
        return len(self.partitions[min(self.partitions)].replicas)


@dataclass(frozen=True)
class ClusterMetadata:
    brokers: dict[int, BrokerNode]
    topics: dict[str, TopicMetadata]
    controller_id: int = -1
    cluster_id: str | None = None

    @classmethod
    def from_response(cls, body: Container) -> "ClusterMetadata":
        brokers = {b.node_id: BrokerNode(b.node_id, b.host, b.port, b.rack) for b in body.brokers}
        topics: dict[str, TopicMetadata] = {}
        for t in body.topics:
            if t.name is None:
                continue
            parts = {
                p.partition_index: PartitionMetadata(
                    t.name, p.partition_index, p.leader_id, p.leader_epoch,
                    tuple(p.replica_nodes), tuple(p.isr_nodes), tuple(p.offline_replicas or ()),
                    ErrorCode.from_wire(p.error_code))
                for p in t.partitions}
            topics[t.name] = TopicMetadata(t.name, t.topic_id or ZERO_UUID, bool(t.is_internal),
                                           parts, ErrorCode.from_wire(t.error_code))
        return cls(brokers, topics, body.controller_id, body.cluster_id)


def is_internal_topic(name: str) -> bool:
    return name in INTERNAL_TOPICS
