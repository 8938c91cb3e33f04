"""kafka-transactions: inspect transactions and recover from hanging ones.

Kafka's TransactionsCommand, with its subcommands, flags and tables (Kafka's prettyPrintTable:
padded columns, each followed by a tab):

  --bootstrap-server H:P [--command-config F] list [--duration-filter MS]
  ... describe --transactional-id ID
  ... describe-producers --topic T --partition P [--broker-id N]
  ... abort --topic T --partition P (--start-offset N | --producer-id I --producer-epoch E
                                     --coordinator-epoch C)
  ... find-hanging (--broker-id N | --topic T [--partition P]) [--max-transaction-timeout MIN]

A hanging transaction is one left open on a partition that its coordinator will never end:
the coordinator has forgotten the producer, or no longer counts that partition in the
producer's transaction. `find-hanging` looks, as Kafka does, at the open transactions whose
last write is older than the largest transaction timeout, and keeps those the coordinator
does not describe as covering the partition; `abort --start-offset` then writes the ABORT
marker the coordinator never wrote, which unblocks read_committed consumers (the last stable
offset moves past it). Failures print Kafka's sentence and exit 1.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Sequence

from protocol.errors import ErrorCode
from pybroker import VERSION_LINE
from pybroker.client.admin import Admin
from pybroker.client.cluster import TopicPartition
from pybroker.client.errors import (
    KafkaConnectionError, KafkaError, KafkaTimeoutError, error_message,
)
from pybroker.client.transaction_admin import (
    AbortTransactionSpec, ProducerState, TransactionDescription,
)
from pybroker.tools.common import (
    ArgumentParser, ClientProperties, ToolError, connect, load_properties, out, pretty_table,
    tool_main,
)

PROG = "kafka-transactions.sh"
_FAILURES = (KafkaError, KafkaConnectionError, KafkaTimeoutError)
LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                    "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                    "TransactionDurationMs", "TopicPartitions")
PRODUCER_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                    "LastTimestamp", "CurrentTransactionStartOffset")
HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                   "StartOffset", "LastTimestamp", "Duration(min)")


def now_ms() -> int:
    """The wall clock in ms (a function, so tests can fix it)."""
    return int(time.time() * 1000)


def build_parser() -> ArgumentParser:
    p = ArgumentParser(PROG, "This tool is used to analyze the transactional state of producers "
                       "in the cluster. It can be used to detect and recover from hanging "
                       "transactions.")
    p.add_argument("-v", action="version", version=VERSION_LINE, help=argparse.SUPPRESS)
    p.add_argument("--command-config", metavar="FILE", help="property file containing configs "
                   "to be passed to admin client")
    p.add_argument("--bootstrap-server", metavar="host:port", required=True,
                   help="hostname and port for the broker to connect to, in the form "
                   "`host:port`  (multiple comma-separated entries can be given)")
    commands = p.add_subparsers(dest="command", title="commands", metavar="COMMAND",
                                required=True)

    def command(name: str, help: str) -> ArgumentParser:
        return commands.add_parser(name, help=help, description=help)

    c = command("list", "list transactions")
    c.add_argument("--duration-filter", type=int, help="Duration (in millis) to filter by: if "
                   "< 0, all transactions will be returned; otherwise, only transactions "
                   "running longer than this duration will be returned")

    c = command("describe", "describe the state of an active transactional-id")
    c.add_argument("--transactional-id", required=True, help="transactional id")

    c = command("describe-producers", "describe the states of active producers for a topic "
                "partition")
    c.add_argument("--broker-id", type=int, help="optional broker id to describe the producer "
                   "state on a specific replica")
    c.add_argument("--topic", required=True, help="topic name")
    c.add_argument("--partition", type=int, required=True, help="partition number")

    c = command("abort", "abort a hanging transaction (requires administrative privileges)")
    c.add_argument("--topic", required=True, help="topic name")
    c.add_argument("--partition", type=int, required=True, help="partition number")
    newer = c.add_argument_group("Brokers on versions 3.0 and above", "For newer brokers, "
                                 "only the start offset of the transaction to be aborted is "
                                 "required")
    newer.add_argument("--start-offset", type=int, help="start offset of the transaction to "
                       "abort")
    older = c.add_argument_group("Brokers on versions older than 3.0", "For older brokers, "
                                 "you must provide all of these arguments")
    older.add_argument("--producer-id", type=int, help="producer id")
    older.add_argument("--producer-epoch", type=int, help="producer epoch")
    older.add_argument("--coordinator-epoch", type=int, help="coordinator epoch")

    c = command("find-hanging", "find hanging transactions")
    c.add_argument("--broker-id", type=int, help="broker id to search for hanging "
                   "transactions")
    c.add_argument("--max-transaction-timeout", type=int, default=15, help="maximum "
                   "transaction timeout in minutes to limit the scope of the search (15 "
                   "minutes by default)")
    c.add_argument("--topic", help="topic name to limit search to (required if --partition is "
                   "specified)")
    c.add_argument("--partition", type=int, help="partition number")
    return p


def fail(message: str, cause: BaseException | None = None) -> ToolError:
    """Kafka's printErrorAndExit: the message, and the cause's message when there is one."""
    if cause is not None:
        message = (f"{message}: {error_message(cause)}. "
                   "Enable debug logging for additional detail.")
    return ToolError(message, plain=True)


def _optional(value: int | None) -> str:
    return "None" if value is None else str(value)


# -- the tables (pure: what Kafka prints for what the admin calls returned) ----------------------

def list_rows(by_broker: dict[int, list]) -> list[list[str]]:
    return [[t.transactional_id, str(broker), str(t.producer_id), t.state]
            for broker, listings in by_broker.items() for t in listings]


def describe_row(tid: str, d: TransactionDescription, now: int) -> list[str]:
    start = d.transaction_start_time_ms
    return [str(d.coordinator_id), tid, str(d.producer_id), str(d.producer_epoch), d.state,
            str(d.transaction_timeout_ms), _optional(start),
            _optional(None if start is None else now - start),
            ",".join(str(tp) for tp in sorted(d.topic_partitions,
                                              key=lambda tp: (tp.topic, tp.partition)))]


def producer_rows(states: list[ProducerState]) -> list[list[str]]:
    return [[str(s.producer_id), str(s.producer_epoch),
             str(-1 if s.coordinator_epoch is None else s.coordinator_epoch),
             str(s.last_sequence), str(s.last_timestamp),
             _optional(s.current_transaction_start_offset)] for s in states]


def hanging_rows(hanging: list[tuple[TopicPartition, ProducerState]], now: int
                 ) -> list[list[str]]:
    return [[tp.topic, str(tp.partition), str(s.producer_id), str(s.producer_epoch),
             str(-1 if s.coordinator_epoch is None else s.coordinator_epoch),
             str(-1 if s.current_transaction_start_offset is None
                 else s.current_transaction_start_offset),
             str(s.last_timestamp), str((now - s.last_timestamp) // 60000)]
            for tp, s in hanging]


def print_table(headers: Sequence[str], rows: list[list[str]]) -> None:
    for line in pretty_table(headers, rows):
        out(line)


# -- the commands --------------------------------------------------------------------------------

async def list_transactions(admin: Admin, args: argparse.Namespace) -> None:
    duration = args.duration_filter if args.duration_filter is not None else -1
    try:
        found = await admin.list_transactions(duration_ms=duration)
    except _FAILURES as exc:
        raise fail("Failed to list transactions", exc) from None
    print_table(LIST_HEADERS, list_rows(found))


async def describe(admin: Admin, args: argparse.Namespace) -> None:
    tid = args.transactional_id
    result = (await admin.describe_transactions([tid]))[tid]
    if isinstance(result, BaseException):
        raise fail(f"Failed to describe transaction state of transactional-id `{tid}`", result)
    print_table(DESCRIBE_HEADERS, [describe_row(tid, result, now_ms())])


async def describe_producers(admin: Admin, args: argparse.Namespace) -> None:
    tp = TopicPartition(args.topic, args.partition)
    result = (await admin.describe_producers([tp], broker_id=args.broker_id)).get(tp)
    if not isinstance(result, list):
        where = "leader" if args.broker_id is None else f"broker {args.broker_id}"
        raise fail(f"Failed to describe producers for partition {tp} on {where}",
                   result or KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "no answer"))
    print_table(PRODUCER_HEADERS, producer_rows(result))


async def abort(admin: Admin, args: argparse.Namespace) -> None:
    tp = TopicPartition(args.topic, args.partition)
    if args.start_offset is None:
        # A transaction that hung before its producer id's first marker shows coordinator
        # epoch -1; 0 is no larger than any epoch a coordinator could have had (Kafka's rule).
        producer_id, producer_epoch = args.producer_id, args.producer_epoch
        coordinator_epoch = max(args.coordinator_epoch, 0)
    else:
        result = (await admin.describe_producers([tp])).get(tp)
        if not isinstance(result, list):
            raise fail(f"Failed to validate producer state for partition {tp}",
                       result or KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "no answer"))
        found = next((s for s in result
                      if s.current_transaction_start_offset == args.start_offset), None)
        if found is None:
            raise fail(f"Could not find any open transactions starting at offset "
                       f"{args.start_offset} on partition {tp}")
        producer_id, producer_epoch = found.producer_id, found.producer_epoch
        coordinator_epoch = found.coordinator_epoch or 0
    spec = AbortTransactionSpec(tp, producer_id, producer_epoch, coordinator_epoch)
    try:
        await admin.abort_transaction(tp.topic, tp.partition, producer_id, producer_epoch,
                                      coordinator_epoch)
    except _FAILURES as exc:
        raise fail(f"Failed to abort transaction {spec}", exc) from None


async def find_hanging(admin: Admin, args: argparse.Namespace) -> None:
    partitions = await _partitions_to_search(admin, args)
    max_timeout_ms = args.max_transaction_timeout * 60_000
    candidates = await _open_transactions(admin, args.broker_id, max_timeout_ms, partitions)
    hanging: list[tuple[TopicPartition, ProducerState]] = []
    if candidates:
        producer_ids = {s.producer_id for _, s in candidates}
        try:
            listings = await admin.list_transactions(producer_ids=sorted(producer_ids))
        except _FAILURES as exc:
            raise fail(f"Failed to list transactions for {len(producer_ids)} producers",
                       exc) from None
        ids = {t.producer_id: t.transactional_id for ts in listings.values() for t in ts
               if t.producer_id in producer_ids}
        descriptions = await _descriptions(admin, set(ids.values()))
        for tp, state in candidates:
            tid = ids.get(state.producer_id)
            description = descriptions.get(tid) if tid is not None else None
            if description is None or tp not in description.topic_partitions:
                hanging.append((tp, state))
    print_table(HANGING_HEADERS, hanging_rows(hanging, now_ms()))


async def _partitions_to_search(admin: Admin, args: argparse.Namespace
                                ) -> list[TopicPartition]:
    if args.topic is not None and args.partition is not None:
        return [TopicPartition(args.topic, args.partition)]
    if args.topic is not None:
        names = [args.topic]
    else:
        try:
            names = list(await admin.list_topics(include_internal=True))
        except _FAILURES as exc:
            raise fail("Failed to list topics", exc) from None
    described = await admin.describe_topics(names)
    found: list[TopicPartition] = []
    for name in names:
        topic = described[name]
        if isinstance(topic, BaseException):
            raise fail(f"Failed to describe {len(names)} topics", topic)
        for p in sorted(topic.partitions):
            if args.broker_id is None or args.broker_id in topic.partitions[p].replicas:
                found.append(TopicPartition(name, p))
    return found


async def _open_transactions(admin: Admin, broker_id: int | None, max_timeout_ms: int,
                             partitions: list[TopicPartition]
                             ) -> list[tuple[TopicPartition, ProducerState]]:
    """Open transactions whose last write is older than the largest transaction timeout."""
    if not partitions:
        return []
    results = await admin.describe_producers(partitions, broker_id=broker_id)
    now = now_ms()
    found: list[tuple[TopicPartition, ProducerState]] = []
    for tp in partitions:
        result = results.get(tp)
        if not isinstance(result, list):
            # Kafka names the broker as Java prints an Optional.
            where = "Optional.empty" if broker_id is None else f"Optional[{broker_id}]"
            raise fail(f"Failed to describe producers for {len(partitions)} partitions on "
                       f"broker {where}",
                       result or KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "no answer"))
        found.extend((tp, s) for s in result if s.current_transaction_start_offset is not None
                     and now - s.last_timestamp > max_timeout_ms)
    return found


async def _descriptions(admin: Admin, ids: set[str]) -> dict[str, TransactionDescription]:
    """The coordinators' descriptions; ids they no longer know are left out."""
    found: dict[str, TransactionDescription] = {}
    for tid, result in (await admin.describe_transactions(sorted(ids))).items():
        if isinstance(result, TransactionDescription):
            found[tid] = result
        elif not (isinstance(result, KafkaError)
                  and result.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND):
            raise fail(f"Failed to describe {len(ids)} transactions", result)
    return found


def check_args(args: argparse.Namespace) -> None:
    """The combinations argparse cannot express, refused before connecting (Kafka's words)."""
    if args.command == "abort":
        if args.start_offset is None and args.producer_id is None:
            raise fail("The transaction to abort must be identified either with "
                       "--start-offset (for brokers on 3.0 or above) or with --producer-id, "
                       "--producer-epoch, and --coordinator-epoch (for older brokers)")
        if args.start_offset is None and args.producer_epoch is None:
            raise fail("Missing required argument --producer-epoch")
        if args.start_offset is None and args.coordinator_epoch is None:
            raise fail("Missing required argument --coordinator-epoch")
    elif args.command == "find-hanging":
        if args.topic is None and args.broker_id is None:
            raise fail("The `find-hanging` command requires either --topic or --broker-id to "
                       "limit the scope of the search")
        if args.partition is not None and args.topic is None:
            raise fail("The --partition argument requires --topic to be provided")


_COMMANDS = {"list": list_transactions, "describe": describe,
             "describe-producers": describe_producers, "abort": abort,
             "find-hanging": find_hanging}


async def _main(args: argparse.Namespace) -> int:
    props = load_properties(args.command_config) if args.command_config else ClientProperties()
    async with connect(args.bootstrap_server, props,
                       default_client_id="kafka-transactions") as client:
        await _COMMANDS[args.command](Admin(client), args)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return tool_main(build_parser(), argv, _main, check=check_args)


if __name__ == "__main__":
    sys.exit(main())
