"""KIP-848 with Apache Kafka's Java client 4.1.1 (`group.protocol=consumer`, through the
compat adapter's JVM): it requires ConsumerGroupHeartbeat in ApiVersions, sends v1 with its own
member id, and commits with OffsetCommit v9 and its member epoch.

One member reads everything; two more join and the six partitions settle two each, the
records produced after that read once each; a member's leave hands its partitions over."""
from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from compat.clients.java_client import JavaClient, JavaClientUnavailable
from protocol.api_keys import ApiKey
from pybroker.testing import Broker
from tests.integration.raw import coordinator_address, create_topic, send_request


def _java() -> JavaClient:
    """The Java client; the test fails (not skips) without it, as bin/test installs Maven
    and Java."""
    java = JavaClient()
    missing = java.missing()
    if missing:
        pytest.fail(f"the Java client is unavailable: {missing}", pytrace=False)
    return java


def _produce(bootstrap: str, topic: str, prefix: bytes, count: int) -> set[bytes]:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap})
    values = {prefix + b"%d" % i for i in range(count)}
    for i, value in enumerate(sorted(values)):
        producer.produce(topic, value, partition=i % 6)
    assert producer.flush(30) == 0
    return values


def _sizes(bootstrap: str, group: str) -> tuple[str, list[int]]:
    """The group's state and its members' partition counts, from its coordinator (on a node
    of several brokers, or a cluster, not always the bootstrap broker)."""
    coordinator = coordinator_address(bootstrap, group)
    described = send_request(coordinator, ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {
        "group_ids": [group], "include_authorized_operations": False}).groups[0]
    return described.group_state, sorted(
        sum(len(t.partitions) for t in m.assignment.topic_partitions) for m in described.members)


def _wait(condition, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.3)


def test_java_consumers_share_a_topic_by_the_consumer_protocol(tmp_path: Path) -> None:
    java = _java()
    # A process, so that the suite's PYBROKER_NUM_CORES=2 runs this against a node of two
    # brokers, as the default of all cores will (issue #29 item 3); one broker otherwise.
    with Broker(process=True, log_dir=tmp_path / "logs") as broker:
        b = broker.bootstrap
        topic, group = f"kip848-java-{uuid.uuid4().hex[:6]}", "java-848"
        create_topic(b, topic, 6)
        members = [java.start_member_as(b, topic, group, group_protocol="consumer")]
        try:
            first = _produce(b, topic, b"a", 60)
            _wait(lambda: set(members[0].values()) >= first)
            members += [java.start_member_as(b, topic, group, group_protocol="consumer")
                        for _ in range(2)]
            _wait(lambda: _sizes(b, group) == ("Stable", [2, 2, 2]))
            later = _produce(b, topic, b"b", 120)

            def taken() -> list[bytes]:
                return [v for m in members for v in m.values() if v.startswith(b"b")]

            _wait(lambda: len(taken()) >= 120)
            assert sorted(taken()) == sorted(later)  # each once
            # each record was committed (OffsetCommit v9 at the member's epoch)
            _wait(lambda: java.committed(b, group, topic, list(range(6))) ==
                  {p: 30 for p in range(6)})
            members.pop().stop()  # leaves the group (epoch -1)
            _wait(lambda: _sizes(b, group) == ("Stable", [3, 3]))
        except JavaClientUnavailable as exc:
            pytest.fail(f"the Java client is unavailable: {exc}", pytrace=False)
        finally:
            for member in members:
                member.stop()
