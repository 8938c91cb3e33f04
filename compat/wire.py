"""Raw Kafka requests over a plain socket, encoded with `protocol/`: the neutral ground.

Scenarios set up topics and records and check what the broker really holds through these,
not through the client under test, so that a client's bug and a broker's bug are told apart.
"""
from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

from protocol.api_keys import ApiKey
from protocol.codec import decode_response, encode_request
from protocol.records.batch import BatchHeader, Compression, iter_batches
from protocol.records.record import build_batch
from protocol.records.record import DecodedRecord, Record, decode_batch

_SIZE = struct.Struct(">i")


def read_exact(sock: socket.socket, n: int) -> bytes:
    """`n` bytes from `sock`; ConnectionError if the broker closes it first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket) -> bytes:
    """One size-prefixed response frame, without its size."""
    (size,) = _SIZE.unpack(read_exact(sock, 4))
    return read_exact(sock, size)


def request(bootstrap: str, api_key: int, version: int, body: Any, timeout: float = 15.0) -> Any:
    """One request on a fresh connection; the decoded response body."""
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(encode_request(api_key, version, 1, "compat-wire", body))
        cid, decoded = decode_response(api_key, version, read_frame(sock))
        assert cid == 1, cid
        return decoded


def partition_leader(bootstrap: str, topic: str, partition: int) -> tuple[int, str] | None:
    """(broker id, host:port) of the partition's leader per the Metadata `bootstrap` answers,
    as a client routes a Produce, Fetch or ListOffsets (on a node of several brokers, or a
    cluster, the bootstrap broker leads only some partitions); None while it names none."""
    answer = request(bootstrap, ApiKey.METADATA, 12, {
        "topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    states = [p for t in answer.topics if t.name == topic for p in t.partitions
              if p.partition_index == partition]
    brokers = [b for b in answer.brokers for p in states if b.node_id == p.leader_id]
    return (brokers[0].node_id, f"{brokers[0].host}:{brokers[0].port}") if brokers else None


def find_coordinator(bootstrap: str, key: str, key_type: int = 0) -> tuple[int, str] | None:
    """(broker id, host:port) of the coordinator of group (`key_type` 0) or transactional id
    (1) `key` per FindCoordinator to `bootstrap`, as a client finds where to send the group's
    requests; None while it names none (COORDINATOR_NOT_AVAILABLE)."""
    found = request(bootstrap, ApiKey.FIND_COORDINATOR, 3, {"key": key, "key_type": key_type})
    return (found.node_id, f"{found.host}:{found.port}") if found.error_code == 0 else None


def _to_leader(bootstrap: str, topic: str, partition: int) -> str:
    """Where a client sends the partition's requests: its leader, or `bootstrap` while it has
    none, whose answer is then the error (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER) a client
    retries on."""
    leader = partition_leader(bootstrap, topic, partition)
    return bootstrap if leader is None else leader[1]


def _to_coordinator(bootstrap: str, group: str) -> str:
    """Where a client sends the group's requests: its coordinator, or `bootstrap` while none
    is named, whose answer then says why (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR)."""
    coordinator = find_coordinator(bootstrap, group)
    return bootstrap if coordinator is None else coordinator[1]


def create_topic(bootstrap: str, name: str, partitions: int = 1,
                 configs: dict[str, str] | None = None) -> None:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 10000, "validate_only": False}
    result = request(bootstrap, ApiKey.CREATE_TOPICS, 7, body).topics[0]
    assert result.error_code == 0, \
        f"CreateTopics {name}: {result.error_code} {result.error_message}"


def partition_count(bootstrap: str, topic: str) -> int | None:
    """Partitions of `topic` per Metadata (no auto-creation), None if it does not exist."""
    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    t = request(bootstrap, ApiKey.METADATA, 9, body).topics[0]
    if t.error_code == 3:  # UNKNOWN_TOPIC_OR_PARTITION
        return None
    assert t.error_code == 0, f"Metadata {topic}: error {t.error_code}"
    return len(t.partitions)


def topic_configs(bootstrap: str, topic: str) -> dict[str, str | None]:
    body = {"resources": [{"resource_type": 2, "resource_name": topic,
                           "configuration_keys": None}]}
    result = request(bootstrap, ApiKey.DESCRIBE_CONFIGS, 4, body).results[0]
    assert result.error_code == 0, f"DescribeConfigs {topic}: {result.error_code}"
    return {c.name: c.value for c in result.configs}


def produce(bootstrap: str, topic: str, partition: int, records: list[Record],
            compression: Compression = Compression.NONE) -> int:
    """One batch; its base offset."""
    batch = build_batch(records, compression=compression)
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}
    # Retried, as a producer does, while the partition is not yet served: Apache Kafka
    # answers CreateTopics (and then Metadata) before its broker knows the topic or has taken
    # the leadership, so a Produce right after may get UNKNOWN_TOPIC_OR_PARTITION (3) or
    # NOT_LEADER_OR_FOLLOWER (6) for a moment.
    deadline = time.monotonic() + 15
    while True:
        part = request(_to_leader(bootstrap, topic, partition), ApiKey.PRODUCE, 9,
                       body).responses[0].partition_responses[0]
        if part.error_code not in (3, 6) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert part.error_code == 0, f"Produce {topic}-{partition}: error {part.error_code}"
    return part.base_offset


def list_offset(bootstrap: str, topic: str, partition: int, timestamp: int = -1) -> int:
    """ListOffsets: -1 latest (the log end), -2 earliest, or the first offset at/after a time."""
    body = {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp}]}]}
    part = request(_to_leader(bootstrap, topic, partition), ApiKey.LIST_OFFSETS, 7,
                   body).topics[0].partitions[0]
    assert part.error_code == 0, f"ListOffsets {topic}-{partition}: error {part.error_code}"
    return part.offset


def batches(bootstrap: str, topic: str, partition: int
            ) -> list[tuple[BatchHeader, list[DecodedRecord]]]:
    """Every batch of a partition from offset 0 to the high watermark, decoded."""
    out: list[tuple[BatchHeader, list[DecodedRecord]]] = []
    offset = 0
    leader = _to_leader(bootstrap, topic, partition)
    while True:
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 8 << 20,
                "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
                    {"partition": partition, "fetch_offset": offset,
                     "partition_max_bytes": 4 << 20}]}]}
        part = request(leader, ApiKey.FETCH, 12, body).responses[0].partitions[0]
        assert part.error_code == 0, f"Fetch {topic}-{partition}: error {part.error_code}"
        data = memoryview(part.records or b"")
        progressed = False
        for pos, header in iter_batches(data):
            if header.base_offset + header.last_offset_delta < offset:
                continue
            out.append((header, decode_batch(data[pos:pos + header.size])))
            offset = header.base_offset + header.last_offset_delta + 1
            progressed = True
        if offset >= part.high_watermark or not progressed:
            return out


def committed(bootstrap: str, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
    """The group's committed offsets (-1 when none) per partition."""
    body = {"group_id": group, "topics": [{"name": topic, "partition_indexes": partitions}],
            "require_stable": False}
    resp = request(_to_coordinator(bootstrap, group), ApiKey.OFFSET_FETCH, 7, body)
    assert resp.error_code == 0, f"OffsetFetch {group}: error {resp.error_code}"
    return {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}


def describe_group(bootstrap: str, group: str) -> tuple[str, list[dict[str, list[int]]]]:
    """(state, [each member's assignment as topic -> partitions])."""
    resp = request(_to_coordinator(bootstrap, group), ApiKey.DESCRIBE_GROUPS, 5, {
        "groups": [group], "include_authorized_operations": False})
    g = resp.groups[0]
    assert g.error_code == 0, f"DescribeGroups {group}: error {g.error_code}"
    return g.group_state, [_consumer_assignment(m.member_assignment) for m in g.members]


def group_members(bootstrap: str, group: str
                  ) -> tuple[str, str, dict[str, tuple[str | None, dict[str, list[int]]]]]:
    """(state, the assignor chosen, member id -> (group.instance.id, assignment))."""
    resp = request(_to_coordinator(bootstrap, group), ApiKey.DESCRIBE_GROUPS, 5, {
        "groups": [group], "include_authorized_operations": False})
    g = resp.groups[0]
    assert g.error_code == 0, f"DescribeGroups {group}: error {g.error_code}"
    return g.group_state, g.protocol_data, {
        m.member_id: (m.group_instance_id, _consumer_assignment(m.member_assignment))
        for m in g.members}


@dataclass(frozen=True)
class ConsumerMember:
    """One member of a consumer-protocol group as ConsumerGroupDescribe shows it."""
    instance_id: str | None
    epoch: int
    assigned: dict[str, list[int]]  # topic -> partitions, sorted
    subscribed_regex: str | None


@dataclass(frozen=True)
class ConsumerGroup:
    """A consumer-protocol (KIP-848) group as ConsumerGroupDescribe v0 shows it; `error` is
    the group's error code (GROUP_ID_NOT_FOUND (69) for a classic group or none)."""
    error: int
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: dict[str, ConsumerMember]  # member id -> member


def consumer_group(bootstrap: str, group: str) -> ConsumerGroup:
    """ConsumerGroupDescribe of `group`, asked of its coordinator."""
    resp = request(_to_coordinator(bootstrap, group), ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {
        "group_ids": [group], "include_authorized_operations": False})
    g = resp.groups[0]
    return ConsumerGroup(g.error_code, g.group_state, g.group_epoch, g.assignment_epoch,
                         g.assignor_name, {
                             m.member_id: ConsumerMember(
                                 m.instance_id, m.member_epoch,
                                 {t.topic_name: sorted(t.partitions)
                                  for t in m.assignment.topic_partitions},
                                 m.subscribed_topic_regex)
                             for m in g.members})


def _consumer_assignment(data: bytes) -> dict[str, list[int]]:
    """ConsumerProtocolAssignment: version int16, [topic string, [partition int32]], ..."""
    if not data:
        return {}
    pos = 2
    (n_topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out: dict[str, list[int]] = {}
    for _ in range(max(n_topics, 0)):
        (length,) = struct.unpack_from(">h", data, pos)
        pos += 2
        name = data[pos:pos + length].decode()
        pos += length
        (n_parts,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out[name] = list(struct.unpack_from(f">{n_parts}i", data, pos))
        pos += 4 * n_parts
    return out
