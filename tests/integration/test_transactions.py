"""Transactions with stock clients against a real broker (issue #12): transactional producers
of confluent-kafka, kafka-python and aiokafka commit and abort; read_committed consumers see
exactly the committed records in order, read_uncommitted ones see everything; the last stable
offset holds at an open transaction's first offset; fencing of zombies and of transactions
that outlive their timeout; offsets committed inside a transaction.
"""
from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from tests.integration.raw import create_topic

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"


def _topic(prefix: str = "txn") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def ck_producer(bootstrap: str, txn_id: str, **extra: object):  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5, **extra})
    producer.init_transactions(30)
    return producer


def ck_read(bootstrap: str, topic: str, isolation: str, partitions: int = 1,
            timeout: float = 20) -> dict[int, list[bytes]]:
    """Every value of each partition from the start to the end the isolation level allows."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        at_eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_eof) < partitions and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    at_eof.add(msg.partition())
                    continue
                raise AssertionError(msg.error())
            at_eof.discard(msg.partition())
            out[msg.partition()].append(msg.value())
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


# -- confluent-kafka -----------------------------------------------------------------------------

def test_confluent_commit_and_abort_read_committed_sees_only_committed(broker) -> None:
    topic = _topic()
    create_topic(broker.bootstrap, topic, 2)
    producer = ck_producer(broker.bootstrap, f"tx-{topic}")
    from confluent_kafka import Producer
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    expected: dict[int, list[bytes]] = {0: [], 1: []}
    everything: dict[int, list[bytes]] = {0: [], 1: []}
    for round_, commit in enumerate([True, False, True, False, True]):
        producer.begin_transaction()
        for i in range(6):
            value = f"r{round_}-{i}".encode()
            producer.produce(topic, value=value, partition=i % 2)
            everything[i % 2].append(value)
            if commit:
                expected[i % 2].append(value)
        producer.flush(10)
        # A non-transactional write between the transaction's records and its marker.
        value = f"plain-{round_}".encode()
        plain.produce(topic, value=value, partition=0)
        assert plain.flush(10) == 0
        everything[0].append(value)
        expected[0].append(value)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    assert ck_read(broker.bootstrap, topic, READ_COMMITTED, 2) == expected
    assert ck_read(broker.bootstrap, topic, READ_UNCOMMITTED, 2) == everything


def test_last_stable_offset_holds_at_the_open_transaction(broker) -> None:
    topic = _topic()
    create_topic(broker.bootstrap, topic, 1)
    from confluent_kafka import Producer
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"before", partition=0)
    assert plain.flush(10) == 0
    producer = ck_producer(broker.bootstrap, f"tx-{topic}")
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=b"open-%d" % i, partition=0)
    producer.flush(10)
    plain.produce(topic, value=b"after", partition=0)
    assert plain.flush(10) == 0
    _, hw = ck_watermarks(broker.bootstrap, topic, READ_UNCOMMITTED)
    _, lso = ck_watermarks(broker.bootstrap, topic, READ_COMMITTED)
    assert (lso, hw) == (1, 5)  # the open transaction starts at offset 1
    assert ck_read(broker.bootstrap, topic, READ_COMMITTED) == {0: [b"before"]}
    producer.commit_transaction(30)
    _, hw = ck_watermarks(broker.bootstrap, topic, READ_UNCOMMITTED)
    _, lso = ck_watermarks(broker.bootstrap, topic, READ_COMMITTED)
    assert lso == hw == 6  # the marker took one offset
    assert ck_read(broker.bootstrap, topic, READ_COMMITTED) == {
        0: [b"before", b"open-0", b"open-1", b"open-2", b"after"]}


def test_zombie_is_fenced_and_its_open_transaction_aborted(broker) -> None:
    from confluent_kafka import KafkaException

    topic = _topic()
    create_topic(broker.bootstrap, topic, 1)
    txn_id = f"tx-{topic}"
    zombie = ck_producer(broker.bootstrap, txn_id)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    zombie.flush(10)
    successor = ck_producer(broker.bootstrap, txn_id)  # fences the zombie, aborts its txn
    successor.begin_transaction()
    successor.produce(topic, value=b"successor", partition=0)
    successor.commit_transaction(30)
    with pytest.raises(KafkaException) as failed:
        zombie.produce(topic, value=b"late", partition=0)
        zombie.commit_transaction(10)
    assert failed.value.args[0].fatal() or failed.value.args[0].txn_requires_abort()
    assert ck_read(broker.bootstrap, topic, READ_COMMITTED) == {0: [b"successor"]}


def test_transaction_older_than_its_timeout_is_aborted(tmp_path) -> None:
    from confluent_kafka import KafkaException
    from tests.helpers import broker_in_thread

    with broker_in_thread(
            tmp_path / "logs",
            transaction_abort_timed_out_transaction_cleanup_interval_ms="200") as info:
        topic = _topic()
        create_topic(info.bootstrap, topic, 1)
        producer = ck_producer(info.bootstrap, f"tx-{topic}", **{"transaction.timeout.ms": 1000})
        producer.begin_transaction()
        producer.produce(topic, value=b"too-slow", partition=0)
        producer.flush(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the broker aborts it: the LSO moves past it
            _, lso = ck_watermarks(info.bootstrap, topic, READ_COMMITTED)
            if lso == 2:
                break
            time.sleep(0.2)
        assert lso == 2
        with pytest.raises(KafkaException):
            producer.commit_transaction(10)
        assert ck_read(info.bootstrap, topic, READ_COMMITTED) == {0: []}


def test_timeout_above_the_maximum_is_refused(broker) -> None:
    from confluent_kafka import KafkaException, Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "too-long",
                         "transaction.timeout.ms": 2147483647})
    with pytest.raises(KafkaException) as failed:
        producer.init_transactions(20)
    assert "INVALID_TRANSACTION_TIMEOUT" in str(failed.value) or \
        failed.value.args[0].name() == "INVALID_TRANSACTION_TIMEOUT"


def test_send_offsets_to_transaction_commits_with_the_transaction(broker) -> None:
    from confluent_kafka import Consumer, TopicPartition

    source, sink = _topic("src"), _topic("sink")
    create_topic(broker.bootstrap, source, 1)
    create_topic(broker.bootstrap, sink, 1)
    from confluent_kafka import Producer
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        plain.produce(source, value=b"in-%d" % i, partition=0)
    assert plain.flush(10) == 0
    group = f"g-{source}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": READ_COMMITTED})
    consumer.assign([TopicPartition(source, 0, 0)])
    producer = ck_producer(broker.bootstrap, f"tx-{source}")
    for commit, count in ((True, 4), (False, 3), (True, 3)):
        producer.begin_transaction()
        taken = []
        while len(taken) < count:
            msg = consumer.poll(5)
            assert msg is not None and not msg.error()
            taken.append(msg)
            producer.produce(sink, value=msg.value().replace(b"in", b"out"), partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, taken[-1].offset() + 1)],
            consumer.consumer_group_metadata(), 30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
            consumer.seek(TopicPartition(source, 0, taken[0].offset()))
    committed = consumer.committed([TopicPartition(source, 0)], timeout=10)[0].offset
    consumer.close()
    # 4 committed, 3 aborted (re-read), then those 3 committed again: 7 in, 7 out.
    assert committed == 7
    assert ck_read(broker.bootstrap, sink, READ_COMMITTED) == {
        0: [b"out-%d" % i for i in range(7)]}


# -- kafka-python --------------------------------------------------------------------------------

def test_kafka_python_transactions(broker) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = _topic()
    create_topic(broker.bootstrap, topic, 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap,
                             transactional_id=f"kp-{topic}", enable_idempotence=True)
    producer.init_transactions()
    for round_, commit in enumerate([True, False, True]):
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, value=f"{round_}-{i}".encode(), partition=0)
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.close()

    def read(isolation: str) -> list[bytes]:
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation,
                                 enable_auto_commit=False, consumer_timeout_ms=3000)
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        values = [m.value for m in consumer]
        consumer.close()
        return values

    committed = [f"{r}-{i}".encode() for r in (0, 2) for i in range(3)]
    assert read(READ_COMMITTED) == committed
    assert read(READ_UNCOMMITTED) == [f"{r}-{i}".encode() for r in range(3) for i in range(3)]


# -- aiokafka ------------------------------------------------------------------------------------

def test_aiokafka_transactions(broker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = _topic()
    create_topic(broker.bootstrap, topic, 1)

    async def main() -> tuple[list[bytes], list[bytes]]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                                    transactional_id=f"ak-{topic}")
        await producer.start()
        try:
            for round_, commit in enumerate([True, False, True]):
                await producer.begin_transaction()
                for i in range(3):
                    await producer.send_and_wait(topic, f"{round_}-{i}".encode(), partition=0)
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

        async def read(isolation: str) -> list[bytes]:
            consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap,
                                        isolation_level=isolation, enable_auto_commit=False)
            await consumer.start()
            try:
                tp = TopicPartition(topic, 0)
                consumer.assign([tp])
                await consumer.seek_to_beginning(tp)
                values: list[bytes] = []
                end = (await consumer.end_offsets([tp]))[tp]
                deadline = time.monotonic() + 15
                while await consumer.position(tp) < end and time.monotonic() < deadline:
                    batch = await consumer.getmany(tp, timeout_ms=1000)
                    values += [m.value for m in batch.get(tp, [])]
                return values
            finally:
                await consumer.stop()
        return await read(READ_COMMITTED), await read(READ_UNCOMMITTED)

    committed, everything = asyncio.run(main())
    assert committed == [f"{r}-{i}".encode() for r in (0, 2) for i in range(3)]
    assert everything == [f"{r}-{i}".encode() for r in range(3) for i in range(3)]
