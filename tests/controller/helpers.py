"""Small builders for the controller's decision tests: partition states and images."""
from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

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
