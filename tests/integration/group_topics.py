"""The topic the KIP-848 group tests consume from (tests/integration/test_consumer_protocol.py
and test_group_migration.py): its partition count, and tagged values produced over all of its
partitions, so a test knows every value a group must read."""
from __future__ import annotations

PARTITIONS = 6


def _produce(bootstrap: str, topic: str, count: int, tag: str) -> set[bytes]:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap})
    values = {f"{tag}-{i}".encode() for i in range(count)}
    for i, value in enumerate(sorted(values)):
        producer.produce(topic, value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    return values
