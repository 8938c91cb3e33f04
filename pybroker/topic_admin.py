"""Creating, growing, reconfiguring and deleting topics for clients (Kafka's AdminManager).

The rules every admin API shares live here once: a new topic's name, partition count,
replication factor and configs are checked; the change is recorded in the metadata store;
this broker's logs follow (made in a worker thread for a client: a directory and three files
each, ~0.65 ms a partition, which for 1,000 partitions stalled every client for as long).
`changes` is held by whoever changes topics for a client across an await, one change at a
time, as Kafka's controller serialises them. Until a new partition's log exists it answers
NOT_LEADER_OR_FOLLOWER, which clients retry, as in Kafka while a new leader creates its log.

Deleting a topic tells `on_deleted` listeners (the group coordinator drops its offsets).
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import trio

from protocol.errors import ErrorCode
from pybroker.cluster.metadata import LocalMetadataStore, TopicInfo
from pybroker.cluster.topic_configs import TopicConfigs
from pybroker.cluster.topic_names import invalid_topic_reason, is_internal
from pybroker.config import BrokerConfig, ConfigError, inert_topic_config_warnings, \
    validate_topic_configs
from pybroker.purgatory import Purgatory
from pybroker.replica_manager import ReplicaManager
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_manager import LogManager, remove_dirs

__all__ = ["TopicAdmin"]

log = logging.getLogger(__name__)


class TopicAdmin:
    def __init__(self, config: BrokerConfig, metadata: LocalMetadataStore, logs: LogManager,
                 topic_configs: TopicConfigs, replicas: ReplicaManager,
                 purgatory: Purgatory) -> None:
        self.config = config
        self.node_id = config.node_id
        self.metadata = metadata
        self.logs = logs
        self.topic_configs = topic_configs
        self.replicas = replicas
        self.purgatory = purgatory
        self.changes = trio.Lock()
        self.on_deleted: list[Callable[[str], Awaitable[None]]] = []

    # -- this broker's logs of a topic ---------------------------------------------------------
    def _create_logs(self, topic: TopicInfo, config: LogConfig, *,
                     sync_once: bool = False) -> None:
        """This broker's logs of the topic's partitions, created where missing. Thread-safe
        (the log manager locks), so new topics' logs are made in a worker thread. With
        `sync_once` (in a worker thread) their files are made durable by one sync of each log
        dir rather than a fsync each: 10,000 partitions took 10 s."""
        for p in topic.partitions:
            if self.node_id in p.replicas:
                self.logs.get_or_create(
                    topic.name, p.partition, config,
                    leader_epoch=p.leader_epoch if p.leader == self.node_id else None,
                    sync=not sync_once)
        if sync_once:
            self.logs.sync()

    async def create_logs_off_loop(self, topic: TopicInfo) -> None:
        """A new topic's (or new partitions') logs, made in a worker thread; callers hold
        `changes`, so a deletion cannot run meanwhile and leave a log behind."""
        await trio.to_thread.run_sync(partial(
            self._create_logs, topic, self.topic_configs.log_config(topic.name),
            sync_once=True))

    def open_partitions(self, topic: TopicInfo) -> None:
        """The topic's logs, created where missing, and its leaderships taken up: with this
        broker the only in-sync replica, everything in its log is committed (Kafka's
        makeLeader moves the high watermark the same way). Without this the high watermark
        read back from a stale checkpoint after an unclean shutdown would hide acknowledged
        records until the next write."""
        self._create_logs(topic, self.topic_configs.log_config(topic.name))
        self.replicas.make_leaders(topic.name, topic.partitions)

    def warn_inert(self, topic: str, configs: dict[str, str]) -> None:
        for warning in inert_topic_config_warnings(configs):
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

    def register_topic(self, name: str, partitions: int, replication_factor: int,
                       configs: dict[str, str], *, validate_only: bool = False,
                       internal: bool = False, assignments: list[list[int]] | None = None,
                       ) -> tuple[ErrorCode, str | None, TopicInfo | None]:
        """Validate a new topic and record it in the metadata; the caller creates its logs
        (`create_topic` at once, `create_topic_off_loop` in a worker thread). `assignments`
        (validated by the caller) are the partitions' replicas, leader first."""
        code, message = self.check_new_topic(name, partitions, replication_factor, configs)
        if code != ErrorCode.NONE or validate_only:
            return code, message, None
        info = self.metadata.create_topic(name, partitions, configs,
                                          internal=internal or is_internal(name),
                                          assignments=assignments)
        self.topic_configs.invalidate(name)
        log.info("created topic %s with %d partition(s)", name, partitions)
        self.warn_inert(name, configs)
        return ErrorCode.NONE, None, info

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     configs: dict[str, str], *, validate_only: bool = False,
                     internal: bool = False) -> tuple[ErrorCode, str | None]:
        """Create a topic and its logs on this thread: for __consumer_offsets, which the
        group coordinator's synchronous code creates on first use."""
        code, message, info = self.register_topic(name, partitions, replication_factor,
                                                  configs, validate_only=validate_only,
                                                  internal=internal)
        if info is not None:
            self.open_partitions(info)
        return code, message

    async def create_topic_off_loop(self, name: str, partitions: int,
                                    replication_factor: int, configs: dict[str, str], *,
                                    validate_only: bool = False,
                                    assignments: list[list[int]] | None = None,
                                    ) -> tuple[ErrorCode, str | None]:
        """Create a topic for a client (CreateTopics, auto-creation), its logs made in a
        worker thread; the caller holds `changes`."""
        code, message, info = self.register_topic(name, partitions, replication_factor,
                                                  configs, validate_only=validate_only,
                                                  assignments=assignments)
        if info is not None:
            await self.create_logs_off_loop(info)
        return code, message

    async def auto_create_topic(self, name: str) -> ErrorCode:
        async with self.changes:
            code, _ = await self.create_topic_off_loop(
                name, self.config.num_partitions, self.config.default_replication_factor, {})
        if code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return ErrorCode.NONE
        return code

    async def add_partitions(self, name: str, total: int) -> None:
        """CreatePartitions; the caller holds `changes`."""
        self.metadata.add_partitions(name, total)
        await self.create_logs_off_loop(self.metadata.image.topics[name])

    # -- configs -------------------------------------------------------------------------------
    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.warn_inert(name, configs)
        self.metadata.set_topic_configs(name, configs)
        self.topic_configs.invalidate(name)
        config = self.topic_configs.log_config(name)
        for p in self.metadata.image.topics[name].partitions:
            plog = self.logs.get(name, p.partition)
            if plog is not None:
                plog.config = config

    # -- deleting ------------------------------------------------------------------------------
    async def delete_topic(self, name: str) -> ErrorCode:
        code, detached = await self.detach_topic(name)
        remove_dirs(detached)
        return code

    async def detach_topic(self, name: str) -> tuple[ErrorCode, list[Path]]:
        """Delete a topic, except for removing its files: returns the partitions' renamed
        `*-delete` directories for the caller to remove (DeleteTopics does it in a worker
        thread: removing a gigabyte of segments took ~240 ms, a stall for every client).
        A crash before then leaves them to the next start, which removes them."""
        info = self.metadata.image.topics.get(name)
        if info is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []
        self.metadata.delete_topic(name)
        detached = []
        for p in info.partitions:
            if self.logs.get(name, p.partition) is not None:
                path = self.logs.detach(name, p.partition)
                if path is not None:
                    detached.append(path)
            self.replicas.forget(name, p.partition)
            self.purgatory.notify_all((name, p.partition))
        self.topic_configs.invalidate(name)
        for listener in self.on_deleted:
            await listener(name)
        log.info("deleted topic %s", name)
        return ErrorCode.NONE, detached
