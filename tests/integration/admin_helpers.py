"""Helpers shared by the admin API tests (tests/integration/test_admin_*.py): unique topic
names, the error code of a confluent admin future, a partition's directories and high
watermark, and a raw Produce. Their fixtures (`ck`, `kp`: the two admin clients on the
`broker` fixture) are in tests/integration/conftest.py, where pytest finds them.
"""
from __future__ import annotations

import uuid
from pathlib import Path

from confluent_kafka import KafkaException

from protocol.api_keys import ApiKey
from tests.integration.raw import RawConnection, send_request

TIMEOUT = 10
# A base timestamp for records stamped by the tests (ListOffsets, version sweeps).
T = 1_700_000_000_000


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def ck_code(future) -> int:  # type: ignore[no-untyped-def]
    """The Kafka error code a confluent admin future failed with (0 when it succeeded)."""
    try:
        future.result(TIMEOUT)
    except KafkaException as exc:
        return exc.args[0].code()
    return 0


def log_dir(broker) -> Path:  # type: ignore[no-untyped-def]
    return broker.broker.log_dirs[0]


def partition_dirs(broker, topic: str) -> list[Path]:  # type: ignore[no-untyped-def]
    return [p for p in log_dir(broker).iterdir() if p.name.startswith(topic + "-")
            or p.name.startswith(topic + ".")]


def raw_produce(bootstrap: str, topic: str, partition: int, records: bytes | None, *,
                version: int = 9, acks: int = -1, conn: RawConnection | None = None):
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
    if conn is not None:
        resp = conn.request(ApiKey.PRODUCE, version, body)
    else:
        resp = send_request(bootstrap, ApiKey.PRODUCE, version, body)
    return resp.responses[0].partition_responses[0]


def high_watermark(broker, topic: str, partition: int = 0) -> int:  # type: ignore[no-untyped-def]
    return broker.broker.logs.get(topic, partition).high_watermark
