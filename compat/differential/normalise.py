"""What legitimately differs between two brokers, masked before the answers are compared.

Decided once here, by field name wherever it appears in an answer:

- identities a broker assigns: cluster id, node ids (when valid, i.e. >= 0), hosts, ports,
  topic ids, fetch session ids, log dir paths and their byte counts on disk;
- per-case identities: member ids, group leaders and producer ids are renamed in order of
  first appearance (`<member-1>`, `<pid-1>`), so "the same member answered twice" and "the
  leader is the first member" are still compared, not the broker's naming scheme;
- throttle times (quota bookkeeping, 0 on both when no quota is set, masked anyway) and
  clock readings taken by the broker (log-append times, transaction start times);
- error messages: their wording is the broker's own and the codes beside them are what a
  client acts on, so only whether a message is present is compared (text vs null); the
  literal "NONE" (what Kafka's Errors.message() gives for success) and "" are kept, so that
  a message on a success is told from a message on an error;
- replica lists (replicas, ISR, offline): node ids, masked like the node fields;
- the order of partitions (by index), topics (by name) and group members (by their renamed
  id) in a list: Kafka's follows its hash maps, and clients match entries by index and name;
- record sets: summarised batch by batch from their headers (base offset, count, epochs,
  producer fields, timestamps, CRC), so a difference names the batch rather than a blob of
  bytes; record timestamps are shown relative to the run's base time t0 and CRCs renamed in
  order of appearance, since both depend on when the run was made.

Everything else is compared exactly, including tagged fields a broker sends and unknown ones.
"""
from __future__ import annotations

import uuid
from typing import Any, Callable

from construct import Container

from protocol.records.batch import iter_batches

MASKED = {
    "throttle_time_ms": "<throttle>",
    "cluster_id": "<cluster-id>",
    "host": "<host>",
    "port": "<port>",
    "client_host": "<host>",
    "log_dir": "<log-dir>",
    "total_bytes": "<bytes>",
    "usable_bytes": "<bytes>",
    "log_append_time_ms": "<broker-time>",
    "transaction_start_time_ms": "<broker-time>",
    "session_id": "<session>",
}
NODE_FIELDS = {"node_id", "leader_id", "controller_id", "broker_id", "coordinator_id"}
NODE_LISTS = {"replica_nodes", "isr_nodes", "offline_replicas"}
BROKER_RESOURCES = {4, 8}  # BROKER and BROKER_LOGGER: named by the node id
MESSAGES = {"error_message", "batch_index_error_message"}
PARTITION_KEYS = ("partition_index", "partition", "partition_id", "name", "topic",
                  "member_id")
RENAMED = {"member_id": "member", "leader": "member", "producer_id": "pid"}
ZERO_UUID = uuid.UUID(int=0)
# Record timestamps the corpus sets relative to the run's base time t0 (recent, so that
# retention never deletes them): shown relative to it, so that two runs record the same.
TIMESTAMPS = {"timestamp", "base_timestamp", "max_timestamp", "last_timestamp"}
DAY_MS = 86_400_000


class Normaliser:
    """One per case and target: the renaming of per-case identities is kept across the
    case's answers, so the same member is the same name in every step."""

    def __init__(self, base_ts: int = 0) -> None:
        self.names: dict[tuple[str, Any], str] = {}
        self.base_ts = base_ts

    def rename(self, kind: str, value: Any) -> str:
        key = (kind, value)
        if key not in self.names:
            count = sum(1 for k, _ in self.names if k == kind)
            self.names[key] = f"<{kind}-{count + 1}>"
        return self.names[key]

    def __call__(self, value: Any, name: str = "") -> Any:
        if isinstance(value, (Container, dict)):
            out = {k: self(v, k) for k, v in value.items() if not k.startswith("_io")}
            # A broker's config resources are named by its node id, which differs.
            if out.get("resource_type") in BROKER_RESOURCES and \
                    str(out.get("resource_name", "")).isdigit():
                out["resource_name"] = "<node>"
            return out
        if isinstance(value, list):
            if name in NODE_LISTS:
                return ["<node>" if isinstance(v, int) and v >= 0 else v for v in value]
            return _in_order([self(v, name) for v in value])
        if name in MASKED and value not in (None, -1):
            return MASKED[name]
        if name in NODE_FIELDS and isinstance(value, int) and value >= 0:
            return "<node>"
        if name in RENAMED and value not in (None, "", -1):
            return self.rename(RENAMED[name], value)
        if name in TIMESTAMPS and isinstance(value, int) and self.base_ts \
                and abs(value - self.base_ts) < DAY_MS:
            return f"<t0{value - self.base_ts:+d}>"
        if name == "crc" and isinstance(value, int):
            return self.rename("crc", value)
        if name in MESSAGES and value is not None:
            return value if value in ("NONE", "") else "<message>"
        if isinstance(value, uuid.UUID):
            return "<uuid>" if value != ZERO_UUID else "<zero-uuid>"
        if name == "records" and isinstance(value, (bytes, bytearray, memoryview)):
            return self(summarise_records(bytes(value)), "records")
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value).hex()
        return value


def _in_order(items: list) -> list:
    """A list of partition (topic, member) entries, normalised, in index (name, renamed
    member) order; any other list as it is."""
    if len(items) < 2 or not all(isinstance(i, (Container, dict)) for i in items):
        return items
    for key in PARTITION_KEYS:
        if all(isinstance(i.get(key), (int, str)) for i in items) and \
                len({type(i[key]) for i in items}) == 1:
            return sorted(items, key=lambda i: i[key])
    return items


def summarise_records(data: bytes) -> list[dict[str, Any]] | str:
    """A record set as its batches' headers; the hex itself when it holds no whole batch."""
    out = []
    try:
        for _, h in iter_batches(memoryview(data)):
            out.append({"base_offset": h.base_offset, "count": h.records_count,
                        "last_offset_delta": h.last_offset_delta, "magic": h.magic,
                        "partition_leader_epoch": h.partition_leader_epoch,
                        "attributes": h.attributes, "crc": h.crc,
                        "base_timestamp": h.base_timestamp, "max_timestamp": h.max_timestamp,
                        "producer_id": h.producer_id, "producer_epoch": h.producer_epoch,
                        "base_sequence": h.base_sequence})
    except Exception as exc:  # a record set no batch walk accepts: show what it was
        return f"<unreadable records: {type(exc).__name__}, {len(data)} bytes>"
    return out if out or not data else f"<{len(data)} bytes, no whole batch>"


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Leaf paths to values (`a.b[0].c`): what a difference is reported against."""
    if isinstance(value, dict):
        if not value:
            return {path: {}}
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{path}.{k}" if path else k))
        return out
    if isinstance(value, list):
        if not value:
            return {path: []}
        out = {}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{path}[{i}]"))
        return out
    return {path: value}


def differences(kafka: Any, pybroker: Any) -> list[dict[str, Any]]:
    """Every leaf where the two answers differ; a leaf only one has shows None for the other."""
    if isinstance(kafka, dict) and isinstance(pybroker, dict):
        # A step one broker answered and the other did not (closed, silent): one difference,
        # not one per field of the answer.
        for label in set(kafka) & set(pybroker):
            if isinstance(kafka[label], str) != isinstance(pybroker[label], str) and \
                    isinstance(kafka[label], (str, dict)) and \
                    isinstance(pybroker[label], (str, dict)):
                kafka, pybroker = dict(kafka), dict(pybroker)
                for side in (kafka, pybroker):
                    if isinstance(side[label], dict):
                        side[label] = "<answered: " + _codes(side[label]) + ">"
    a, b = flatten(kafka), flatten(pybroker)
    missing = "<absent>"
    return [{"path": p, "kafka": a.get(p, missing), "pybroker": b.get(p, missing)}
            for p in sorted(set(a) | set(b), key=_order(a, b))
            if a.get(p, missing) != b.get(p, missing)]


def _codes(answer: dict) -> str:
    codes = sorted({v for k, v in flatten(answer).items()
                    if k.rsplit(".", 1)[-1] == "error_code"})
    return "error codes " + ",".join(map(str, codes)) if codes else "no error codes"


def _order(a: dict, b: dict) -> Callable[[Any], int]:
    seen = {p: i for i, p in enumerate([*a, *(p for p in b if p not in a)])}
    return lambda p: seen[p]
