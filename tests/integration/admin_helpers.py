"""Helpers shared by the admin API tests (tests/integration/test_admin_*.py): unique topic
names, the error code of a confluent admin future, a partition's directories and high
watermark, and a raw Produce. Their fixtures (`ck`, `kp`: the two admin clients on the
`broker` fixture) are in tests/integration/conftest.py, where pytest finds them.
"""
from __future__ import annotations

import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from compat.wire import partition_leader
from protocol.api_keys import ApiKey
from pybroker.server import ServerInfo
from tests.helpers import WireBroker
from tests.integration.raw import RawConnection, leader_address, send_request

# The `broker` fixture's (tests.helpers.serving_broker): a broker held in this process, or one
# seen over the wire.
Served = ServerInfo | WireBroker

TIMEOUT = 10
# A base timestamp for records stamped by the tests (ListOffsets, version sweeps).
T = 1_700_000_000_000


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def ck_code(future: Future[Any]) -> int:
    """The Kafka error code a confluent admin future failed with (0 when it succeeded)."""
    try:
        future.result(TIMEOUT)
    except KafkaException as exc:
        return exc.args[0].code()
    return 0


def log_dirs(broker: Served) -> list[Path]:
    """Each broker's log dir: a node's workers' too (`WireBroker.log_dirs`); a broker held in
    this process (an in_process test's `ServerInfo`) has its own."""
    if hasattr(broker, "log_dirs"):
        return broker.log_dirs()
    return [Path(d) for d in broker.broker.log_dirs]


def log_dir(broker: Served) -> Path:
    """The first broker's log dir (a node's worker 0's)."""
    return log_dirs(broker)[0]


def stored_cluster_id(broker: Served) -> str:
    """The cluster id the broker wrote into its log dir (meta.properties), the one it must
    tell clients."""
    for line in (log_dir(broker) / "meta.properties").read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "cluster.id":
            return value.strip()
    raise AssertionError(f"no cluster.id in {log_dir(broker) / 'meta.properties'}")


def partition_dirs(broker: Served, topic: str) -> list[Path]:
    """The dirs of `topic`'s partitions (and of its deleted ones, `topic-N.<id>-delete`) in
    every broker's log dir: on a node each partition is with the worker it was assigned."""
    return [p for d in log_dirs(broker) for p in d.iterdir()
            if p.name.startswith(topic + "-") or p.name.startswith(topic + ".")]


def raw_produce(bootstrap: str, topic: str, partition: int, records: bytes | None, *,
                version: int = 9, acks: int = -1, conn: RawConnection | None = None) -> Any:
    """One Produce, on `conn` or else to the partition's leader as a client routes it (to
    `bootstrap` while none is named: its answer is then the error)."""
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
    if conn is not None:
        resp = conn.request(ApiKey.PRODUCE, version, body)
    else:
        leader = partition_leader(bootstrap, topic, partition)
        resp = send_request(bootstrap if leader is None else leader[1], ApiKey.PRODUCE,
                            version, body)
    return resp.responses[0].partition_responses[0]


def high_watermark(broker: Served, topic: str, partition: int = 0) -> int:
    """The partition's high watermark as its leader answers ListOffsets (LATEST, read
    uncommitted)."""
    address = leader_address(broker.bootstrap, topic, partition)
    answer = send_request(address, ApiKey.LIST_OFFSETS, 2, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "timestamp": -1}]}]})
    found = answer.topics[0].partitions[0]
    assert found.error_code == 0, found
    return found.offset
