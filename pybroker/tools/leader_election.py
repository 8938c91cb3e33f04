"""kafka-leader-election: ask the controller to elect the preferred replica, or to elect a
leader for partitions that have none from replicas out of sync (unclean).

Flags, output and messages are those of Kafka 3.9's `LeaderElectionCommand`, which replaced
`kafka-preferred-replica-election` (removed in 3.0), so the operations documentation can be
followed as typed. Like Kafka's, the tool prints one line for the partitions elected, one for
those whose valid replica already led, and one line per failure naming Kafka's exception
class, then fails with "N replica(s) could not be elected" (exit code 1). Differences: Kafka
prints its exceptions' stack traces on stderr; this prints their message only. The partitions
of each line are sorted (Kafka's come in hash-set order).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from protocol.errors import ErrorCode, KafkaError
from pybroker.client.admin import Admin
from pybroker.client.cluster import TopicPartition
from pybroker.client.errors import KafkaTimeoutError, error_message
from pybroker.tools.common import (
    ArgumentParser, ClientProperties, ToolError, connect, load_properties, out, tool_main,
)

PROG = "kafka-leader-election"
ELECTION_TYPES = {"preferred": 0, "unclean": 1}
TIMEOUT_S = 30.0  # Kafka's default.api.timeout.ms for this tool; requests get half
# Kafka exception classes whose names are not the error code in CamelCase + "Exception".
_EXCEPTION_NAMES = {
    ErrorCode.INVALID_TOPIC_EXCEPTION: "InvalidTopicException",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "ClusterAuthorizationException",
    ErrorCode.UNKNOWN_SERVER_ERROR: "UnknownServerException",
    ErrorCode.REQUEST_TIMED_OUT: "TimeoutException",
}


class CommandFailed(ToolError):
    """Kafka's AdminCommandFailedException: its message alone on stderr, exit code 1."""

    def __init__(self, message: str) -> None:
        super().__init__(message, plain=True)


def build_parser() -> ArgumentParser:
    p = ArgumentParser(PROG, "This tool attempts to elect a new leader for a set of topic "
                       "partitions. The type of elections supported are preferred replicas "
                       "and unclean replicas.")
    p.add_argument("--bootstrap-server", metavar="host:port", help="A hostname and port for "
                   "the broker to connect to, in the form host:port. Multiple comma "
                   "separated URLs can be given. REQUIRED.")
    p.add_argument("--admin.config", dest="admin_config", metavar="config file",
                   help="Configuration properties files to pass to the admin client")
    p.add_argument("--path-to-json-file", metavar="Path to JSON file", help="The JSON file "
                   "with the list of partition for which leader elections should be "
                   'performed. This is an example format. {"partitions": [{"topic": "foo", '
                   '"partition": 1}, {"topic": "foobar", "partition": 2}]} Not allowed if '
                   "--all-topic-partitions or --topic flags are specified.")
    p.add_argument("--topic", metavar="topic name", help="Name of topic for which to perform "
                   "an election. Not allowed if --path-to-json-file or --all-topic-partitions "
                   "is specified.")
    p.add_argument("--partition", type=int, metavar="partition id", help="Partition id for "
                   "which to perform an election. REQUIRED if --topic is specified.")
    p.add_argument("--all-topic-partitions", action="store_true", help="Perform election on "
                   "all of the eligible topic partitions based on the type of election (see "
                   "the --election-type flag). Not allowed if --topic or --path-to-json-file "
                   "is specified.")
    p.add_argument("--election-type", type=_election_type, metavar="election type",
                   help='Type of election to attempt. Possible values are "preferred" for '
                   'preferred leader election or "unclean" for unclean leader election. If '
                   "preferred election is selection, the election is only performed if the "
                   "current leader is not the preferred leader for the topic partition. If "
                   "unclean election is selected, the election is only performed if there "
                   "are no leader for the topic partition. REQUIRED.")
    return p


def _election_type(text: str) -> str:
    """joptsimple's EnumConverter: case-insensitive, the enum's names only."""
    if text.lower() not in ELECTION_TYPES:
        raise argparse.ArgumentTypeError(
            f"Value for argument [election-type] must be one of [PREFERRED, UNCLEAN]: {text}")
    return text.upper()


def validate(args: argparse.Namespace) -> None:
    """Kafka's LeaderElectionCommandOptions.validate, with its messages."""
    missing = [flag for flag, value in (("bootstrap-server", args.bootstrap_server),
                                        ("election-type", args.election_type)) if not value]
    if missing:
        raise CommandFailed("Missing required option(s): " + ", ".join(missing))
    chosen = [args.topic is not None, args.all_topic_partitions,
              args.path_to_json_file is not None]
    if sum(chosen) != 1:
        raise CommandFailed("One and only one of the following options is required: topic, "
                            "all-topic-partitions, path-to-json-file")
    if args.topic is not None and args.partition is None:
        raise CommandFailed("Missing required option(s): partition")
    if args.topic is None and args.partition is not None:
        raise CommandFailed("Option partition is only allowed if topic is used")


def parse_election_data(path: str) -> list[TopicPartition]:
    """The `--path-to-json-file` document: {"partitions": [{"topic": t, "partition": p}]}."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise CommandFailed(f"{path} ({exc.strerror or exc})") from None
    try:
        data = json.loads(text) if text.strip() else None
    except ValueError as exc:
        raise CommandFailed(f"Invalid JSON in {path}: {exc}") from None
    if data is None:
        raise CommandFailed("Replica election data is empty")
    if not isinstance(data, dict) or "partitions" not in data:
        raise CommandFailed('Replica election data is missing "partitions" field')
    try:
        partitions = [TopicPartition(str(e["topic"]), int(e["partition"]))
                      for e in data["partitions"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise CommandFailed(f"Invalid replica election data: {exc}") from None
    duplicates = sorted({tp for tp in partitions if partitions.count(tp) > 1})
    if duplicates:
        raise CommandFailed("Replica election data contains duplicate partitions: ["
                            + ", ".join(map(str, duplicates)) + "]")
    return list(dict.fromkeys(partitions))


def java_exception(error: KafkaError) -> str:
    """How Kafka's tool prints a partition's failure: the exception's toString."""
    code = ErrorCode.from_wire(error.code)
    name = _EXCEPTION_NAMES.get(code) or "".join(
        word.capitalize() for word in code.name.split("_")) + "Exception"
    return f"org.apache.kafka.common.errors.{name}: {error_message(error)}"


def report(election_type: str, results: dict[TopicPartition, KafkaError | None]) -> None:
    """Kafka's three groups: elected, already valid (ELECTION_NOT_NEEDED), failed."""
    elected = sorted(tp for tp, e in results.items() if e is None)
    noop = sorted(tp for tp, e in results.items()
                  if e is not None and e.code == ErrorCode.ELECTION_NOT_NEEDED)
    failed = {tp: e for tp, e in sorted(results.items())
              if e is not None and e.code != ErrorCode.ELECTION_NOT_NEEDED}
    if elected:
        out(f"Successfully completed leader election ({election_type}) for partitions "
            + ", ".join(map(str, elected)))
    if noop:
        out("Valid replica already elected for partitions " + ", ".join(map(str, noop)))
    for tp, error in failed.items():
        out(f"Error completing leader election ({election_type}) for partition: {tp}: "
            f"{java_exception(error)}")
    if failed:
        raise CommandFailed(f"{len(failed)} replica(s) could not be elected")


async def _main(args: argparse.Namespace) -> int:
    partitions: list[TopicPartition] | None = None
    if args.path_to_json_file is not None:
        partitions = parse_election_data(args.path_to_json_file)
    elif args.topic is not None:
        partitions = [TopicPartition(args.topic, args.partition)]
    props = load_properties(args.admin_config) if args.admin_config else ClientProperties()
    timeout = int(props.get("default.api.timeout.ms", TIMEOUT_S * 1000)) / 1000
    async with connect(args.bootstrap_server, props, default_client_id=PROG,
                       request_timeout=timeout / 2) as client:
        try:
            results = await Admin(client, timeout=timeout).elect_leaders(
                ELECTION_TYPES[args.election_type.lower()], partitions)
        except KafkaTimeoutError:
            out("Timeout waiting for election results")
            raise CommandFailed("Timeout waiting for election results") from None
        except KafkaError as exc:
            if exc.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
                out("Not authorized to perform leader election")
                raise CommandFailed("Not authorized to perform leader election") from None
            raise
    report(args.election_type, results)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return tool_main(build_parser(), argv, _main, check=validate)


if __name__ == "__main__":
    sys.exit(main())
