"""kafka-topics: create, list, describe, alter (add partitions) and delete topics.

Flags, output lines and messages are Kafka's `TopicCommand`'s, so its documentation can be
followed as typed. `--topic` is a regular expression except with --create (Kafka's
IncludeList: ',' separates alternatives). Differences: errors go to stderr (Kafka prints
"Error while executing topic command : ..." on stdout), and partition lines show
`Elr: N/A  LastKnownElr: N/A`, which is what Kafka prints when the broker's metadata comes from
Metadata rather than DescribeTopicPartitions.

`--zookeeper host:port[/chroot]` (Kafka 0.8 to 2.x, removed in 3.0) works on ZooKeeper
directly, as Kafka 2.8 did: see `topics_zk`.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from protocol.errors import ErrorCode, KafkaError
from pybroker.client.admin import Admin, ConfigResource, NewTopic, ResourceType
from pybroker.client.cluster import TopicMetadata, format_topic_id
from pybroker.tools.common import (
    ArgumentParser, ClientProperties, UsageError, connect, include_list, load_properties, out,
    tool_main,
)
from pybroker.tools.topics_common import (
    TopicMissing, parse_assignment, parse_configs, partition_line, topic_line,
)
from pybroker.tools.topics_zk import check_zookeeper_args, run_on_zookeeper

PROG = "kafka-topics"
ERROR_PREFIX = "Error while executing topic command : "
_ACTIONS = ("create", "list", "alter", "describe", "delete")


def build_parser() -> ArgumentParser:
    p = ArgumentParser(PROG, "Create, delete, describe, or change a topic.")
    p.add_argument("--bootstrap-server", help="REQUIRED: The Kafka server to connect to.")
    p.add_argument("--zookeeper", metavar="hosts", help="DEPRECATED, The connection string "
                   "for the zookeeper connection in the form host:port. Multiple hosts can be "
                   "given to allow fail-over. (Kafka 2.x; works on a pybroker ZooKeeper "
                   "cluster.)")
    p.add_argument("--command-config", help="Property file containing configs to be passed to "
                   "Admin Client.")
    for action, text in (("list", "List all available topics."),
                         ("create", "Create a new topic."),
                         ("delete", "Delete a topic."),
                         ("alter", "Alter the number of partitions and replica assignment."),
                         ("describe", "List details for the given topics.")):
        p.add_argument(f"--{action}", action="store_true", help=text)
    p.add_argument("--topic", help="The topic to create, alter, describe or delete. It also "
                   "accepts a regular expression, except for --create option.")
    p.add_argument("--topic-id", help="The topic-id to describe.")
    p.add_argument("--config", action="append", metavar="name=value",
                   help="A topic configuration override for the topic being created.")
    p.add_argument("--delete-config", action="append", metavar="name",
                   help="A topic configuration override to be removed for an existing topic "
                   "(with --zookeeper --alter only, as in Kafka 2.x).")
    p.add_argument("--partitions", type=int, metavar="# of partitions",
                   help="The number of partitions for the topic being created or altered.")
    p.add_argument("--replication-factor", type=int, metavar="replication factor",
                   help="The replication factor for each partition in the topic being created.")
    p.add_argument("--replica-assignment", metavar="b1:b2,b3:b4",
                   help="A list of manual partition-to-broker assignments.")
    for flag, text in (
            ("under-replicated-partitions", "only show under-replicated partitions"),
            ("unavailable-partitions", "only show partitions whose leader is not available"),
            ("under-min-isr-partitions", "only show partitions whose isr count is less than "
                                         "the configured minimum"),
            ("at-min-isr-partitions", "only show partitions whose isr count is equal to the "
                                      "configured minimum"),
            ("topics-with-overrides", "only show topics that have overridden configs")):
        p.add_argument(f"--{flag}", action="store_true", help=f"If set when describing topics, "
                       f"{text}.")
    p.add_argument("--if-exists", action="store_true", help="If set when altering or deleting "
                   "or describing topics, the action will only execute if the topic exists.")
    p.add_argument("--if-not-exists", action="store_true", help="If set when creating topics, "
                   "the create request will not fail if the topic already exists.")
    p.add_argument("--exclude-internal", action="store_true", help="Exclude internal topics "
                   "when listing or describing topics.")
    p.add_argument("--disable-rack-aware", action="store_true", help="Disable rack aware "
                   "replica assignment (with --zookeeper).")
    p.add_argument("--partition-size-limit-per-response", type=int, help=argparse.SUPPRESS)
    return p


def check_args(args: argparse.Namespace) -> None:
    """Kafka's TopicCommandOptions.checkArgs, with its messages."""
    actions = [a for a in _ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, "
                         "--create, --alter or --delete")
    action = actions[0]
    if args.zookeeper:
        check_zookeeper_args(args, action)
    elif not args.bootstrap_server:
        raise UsageError("--bootstrap-server must be specified")
    if action in ("create", "alter", "delete") and not args.topic:
        raise UsageError('Missing required argument "[topic]"')
    # --alter --config/--delete-config: ZooKeeper only, as in Kafka 2.x.
    zk_alter = bool(args.zookeeper) and action == "alter"
    if action == "alter" and args.partitions is None and not (
            zk_alter and (args.config or args.delete_config)):
        raise UsageError('Missing required argument "[partitions]"')
    if args.delete_config and not zk_alter:
        raise UsageError("delete-config option is no longer supported; use kafka-configs "
                         "--alter --delete-config")

    def only(flag: str, allowed: tuple[str, ...]) -> None:
        if getattr(args, flag.replace("-", "_")) not in (None, False) and action not in allowed:
            raise UsageError(f'Option "[{flag}]" can\'t be used with option "[{action}]"')

    only("config", ("create", "alter") if zk_alter else ("create",))
    if action == "alter" and args.config and not zk_alter:
        raise UsageError('Option "[config]" can\'t be used with option "[alter]" (To alter '
                         'topic configurations, the kafka-configs tool can be used.)')
    only("partitions", ("create", "alter"))
    only("replication-factor", ("create",))
    only("replica-assignment", ("create", "alter"))
    for flag in ("under-replicated-partitions", "unavailable-partitions",
                 "under-min-isr-partitions", "at-min-isr-partitions", "topics-with-overrides"):
        only(flag, ("describe",))
    only("if-exists", ("alter", "delete", "describe"))
    only("if-not-exists", ("create",))
    only("exclude-internal", ("list", "describe"))
    if action == "create" and args.replica_assignment and (
            args.partitions is not None or args.replication_factor is not None):
        raise UsageError('Option "[replica-assignment]" can\'t be used with option '
                         '"[partitions]" or "[replication-factor]"')


async def _matching(admin: Admin, args: argparse.Namespace) -> dict[str, TopicMetadata]:
    """Topics matching --topic (all without it), minus internal ones with --exclude-internal."""
    topics = await admin.list_topics(include_internal=not args.exclude_internal)
    if args.topic:
        pattern = include_list(args.topic)
        topics = {n: t for n, t in topics.items() if pattern.fullmatch(n)}
    if args.topic and not topics and not args.if_exists:
        raise TopicMissing(f"Topic '{args.topic}' does not exist as expected")
    return topics


async def create(admin: Admin, args: argparse.Namespace) -> None:
    name = args.topic
    if "." in name or "_" in name:
        out("WARNING: Due to limitations in metric names, topics with a period ('.') or "
            "underscore ('_') could collide. To avoid issues it is best to use either, but "
            "not both.")
    rf = args.replication_factor
    if rf is not None and not 1 <= rf <= 32767:
        raise TopicMissing("The replication factor must be between 1 and 32767 inclusive")
    if args.partitions is not None and args.partitions < 1:
        raise TopicMissing("The partitions must be greater than 0")
    assignment = parse_assignment(args.replica_assignment) if args.replica_assignment else None
    topic = NewTopic(name, args.partitions if args.partitions is not None else -1,
                     rf if rf is not None else -1, parse_configs(args.config), assignment)
    result = (await admin.create_topics([topic]))[name]
    if isinstance(result, KafkaError):
        if result.code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
            return
        raise result
    if isinstance(result, BaseException):
        raise result
    out(f"Created topic {name}.")


async def describe(admin: Admin, args: argparse.Namespace) -> None:
    if args.topic_id:
        everything = await admin.list_topics(include_internal=not args.exclude_internal)
        topics = {n: t for n, t in everything.items()
                  if format_topic_id(t.topic_id) == args.topic_id}
        if not topics and not args.if_exists:
            raise TopicMissing(f"TopicId '{args.topic_id}' does not exist as expected")
    else:
        topics = await _matching(admin, args)
    if not topics:
        return
    configs = await admin.describe_configs(
        [ConfigResource(ResourceType.TOPIC, n) for n in topics])
    _, _, brokers = await admin.describe_cluster()
    report_flags = (args.under_replicated_partitions, args.unavailable_partitions,
                    args.under_min_isr_partitions, args.at_min_isr_partitions)
    describe_configs = not any(report_flags)
    describe_partitions = not args.topics_with_overrides
    for name, topic in topics.items():
        entries = configs.get(ConfigResource(ResourceType.TOPIC, name))
        if isinstance(entries, BaseException):
            raise entries
        entries = entries or []
        overrides = [e for e in entries if not e.is_default]
        min_isr = next((int(e.value) for e in entries
                        if e.name == "min.insync.replicas" and e.value), 1)
        if describe_configs and (not args.topics_with_overrides or overrides):
            out(topic_line(name, topic.topic_id, len(topic.partitions),
                           topic.replication_factor, {e.name: e.value for e in overrides}))
        if not describe_partitions:
            continue
        for index in sorted(topic.partitions):
            p = topic.partitions[index]
            leader = p.leader if p.leader >= 0 else None
            show = describe_configs or (
                (args.under_replicated_partitions and len(p.replicas) - len(p.isr) > 0)
                or (args.unavailable_partitions and (leader is None or leader not in brokers))
                or (args.under_min_isr_partitions and (leader is None or len(p.isr) < min_isr))
                or (args.at_min_isr_partitions and len(p.isr) == min_isr))
            if show:
                out(partition_line(name, index, leader, p.replicas, p.isr))


async def alter(admin: Admin, args: argparse.Namespace) -> None:
    topics = await _matching(admin, args)
    if not topics:
        return
    results = await admin.create_partitions({n: args.partitions for n in topics})
    for outcome in results.values():
        if isinstance(outcome, BaseException):
            raise outcome


async def delete(admin: Admin, args: argparse.Namespace) -> None:
    topics = await _matching(admin, args)
    if not topics:
        return
    results = await admin.delete_topics(list(topics))
    for outcome in results.values():
        if isinstance(outcome, BaseException):
            raise outcome


async def list_topics(admin: Admin, args: argparse.Namespace) -> None:
    topics = await admin.list_topics(include_internal=not args.exclude_internal)
    names = list(topics)
    if args.topic:
        pattern = include_list(args.topic)
        names = [n for n in names if pattern.fullmatch(n)]
    out("\n".join(names))


async def _main(args: argparse.Namespace) -> int:
    action = next(a for a in _ACTIONS if getattr(args, a))
    if args.zookeeper:
        return await run_on_zookeeper(args, action)
    props = load_properties(args.command_config) if args.command_config else ClientProperties()
    async with connect(args.bootstrap_server, props, default_client_id="kafka-topics",
                       request_timeout=30.0) as client:
        admin = Admin(client)
        await {"create": create, "list": list_topics, "describe": describe, "alter": alter,
               "delete": delete}[action](admin, args)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return tool_main(build_parser(), argv, _main, check=check_args, error_prefix=ERROR_PREFIX)


if __name__ == "__main__":
    sys.exit(main())
