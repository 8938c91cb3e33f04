"""The JSON documents of kafka-reassign-partitions, read and written as Kafka 3.9 does.

Two inputs: the topics to move (`--topics-to-move-json-file`, `{"topics": [{"topic": "foo"}],
"version": 1}`) and a reassignment (`--reassignment-json-file`, `{"version": 1, "partitions":
[{"topic": "foo", "partition": 1, "replicas": [1, 2], "log_dirs": ["any", "any"]}]}`, with
`log_dirs` optional). One output: the reassignment format, compact, partitions sorted by topic
then partition, `log_dirs` all "any" -- what `--generate` proposes and what `--execute` prints
to save for a rollback, so either can be fed back to the tool.

Kafka's decoder is strict and so is this one: an absent field, a number given as a string, a
version other than 1 each stop the tool with Kafka's message ("No such field exists: `topic`",
"Expected `Integer` value, received \\"1\\"", "Not supported version field value 2"); the
`--execute` checks (empty list, duplicate partitions, duplicate replicas) are Kafka's too.
Kafka prints all of these after "Error: ". Where Kafka quotes its JSON parser (Jackson), the
message is Python's with Jackson's exception name in front, since the text cannot be the same.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pybroker.client.cluster import TopicPartition

ANY_LOG_DIR = "any"
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_INT_MIN, _INT_MAX = -2**31, 2**31 - 1


class ReassignFileError(Exception):
    """A document (or a flag) Kafka's tool refuses, with its message."""


@dataclass(frozen=True)
class Reassignment:
    """A parsed --reassignment-json-file: target replicas per partition, in file order
    (duplicates kept, so --execute can refuse them as Kafka does), and the log dirs named
    other than "any", keyed by (partition, broker)."""

    partitions: tuple[tuple[TopicPartition, tuple[int, ...]], ...]
    log_dirs: Mapping[tuple[TopicPartition, int], str]

    @property
    def targets(self) -> dict[TopicPartition, tuple[int, ...]]:
        return dict(self.partitions)


def format_reassignment(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """Kafka's `formatAsReassignmentJson`: compact JSON, sorted, every log dir "any"."""
    partitions = [{"topic": tp.topic, "partition": tp.partition,
                   "replicas": list(assignment[tp]),
                   "log_dirs": [ANY_LOG_DIR] * len(assignment[tp])}
                  for tp in sorted(assignment)]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"),
                      ensure_ascii=False)


def parse_topics_to_move(text: str) -> list[str]:
    """The --topics-to-move-json-file document: the topic names, in file order. A missing
    "topics" field means none, as in Kafka."""
    try:
        data = _loads(text)
    except ReassignFileError:
        raise ReassignFileError("The input string is not a valid JSON") from None
    root = _object(data)
    _check_version(root)
    if "topics" not in root:
        return []
    return [_string(_field(_object(entry), "topic")) for entry in _array(root["topics"])]


def parse_reassignment(text: str) -> Reassignment:
    """The --reassignment-json-file document; a missing "partitions" field means none."""
    root = _object(_loads(text))
    _check_version(root)
    partitions: list[tuple[TopicPartition, tuple[int, ...]]] = []
    log_dirs: dict[tuple[TopicPartition, int], str] = {}
    for entry in _array(root["partitions"]) if "partitions" in root else []:
        fields = _object(entry)
        topic = _string(_field(fields, "topic"))
        tp = TopicPartition(topic, _int(_field(fields, "partition")))
        replicas = tuple(_int(r) for r in _array(_field(fields, "replicas")))
        dirs = ([_string(d) for d in _array(fields["log_dirs"])] if "log_dirs" in fields
                else [ANY_LOG_DIR] * len(replicas))
        if len(dirs) != len(replicas):
            raise ReassignFileError(
                f"Size of replicas list {_java_list(replicas)} is different from size of log "
                f"dirs list {_java_list(dirs)} for partition {tp}")
        partitions.append((tp, replicas))
        log_dirs.update({(tp, r): d for r, d in zip(replicas, dirs) if d != ANY_LOG_DIR})
    return Reassignment(tuple(partitions), log_dirs)


def check_executable(reassignment: Reassignment) -> dict[TopicPartition, tuple[int, ...]]:
    """Kafka's `parseExecuteAssignmentArgs` checks, in its order; the targets by partition."""
    parts = reassignment.partitions
    if not parts:
        raise ReassignFileError("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas in parts):
        raise ReassignFileError("Partition replica list cannot be empty")
    repeated = [tp for tp, n in Counter(tp for tp, _ in parts).items() if n > 1]
    if repeated:
        raise ReassignFileError("Partition reassignment contains duplicate topic partitions: "
                                + ",".join(map(str, repeated)))
    doubled = [(tp, [r for r, n in Counter(replicas).items() if n > 1])
               for tp, replicas in parts]
    doubled = [(tp, rs) for tp, rs in doubled if rs]
    if doubled:
        raise ReassignFileError(
            "Partition replica lists may not contain duplicate entries: " + ". ".join(
                f"{tp} contains multiple entries for {','.join(map(str, rs))}"
                for tp, rs in doubled))
    return reassignment.targets


def parse_broker_list(text: str) -> list[int]:
    """--broker-list "1,2,3": Java's Integer.parseInt on each item (no spaces), no repeats."""
    brokers = [_parse_java_int(item) for item in text.split(",")]
    repeated = sorted(b for b, n in Counter(brokers).items() if n > 1)
    if repeated:
        raise ReassignFileError(f"Broker list contains duplicate entries: {_java_list(repeated)}")
    return brokers


def check_topics(topics: Iterable[str]) -> list[str]:
    """Kafka refuses a topics-to-move list that names a topic twice."""
    topics = list(topics)
    repeated = sorted(t for t, n in Counter(topics).items() if n > 1)
    if repeated:
        raise ReassignFileError("List of topics to reassign contains duplicate entries: "
                                + _java_list(repeated))
    return topics


def _java_list(items: Iterable[Any]) -> str:
    """How Java prints a List or Set: [a, b]."""
    return "[" + ", ".join(map(str, items)) + "]"


def _parse_java_int(text: str) -> int:
    value = int(text) if _JAVA_INT.fullmatch(text) else None
    if value is None or not _INT_MIN <= value <= _INT_MAX:
        raise ReassignFileError(f'For input string: "{text}"')
    return value


def _loads(text: str) -> Any:
    """Parse JSON; Kafka's Jackson refuses an empty document with this message."""
    if not text:
        raise ReassignFileError("com.fasterxml.jackson.core.JsonParseException: The input "
                                "string shouldn't be empty")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ReassignFileError(f"com.fasterxml.jackson.core.JsonParseException: {exc}") from None


def _node(value: Any) -> str:
    """A JSON value as Jackson's JsonNode.toString shows it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ReassignFileError(f"Expected JSON object, received {_node(value)}")
    return value


def _array(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ReassignFileError(f"Expected `JSON array` value, received {_node(value)}")
    return value


def _field(fields: dict[str, Any], name: str) -> Any:
    if name not in fields:
        raise ReassignFileError(f"No such field exists: `{name}`")
    return fields[name]


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) \
            or not _INT_MIN <= value <= _INT_MAX:
        raise ReassignFileError(f"Expected `Integer` value, received {_node(value)}")
    return value


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise ReassignFileError(f"Expected `String` value, received {_node(value)}")
    return value


def _check_version(root: dict[str, Any]) -> None:
    version = _int(root["version"]) if "version" in root else 1
    if version != 1:
        raise ReassignFileError(f"Not supported version field value {version}")
