"""The replica manager following the metadata store (Kafka's ReplicaManager.applyDelta): each
change creates, takes up or removes this broker's logs and leaderships.

A mixin of `ReplicaManager` (`manager.py`), which owns and documents the state; kept apart by
job from the request path.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING

import trio

from protocol.topic_partition import TopicPartition
from pybroker.cluster.metadata import MetadataDelta, MetadataImage, TopicInfo
from pybroker.cluster.topic_configs import TopicConfigs
from pybroker.replica.partition import Partition
from pybroker.replica.purgatory import Purgatory
from pybroker.storage.log_manager import KafkaStorageException, LogManager, remove_dirs

if TYPE_CHECKING:
    from pybroker.replica.fetcher import ReplicaFetchers

__all__ = ["ReplicaDeltas", "SYNCFS_MIN_NEW_LOGS"]

log = logging.getLogger(__name__)
# From this many new logs in one change, their files are made durable by one syncfs per log
# dir instead of a fsync each.
SYNCFS_MIN_NEW_LOGS = 64


class ReplicaDeltas:
    """Logs and leaderships after the metadata image; see `ReplicaManager` for the state."""

    node_id: int
    logs: LogManager
    topic_configs: TopicConfigs
    purgatory: Purgatory
    fetchers: ReplicaFetchers | None
    _partitions: dict[TopicPartition, Partition]
    _become_leader: Callable[..., Partition | None]  # ReplicaManager's
    min_isr_of: Callable[[str], int]
    _dirs_failed: trio.Event

    # -- following the metadata store (Kafka's applyDelta) ---------------------------------------
    def _create_logs(self, info: TopicInfo, partitions: Iterable[int], *,
                     sync_once: bool = False, new: bool = True) -> None:
        """This broker's logs of `partitions` of the topic, created where missing. Thread-safe
        (the log manager locks), so a new topic's logs are made in a worker thread: a
        directory and three files each, ~0.65 ms a partition, which for 1,000 partitions
        stalled every client for as long. With `sync_once` (in a worker thread) their files
        are made durable by one sync of each log dir rather than a fsync each."""
        config = self.topic_configs.log_config(info.name)
        for index in partitions:
            p = info.partitions[index]
            if self.node_id in p.replicas:
                try:
                    self.logs.get_or_create(
                        info.name, index, config,
                        leader_epoch=p.leader_epoch if p.leader == self.node_id else None,
                        sync=not sync_once, new=new)
                except KafkaStorageException as exc:  # its log dir is offline
                    log.warning("no log for %s-%d: %s", info.name, index, exc)
        if sync_once:
            self.logs.sync()

    def _take_up(self, info: TopicInfo, partitions: Iterable[int],
                 announce: bool = True) -> None:
        """`announce`: log each leadership taken (without, the caller sums them up)."""
        for index in partitions:
            state = info.partitions[index]
            tp = (info.name, index)
            known = self._partitions.get(tp)
            if known is not None and known.has_newer_state_than(state.version):
                continue  # an image built before one already taken up, applied late
            if state.leader == self.node_id:
                was_leading = tp in self._partitions and self._partitions[tp].is_leader
                self._become_leader(info.name, index, state, announce)
                if not was_leading:
                    self.purgatory.notify_all(tp)
                continue
            part = self._partitions.get(tp)
            if part is None and self.node_id in state.replicas:
                plog = self.logs.get(info.name, index)
                if plog is not None:
                    part = self._partitions[tp] = Partition(info.name, index, plog,
                                                            self.node_id, self.min_isr_of)
            if part is None:
                continue
            if part.make_follower(state.leader, state.leader_epoch, state.replicas,
                                  state.version):
                # Waiting acks=all produces and fetches learn they are not at the leader.
                self.purgatory.notify_all(tp)
            if self.fetchers is not None:
                if state.leader >= 0 and self.node_id in state.replicas:
                    self.fetchers.follow(tp, state.leader, state.leader_epoch)
                else:
                    self.fetchers.unfollow(tp)

    def load_image(self, image: MetadataImage) -> None:
        """At start (blocking, before the broker listens): every hosted partition's log,
        created where missing, and its leadership taken up, so that a leader's high watermark
        covers its whole log before anyone reads (Kafka's makeLeader). Without this the high
        watermark read back from a stale checkpoint after an unclean shutdown would hide
        acknowledged records until the next write.

        A replica whose log is not found is created empty, unless a log dir is offline: it
        may be in there, and it is offline too (`LogManager.get_or_create(new=False)`). The
        controller hears of those as of a dir failing later (`announce_offline_replicas`)."""
        for info in image.topics.values():
            indexes = range(len(info.partitions))
            self._create_logs(info, indexes, new=False)
            # One line a topic, not one a partition: 10,000 lines to stderr were a tenth of
            # a start with 10,000 partitions on disk (issue #15 §3).
            self._take_up(info, indexes, announce=False)
            led = [p for p in indexes if info.partitions[p].leader == self.node_id]
            if led:
                log.info("broker %d leads %d of the %d partitions of %s", self.node_id,
                         len(led), len(info.partitions), info.name)
        if self.logs.offline_partitions():
            self._dirs_failed.set()

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
            # Replicas moved off this broker (a reassignment done): Kafka's StopReplica with
            # delete — stop following and remove the log.
            detached = []
            for i in sorted(indexes):
                if (self.node_id in info.partitions[i].replicas
                        or self.logs.get(name, i) is None):
                    continue
                log.info("replica %s-%d moved off broker %d: removing its log", name, i,
                         self.node_id)
                self.forget(name, i)
                self.purgatory.notify_all((name, i))
                path = self.logs.detach(name, i)
                if path is not None:
                    detached.append(path)
            if detached:
                await trio.to_thread.run_sync(remove_dirs, detached)
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
        if self.fetchers is not None:
            self.fetchers.unfollow((topic, partition))
