"""Small builders for the controller's tests: partition states, images, and a partition in
ZooKeeper."""
from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pybroker.cluster import zk_data as zd
from pybroker.cluster.image import MetadataImage, PartitionState, TopicInfo


def ps(leader: int, replicas: Sequence[int], isr: Sequence[int], epoch: int = 5,
       partition: int = 0) -> PartitionState:
    return PartitionState(partition, leader, epoch, tuple(replicas), tuple(isr))


def image(topics: Mapping[str, Sequence[PartitionState]],
          configs: Mapping[str, Mapping[str, str]] | None = None) -> MetadataImage:
    """An image of `topics` (name -> partition states, renumbered in order)."""
    configs = configs or {}
    infos = {
        name: TopicInfo(name, uuid.UUID(int=i + 1),
                        tuple(PartitionState(p, s.leader, s.leader_epoch, s.replicas, s.isr)
                              for p, s in enumerate(states)),
                        dict(configs.get(name, {})))
        for i, (name, states) in enumerate(topics.items())}
    return MetadataImage("cluster", 0, {}, infos)


def seed_partition(zk: Any, topic: str, replicas: Sequence[int],
                   state: zd.LeaderAndIsr) -> None:
    """Partition 0 of a new `topic` in a ZooKeeper (a client of `memory_zk`): its assignment
    and its state znode (version 0), as the controller would have created them."""
    for path in zd.PERSISTENT_PATHS:
        zk.ensure_path(path)
    zk.create(zd.topic_path(topic), zd.encode_topic(zd.TopicAssignment({0: tuple(replicas)})),
              makepath=True)
    zk.create(zd.state_path(topic, 0), zd.encode_state(state), makepath=True)
