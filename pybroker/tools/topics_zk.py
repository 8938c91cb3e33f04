"""kafka-topics `--zookeeper`: the pre-3.0 way, working on ZooKeeper directly.

Old quickstarts (Kafka 0.8 to 2.x) type `kafka-topics.sh --zookeeper localhost:2181 --create
...`. Kafka removed the flag in 3.0; pybroker keeps it so those pages work as typed against a
ZooKeeper cluster, doing what Kafka 2.8's `TopicCommand.ZookeeperTopicService` did, with its
output: create writes the topic's znodes and lets the controller elect leaders; list reads
/brokers/topics and says which topics are marked for deletion; describe reads each
partition's assignment and state znodes, printing 2.8's lines (no Elr columns, which came in
3.8); delete marks the topic in /admin/delete_topics for the controller.

alter adds partitions (a longer assignment in /brokers/topics/T, which the controller
follows) and changes configs (`--config`, `--delete-config`: /config/topics/T and a change
notification, which every broker follows), as 2.8 did, with its deprecation warning for the
configs.

As in 2.8, describe knows no `min.insync.replicas` here (it reads no broker defaults), so
`--under-min-isr-partitions` and `--at-min-isr-partitions` are refused with `--zookeeper`.

When nothing is registered where `--zookeeper host:port` points but brokers are registered
under a chroot of that server (zookeeper.connect=host:port/chroot), an error or an empty
listing says which connect string to give instead, rather than an empty answer.
"""
from __future__ import annotations

import argparse
import random
from typing import Any

import trio

from pybroker.cluster.topic_names import invalid_topic_reason, is_internal
from pybroker.config.topic import validate_topic_configs
from protocol.errors import KafkaError
from pybroker.controller.assignment import assign_added_partitions, assign_replicas
from pybroker.tools import zk_admin
from pybroker.tools.common import ToolError, UsageError, err, include_list, out
from pybroker.tools.topics_common import (
    TopicMissing, parse_assignment, parse_configs, partition_line, topic_line,
)

_ZK_REFUSED = ("under-min-isr-partitions", "at-min-isr-partitions", "topic-id",
               "command-config")


def check_zookeeper_args(args: argparse.Namespace, action: str) -> None:
    """Kafka 2.8's checkArgs for `--zookeeper`, with its messages."""
    if args.bootstrap_server:
        raise UsageError("Only one of --bootstrap-server or --zookeeper must be specified")
    for flag in _ZK_REFUSED:
        if getattr(args, flag.replace("-", "_")) not in (None, False):
            raise UsageError(f'Option "[{flag}]" can\'t be used with option "[zookeeper]"')
    if action == "create" and not args.replica_assignment:
        for flag in ("partitions", "replication-factor"):
            if getattr(args, flag.replace("-", "_")) is None:
                raise UsageError(f'Missing required argument "[{flag}]"')


def _matching(zk: Any, args: argparse.Namespace) -> list[str]:
    """Kafka's getTopics + ensureTopicExists over /brokers/topics."""
    names = zk_admin.topics(zk)
    if args.topic:
        pattern = include_list(args.topic)
        names = [n for n in names if pattern.fullmatch(n)]
    if args.exclude_internal:
        names = [n for n in names if not is_internal(n)]
    if args.topic and not names and not args.if_exists:
        raise TopicMissing(f"Topic '{args.topic}' does not exist as expected")
    return names


def create(zk: Any, args: argparse.Namespace) -> None:
    name = args.topic
    if "." in name or "_" in name:
        out("WARNING: Due to limitations in metric names, topics with a period ('.') or "
            "underscore ('_') could collide. To avoid issues it is best to use either, but "
            "not both.")
    configs = parse_configs(args.config)
    try:
        _validate_create(zk, name, configs)
        if args.replica_assignment:
            replicas = parse_assignment(args.replica_assignment)
        else:
            replicas = dict(enumerate(_assign(zk, args)))
        zk_admin.create_topic(zk, name, replicas, configs)
    except zk_admin.TopicExists:
        if args.if_not_exists:
            return
        raise
    out(f"Created topic {name}.")


def _validate_create(zk: Any, name: str, configs: dict[str, str]) -> None:
    """AdminZkClient.validateTopicCreate: a legal, new, non-colliding name; valid configs."""
    reason = invalid_topic_reason(name)
    if reason is not None:
        raise ToolError(reason)
    existing = zk_admin.topics(zk)
    if name in existing:
        raise zk_admin.TopicExists(name)
    folded = name.replace(".", "_")
    colliding = [t for t in existing if t.replace(".", "_") == folded]
    if colliding:
        raise ToolError(f"Topic '{name}' collides with existing topics: "
                        + ", ".join(colliding))
    try:
        validate_topic_configs(configs)
    except Exception as exc:  # the config layer's ConfigError, with Kafka's wording
        raise ToolError(str(exc)) from None


def _assign(zk: Any, args: argparse.Namespace) -> list[list[int]]:
    """Kafka's assignReplicasToBrokers over the registered brokers, rack-aware unless
    --disable-rack-aware (2.8's RackAwareMode.Enforced: all brokers racked, or none)."""
    if args.partitions < 1:
        raise TopicMissing("The partitions must be greater than 0")
    if not 1 <= args.replication_factor <= 32767:
        raise TopicMissing("The replication factor must be between 1 and 32767 inclusive")
    registered = zk_admin.brokers(zk)
    racks = {n: (None if args.disable_rack_aware else b.rack) for n, b in registered.items()}
    racked = sum(1 for r in racks.values() if r is not None)
    if 0 < racked < len(racks):
        raise ToolError("Not all brokers have rack information. Add --disable-rack-aware in "
                        "command line to make replica assignment without rack information.")
    return assign_replicas(racks, args.partitions, args.replication_factor,
                           rng=random.Random())


def list_topics(zk: Any, args: argparse.Namespace) -> None:
    marked = zk_admin.marked_for_deletion(zk)
    names = _matching(zk, args)
    for name in names:
        out(f"{name} - marked for deletion" if name in marked else name)
    if not names:
        hint = zk_admin.chroot_hint(zk, args.zookeeper)
        if hint:
            err(f"No topics at {args.zookeeper}{hint}")


def describe(zk: Any, args: argparse.Namespace) -> None:
    """2.8's ZookeeperTopicService.describeTopic: assignment and state znodes; partition
    lines for a leader that is not registered still show its id (unavailable)."""
    names = _matching(zk, args)
    live = set(zk_admin.brokers(zk))
    marked = zk_admin.marked_for_deletion(zk)
    filters = (args.under_replicated_partitions, args.unavailable_partitions)
    describe_configs = not any(filters)
    for name in names:
        assigned = zk_admin.assignment(zk, name)
        if assigned is None or not assigned.partitions:
            out(f"Topic {name} doesn't exist!")
            continue
        deleting = name in marked
        if describe_configs:
            overrides = zk_admin.topic_config(zk, name)
            if not args.topics_with_overrides or overrides:
                replicas = assigned.partitions[min(assigned.partitions)]
                out(topic_line(name, assigned.topic_id, len(assigned.partitions),
                               len(replicas), overrides, deleting))
        if args.topics_with_overrides:
            continue
        for index in sorted(assigned.partitions):
            replicas = assigned.partitions[index]
            current = zk_admin.state(zk, name, index)
            leader = current.leader if current is not None and current.leader >= 0 else None
            isr = current.isr if current is not None else ()
            show = describe_configs or (
                (args.under_replicated_partitions and len(replicas) - len(isr) > 0)
                or (args.unavailable_partitions and (leader is None or leader not in live)))
            if show:
                out(partition_line(name, index, leader, replicas, isr, elr=False,
                                   deleting=deleting))


def alter(zk: Any, args: argparse.Namespace) -> None:
    """2.8's ZookeeperTopicService.alterTopic: configs first, then partitions, per topic."""
    names = _matching(zk, args)
    to_set = parse_configs(args.config)
    to_delete = [name.strip() for name in args.delete_config or ()]
    if to_set:
        try:
            validate_topic_configs(to_set)
        except Exception as exc:  # the config layer's ConfigError, with Kafka's wording
            raise ToolError(str(exc)) from None
    for name in names:
        if to_set or to_delete:
            out("WARNING: Altering topic configuration from this script has been deprecated "
                "and may be removed in future releases.")
            out("         Going forward, please use kafka-configs.sh for this functionality")
            configs = zk_admin.topic_config(zk, name)
            configs.update(to_set)
            for key in to_delete:
                configs.pop(key, None)
            zk_admin.set_topic_config(zk, name, configs)
            out(f"Updated config for topic {name}.")
        if args.partitions is not None:
            if name == "__consumer_offsets":
                raise TopicMissing("The number of partitions for the offsets topic cannot be "
                                   "changed.")
            out("WARNING: If partitions are increased for a topic that has a key, the "
                "partition logic or ordering of the messages will be affected")
            zk_admin.add_partitions(zk, name, _added(zk, name, args))
            out("Adding partitions succeeded!")


def _added(zk: Any, name: str, args: argparse.Namespace) -> dict[int, list[int]]:
    """AdminZkClient.addPartitions: the new partitions' replicas, from --replica-assignment
    (its entries past the existing partitions) or continuing the existing round-robin."""
    assigned = zk_admin.assignment(zk, name)
    if assigned is None or not assigned.partitions:
        raise ToolError(f"The topic {name} does not exist")
    existing = [list(assigned.partitions[p]) for p in sorted(assigned.partitions)]
    count = len(existing)
    if args.partitions <= count:
        raise ToolError(f"The number of partitions for a topic can only be increased. Topic "
                        f"{name} currently has {count} partitions, {args.partitions} would "
                        "not be an increase.")
    registered = zk_admin.brokers(zk)
    if args.replica_assignment:
        proposed = list(parse_assignment(args.replica_assignment).values())[count:]
        if len(proposed) != args.partitions - count:
            raise ToolError(f"Increasing the number of partitions by {args.partitions - count} "
                            f"but {len(proposed)} assignments provided.")
        unknown = sorted({b for r in proposed for b in r} - set(registered))
        if unknown:
            raise ToolError("Unknown broker(s) in replica assignment: "
                            + ", ".join(map(str, unknown)) + ".")
        if any(len(r) != len(existing[0]) for r in proposed):
            raise ToolError(f"Inconsistent replication factor between partitions, partition 0 "
                            f"has {len(existing[0])} while partitions "
                            f"[{', '.join(str(count + i) for i in range(len(proposed)))}] have "
                            f"replication factors [{', '.join(str(len(r)) for r in proposed)}], "
                            "respectively.")
        return {count + i: r for i, r in enumerate(proposed)}
    racks = {n: (None if args.disable_rack_aware else b.rack) for n, b in registered.items()}
    added = assign_added_partitions(existing, racks, args.partitions, rng=random.Random())
    return {count + i: r for i, r in enumerate(added)}


def delete(zk: Any, args: argparse.Namespace) -> None:
    for name in _matching(zk, args):
        if is_internal(name):
            raise ToolError(f"Topic {name} is a kafka internal topic and is not allowed to be "
                            "marked for deletion.")
        if zk_admin.mark_for_deletion(zk, name):
            out(f"Topic {name} is marked for deletion.")
            out("Note: This will have no impact if delete.topic.enable is not set to true.")
        else:
            out(f"Topic {name} is already marked for deletion.")


def _blocking(args: argparse.Namespace, action: str) -> None:
    with zk_admin.open_zk(args.zookeeper) as zk:
        try:
            {"create": create, "list": list_topics, "describe": describe, "alter": alter,
             "delete": delete}[action](zk, args)
        except (ToolError, KafkaError) as exc:
            hint = zk_admin.chroot_hint(zk, args.zookeeper)
            if not hint:
                raise
            raise ToolError(f"{exc}{hint}", getattr(exc, "exit_code", 1),
                            plain=getattr(exc, "plain", False)) from None


async def run_on_zookeeper(args: argparse.Namespace, action: str) -> int:
    """The action against ZooKeeper, in a worker thread (kazoo's calls block)."""
    await trio.to_thread.run_sync(_blocking, args, action)
    return 0
