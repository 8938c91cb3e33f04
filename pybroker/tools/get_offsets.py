"""kafka-get-offsets: the offset at a time (or earliest/latest) of each matching partition.

Kafka's GetOffsetShell: prints `topic:partition:offset`, one per partition, ordered as Kafka
orders them (by the string "topic-partition"). `--time` is -1/latest, -2/earliest,
-3/max-timestamp, or a timestamp in ms (the first offset whose timestamp is at or after it;
partitions with none are left out, as in Kafka). Partitions are chosen with `--topic` (a
regular expression) and `--partitions` (ids), or `--topic-partitions` patterns such as
`t1:0,t2:1-3,t3:5-,t4:-3`. No match at all is an error.
"""
from __future__ import annotations

import argparse
import re
import sys
from typing import Callable, Sequence

from pybroker.client.admin import Admin, OffsetSpec
from pybroker.client.cluster import TopicPartition
from pybroker.client.errors import error_message
from pybroker.tools.common import (
    ArgumentParser, ClientProperties, ToolError, connect, err, include_list, load_properties,
    out, tool_main,
)

PROG = "kafka-get-offsets"
_RULE = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")
_NAMED = {"latest": OffsetSpec.LATEST, "earliest": OffsetSpec.EARLIEST,
          "max-timestamp": OffsetSpec.MAX_TIMESTAMP}

Filter = Callable[[str, int], bool]


def build_parser() -> ArgumentParser:
    p = ArgumentParser(PROG, "An interactive shell for getting topic-partition offsets.")
    p.add_argument("--bootstrap-server", help="REQUIRED. The server(s) to connect to in the "
                   "form HOST1:PORT1,HOST2:PORT2.")
    p.add_argument("--broker-list", help="DEPRECATED, use --bootstrap-server instead.")
    p.add_argument("--topic-partitions", help="Comma separated list of topic-partition "
                   "patterns to get the offsets for, e.g. topic1:1,topic2:0-3,topic3,"
                   "topic4:5-,topic5:-3")
    p.add_argument("--topic", help="The topic to get the offsets for. It also accepts a "
                   "regular expression. If not present, all authorized topics are queried.")
    p.add_argument("--partitions", help="Comma separated list of partition ids to get the "
                   "offsets for. If not present, all partitions of the topics are queried.")
    p.add_argument("--time", default="latest", help="timestamp of the offsets before that: "
                   "<timestamp> / -1 or latest / -2 or earliest / -3 or max-timestamp "
                   "(default: latest)")
    p.add_argument("--command-config", help="Property file containing configs to be passed to "
                   "Admin Client.")
    p.add_argument("--exclude-internal-topics", action="store_true", help="By default, "
                   "internal topics are included. If specified, internal topics are excluded.")
    return p


def parse_time(text: str) -> int:
    if text in _NAMED:
        return _NAMED[text]
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value in (-4, -5, -6) or value < -6:
        raise ToolError(f"Malformed time argument {text}. Please use -1 or latest / -2 or "
                        "earliest / -3 or max-timestamp, or a specified long format timestamp",
                        plain=True)
    return value


def _rule(spec: str) -> Filter:
    m = _RULE.fullmatch(spec)
    if not m:
        raise ToolError(f"Invalid rule specification: {spec}", plain=True)
    topic = include_list(m.group(1) or ".*")
    if m.group(2):
        wanted = int(m.group(2))
        return lambda t, p: bool(topic.fullmatch(t)) and p == wanted
    low = int(m.group(3)) if m.group(3) else 0
    high = int(m.group(4)) if m.group(4) else 1 << 31
    return lambda t, p: bool(topic.fullmatch(t)) and low <= p < high


def build_filter(args: argparse.Namespace) -> Filter:
    if args.topic_partitions:
        if args.topic or args.partitions:
            raise ToolError("--topic-partitions cannot be used with --topic or --partitions",
                            plain=True)
        rules = [_rule(spec) for spec in args.topic_partitions.split(",")]
        return lambda t, p: any(rule(t, p) for rule in rules)
    topic = include_list(args.topic or ".*")
    partitions: set[int] = set()
    if args.partitions:
        try:
            partitions = {int(x) for x in args.partitions.split(",")}
        except ValueError:
            raise ToolError("--partitions expects a comma separated list of numeric partition "
                            f"ids, but received: {args.partitions}", plain=True) from None
    return lambda t, p: bool(topic.fullmatch(t)) and (not partitions or p in partitions)


async def _main(args: argparse.Namespace) -> int:
    spec = parse_time(args.time)
    wanted = build_filter(args)
    props = load_properties(args.command_config) if args.command_config else ClientProperties()
    async with connect(args.bootstrap_server or args.broker_list, props,
                       default_client_id="GetOffsetShell") as client:
        admin = Admin(client)
        topics = await admin.list_topics(include_internal=not args.exclude_internal_topics)
        partitions = [TopicPartition(name, p) for name, t in topics.items()
                      for p in sorted(t.partitions) if wanted(name, p)]
        if not partitions:
            raise ToolError("Could not match any topic-partitions with the specified filters")
        results = await admin.list_offsets({tp: spec for tp in partitions})
    failed = 0
    for tp in sorted(partitions, key=str):
        outcome = results.get(tp)
        if isinstance(outcome, BaseException):
            err(f"Skip getting offsets for topic-partition {tp} due to error: "
                f"{error_message(outcome)}")
            failed = 1
        elif outcome is not None and outcome.offset >= 0:
            out(f"{tp.topic}:{tp.partition}:{outcome.offset}")
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    return tool_main(build_parser(), argv, _main,
                     required=(("bootstrap_server", "broker_list"),),
                     error_prefix="Error occurred: ")


if __name__ == "__main__":
    sys.exit(main())
