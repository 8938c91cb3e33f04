"""kafka-delete-records: delete records of partitions up to given offsets.

Kafka's DeleteRecordsCommand: `--offset-json-file` holds
`{"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version": 1}` (offset -1
means the high watermark); the output is "Executing records delete operation", "Records delete
operation completed:" and a `partition: foo-1\tlow_watermark: 1` (or `\terror: ...`) line per
partition. Unlike Kafka, a partition that failed makes the exit code 1.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from pybroker.client.admin import Admin
from pybroker.client.cluster import TopicPartition
from pybroker.client.errors import error_message
from pybroker.tools.common import (
    ArgumentParser, ClientProperties, ToolError, connect, load_properties, out, tool_main,
)

PROG = "kafka-delete-records"


def build_parser() -> ArgumentParser:
    p = ArgumentParser(PROG, "This tool helps to delete records of the given partitions down "
                       "to the specified offset.")
    p.add_argument("--bootstrap-server", help="REQUIRED: The server to connect to.")
    p.add_argument("--offset-json-file", help='REQUIRED: The JSON file with offset per '
                   'partition. The format to use is: {"partitions": [{"topic": "foo", '
                   '"partition": 1, "offset": 1}], "version":1}')
    p.add_argument("--command-config", help="A property file containing configs to be passed "
                   "to Admin Client.")
    return p


def parse_offsets(text: str) -> dict[TopicPartition, int]:
    try:
        data: Any = json.loads(text)
    except ValueError:
        raise ToolError("The input string is not a valid JSON") from None
    if not isinstance(data, dict):
        raise ToolError("The input string is not a valid JSON object")
    version = data.get("version", 1)
    if version != 1:
        raise ToolError(f"Not supported version field value {version}")
    if "partitions" not in data:
        raise ToolError("Missing partitions field")
    offsets: dict[TopicPartition, int] = {}
    duplicates: list[str] = []
    try:
        for entry in data["partitions"]:
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
            if tp in offsets:
                duplicates.append(str(tp))
            offsets[tp] = int(entry["offset"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ToolError(f"Invalid partition entry in the offset JSON file: {exc}") from None
    if duplicates:
        raise ToolError("Offset json file contains duplicate topic partitions: "
                        + ",".join(duplicates))
    return offsets


async def _main(args: argparse.Namespace) -> int:
    try:
        with open(args.offset_json_file, encoding="utf-8") as f:
            offsets = parse_offsets(f.read())
    except OSError as exc:
        raise ToolError(f"Cannot read {args.offset_json_file}: {exc.strerror or exc}") from None
    props = load_properties(args.command_config) if args.command_config else ClientProperties()
    async with connect(args.bootstrap_server, props,
                       default_client_id="kafka-delete-records") as client:
        out("Executing records delete operation")
        results = await Admin(client).delete_records(offsets)
    out("Records delete operation completed:")
    failed = 0
    for tp in offsets:
        outcome = results.get(tp)
        if isinstance(outcome, BaseException):
            out(f"partition: {tp}\terror: {error_message(outcome)}")
            failed = 1
        else:
            out(f"partition: {tp}\tlow_watermark: {outcome}")
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    return tool_main(build_parser(), argv, _main,
                     required=("bootstrap_server", "offset_json_file"))


if __name__ == "__main__":
    sys.exit(main())
