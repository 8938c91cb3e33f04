"""The replication throttles kafka-reassign-partitions sets and clears (Kafka's
ReassignPartitionsCommand: calculateProposedMoveMap, calculateLeaderThrottles,
calculateFollowerThrottles, calculateReassigningBrokers, modifyInterBrokerThrottle,
clearAllThrottles), with its messages.

A move of a partition copies from its sources (its current replicas, or, when a reassignment
of it is already in progress, that one's original replicas) to its destinations (the new
replicas that are not sources). `--execute --throttle N` throttles each source as leader and
each destination as follower, in the topics' `leader/follower.replication.throttled.replicas`,
and sets both rates to N on every broker taking part, counting the moves already in progress
too (Kafka resubmits their lists with `--additional`). `--verify`, once nothing moves, and
`--cancel` delete the rates on every broker of the cluster and the lists of the file's topics.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from protocol.errors import KafkaError
from pybroker.client.admin import Admin, AlterConfigOp, AlterOpType, ConfigResource, \
    PartitionReassignment, ResourceType
from pybroker.client.cluster import TopicPartition
from pybroker.tools.common import ToolError, out
from pybroker.tools.leader_election import java_exception

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
BROKER_THROTTLES = (LEADER_RATE, FOLLOWER_RATE,
                    "replica.alter.log.dirs.io.max.bytes.per.second")
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
TOPIC_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
YOU_MUST_RUN_VERIFY_PERIODICALLY = (
    "Warning: You must run --verify periodically, until the reassignment completes, to "
    "ensure the throttle is removed.")


@dataclass(frozen=True)
class Move:
    sources: frozenset[int]
    destinations: frozenset[int]


Moves = dict[str, dict[int, Move]]


def proposed_moves(ongoing: Mapping[TopicPartition, PartitionReassignment],
                   proposed: Mapping[TopicPartition, Sequence[int]],
                   current: Mapping[TopicPartition, Sequence[int]]) -> Moves:
    """Every move once the proposal starts: those in progress, then the proposed ones."""
    moves: Moves = {}
    for tp, r in ongoing.items():
        moves.setdefault(tp.topic, {})[tp.partition] = Move(
            frozenset(r.replicas) - frozenset(r.adding_replicas), frozenset(r.adding_replicas))
    for tp, replicas in proposed.items():
        of_topic = moves.setdefault(tp.topic, {})
        sources = of_topic[tp.partition].sources if tp.partition in of_topic \
            else frozenset(current[tp])
        of_topic[tp.partition] = Move(sources, frozenset(replicas) - sources)
    return moves


def leader_throttles(moves: Moves) -> dict[str, str]:
    return {topic: ",".join(sorted(f"{p}:{b}" for p, m in parts.items() for b in m.sources))
            for topic, parts in moves.items()}


def follower_throttles(moves: Moves) -> dict[str, str]:
    return {topic: ",".join(sorted(f"{p}:{b}" for p, m in parts.items()
                                   for b in m.destinations - m.sources))
            for topic, parts in moves.items()}


def reassigning_brokers(moves: Moves) -> list[int]:
    return sorted({b for parts in moves.values() for m in parts.values()
                   for b in m.sources | m.destinations})


async def set_throttles(admin: Admin, moves: Moves, rate: int) -> None:
    """Kafka's modifyReassignmentThrottle: the topics' lists, then the brokers' rates."""
    leaders, followers = leader_throttles(moves), follower_throttles(moves)
    await _alter(admin, {
        ConfigResource(ResourceType.TOPIC, topic):
            [AlterConfigOp(LEADER_REPLICAS, leaders[topic], AlterOpType.SET),
             AlterConfigOp(FOLLOWER_REPLICAS, followers[topic], AlterOpType.SET)]
        for topic in sorted(moves)})
    await _alter(admin, {
        ConfigResource(ResourceType.BROKER, str(broker)):
            [AlterConfigOp(LEADER_RATE, str(rate), AlterOpType.SET),
             AlterConfigOp(FOLLOWER_RATE, str(rate), AlterOpType.SET)]
        for broker in reassigning_brokers(moves)})
    out(f"The inter-broker throttle limit was set to {rate} B/s")


async def clear_throttles(admin: Admin, targets: Mapping[TopicPartition, Sequence[int]]
                          ) -> None:
    """Kafka's clearAllThrottles: the rates on every broker of the cluster (and any the file
    names), then the lists of the file's topics; the first failure stops the tool, as
    Kafka's `all().get()` does."""
    _, _, nodes = await admin.describe_cluster()
    brokers = sorted(set(nodes) | {b for replicas in targets.values() for b in replicas})
    out(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
        + ",".join(map(str, brokers)))
    await _alter(admin, {ConfigResource(ResourceType.BROKER, str(broker)):
                         [AlterConfigOp(key, None, AlterOpType.DELETE)
                          for key in BROKER_THROTTLES] for broker in brokers})
    topics = sorted({tp.topic for tp in targets})
    out(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} "
        + ",".join(topics))
    await _alter(admin, {ConfigResource(ResourceType.TOPIC, topic):
                         [AlterConfigOp(key, None, AlterOpType.DELETE)
                          for key in TOPIC_THROTTLES] for topic in topics})


async def _alter(admin: Admin, changes: Mapping[ConfigResource, Iterable[AlterConfigOp]]
                 ) -> None:
    results = await admin.incremental_alter_configs(
        {resource: list(ops) for resource, ops in changes.items()})
    for outcome in results.values():
        if isinstance(outcome, KafkaError):
            raise ToolError(java_exception(outcome))
