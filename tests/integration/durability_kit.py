"""The durability tests' clients (tests/integration/test_durability.py, and the log-dir lock's,
test_log_dir_lock.py): produce and wait for the offsets, read (offset, value) back by offset,
numbered values that show a gap or a reorder, and the file a clean shutdown leaves, by Kafka's
name. Their brokers are `BrokerProcess`es, started by the `brokers` fixture
(tests/integration/conftest.py)."""
from __future__ import annotations

import time

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"


def _producer(bootstrap: str, **extra):  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, **extra})


def produce(bootstrap: str, topic: str, values: list[bytes], *, partition: int = 0,
            timestamp: int = 0, **extra: object) -> list[int]:
    """Produce and wait: the offsets the broker assigned, in order of `values`."""
    producer = _producer(bootstrap, **extra)
    offsets: dict[int, int] = {}
    errors: list[object] = []

    def on_delivery(err, msg, i):  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(err)
        else:
            offsets[i] = msg.offset()

    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=partition, timestamp=timestamp,
                         on_delivery=lambda err, msg, i=i: on_delivery(err, msg, i))
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors
    return [offsets[i] for i in range(len(values))]


def consume(bootstrap: str, topic: str, *, start: int = 0, until: int | None = None,
            partition: int = 0, timeout: float = 20) -> list[tuple[int, bytes]]:
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
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        next_offset = start
        while next_offset < until and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got.append((msg.offset(), msg.value()))
            next_offset = msg.offset() + 1
        return got
    finally:
        consumer.close()


def numbered(prefix: str, n: int, start: int = 0) -> list[bytes]:
    return [f"{prefix}-{i:06d}".encode() for i in range(start, start + n)]
