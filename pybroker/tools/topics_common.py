"""What both ways of kafka-topics share (`--bootstrap-server` through the admin API,
`--zookeeper` on the znodes): parsing `--config` and `--replica-assignment`, and the
describe lines, printed exactly as Kafka's TopicCommand prints them."""
from __future__ import annotations

import uuid
from typing import Iterable, Mapping, Sequence

from pybroker.client.cluster import format_topic_id
from pybroker.tools.common import ToolError, UsageError


class TopicMissing(ToolError):
    """Kafka's IllegalArgumentException path: the message alone, no prefix."""

    def __init__(self, message: str) -> None:
        super().__init__(message, plain=True)


def parse_configs(items: Sequence[str] | None) -> dict[str, str]:
    configs: dict[str, str] = {}
    for item in items or ():
        parts = [x.strip() for x in item.split("=")]
        if len(parts) != 2 or not parts[0]:
            raise TopicMissing('requirement failed: Invalid topic config: all configs to be '
                               'added must be in the format "key=val".')
        configs[parts[0]] = parts[1]
    return configs


def parse_assignment(text: str) -> dict[int, list[int]]:
    out_: dict[int, list[int]] = {}
    for i, part in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in part.split(":")]
        except ValueError:
            raise UsageError(f"Invalid replica assignment '{text}'") from None
        if len(set(brokers)) != len(brokers):
            raise ToolError("Partition replica lists may not contain duplicate entries: "
                            + ",".join(str(b) for b in brokers if brokers.count(b) > 1))
        if out_ and len(brokers) != len(out_[0]):
            raise ToolError(f"Partition {i} has different replication factor: {brokers}")
        out_[i] = brokers
    return out_


def topic_line(name: str, topic_id: uuid.UUID | None, partition_count: int,
               replication_factor: int, overrides: Mapping[str, str],
               deleting: bool = False) -> str:
    """Kafka's TopicDescription.printDescription: the topic id only when it has one."""
    line = f"Topic: {name}"
    if topic_id is not None and topic_id.int:
        line += f"\tTopicId: {format_topic_id(topic_id)}"
    line += (f"\tPartitionCount: {partition_count}\tReplicationFactor: {replication_factor}"
             "\tConfigs: " + ",".join(f"{k}={v}" for k, v in overrides.items()))
    return line + ("\tMarkedForDeletion: true" if deleting else "")


def partition_line(name: str, partition: int, leader: int | None, replicas: Sequence[int],
                   isr: Iterable[int], *, elr: bool = True, deleting: bool = False) -> str:
    """Kafka's PartitionDescription.printDescription: `Leader: none` without a leader; the
    Elr columns (3.8+, N/A when the broker's metadata has none) unless printing 2.8's lines."""
    line = (f"\tTopic: {name}\tPartition: {partition}"
            f"\tLeader: {leader if leader is not None else 'none'}"
            f"\tReplicas: {','.join(map(str, replicas))}\tIsr: {','.join(map(str, isr))}")
    if elr:
        line += "\tElr: N/A\tLastKnownElr: N/A"
    return line + ("\tMarkedForDeletion: true" if deleting else "")
