"""The composition root: one broker's metadata, logs, replica manager, purgatory, coordinators.

Built synchronously (opening the logs may recover segments after an unclean shutdown, so the
server builds it in a worker thread); `run_background` owns the periodic work (retention,
flushing, checkpoints, log cleaning) inside the server's nursery; `close` flushes and marks a
clean shutdown.
"""
from __future__ import annotations

import logging
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

import trio

from protocol.errors import ErrorCode
from pybroker.cluster.metadata import LocalMetadataStore, TopicInfo
from pybroker.cluster.topic_names import invalid_topic_reason, is_internal
from pybroker.config import BrokerConfig, ConfigError, TopicConfig, resolve_topic_config, \
    validate_topic_configs
from pybroker.coordinator.group_coordinator import GroupCoordinator
from pybroker.coordinator.producer_ids import ProducerIdManager
from pybroker.connection_limits import ConnectionLimits
from pybroker.idle import IdleConnections
from pybroker.purgatory import Purgatory
from pybroker.replica_manager import ReplicaManager
from pybroker.storage.cleaner import LogCleaner
from pybroker.storage.log_manager import LogManager, remove_dirs
from pybroker.storage.log_config import LogConfig
from pybroker.storage.partition_log import PartitionLog
from pybroker.storage.segment import LogSegment

log = logging.getLogger(__name__)
# How often `.deleted` segment files are looked at; file.delete.delay.ms is counted from the
# rename, so a file goes at most this much later than its delay says.
DELETE_CHECK_INTERVAL_MS = 1000


def _unlink(segments: list[LogSegment]) -> None:
    for segment in segments:
        segment.delete()


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id: int = config.node_id
        self.log_dirs = [Path(d) for d in config.log_dirs]
        listener = config.broker_listeners[0]
        self.metadata = LocalMetadataStore(self.log_dirs[0], self.node_id, listener.host,
                                           listener.port, config.broker_rack)
        # Before the logs: loading them asks `log_config`, which caches topic configs here.
        self._topic_configs: dict[str, TopicConfig] = {}
        self.logs = LogManager([str(d) for d in self.log_dirs], config_for=self.log_config)
        self.cleaner = LogCleaner(self.logs, max_map_entries=LogCleaner.max_map_entries_for(
            int(config["log.cleaner.dedupe.buffer.size"]), config.log_cleaner_threads))
        self.producer_ids = ProducerIdManager(self.log_dirs[0])
        self.replicas = ReplicaManager(self)
        self.purgatory = Purgatory()
        self.connections = IdleConnections(config.connections_max_idle_ms)
        self.limits = ConnectionLimits(config.max_connections, config.max_connections_per_ip)
        # Held by whoever creates, grows or deletes topics for a client across an await (the
        # logs are made in a worker thread): one change at a time, as Kafka's controller does.
        self.topic_changes = trio.Lock()
        for topic in self.metadata.image.topics.values():
            self._open_partitions(topic)
        self.groups = GroupCoordinator(self)
        self.groups.load()

    # -- topics --------------------------------------------------------------------------------
    def topic_config(self, topic: str) -> TopicConfig:
        cached = self._topic_configs.get(topic)
        if cached is None:
            info = self.metadata.image.topics.get(topic)
            cached = resolve_topic_config(self.config, info.configs if info else {})
            self._topic_configs[topic] = cached
        return cached

    def log_config(self, topic: str) -> LogConfig:
        tc = self.topic_config(topic)
        return LogConfig(
            segment_bytes=tc.segment_bytes, segment_ms=tc.max_segment_ms,
            retention_ms=tc.retention_ms, retention_bytes=tc.retention_bytes,
            index_interval_bytes=tc.index_interval_bytes,
            segment_index_bytes=tc.segment_index_bytes,
            flush_messages=tc.flush_messages, flush_ms=tc.flush_ms,
            message_timestamp_type=tc.message_timestamp_type,
            max_message_bytes=tc.max_message_bytes,
            file_delete_delay_ms=tc.file_delete_delay_ms,
            cleanup_policy=",".join(sorted(tc.cleanup_policy)),
            delete_retention_ms=tc.delete_retention_ms,
            min_cleanable_dirty_ratio=tc.min_cleanable_dirty_ratio,
            min_compaction_lag_ms=tc.min_compaction_lag_ms,
            max_compaction_lag_ms=tc.max_compaction_lag_ms,
            producer_id_expiration_ms=self.config.producer_id_expiration_ms,
            segment_jitter_ms=tc.segment_jitter_ms)

    def _create_logs(self, topic: TopicInfo, config: LogConfig, *, sync_once: bool = False,
                     ) -> None:
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
        """Create a new topic's (or new partitions') logs in a worker thread: a directory and
        three files each, ~0.65 ms a partition, which for 1,000 partitions stalled every
        client for as long. Until a partition's log exists it answers NOT_LEADER_OR_FOLLOWER,
        which clients retry, as in Kafka while a new leader creates its log. Callers hold
        `topic_changes`, so a deletion cannot run meanwhile and leave a log behind."""
        await trio.to_thread.run_sync(partial(self._create_logs, topic,
                                              self.log_config(topic.name), sync_once=True))

    def _open_partitions(self, topic: TopicInfo) -> None:
        self._create_logs(topic, self.log_config(topic.name))
        for p in topic.partitions:
            plog = self.logs.get(topic.name, p.partition)
            if plog is not None and p.leader == self.node_id and list(p.isr) == [self.node_id]:
                # The only in-sync replica: everything in its log is committed, as on every
                # append (Kafka's makeLeader moves the high watermark the same way). Without
                # this the high watermark read back from a stale checkpoint after an unclean
                # shutdown would hide acknowledged records until the next write.
                plog.update_high_watermark()

    def partition_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get(topic, partition)

    def leader_epoch(self, topic: str, partition: int) -> int:
        state = self.metadata.image.partition(topic, partition)
        return state.leader_epoch if state else -1

    def is_internal_topic(self, topic: str) -> bool:
        info = self.metadata.image.topics.get(topic)
        return bool(info and info.internal)

    async def auto_create_topic(self, name: str) -> ErrorCode:
        async with self.topic_changes:
            code, _ = await self.create_topic_off_loop(
                name, self.config.num_partitions, self.config.default_replication_factor, {})
        if code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return ErrorCode.NONE
        return code

    def check_new_topic(self, name: str, partitions: int, replication_factor: int,
                        configs: dict[str, str]) -> tuple[ErrorCode, str | None]:
        reason = invalid_topic_reason(name)
        if reason:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, reason
        if name in self.metadata.image.topics:
            return ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
        # As Kafka: '.' and '_' map to the same metric names, so such names may not coexist.
        folded = name.replace(".", "_")
        for existing in self.metadata.image.topics:
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
                       internal: bool = False) -> tuple[ErrorCode, str | None, TopicInfo | None]:
        """Validate a new topic and record it in the metadata; the caller creates its logs
        (`create_topic` at once, `create_topic_off_loop` in a worker thread)."""
        code, message = self.check_new_topic(name, partitions, replication_factor, configs)
        if code != ErrorCode.NONE or validate_only:
            return code, message, None
        info = self.metadata.create_topic(name, partitions, configs,
                                          internal=internal or is_internal(name))
        self._topic_configs.pop(name, None)
        log.info("created topic %s with %d partition(s)", name, partitions)
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
            self._open_partitions(info)
        return code, message

    async def create_topic_off_loop(self, name: str, partitions: int,
                                    replication_factor: int, configs: dict[str, str], *,
                                    validate_only: bool = False) -> tuple[ErrorCode, str | None]:
        """Create a topic for a client (CreateTopics, auto-creation), its logs made in a
        worker thread; the caller holds `topic_changes`."""
        code, message, info = self.register_topic(name, partitions, replication_factor,
                                                  configs, validate_only=validate_only)
        if info is not None:
            await self.create_logs_off_loop(info)
        return code, message

    def delete_topic(self, name: str) -> ErrorCode:
        code, detached = self.detach_topic(name)
        remove_dirs(detached)
        return code

    def detach_topic(self, name: str) -> tuple[ErrorCode, list[Path]]:
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
            self.purgatory.notify((name, p.partition))
        self._topic_configs.pop(name, None)
        self.groups.on_topic_deleted(name)
        log.info("deleted topic %s", name)
        return ErrorCode.NONE, detached

    async def add_partitions(self, name: str, total: int) -> None:
        """CreatePartitions; the caller holds `topic_changes`."""
        self.metadata.add_partitions(name, total)
        await self.create_logs_off_loop(self.metadata.image.topics[name])

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.metadata.set_topic_configs(name, configs)
        self._topic_configs.pop(name, None)
        config = self.log_config(name)
        for p in self.metadata.image.topics[name].partitions:
            plog = self.logs.get(name, p.partition)
            if plog is not None:
                plog.config = config

    # -- background work -----------------------------------------------------------------------
    async def run_background(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._every, self.config.log_retention_check_interval_ms,
                               self._retention)
            nursery.start_soon(self._every, self.config.log_flush_scheduler_interval_ms,
                               self._flush)
            nursery.start_soon(self._every, DELETE_CHECK_INTERVAL_MS, self._delete_files)
            nursery.start_soon(self._every, self.config.log_flush_offset_checkpoint_interval_ms,
                               self._checkpoint)
            if self.config.log_cleaner_enable:
                nursery.start_soon(self._every, self.config.log_cleaner_backoff_ms,
                                   self.clean_logs)
            nursery.start_soon(self.connections.reap)
            await nursery.start(self.groups.run)
            task_status.started()

    async def _every(self, interval_ms: int, job: Any) -> None:
        interval = max(interval_ms, 10) / 1000
        while True:
            await trio.sleep(interval)
            try:
                await job()
            except Exception:
                log.exception("background job %s failed", job.__name__)

    async def _retention(self) -> None:
        deleted = self.logs.cleanup(int(time.time() * 1000))
        if deleted:
            log.info("retention deleted %d segment(s)", deleted)

    async def _delete_files(self) -> None:
        """Remove segments retention or the cleaner renamed `.deleted`, once their
        file.delete.delay.ms is over (Kafka schedules one task per file): closed here, and
        unlinked in a worker thread, since unlinking a large file takes the file system tens
        of milliseconds."""
        due = self.logs.close_due_deletes(int(time.time() * 1000))
        if due:
            await trio.to_thread.run_sync(_unlink, due)

    async def _flush(self) -> None:
        await trio.to_thread.run_sync(self.logs.flush_dirty, int(time.time() * 1000))

    async def _checkpoint(self) -> None:
        await trio.to_thread.run_sync(self.logs.checkpoint)

    async def clean_logs(self) -> int:
        """One pass of the log cleaner: compact every log that needs it, filthiest first.

        Planning and the final swap run here, on the event loop, between requests, so reads
        never see half a swap; reading, filtering, writing and fsyncing the cleaned segments
        run in a worker thread, as does writing the checkpoint. A cancel (shutdown) abandons the thread and tells it to stop; it removes
        its own files. Returns how many logs were cleaned.
        """
        cleaned = 0
        done: set[tuple[str, int]] = set()
        while True:
            plan = self.cleaner.grab_filthiest_log(int(time.time() * 1000), exclude=done)
            if plan is None:
                break
            done.add(plan.topic_partition)
            stop = threading.Event()
            try:
                result = await trio.to_thread.run_sync(self.cleaner.clean, plan, stop,
                                                       abandon_on_cancel=True)
            except BaseException:
                stop.set()
                raise
            if self.cleaner.commit(result, write_checkpoint=False) is not None:
                cleaned += 1
        files = self.cleaner.checkpoint_files()
        if files:
            await trio.to_thread.run_sync(self.cleaner.write_checkpoint_files, files)
        return cleaned

    def close(self) -> None:
        self.logs.close()
