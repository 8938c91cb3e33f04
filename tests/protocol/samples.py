"""Valid request frames and record batches for the protocol tests and the benchmark.

The record batch is assembled here by hand (v2 header, CRC-32C over attributes..end) rather than
with `protocol.records`, so that these tests only depend on the code they test.
"""
from __future__ import annotations

import struct
import uuid
from typing import Any

import crc32c

from protocol import primitives as P
from protocol.codec import encode_request


def _varint(n: int) -> bytes:
    return P.uvarint_bytes(P.zigzag_encode(n))


def record_batch(values: list[bytes], base_timestamp: int = 1_700_000_000_000) -> bytes:
    """A magic-2 batch of keyless records without headers, producer id -1, offsets from 0."""
    records = b""
    for i, value in enumerate(values):
        body = (b"\x00" + _varint(0) + _varint(i) + _varint(-1) + _varint(len(value)) + value
                + _varint(0))
        records += _varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, len(values) - 1, base_timestamp, base_timestamp,
                            -1, -1, -1, len(values)) + records
    crc = crc32c.crc32c(after_crc)
    return struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc) + after_crc


def produce_body(partitions: int = 1, record_bytes: int = 100, topic: str = "golden") -> dict:
    batch = record_batch([b"v" * record_bytes])
    return {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": i, "records": batch} for i in range(partitions)]}]}


def fetch_request_body() -> dict:
    return {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
            "isolation_level": 1, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "golden", "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 42,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1048576}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def metadata_request_body() -> dict:
    return {"topics": [{"topic_id": uuid.UUID(int=0), "name": "golden"}],
            "allow_auto_topic_creation": True, "include_topic_authorized_operations": False}


def api_versions_request_body() -> dict:
    return {"client_software_name": "pybroker-tests", "client_software_version": "1.0"}


def join_group_request_body() -> dict:
    return {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 300000,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x01\x00\x06golden"},
                          {"name": "roundrobin", "metadata": b"\x00"}]}


def create_topics_request_body() -> dict:
    return {"topics": [{"name": "new-tópic", "num_partitions": 3, "replication_factor": 1,
                        "assignments": [],
                        "configs": [{"name": "cleanup.policy", "value": "compact"},
                                    {"name": "retention.ms", "value": None}]}],
            "timeout_ms": 30000, "validate_only": False}


# (name, api key, version, body): the request frames the malformed-input tests start from.
REQUESTS: list[tuple[str, int, int, dict[str, Any]]] = [
    ("Produce-v9", 0, 9, produce_body()),
    ("Fetch-v12", 1, 12, fetch_request_body()),
    ("Metadata-v12", 3, 12, metadata_request_body()),
    ("ApiVersions-v3", 18, 3, api_versions_request_body()),
    ("JoinGroup-v7", 11, 7, join_group_request_body()),
    ("CreateTopics-v7", 19, 7, create_topics_request_body()),
]


def request_frame(key: int, version: int, body: dict, correlation_id: int = 7,
                  client_id: str | None = "tests") -> bytes:
    """A request frame without its 4-byte size prefix, as `decode_request` takes it."""
    return encode_request(key, version, correlation_id, client_id, body)[4:]


FRAMES: dict[str, bytes] = {name: request_frame(k, v, b) for name, k, v, b in REQUESTS}
