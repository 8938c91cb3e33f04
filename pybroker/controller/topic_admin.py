"""Creating, growing, reconfiguring and deleting topics for clients (Kafka's AdminManager).

The rules every admin API shares live here once: a new topic's name, partition count,
replication factor and configs are checked, and the change is asked of the metadata store.
Nothing here touches a log: the store publishes the change and its listeners follow it (the
replica manager creates and deletes this broker's logs, the group coordinator drops a deleted
topic's offsets), as every broker of a cluster will. `changes` is held by whoever changes
topics for a client across an await, one change at a time, as Kafka's controller serialises
them.
"""
from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Mapping

import trio

from protocol.errors import ErrorCode, KafkaError
from pybroker.cluster.metadata import CHANGE_TIMEOUT_S, MetadataImage, MetadataStore
from pybroker.cluster.topic_names import invalid_topic_reason, is_internal
from pybroker.controller.assignment import assign_added_partitions, assign_replicas
from pybroker.config import BrokerConfig, ConfigError, inert_topic_config_warnings, \
    validate_topic_configs

__all__ = ["TopicAdmin"]

log = logging.getLogger(__name__)


class TopicAdmin:
    def __init__(self, config: BrokerConfig, metadata: MetadataStore) -> None:
        self.config = config
        self.metadata = metadata
        self.changes = trio.Lock()
        self._rng = random.Random()

    def warn_inert(self, topic: str, configs: Mapping[str, str]) -> None:
        for warning in inert_topic_config_warnings(dict(configs)):
            log.warning("topic %s: %s", topic, warning)

    # -- creating ------------------------------------------------------------------------------
    def check_new_topic(self, name: str, partitions: int, replication_factor: int,
                        configs: dict[str, str]) -> tuple[ErrorCode, str | None]:
        reason = invalid_topic_reason(name)
        if reason:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, reason
        topics = self.metadata.image.topics
        if name in topics:
            return ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
        # As Kafka: '.' and '_' map to the same metric names, so such names may not coexist.
        folded = name.replace(".", "_")
        for existing in topics:
            if existing.replace(".", "_") == folded:
                return (ErrorCode.INVALID_TOPIC_EXCEPTION,
                        f"Topic '{name}' collides with existing topic: {existing}")
        if partitions <= 0:
            return ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
        brokers = len(self.metadata.image.brokers)
        if replication_factor <= 0:
            return (ErrorCode.INVALID_REPLICATION_FACTOR,
                    "Replication factor must be larger than 0.")
        if replication_factor > brokers:
            return (ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"Unable to replicate the partition {replication_factor} time(s): "
                    f"The target replication factor of {replication_factor} cannot be "
                    f"reached because only {brokers} broker(s) are registered.")
        try:
            validate_topic_configs(configs)
        except ConfigError as exc:
            return ErrorCode.INVALID_CONFIG, str(exc)
        return ErrorCode.NONE, None

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: dict[str, str], *, validate_only: bool = False,
                           internal: bool = False, assignments: list[list[int]] | None = None,
                           admit: Callable[[int], bool] | None = None,
                           wait: bool = True) -> tuple[ErrorCode, str | None]:
        """Validate a new topic and ask the store for it; it is done (this broker's logs
        made by the replica manager) when this returns, or, with `wait` False, written
        (`await_leaders` then waits for it). `assignments` (validated by the caller) are the
        partitions' replicas, leader first. `admit(partitions)`, once the topic is valid and
        assigned, is the client's controller_mutation_rate: False refuses it with
        THROTTLING_QUOTA_EXCEEDED. Client-driven callers hold `changes`."""
        code, message = self.check_new_topic(name, partitions, replication_factor, configs)
        if code != ErrorCode.NONE or validate_only:
            return code, message
        if assignments is None:
            try:
                assignments = self.assign(partitions, replication_factor)
            except KafkaError as exc:
                return exc.code, exc.message
        if admit is not None and not admit(len(assignments)):
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED, None  # as Kafka 4.1: no message
        try:
            await self.metadata.create_topic(
                name, partitions, configs, internal=internal or is_internal(name),
                assignments=assignments, wait_s=CHANGE_TIMEOUT_S if wait else 0.0)
        except KeyError:  # created meanwhile by a caller not holding `changes`
            return ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
        log.info("created topic %s with %d partition(s)", name, partitions)
        self.warn_inert(name, configs)
        return ErrorCode.NONE, None

    async def await_leaders(self, wanted: Mapping[str, int], timeout_s: float) -> set[str]:
        """Of `wanted` (topic -> partition count), the topics whose partitions all have a
        leader in this broker's image within `timeout_s`: what Kafka's
        DelayedCreatePartitions waits for before it answers CreateTopics or CreatePartitions
        (by name, as Kafka's). At 0 or less none, without looking: ZooKeeper-mode Kafka
        answers every topic written REQUEST_TIMED_OUT at once then, led or not."""
        return await self._await(
            wanted, lambda image, name: image.has_states(name, wanted[name]), timeout_s)

    async def await_deletions(self, names: Iterable[str], timeout_s: float) -> set[str]:
        """Of `names`, the topics gone from this broker's image within `timeout_s`: what
        Kafka's DelayedDeleteTopics waits for before it answers DeleteTopics (by name, as
        Kafka's). At 0 or less none, without looking: ZooKeeper-mode Kafka answers every
        topic marked for deletion REQUEST_TIMED_OUT at once then, gone or not."""
        return await self._await(names, lambda image, name: name not in image.topics,
                                 timeout_s)

    async def _await(self, topics: Iterable[str], done: Callable[[MetadataImage, str], bool],
                     timeout_s: float) -> set[str]:
        """The topics `done` holds for in this broker's image within `timeout_s` (none,
        without looking, at 0 or less): the purgatory wait of Kafka's topic admin APIs."""
        if timeout_s <= 0:
            return set()
        names = list(topics)
        await self.metadata.wait_for(
            lambda image: all(done(image, name) for name in names), timeout_s)
        image = self.metadata.image
        return {name for name in names if done(image, name)}

    def _brokers(self) -> dict[int, str | None]:
        return {b.node_id: b.rack for b in self.metadata.image.brokers.values()}

    def assign(self, partitions: int, replication_factor: int) -> list[list[int]]:
        """Replicas for a new topic over the registered brokers (Kafka's
        assignReplicasToBrokers: round-robin from a random start, rack-aware when every
        broker has a rack). KafkaError INVALID_REPLICATION_FACTOR and the like."""
        return [list(r) for r in assign_replicas(self._brokers(), partitions,
                                                 replication_factor, rng=self._rng)]

    async def auto_create_topic(self, name: str) -> ErrorCode:
        async with self.changes:
            code, _ = await self.create_topic(
                name, self.config.num_partitions, self.config.default_replication_factor, {})
        if code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return ErrorCode.NONE
        return code

    async def add_partitions(self, name: str, total: int,
                             assignments: list[list[int]] | None = None, *,
                             wait: bool = True) -> None:
        """CreatePartitions; the caller holds `changes`. Without `assignments` the new
        partitions continue the topic's round-robin over the registered brokers. With `wait`
        False it returns once the change is written (`await_leaders` waits for it)."""
        if assignments is None:
            existing = [p.replicas for p in self.metadata.image.topics[name].partitions]
            assignments = [list(r) for r in assign_added_partitions(
                existing, self._brokers(), total, rng=self._rng)]
        await self.metadata.add_partitions(name, total, assignments,
                                           wait_s=CHANGE_TIMEOUT_S if wait else 0.0)

    # -- configs -------------------------------------------------------------------------------
    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.warn_inert(name, configs)
        await self.metadata.set_topic_configs(name, configs)

    # -- deleting ------------------------------------------------------------------------------
    async def delete_topic(self, name: str, *, wait: bool = True) -> ErrorCode:
        """Delete a topic; its logs go with the store's delta (renamed `*-delete`, removed in
        a worker thread; a crash before then leaves them to the next start, which removes
        them). With `wait` False it returns once the deletion is asked of the store (in a
        cluster: marked for the controller; `await_deletions` then waits for it)."""
        try:
            await self.metadata.delete_topic(name, wait_s=CHANGE_TIMEOUT_S if wait else 0.0)
        except KeyError:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        log.info("deleted topic %s" if wait else "topic %s marked for deletion", name)
        return ErrorCode.NONE
