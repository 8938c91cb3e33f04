"""The metadata image's value types: brokers, topics, partitions, and what a change changed.

Theory of operation. These are plain frozen values with no I/O, no trio and no store, so the
controller's decisions (`pybroker.controller`), which must stay pure and clock-free, can take
and return them without importing the store that persists them (`cluster/metadata.py`, which
re-exports every name here, so existing imports keep working). A new image is made with
`dataclasses.replace`, never by mutation.
"""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from pybroker.cluster.client_quotas import QuotaEntity


@dataclass(frozen=True)
class BrokerInfo:
    """A broker and its advertised endpoints, one per listener name: a client is told the
    endpoints of the listener it came in on (Kafka's rule), so `host`/`port` are only the
    first listener's, for whoever does not say."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    # In a ZooKeeper cluster: the registration's czxid, new at every registration (Kafka's
    # broker epoch), and whether the broker asked for a controlled shutdown.
    epoch: int = -1
    shutting_down: bool = False
    # Its replicas in failed log dirs (KIP-112): dead for their partitions alone.
    offline_replicas: frozenset[tuple[str, int]] = frozenset()

    def endpoint(self, listener: str | None) -> tuple[str, int] | None:
        """(host, port) on `listener`; None if the broker has no such listener."""
        if not self.endpoints or listener is None:
            return self.host, self.port
        return self.endpoints.get(listener)


# Kafka's LeaderRecoveryState: a leader elected uncleanly is RECOVERING until its ISR grows.
RECOVERED = 0
RECOVERING = 1


@dataclass(frozen=True)
class PartitionState:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    # A reassignment in progress (KIP-455): replicas being added to and removed from
    # `replicas`, which meanwhile holds both the target and the original ones.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    # Kafka's LeaderRecoveryState (KIP-704): RECOVERING (1) after an unclean election until
    # the leader's ISR grows, else RECOVERED (0).
    leader_recovery_state: int = RECOVERED
    # In a ZooKeeper cluster: the version of the state znode this state was read at (Kafka's
    # zkVersion, its LeaderAndIsr's partitionEpoch); -1 where nothing was read (a local store,
    # a partition without a state znode yet). A decision made from a state by
    # `dataclasses.replace` keeps it, as Kafka's `newLeaderAndIsr` keeps the zkVersion: it is
    # the version the decision's write is conditional on, so a state that changed after the
    # decision was read refuses the write instead of being overwritten by it. Not part of
    # equality (a decision equals the state it describes); `diff_images` compares it apart.
    version: int = field(default=-1, compare=False)


@dataclass(frozen=True, eq=False)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionState, ...]
    configs: Mapping[str, str] = field(default_factory=dict)
    internal: bool = False

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclass(frozen=True, eq=False)
class MetadataImage:
    """One state of the cluster's metadata; never changed, replaced by the store."""

    cluster_id: str
    controller_id: int
    brokers: Mapping[int, BrokerInfo]
    topics: Mapping[str, TopicInfo]
    # Client quotas (producer_byte_rate, ...) by user / client-id entity: cluster-wide, as
    # Kafka keeps them in /config/clients and /config/users.
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=dict)
    # SCRAM credentials by user, then mechanism, in Kafka's text form (`salt=...,stored_key=
    # ...`): in a ZooKeeper cluster they share /config/users/<user> with the user's quotas and
    # are followed by the same watches. A single broker keeps them in its own file instead
    # (pybroker/security/sasl/credential_store.py), so its image has none.
    scram_credentials: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Dynamic broker configs (KIP-226) by entity: "<default>" for every broker's, "<id>" for
    # one broker's; cluster-wide, as Kafka keeps them in /config/brokers.
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Consumer and share groups' own configs (the GROUP config resource, config/group.py) by
    # group id, whether the group exists or not.
    group_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < len(info.partitions):
            return None
        return info.partitions[partition]

    def has_states(self, topic: str, partitions: int) -> bool:
        """Whether `topic` has at least `partitions` partitions, each with a state the
        controller wrote (a leader epoch: a ZooKeeper cluster's image shows a partition it
        has not elected yet at -1). What CreateTopics and CreatePartitions wait for, as
        Kafka's DelayedCreatePartitions waits for the answering broker's metadata to have
        their leaders."""
        info = self.topics.get(topic)
        return (info is not None and len(info.partitions) >= partitions
                and all(p.leader_epoch >= 0 for p in info.partitions))


@dataclass(frozen=True)
class MetadataDelta:
    """What one change of the store changed, for the listeners that follow it."""

    created_topics: frozenset[str] = frozenset()
    # Topics whose partitions were added or whose replicas, leader or ISR changed: name ->
    # partition indexes (a new topic lists all of its partitions).
    changed_partitions: Mapping[str, frozenset[int]] = field(default_factory=dict)
    deleted_topics: Mapping[str, TopicInfo] = field(default_factory=dict)
    changed_configs: frozenset[str] = frozenset()


def diff_images(old: MetadataImage, new: MetadataImage) -> MetadataDelta:
    """What changed from `old` to `new`: a topic whose id changed was deleted and created
    again; a partition is changed when its replicas, leader, epoch or ISR differ, or its
    state was written again (its version: a leader's next ISR write is conditional on it)."""
    created: set[str] = set()
    deleted: dict[str, TopicInfo] = {}
    changed: dict[str, frozenset[int]] = {}
    configs: set[str] = set()
    for name, info in old.topics.items():
        now = new.topics.get(name)
        if now is None or now.topic_id != info.topic_id:
            deleted[name] = info
    for name, info in new.topics.items():
        before = old.topics.get(name)
        if before is None or name in deleted:
            created.add(name)
            changed[name] = frozenset(range(len(info.partitions)))
            continue
        if before is info:
            continue
        moved = frozenset(p.partition for p in info.partitions
                          if p.partition >= len(before.partitions)
                          or p != before.partitions[p.partition]
                          or p.version != before.partitions[p.partition].version)
        if moved:
            changed[name] = moved
        if dict(before.configs) != dict(info.configs):
            configs.add(name)
    return MetadataDelta(frozenset(created), changed, deleted, frozenset(configs))
