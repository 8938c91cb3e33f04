"""kafka-console-consumer: records to standard output, one per line.

Kafka's ConsoleConsumer with its DefaultMessageFormatter: `--property print.key=true`,
`print.timestamp`, `print.partition`, `print.offset`, `print.headers`, `print.value`,
`key.separator`, `line.separator`, `headers.separator`, `null.literal`, printed in Kafka's
order (timestamp, partition, offset, headers, key, value). `Processed a total of N messages` goes
to stderr when the tool stops: after `--max-messages`, after `--timeout-ms` without a message,
on Ctrl-C (exit 130), or on an error.

Where records come from: `--partition` (with `--offset earliest|latest|N`, default latest)
reads one partition without a group; `--group` joins a consumer group with the range assignor
and commits offsets (auto-commit, and on exit for what was printed); `--topic` or `--include`
without a group reads every partition of the matching topics, starting at the end, or at the
beginning with `--from-beginning`. Unlike Kafka, no random "console-consumer-NNNNN" group is
made up in that last case: nothing is committed there anyway, so we skip the group entirely.

When the broker goes away the consumer keeps retrying and says so once on stderr, in the
words of Kafka's clients ("Connection to node N (host:port) could not be established. Broker
may not be available."); once per outage, not once per retry.

`--zookeeper host:port[/chroot]` is what quickstarts before Kafka 2.0 typed (the old Scala
consumer, removed in 2.0). There is no such consumer here: the brokers registered under
/brokers/ids are looked up once and consumed from as with `--bootstrap-server`, after
Kafka 1.x's deprecation warning on stderr.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

import trio

from pybroker.client.cluster import TopicPartition
from pybroker.client.consumer import Consumer, ConsumerRecord, parse_isolation_level
from pybroker.tools import zk_admin
from pybroker.tools.client_config import consumer_options
from pybroker.tools.common import (
    INTERRUPTED, ArgumentParser, ClientProperties, ToolError, UsageError, connect, err,
    load_properties, parse_key_values, stop_on_signals, subscribe_or_assign, tool_main,
)

PROG = "kafka-console-consumer"
_FORMATTERS = ("kafka.tools.DefaultMessageFormatter",
               "org.apache.kafka.tools.consumer.DefaultMessageFormatter")


def build_parser() -> ArgumentParser:
    p = ArgumentParser(PROG, "This tool helps to read data from Kafka topics and outputs it "
                       "to standard output.")
    p.add_argument("--bootstrap-server", help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--zookeeper", metavar="urls", help="DEPRECATED (the old consumer, "
                   "Kafka < 2.0): the ZooKeeper connection string host:port[/chroot] of a "
                   "pybroker cluster; its registered brokers are consumed from.")
    p.add_argument("--topic", help="The topic to consume on.")
    p.add_argument("--include", "--whitelist", dest="include", metavar="regex",
                   help="Regular expression specifying list of topics to include for "
                   "consumption.")
    p.add_argument("--partition", type=int, help="The partition to consume from. Consumption "
                   "starts from the end of the partition unless '--offset' is specified.")
    p.add_argument("--offset", help="The offset to consume from (a non-negative number), or "
                   "'earliest' which means from beginning, or 'latest' which means from end "
                   "(default: latest)")
    p.add_argument("--consumer-property", "--command-property", action="append",
                   dest="consumer_property", metavar="prop=value",
                   help="A mechanism to pass user-defined properties to the consumer.")
    p.add_argument("--consumer.config", "--command-config", dest="consumer_config",
                   help="Consumer config properties file.")
    p.add_argument("--formatter", default=_FORMATTERS[0], help="The name of a class to use "
                   "for formatting Kafka messages for display.")
    p.add_argument("--formatter-config", help="Config properties file to initialize the "
                   "message formatter.")
    p.add_argument("--property", "--formatter-property", action="append", dest="property",
                   metavar="prop=value", help="The properties to initialize the message "
                   "formatter: print.timestamp, print.key, print.offset, print.partition, "
                   "print.headers, print.value, key.separator, line.separator, "
                   "headers.separator, null.literal")
    p.add_argument("--from-beginning", action="store_true", help="If the consumer does not "
                   "already have an established offset to consume from, start with the "
                   "earliest message present in the log rather than the latest message.")
    p.add_argument("--max-messages", type=int, help="The maximum number of messages to "
                   "consume before exiting. If not set, consumption is continual.")
    p.add_argument("--timeout-ms", type=int, help="If specified, exit if no message is "
                   "available for consumption for the specified interval.")
    p.add_argument("--skip-message-on-error", action="store_true", help="If there is an error "
                   "when processing a message, skip it instead of halt.")
    p.add_argument("--key-deserializer", help=argparse.SUPPRESS)
    p.add_argument("--value-deserializer", help=argparse.SUPPRESS)
    p.add_argument("--enable-systest-events", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--isolation-level", default=None, help="Set to read_committed in order to "
                   "filter out transactional messages which are not committed. Set to "
                   "read_uncommitted to read all messages. (default: read_uncommitted)")
    p.add_argument("--group", help="The consumer group id of the consumer.")
    return p


class Formatter:
    """Kafka's DefaultMessageFormatter, writing bytes."""

    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str, default: bool) -> bool:
            return props[name].strip().lower() == "true" if name in props else default

        def text(name: str, default: str) -> bytes:
            return props.get(name, default).encode("utf-8")

        self.print_timestamp = flag("print.timestamp", False)
        self.print_key = flag("print.key", False)
        self.print_value = flag("print.value", True)
        self.print_partition = flag("print.partition", False)
        self.print_offset = flag("print.offset", False)
        self.print_headers = flag("print.headers", False)
        self.key_separator = text("key.separator", "\t")
        self.line_separator = text("line.separator", "\n")
        self.headers_separator = text("headers.separator", ",")
        self.null_literal = text("null.literal", "null")

    def format(self, r: ConsumerRecord) -> bytes:
        fields: list[bytes] = []
        if self.print_timestamp:
            fields.append(f"{r.timestamp_type_name}:{r.timestamp}".encode()
                          if r.timestamp >= 0 else b"NO_TIMESTAMP")
        if self.print_partition:
            fields.append(f"Partition:{r.partition}".encode())
        if self.print_offset:
            fields.append(f"Offset:{r.offset}".encode())
        if self.print_headers:
            if not r.headers:
                fields.append(b"NO_HEADERS")
            else:
                fields.append(self.headers_separator.join(
                    k.encode("utf-8") + b":" + (self.null_literal if v is None else v)
                    for k, v in r.headers))
        if self.print_key:
            fields.append(self.null_literal if r.key is None else r.key)
        if self.print_value:
            fields.append(self.null_literal if r.value is None else r.value)
            return self.key_separator.join(fields) + self.line_separator
        return self.key_separator.join(fields) + (self.line_separator if fields else b"")


def parse_offset(text: str | None, from_beginning: bool) -> str | int:
    if text is None:
        return "earliest" if from_beginning else "latest"
    lowered = text.strip().lower()
    if lowered in ("earliest", "latest"):
        return lowered
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise UsageError(f"The provided offset value '{text}' is incorrect. Valid values are "
                         "'earliest', 'latest', or a non-negative long.")
    return value


def check_args(args: argparse.Namespace) -> None:
    if bool(args.topic) == bool(args.include):
        raise UsageError("Exactly one of include/topic is required.")
    if args.partition is not None:
        if not args.topic:
            raise UsageError("The topic is required when partition is specified.")
        if args.from_beginning and args.offset is not None:
            raise UsageError("Options from-beginning and offset cannot be specified together.")
    elif args.offset is not None:
        raise UsageError("The partition is required when offset is specified.")
    parse_offset(args.offset, args.from_beginning)
    if args.zookeeper and args.bootstrap_server:
        raise UsageError("Option [bootstrap-server] is not valid with [zookeeper].")
    if not args.bootstrap_server and not args.zookeeper:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    if args.formatter not in _FORMATTERS:
        raise UsageError(f"Unsupported formatter {args.formatter}: only the default message "
                         "formatter is available")


def consumer_settings(args: argparse.Namespace) -> tuple[dict[str, str], dict[str, Any]]:
    props = load_properties(args.consumer_config) if args.consumer_config else ClientProperties()
    props.update(parse_key_values(args.consumer_property, "consumer property"))
    groups = {g for g in (args.group, props.get("group.id")) if g}
    if len(groups) > 1:
        raise UsageError("The group ids provided in different places (directly using "
                         "'--group', via '--consumer-property', or via '--consumer.config') "
                         "do not match. Detected group ids: "
                         + ", ".join(f"'{g}'" for g in sorted(groups)))
    if groups and args.partition is not None:
        raise UsageError("Options group and partition cannot be specified together.")
    reset = props.get("auto.offset.reset")
    if reset is not None and args.from_beginning and reset != "earliest":
        raise UsageError(f"Can't simultaneously specify --from-beginning and "
                         f"'auto.offset.reset={reset}', please remove one option")
    options = consumer_options(props)
    options.setdefault("auto_offset_reset", "earliest" if args.from_beginning else "latest")
    if args.isolation_level is not None:
        try:
            options["isolation_level"] = parse_isolation_level(args.isolation_level)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if groups:
        options["group_id"] = groups.pop()
    return props, options


async def _start(consumer: Consumer, args: argparse.Namespace,
                 allow_create: bool) -> None:
    client = consumer.client
    if args.partition is not None:
        topic = await client.topic(args.topic, refresh=True, allow_auto_create=allow_create)
        if args.partition not in topic.partitions:
            raise ToolError(f"Partition {args.partition} of topic {args.topic} does not exist "
                            f"(the topic has {len(topic.partitions)} partitions).")
        tp = TopicPartition(args.topic, args.partition)
        consumer.assign([tp])
        offset = parse_offset(args.offset, args.from_beginning)
        if offset == "earliest":
            await consumer.seek_to_beginning([tp])
        elif offset == "latest":
            await consumer.seek_to_end([tp])
        else:
            consumer.seek(tp, int(offset))
        return
    await subscribe_or_assign(consumer, args.topic, args.include,
                              allow_auto_create=allow_create)


async def _main(args: argparse.Namespace) -> int:
    formatter_props = load_properties(args.formatter_config) if args.formatter_config else {}
    formatter_props.update(parse_key_values(args.property))
    formatter = Formatter(formatter_props)
    props, options = consumer_settings(args)
    allow_create = props.get("allow.auto.create.topics", "true").strip().lower() == "true"
    stdout = getattr(sys.stdout, "buffer", None)
    count = 0
    stopped = [False]
    max_messages = args.max_messages if args.max_messages is not None else -1
    timeout = args.timeout_ms / 1000 if args.timeout_ms is not None and args.timeout_ms >= 0 \
        else None
    if args.zookeeper:
        args.bootstrap_server = await trio.to_thread.run_sync(_brokers_of, args.zookeeper)
    async with connect(args.bootstrap_server, props, default_client_id="console-consumer",
                       warn_when_unreachable=True) as client:
        consumer = Consumer(client, **options)
        try:
            with trio.CancelScope() as consuming:
                await client.nursery.start(stop_on_signals, consuming, stopped)
                await _start(consumer, args, allow_create)
                last = trio.current_time()
                while max_messages < 0 or count < max_messages:
                    records = await consumer.poll(0.5 if timeout is None else
                                                  min(0.5, max(0.0, timeout)))
                    now = trio.current_time()
                    if not records:
                        if timeout is not None and now - last >= timeout:
                            err("ERROR Error processing message, terminating consumer process: "
                                f"TimeoutException: no message within {args.timeout_ms} ms")
                            break
                        continue
                    last = now
                    if max_messages >= 0 and count + len(records) > max_messages:
                        unconsumed = records[max_messages - count:]
                        records = records[:max_messages - count]
                        _rewind(consumer, unconsumed)
                    chunk = b"".join(formatter.format(r) for r in records)
                    try:
                        if stdout is not None:
                            stdout.write(chunk)
                            stdout.flush()
                        else:
                            sys.stdout.write(chunk.decode("utf-8", "replace"))
                            sys.stdout.flush()
                    except (BrokenPipeError, ValueError):
                        err("Unable to write to standard out, closing consumer.")
                        break
                    count += len(records)
        finally:
            await consumer.close()
            err(f"Processed a total of {count} messages")
    return INTERRUPTED if stopped[0] else 0


def _rewind(consumer: Consumer, unconsumed: list[ConsumerRecord]) -> None:
    """Seek back to the first record not printed, so a group commits only what was shown."""
    first: dict[TopicPartition, int] = {}
    for r in unconsumed:
        first.setdefault(TopicPartition(r.topic, r.partition), r.offset)
    for tp, offset in first.items():
        consumer.seek(tp, offset)


def _brokers_of(zookeeper: str) -> str:
    """The registered brokers' addresses, found through ZooKeeper (blocking)."""
    with zk_admin.open_zk(zookeeper) as zk:
        servers = zk_admin.bootstrap_servers(zk)
        if not servers:
            raise ToolError(f"No brokers are registered in ZooKeeper at {zookeeper}"
                            + zk_admin.chroot_hint(zk, zookeeper))
    return servers


def _check_and_warn(args: argparse.Namespace) -> None:
    check_args(args)
    if args.zookeeper:
        err("Using the ConsoleConsumer with old consumer is deprecated and will be removed in "
            "a future major release. Consider using the new consumer by passing "
            "[bootstrap-server] instead of [zookeeper].")


def main(argv: Sequence[str] | None = None) -> int:
    return tool_main(build_parser(), argv, _main, check=_check_and_warn)


if __name__ == "__main__":
    sys.exit(main())
