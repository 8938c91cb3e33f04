"""Transactional clients of the transaction tests, in process and on a cluster: a
confluent-kafka transactional producer, a reader of every partition to the end its isolation
level allows, the watermarks a consumer at that level sees, and a raw transactional batch
for requests made by hand."""
from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from confluent_kafka import Producer

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"


def ck_producer(bootstrap: str, txn_id: str, **extra: object) -> Producer:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5, **extra})
    producer.init_transactions(30)
    return producer


def ck_read(bootstrap: str, topic: str, isolation: str, partitions: int = 1,
            timeout: float = 20) -> dict[int, list[bytes | None]]:
    """Every value of each partition from the start to the end the isolation level allows."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[bytes | None]] = {p: [] for p in range(partitions)}
        at_eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_eof) < partitions and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            partition, error = msg.partition(), msg.error()
            if error and error.code() != -191:  # not _PARTITION_EOF
                raise AssertionError(error)
            assert partition is not None  # a record's or an EOF's: of an assigned partition
            if error:  # _PARTITION_EOF
                at_eof.add(partition)
                continue
            at_eof.discard(partition)
            out[partition].append(msg.value())
        assert len(at_eof) == partitions, f"no EOF on every partition within {timeout}s"
        return out
    finally:
        consumer.close()


def ck_watermarks(bootstrap: str, topic: str, isolation: str) -> tuple[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm",
                         "isolation.level": isolation})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10,
                                              cached=False)
    finally:
        consumer.close()


def _raw_txn_batch(producer_id: int, epoch: int, value: bytes = b"x", sequence: int = 0
                   ) -> bytes:
    from protocol.records.record import Record, build_batch

    return build_batch([Record(key=None, value=value)], producer_id=producer_id,
                       producer_epoch=epoch, base_sequence=sequence, transactional=True)
