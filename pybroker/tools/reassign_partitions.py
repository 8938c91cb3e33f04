"""kafka-reassign-partitions: propose, start, follow, cancel and list moves of partitions
between brokers (KIP-455, served by the controller).

Flags, output and messages are those of Kafka 3.9's `ReassignPartitionsCommand`, so the
operations pages ("Expanding your cluster", "Custom partition assignment and migration",
"Increasing replication factor") can be followed as typed: `--generate` prints the current
assignment and a proposal made by the same algorithm as topic creation
(`controller/assignment.py`, Kafka's `assignReplicasToBrokers`); `--execute` prints the
current assignment to save for a rollback, then starts the moves; `--verify` says per
partition whether its move is done; `--cancel` puts moves in progress back; `--list` shows
them. The JSON documents are handled by `reassign_json`.

`--execute --throttle N` throttles the moves' replication to N bytes/s, and `--verify` (once
nothing moves) and `--cancel` remove the throttles, as Kafka does (`reassign_throttles`;
the brokers apply them as quota/replication_quota.py says). `--preserve-throttles` keeps them.

What pybroker cannot do is refused in one line rather than pretended:
- `--replica-alter-log-dirs-throttle` (a value >= 0) and a `log_dirs` entry other than "any":
  pybroker has no AlterReplicaLogDirs.

Other differences: errors go to stderr (Kafka prints them, and its stack traces, on stdout);
`--cancel` cancels every listed move in progress, as Kafka 2.x did (3.9's Java port skips
those that only add replicas), and ends "None of the specified partition moves are active."
with a newline (Kafka's has none, so its next line runs on). `--bootstrap-controller`
(KRaft) does not exist.
"""
from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence, Sized
from typing import Any, TypeVar

from protocol.errors import ErrorCode, KafkaError
from pybroker.client.admin import Admin
from pybroker.client.cluster import TopicPartition
from pybroker.client.errors import error_message
from pybroker.controller.assignment import assign_replicas
from pybroker.tools.common import (
    ArgumentParser, ClientProperties, ToolError, connect, load_properties, out, tool_main,
)
from pybroker.tools.reassign_throttles import (
    YOU_MUST_RUN_VERIFY_PERIODICALLY, clear_throttles, proposed_moves, set_throttles,
)
from pybroker.tools.reassign_json import (
    ANY_LOG_DIR, ReassignFileError, Reassignment, check_executable, check_topics,
    format_reassignment, parse_broker_list, parse_reassignment, parse_topics_to_move,
)

PROG = "kafka-reassign-partitions"
CLIENT_ID = "reassign-partitions-tool"
TIMEOUT_MS = 60000  # Kafka's default.api.timeout.ms
T = TypeVar("T")
ACTIONS = ("generate", "execute", "verify", "cancel", "list")
# Kafka's requiredArgs and permittedArgs per action (flag names as argparse dests).
REQUIRED = {"verify": ("reassignment_json_file",),
            "generate": ("topics_to_move_json_file", "broker_list"),
            "execute": ("reassignment_json_file",), "cancel": ("reassignment_json_file",),
            "list": ()}
PERMITTED = {"verify": ("bootstrap_server", "command_config", "preserve_throttles"),
             "generate": ("bootstrap_server", "broker_list", "command_config",
                          "disable_rack_aware"),
             "execute": ("additional", "bootstrap_server", "command_config", "throttle",
                         "replica_alter_log_dirs_throttle", "timeout"),
             "cancel": ("bootstrap_server", "command_config", "preserve_throttles", "timeout"),
             "list": ("bootstrap_server", "command_config")}
CANNOT_EXECUTE_BECAUSE_OF_EXISTING = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to "
    "override this and create a new partition assignment in addition to the existing one. "
    "The --additional flag can also be used to change the throttle by resubmitting the "
    "current reassignment.")
UNKNOWN_TOPIC = "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"


class Terse(ToolError):
    """Kafka's TerseException: its message alone, exit code 1."""

    def __init__(self, message: str) -> None:
        super().__init__(message, plain=True)


def build_parser() -> ArgumentParser:
    p = ArgumentParser(PROG, "This tool helps to move topic partitions between replicas.")
    p.add_argument("--verify", action="store_true", help="Verify if the reassignment "
                   "completed as specified by the --reassignment-json-file option. If there "
                   "is a throttle engaged for the replicas specified, and the rebalance has "
                   "completed, the throttle will be removed")
    p.add_argument("--generate", action="store_true", help="Generate a candidate partition "
                   "reassignment configuration. Note that this only generates a candidate "
                   "assignment, it does not execute it.")
    p.add_argument("--execute", action="store_true", help="Kick off the reassignment as "
                   "specified by the --reassignment-json-file option.")
    p.add_argument("--cancel", action="store_true", help="Cancel an active reassignment.")
    p.add_argument("--list", action="store_true", help="List all active partition "
                   "reassignments.")
    p.add_argument("--bootstrap-server", metavar="Server(s) to use for bootstrapping",
                   help="the server(s) to use for bootstrapping.")
    p.add_argument("--command-config", metavar="Admin client property file",
                   help="Property file containing configs to be passed to Admin Client.")
    p.add_argument("--reassignment-json-file", metavar="manual assignment json file path",
                   help='The JSON file with the partition reassignment configuration. The '
                   'format to use is - {"partitions": [{"topic": "foo", "partition": 1, '
                   '"replicas": [1,2,3], "log_dirs": ["any","any","any"]}], "version":1}. '
                   '"log_dirs" is optional; its entries must be "any" here (pybroker does '
                   "not move replicas between log directories).")
    p.add_argument("--topics-to-move-json-file", metavar="topics to reassign json file path",
                   help="Generate a reassignment configuration to move the partitions of the "
                   "specified topics to the list of brokers specified by the --broker-list "
                   'option. The format to use is - {"topics": [{"topic": "foo"},{"topic": '
                   '"foo1"}], "version":1}')
    p.add_argument("--broker-list", metavar="brokerlist", help="The list of brokers to which "
                   'the partitions need to be reassigned in the form "0,1,2". This is '
                   "required if --topics-to-move-json-file is used to generate reassignment "
                   "configuration")
    p.add_argument("--disable-rack-aware", action="store_true",
                   help="Disable rack aware replica assignment")
    p.add_argument("--throttle", type=_java_long, metavar="throttle", help="The movement of "
                   "partitions between brokers will be throttled to this value (bytes/sec). "
                   "This option can be included with --execute when a reassignment is "
                   "started, and it can be altered by resubmitting the current reassignment "
                   "along with the --additional flag. The throttle rate should be at least "
                   "1 KB/s. (default: -1)")
    p.add_argument("--replica-alter-log-dirs-throttle", type=_java_long,
                   metavar="replicaAlterLogDirsThrottle", help="Refused: pybroker does not "
                   "move replicas between log directories.")
    p.add_argument("--timeout", type=_java_long, metavar="timeout", help="The maximum time "
                   "in ms to wait for log directory replica assignment to begin (there is "
                   "none here: log directory moves are refused). Default: 10000")
    p.add_argument("--additional", action="store_true", help="Execute this reassignment in "
                   "addition to any other ongoing ones.")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="Do not modify broker or topic throttles.")
    return p


def _java_long(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid long value: '{text}'") from None


def _given(args: argparse.Namespace, dest: str) -> bool:
    value = getattr(args, dest)
    return value is not None and value is not False


def validate(args: argparse.Namespace) -> str:
    """Kafka's `validateAndParseArgs`, with its messages, then the refusals; the action."""
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise ToolError("Command must include exactly one action: --generate, --execute, "
                        "--verify, --cancel, --list", plain=True)
    action = chosen[0]
    if not args.bootstrap_server:
        raise ToolError("Please specify --bootstrap-server", plain=True)
    for dest in REQUIRED[action]:
        if not _given(args, dest):
            raise ToolError(f'Missing required argument "[{_flag(dest)}]"', plain=True)
    for dest in vars(args):
        if dest in ACTIONS or not _given(args, dest):
            continue
        if dest not in REQUIRED[action] and dest not in PERMITTED[action]:
            raise ToolError(f'Option "[{_flag(dest)}]" can\'t be used with action '
                            f'"[{action}]"', plain=True)
    if args.replica_alter_log_dirs_throttle is not None \
            and args.replica_alter_log_dirs_throttle >= 0:
        raise ToolError("--replica-alter-log-dirs-throttle is not supported: pybroker does "
                        "not move replicas between log directories (leave the flag out)",
                        plain=True)
    return action


def _flag(dest: str) -> str:
    return dest.replace("_", "-")


def read_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise ToolError(f"{path} ({exc.strerror or exc})") from None


def read_reassignment(path: str) -> Reassignment:
    """The --reassignment-json-file, refusing log directories (no AlterReplicaLogDirs)."""
    reassignment = _parsed(parse_reassignment, read_file(path))
    if reassignment.log_dirs:
        (tp, broker), log_dir = sorted(reassignment.log_dirs.items())[0]
        raise ToolError(f'Moving a replica to a log directory is not supported: pybroker has '
                        f'no AlterReplicaLogDirs; give "{ANY_LOG_DIR}" as each log dir '
                        f'({tp} on broker {broker}: {log_dir})')
    return reassignment


def _parsed(parse: Callable[..., T], *args: Any) -> T:
    try:
        return parse(*args)
    except ReassignFileError as exc:
        raise ToolError(str(exc)) from None


async def current_replicas(admin: Admin, topics: Iterable[str]
                           ) -> dict[TopicPartition, tuple[int, ...]]:
    """Every partition's replicas for `topics` (Kafka's getReplicaAssignmentForTopics); an
    unknown topic stops the tool with Kafka's message."""
    described = await admin.describe_topics(sorted(set(topics)))
    result: dict[TopicPartition, tuple[int, ...]] = {}
    for name, topic in described.items():
        if isinstance(topic, KafkaError):
            if topic.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise ToolError(f"{UNKNOWN_TOPIC}: Topic {name} not found.")
            raise topic
        for index, p in topic.partitions.items():
            result[TopicPartition(name, index)] = tuple(p.replicas)
    return result


def read_inputs(action: str, args: argparse.Namespace) -> object:
    """The action's files and lists, parsed before connecting (Kafka's admin client connects
    lazily, so a bad file is reported whatever the broker's state)."""
    if action == "generate":
        return (_parsed(parse_broker_list, args.broker_list),
                _parsed(check_topics, _parsed(parse_topics_to_move,
                                              read_file(args.topics_to_move_json_file))))
    if action == "execute":
        return _parsed(check_executable, read_reassignment(args.reassignment_json_file))
    if action in ("verify", "cancel"):
        return read_reassignment(args.reassignment_json_file)
    return None


async def generate(admin: Admin, args: argparse.Namespace,
                   inputs: tuple[list[int], list[str]]) -> None:
    brokers, topics = inputs
    current = await current_replicas(admin, topics)
    _, _, nodes = await admin.describe_cluster()
    wanted = set(brokers)
    racks = {n.node_id: (n.rack if not args.disable_rack_aware else None)
             for n in nodes.values() if n.node_id in wanted}
    rackless = sum(1 for r in racks.values() if r is None)
    if not args.disable_rack_aware and 0 < rackless < len(racks):
        raise ToolError("Not all brokers have rack information. Add --disable-rack-aware in "
                        "command line to make replica assignment without rack information.")
    proposed: dict[TopicPartition, list[int]] = {}
    rng = random.Random()
    for topic in sorted({tp.topic for tp in current}):
        count = sum(1 for tp in current if tp.topic == topic)
        factor = len(current[TopicPartition(topic, 0)])
        try:
            lists = assign_replicas(racks, count, factor, rng=rng)
        except KafkaError as exc:
            raise ToolError(error_message(exc)) from None
        proposed.update({TopicPartition(topic, i): r for i, r in enumerate(lists)})
    out(f"Current partition replica assignment\n{format_reassignment(current)}\n")
    out(f"Proposed partition reassignment configuration\n{format_reassignment(proposed)}")


async def execute(admin: Admin, args: argparse.Namespace,
                  targets: dict[TopicPartition, tuple[int, ...]]) -> None:
    ongoing = await admin.list_partition_reassignments()
    if ongoing and not args.additional:
        raise Terse(CANNOT_EXECUTE_BECAUSE_OF_EXISTING)
    _, _, nodes = await admin.describe_cluster()
    unknown = sorted({b for replicas in targets.values() for b in replicas} - set(nodes))
    if unknown:
        raise ToolError(f"Unknown broker id {unknown[0]}")
    current = await current_replicas(admin, {tp.topic for tp in targets})
    missing = sorted(set(targets) - set(current))
    if missing:
        raise ToolError(f"{UNKNOWN_TOPIC}: Unable to find partition: "
                        + ", ".join(map(str, missing)))
    out("Current partition replica assignment\n\n"
        + format_reassignment({tp: current[tp] for tp in targets})
        + "\n\nSave this to use as the --reassignment-json-file option during rollback")
    if args.throttle is not None and args.throttle >= 0:
        out(YOU_MUST_RUN_VERIFY_PERIODICALLY)
        await set_throttles(admin, proposed_moves(ongoing, targets, current), args.throttle)
    errors = _failures(await admin.alter_partition_reassignments(targets))
    if errors:
        raise Terse("Error reassigning partition(s):\n" + errors)
    out(f"Successfully started partition reassignment{_plural(targets)} for "
        + ",".join(map(str, sorted(targets))))


async def verify(admin: Admin, args: argparse.Namespace, reassignment: Reassignment) -> None:
    ongoing = await admin.list_partition_reassignments()
    absent = {tp.topic for tp, _ in reassignment.partitions if tp not in ongoing}
    described = await admin.describe_topics(sorted(absent)) if absent else {}
    lines = ["Status of partition reassignment:"]
    for tp, target in sorted(reassignment.targets.items()):
        if tp in ongoing:
            lines.append(f"Reassignment of partition {tp} is still in progress.")
            continue
        topic = described.get(tp.topic)
        if isinstance(topic, KafkaError) and topic.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise topic
        partition = None if isinstance(topic, KafkaError) or topic is None \
            else topic.partitions.get(tp.partition)
        replicas = () if partition is None else tuple(partition.replicas)
        if replicas == tuple(target):
            lines.append(f"Reassignment of partition {tp} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {tp}, but replica "
                         f"set is {_commas(replicas)} rather than {_commas(target)}.")
    out("\n".join(lines))
    out("")  # Kafka's (empty) report of log directory moves
    # As Kafka: once none of the file's partitions moves (others may).
    if not any(tp in ongoing for tp in reassignment.targets) and not args.preserve_throttles:
        await clear_throttles(admin, reassignment.targets)


async def cancel(admin: Admin, args: argparse.Namespace, reassignment: Reassignment) -> None:
    listed = await admin.list_partition_reassignments(dict(reassignment.partitions))
    moving = sorted(tp for tp, r in listed.items() if r.adding_replicas or r.removing_replicas)
    if moving:
        errors = _failures(await admin.alter_partition_reassignments(
            {tp: None for tp in moving}))
        if errors:
            raise Terse(f"Error cancelling partition reassignment{_plural(errors.splitlines())}"
                        f" for:\n{errors}")
        out(f"Successfully cancelled partition reassignment{_plural(moving)} for: "
            + ",".join(map(str, moving)))
    else:
        out("None of the specified partition reassignments are active.")
    out("None of the specified partition moves are active.")
    if not args.preserve_throttles:
        await clear_throttles(admin, reassignment.targets)


async def list_reassignments(admin: Admin, args: argparse.Namespace, _: None) -> None:
    ongoing = await admin.list_partition_reassignments()
    if not ongoing:
        out("No partition reassignments found.")
        return
    lines = ["Current partition reassignments:"]
    for tp, r in sorted(ongoing.items()):
        line = f"{tp}: replicas: {_commas(r.replicas)}."
        if r.adding_replicas:
            line += f" adding: {_commas(r.adding_replicas)}."
        if r.removing_replicas:
            line += f" removing: {_commas(r.removing_replicas)}."
        lines.append(line)
    out("\n".join(lines))


def _failures(results: Mapping[TopicPartition, KafkaError | None]) -> str:
    """Kafka's per-partition error lines, sorted: "t-0: message"."""
    return "\n".join(f"{tp}: {error_message(e)}" for tp, e in sorted(results.items())
                     if e is not None)


def _plural(items: Sized) -> str:
    return "" if len(items) == 1 else "s"


def _commas(items: Iterable[int]) -> str:
    return ",".join(map(str, items))


_RUN: dict[str, Callable[..., Awaitable[None]]] = {
    "generate": generate, "execute": execute, "verify": verify, "cancel": cancel,
    "list": list_reassignments}


async def _main(args: argparse.Namespace, action: str) -> int:
    props = load_properties(args.command_config) if args.command_config else ClientProperties()
    props.setdefault("client.id", CLIENT_ID)
    timeout = int(props.get("default.api.timeout.ms", TIMEOUT_MS)) / 1000
    inputs = read_inputs(action, args)
    async with connect(args.bootstrap_server, props, default_client_id=CLIENT_ID,
                       request_timeout=timeout / 2) as client:
        await _RUN[action](Admin(client, timeout=timeout), args, inputs)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return tool_main(build_parser(), argv, _main, check=validate)


if __name__ == "__main__":
    sys.exit(main())
