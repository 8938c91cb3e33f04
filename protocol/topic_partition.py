"""A partition's name as the broker passes it around: (topic, partition index).

One alias, declared once, for every module that keys state by partition: the logs, the
cleaner's checkpoints, the purgatory, the replica manager, the group coordinator's offsets.
It lives here because `protocol` is the layer all of them may import (the group state machine
may not import storage), as Kafka's TopicPartition lives in its common package, which clients
and broker share.

A plain tuple, not a class: it is a dict key on every request's path, where a tuple is the
cheapest to build, hash and compare, and Kafka's checkpoints and wire fields hold the two
values as they are. The client library's `pybroker.client.cluster.TopicPartition` is a
NamedTuple of the same two fields, so one of its values is also one of these.
"""
from __future__ import annotations

from typing import TypeAlias

__all__ = ["TopicPartition"]

TopicPartition: TypeAlias = tuple[str, int]
