"""What the Streams, Connect and MirrorMaker 2 tests share: the built classpath (or a failure
saying why there is none), and reading and writing topics with confluent-kafka."""
from __future__ import annotations

import struct
import time
from typing import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from compat import streams
from compat.apache_kafka import ApacheKafkaUnavailable


def require_classpath() -> str:
    """The classpath of compat/streams, built on first use; the test fails (not skips)
    without it, as bin/test installs Maven and Java."""
    try:
        return streams.classpath()
    except ApacheKafkaUnavailable as exc:
        pytest.fail(f"Kafka Streams/Connect/MirrorMaker are unavailable: {exc}", pytrace=False)


def produce(bootstrap: str, topic: str, values: list[str], *, keys: list[str] | None = None
            ) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), key=None if keys is None else keys[i])
    assert producer.flush(30) == 0, f"{topic}: records left unsent"


def consume_until(bootstrap: str, topic: str, done: Callable[[list[tuple[bytes | None, bytes | None]]], bool],
                  *, timeout: float = 60, read_committed: bool = False,
                  partitions: int = 1) -> list[tuple[bytes | None, bytes | None]]:
    """Every (key, value) of `topic` from its start, polled until `done(records)` or the
    timeout (then returned as they are, for the caller's assertion to show)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time_ns()}",
                         "enable.auto.commit": False,
                         "isolation.level": "read_committed" if read_committed
                         else "read_uncommitted"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records: list[tuple[bytes | None, bytes | None]] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not done(records):
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            records.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    return records


def counts_of(records: list[tuple[bytes | None, bytes | None]]) -> dict[str, int]:
    """The latest count per word of WordCount's output (String keys, Long values)."""
    counts: dict[str, int] = {}
    for key, value in records:
        assert key is not None and value is not None and len(value) == 8, (key, value)
        counts[key.decode()] = struct.unpack(">q", value)[0]
    return counts


def committed_and_end_offsets(bootstrap: str, group: str, topic: str, partitions: int
                              ) -> dict[int, tuple[int, int]]:
    """Per partition, `group`'s committed offset (-1001 where it committed none, librdkafka's
    OFFSET_INVALID) and the partition's high watermark, read through OffsetFetch and
    ListOffsets without joining the group."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return {tp.partition: (tp.offset, consumer.get_watermark_offsets(tp, timeout=10)[1])
                for tp in consumer.committed(tps, timeout=10)}
    finally:
        consumer.close()


def topic_names(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=10).topics)


def partition_count(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=10)
    return {name: entry.value for name, entry in entries.items()}


def wait_for_topics(bootstrap: str, names: set[str], timeout: float = 60) -> set[str]:
    """The topics of the broker once all of `names` exist (or at the timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        have = topic_names(bootstrap)
        if names <= have or time.monotonic() > deadline:
            return have
        time.sleep(0.5)
