"""The durability tests' clients (tests/integration/test_durability.py, and the log-dir lock's,
test_log_dir_lock.py): produce and wait for the offsets, read (offset, value) back by offset,
numbered values that show a gap or a reorder, and the file a clean shutdown leaves, by Kafka's
name. Their brokers are `BrokerProcess`es, started by the `brokers` fixture
(tests/integration/conftest.py)."""
from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message, Producer

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"


def _producer(bootstrap: str, **extra: object) -> Producer:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, **extra})


def produce(bootstrap: str, topic: str, values: list[bytes], *, partition: int = 0,
            timestamp: int = 0, **extra: object) -> list[int]:
    """Produce and wait: the offsets the broker assigned, in order of `values`."""
    producer = _producer(bootstrap, **extra)
    offsets: dict[int, int] = {}
    errors: list[object] = []

    def on_delivery(err: KafkaError | None, msg: Message, i: int) -> None:
        offset = msg.offset()
        if err is not None or offset is None:  # the stubs allow a report without an offset
            errors.append(err if err is not None else f"delivered without an offset: {msg}")
        else:
            offsets[i] = offset

    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=partition, timestamp=timestamp,
                         on_delivery=partial(on_delivery, i=i))
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors
    return [offsets[i] for i in range(len(values))]


def consume(bootstrap: str, topic: str, *, start: int = 0, until: int | None = None,
            partition: int = 0, timeout: float = 20) -> list[tuple[int, bytes | None]]:
    """(offset, value) from `start` up to the high watermark (or `until`, exclusive)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "durability-test",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True})
    try:
        if until is None:
            _, until = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                      timeout=10)
        consumer.assign([TopicPartition(topic, partition, start)])
        got: list[tuple[int, bytes | None]] = []
        deadline = time.monotonic() + timeout
        next_offset = start
        while next_offset < until and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            offset = msg.offset()
            assert offset is not None  # a consumed record's (the stubs allow None for an event)
            got.append((offset, msg.value()))
            next_offset = offset + 1
        return got
    finally:
        consumer.close()


def numbered(prefix: str, n: int, start: int = 0) -> list[bytes]:
    return [f"{prefix}-{i:06d}".encode() for i in range(start, start + n)]
