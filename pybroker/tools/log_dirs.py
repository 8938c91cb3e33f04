"""kafka-log-dirs: each broker's log directories and the size of every replica in them.

Kafka's LogDirsCommand: `--describe` (required) asks each broker (`--broker-list`, default
all) with DescribeLogDirs and prints "Querying brokers for log directories information",
"Received log directory information from brokers 0,1" and one line of JSON:
`{"brokers":[{"broker":0,"logDirs":[{"logDir":"/d","error":null,"partitions":[{"partition":
"t-0","size":69,"offsetLag":0,"isFuture":false}]}]}],"version":1}`, keeping only the topics of
`--topic-list` when given. A log dir's error is printed as its error code's name (e.g.
KAFKA_STORAGE_ERROR) where Kafka prints its exception's class name. Unlike Kafka, which fails
the whole command, a broker that could not be asked is reported on stderr, the others are
printed, and the exit code is 1.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from protocol.errors import ErrorCode
from pybroker.client.admin import Admin, LogDirDescription
from pybroker.client.errors import error_message
from pybroker.tools.common import (
    ArgumentParser, ClientProperties, ToolError, UsageError, connect, err, load_properties, out,
    tool_main,
)

PROG = "kafka-log-dirs"


def build_parser() -> ArgumentParser:
    p = ArgumentParser(PROG, "This tool helps to query log directory usage on the specified "
                       "brokers.")
    p.add_argument("--bootstrap-server", help="REQUIRED: the server(s) to use for "
                   "bootstrapping")
    p.add_argument("--command-config", help="Property file containing configs to be passed to "
                   "Admin Client.")
    p.add_argument("--describe", action="store_true", help="Describe the specified log "
                   "directories on the specified brokers.")
    p.add_argument("--topic-list", default="", help='The list of topics to be queried in the '
                   'form "topic1,topic2,topic3". All topics will be queried if no topic list '
                   'is specified')
    p.add_argument("--broker-list", default="", help='The list of brokers to be queried in '
                   'the form "0,1,2". All brokers in the cluster will be queried if no broker '
                   'list is specified')
    return p


def _split(text: str) -> list[str]:
    return [x for x in text.split(",") if x]


def parse_brokers(text: str) -> set[int]:
    try:
        return {int(x) for x in _split(text)}
    except ValueError:
        raise UsageError(f"Invalid --broker-list '{text}': expected ids such as 0,1,2") from None


def as_json(described: dict[int, dict[str, LogDirDescription]], topics: set[str]) -> str:
    """Kafka's JSON shape (key order aside, which Kafka's HashMaps do not fix either)."""
    brokers: list[dict[str, Any]] = []
    for broker, dirs in sorted(described.items()):
        log_dirs = []
        for path, d in sorted(dirs.items()):
            partitions = [{"partition": str(tp), "size": r.size, "offsetLag": r.offset_lag,
                           "isFuture": r.is_future}
                          for tp, r in sorted(d.replicas.items())
                          if not topics or tp.topic in topics]
            error = None if d.error is None else ErrorCode.from_wire(d.error.code).name
            log_dirs.append({"logDir": path, "error": error, "partitions": partitions})
        brokers.append({"broker": broker, "logDirs": log_dirs})
    return json.dumps({"brokers": brokers, "version": 1}, separators=(",", ":"))


async def _main(args: argparse.Namespace) -> int:
    topics = set(_split(args.topic_list))
    wanted = parse_brokers(args.broker_list)
    props = load_properties(args.command_config) if args.command_config else ClientProperties()
    async with connect(args.bootstrap_server, props, default_client_id="log-dirs-tool") as client:
        _, _, nodes = await Admin(client).describe_cluster()
        missing = wanted - set(nodes)
        if missing:
            raise ToolError("ERROR: The given brokers do not exist from --broker-list: "
                            f"{','.join(map(str, sorted(missing)))}. Current existent brokers: "
                            f"{','.join(map(str, sorted(nodes)))}", plain=True)
        brokers = sorted(wanted or nodes)
        out("Querying brokers for log directories information")
        results = await Admin(client).describe_log_dirs(brokers)
    failed = {b: r for b, r in results.items() if isinstance(r, BaseException)}
    for broker, exc in sorted(failed.items()):
        err(f"Error: broker {broker}: {error_message(exc)}")
    described = {b: r for b, r in results.items() if b not in failed}
    out("Received log directory information from brokers "
        + ",".join(map(str, sorted(described))))
    out(as_json(described, topics))
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    return tool_main(build_parser(), argv, _main, required=("bootstrap_server", "describe"))


if __name__ == "__main__":
    sys.exit(main())
