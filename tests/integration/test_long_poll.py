"""Long polling: a fetch waiting for data is woken by the append, not by its max wait.

Tailing consumers (confluent-kafka and kafka-python, both with their default 500 ms fetch
wait) must receive each new record within a few milliseconds of its append: if appends did
not wake waiting fetches, the produce-to-receive latency would average about half the fetch
wait. Raw Fetch requests check the wait itself: an empty partition answers after max_wait_ms
with no records, an append answers at once, and min_bytes is honoured across wake-ups.
"""
from __future__ import annotations

import statistics
import struct
import threading
import time
import uuid
from typing import Callable

import pytest

from protocol.api_keys import ApiKey
from protocol.messages import APIS
from protocol.records.record import build_batch
from protocol.records.record import Record
from tests.integration.raw import RawConnection, create_topic, leader_address, send_request

N_RECORDS = 50
INTERVAL_S = 0.02
MEDIAN_LIMIT_S = 0.1  # the clients' fetch wait is 0.5 s


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _produce_timed(bootstrap: str, topic: str, ready: threading.Event) -> dict[int, float]:
    """Produce N_RECORDS at intervals with linger 0; each value carries its index."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.produce(topic, value=b"warm-up", partition=0)  # connect before timing
    assert producer.flush(10) == 0
    assert ready.wait(15), "consumer did not start"
    time.sleep(0.3)  # the consumer's first fetches are parked in the broker by now
    sent: dict[int, float] = {}
    for i in range(N_RECORDS):
        sent[i] = time.perf_counter()
        producer.produce(topic, value=struct.pack(">I", i), partition=0)
        producer.poll(0)
        time.sleep(INTERVAL_S)
    assert producer.flush(10) == 0
    return sent


def _latencies(sent: dict[int, float], received: dict[int, float]) -> list[float]:
    assert sorted(received) == list(range(N_RECORDS)), "records lost"
    return [received[i] - sent[i] for i in range(N_RECORDS)]


def _assert_woken_promptly(bootstrap: str, topic: str, consume: Callable[[], None],
                           ready: threading.Event, done: threading.Event,
                           received: dict[int, float]) -> None:
    """Run the tailing `consume` in a thread while records are produced one by one; the
    median time from produce to receipt must be short (the fetch was woken, not timed out)."""
    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    try:
        sent = _produce_timed(bootstrap, topic, ready)
        thread.join(10)
    finally:
        done.set()
    lat = _latencies(sent, received)
    assert statistics.median(lat) < MEDIAN_LIMIT_S, sorted(lat)


def test_confluent_tailing_consumer_is_woken_by_appends(broker) -> None:
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition
    topic = topic_name("tail-ck")
    create_topic(broker.bootstrap, topic, 1)
    received: dict[int, float] = {}
    ready = threading.Event()
    done = threading.Event()

    def consume() -> None:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                             "enable.auto.commit": False})
        assert consumer.list_topics(topic, timeout=10).topics[topic].error is None
        consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
        try:
            ready.set()
            while not done.is_set():
                m = consumer.poll(0.05)
                if m is None or m.error() is not None or m.value() == b"warm-up":
                    continue
                received[struct.unpack(">I", m.value())[0]] = time.perf_counter()
                if len(received) == N_RECORDS:
                    return
        finally:
            consumer.close()

    _assert_woken_promptly(broker.bootstrap, topic, consume, ready, done, received)


def test_kafka_python_tailing_consumer_is_woken_by_appends(broker) -> None:
    from kafka import KafkaConsumer, TopicPartition
    topic = topic_name("tail-kp")
    create_topic(broker.bootstrap, topic, 1)
    received: dict[int, float] = {}
    ready = threading.Event()
    done = threading.Event()

    def consume() -> None:
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                                 enable_auto_commit=False)
        assert consumer.config["fetch_max_wait_ms"] == 500
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_end(tp)
        consumer.position(tp)
        try:
            ready.set()
            while not done.is_set() and len(received) < N_RECORDS:
                for msgs in consumer.poll(timeout_ms=50).values():
                    now = time.perf_counter()
                    for m in msgs:
                        if m.value != b"warm-up":
                            received[struct.unpack(">I", m.value)[0]] = now
        finally:
            consumer.close()

    _assert_woken_promptly(broker.bootstrap, topic, consume, ready, done, received)


# -- raw Fetch ---------------------------------------------------------------------------------

def _fetch_body(topic: str, partitions: list[int], *, max_wait_ms: int, min_bytes: int,
                offset: int = 0) -> dict:
    body = APIS[ApiKey.FETCH].request.default(12)
    body.update(dict(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                     max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                     topics=[{"topic": topic, "partitions": [
                         {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset,
                          "last_fetched_epoch": -1, "log_start_offset": -1,
                          "partition_max_bytes": 1 << 20} for p in partitions]}],
                     forgotten_topics_data=[], rack_id=""))
    return body


def _produce_raw(bootstrap: str, topic: str, partition: int, value: bytes) -> None:
    batch = build_batch([Record(None, value)])
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}
    resp = send_request(bootstrap, ApiKey.PRODUCE, 9, body)
    assert resp.responses[0].partition_responses[0].error_code == 0


def test_fetch_on_empty_partition_waits_max_wait(broker) -> None:
    topic = topic_name("wait")
    create_topic(broker.bootstrap, topic, 1)
    with RawConnection(leader_address(broker.bootstrap, topic, 0)) as conn:
        start = time.perf_counter()
        resp = conn.request(ApiKey.FETCH, 12, _fetch_body(topic, [0], max_wait_ms=300,
                                                          min_bytes=1))
        elapsed = time.perf_counter() - start
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0
    assert not part.records
    assert part.high_watermark == 0
    assert 0.28 <= elapsed < 1.0, elapsed


def test_fetch_with_zero_wait_answers_at_once(broker) -> None:
    topic = topic_name("nowait")
    create_topic(broker.bootstrap, topic, 1)
    leader = leader_address(broker.bootstrap, topic, 0)  # a node's worker leads it
    start = time.perf_counter()
    resp = send_request(leader, ApiKey.FETCH, 12,
                        _fetch_body(topic, [0], max_wait_ms=0, min_bytes=1))
    assert time.perf_counter() - start < 0.2
    assert not resp.responses[0].partitions[0].records


def _wait_parked(broker) -> None:  # type: ignore[no-untyped-def]
    """Until the broker holds a Fetch in its purgatory: an append that lands before the fetch
    has arrived answers it at once, and the test would time the connection instead."""
    waiting = broker.broker.purgatory.waiting
    deadline = time.monotonic() + 10
    while not waiting.get("Fetch"):
        assert time.monotonic() < deadline, "the fetch never waited in the broker"
        time.sleep(0.01)


@pytest.mark.in_process("waits until the fetch is parked in the broker's purgatory")
@pytest.mark.parametrize("partition_written", [0, 1])
def test_append_wakes_a_waiting_fetch(broker, partition_written: int) -> None:
    """A fetch over two empty partitions, max wait 5 s, returns as soon as either gets data."""
    topic = topic_name("wake")
    create_topic(broker.bootstrap, topic, 2)
    result: dict = {}

    def fetch() -> None:
        result["resp"] = send_request(broker.bootstrap, ApiKey.FETCH, 12,
                                      _fetch_body(topic, [0, 1], max_wait_ms=5000,
                                                  min_bytes=1))
        result["done"] = time.perf_counter()

    thread = threading.Thread(target=fetch)
    thread.start()
    _wait_parked(broker)
    appended = time.perf_counter()
    _produce_raw(broker.bootstrap, topic, partition_written, b"wake up")
    thread.join(10)
    assert result["done"] - appended < 0.2, result["done"] - appended
    parts = {p.partition_index: p for p in result["resp"].responses[0].partitions}
    assert parts[partition_written].records
    assert parts[partition_written].high_watermark == 1
    assert not parts[1 - partition_written].records


@pytest.mark.in_process("waits until the fetch is parked in the broker's purgatory")
def test_fetch_min_bytes_keeps_waiting_until_max_wait(broker) -> None:
    """An append smaller than min_bytes wakes the fetch, which waits again; at max wait it
    returns what there is."""
    topic = topic_name("minbytes")
    create_topic(broker.bootstrap, topic, 1)
    result: dict = {}

    def fetch() -> None:
        start = time.perf_counter()
        result["resp"] = send_request(broker.bootstrap, ApiKey.FETCH, 12,
                                      _fetch_body(topic, [0], max_wait_ms=800,
                                                  min_bytes=100_000))
        result["elapsed"] = time.perf_counter() - start

    thread = threading.Thread(target=fetch)
    thread.start()
    _wait_parked(broker)
    _produce_raw(broker.bootstrap, topic, 0, b"small")
    thread.join(10)
    assert 0.75 <= result["elapsed"] < 1.5, result["elapsed"]
    assert result["resp"].responses[0].partitions[0].records


@pytest.mark.in_process("waits until the fetch is parked in the broker's purgatory")
def test_fetch_min_bytes_met_by_several_appends(broker) -> None:
    """Appends that together pass min_bytes answer the fetch before its max wait."""
    topic = topic_name("minbytes2")
    create_topic(broker.bootstrap, topic, 1)
    result: dict = {}

    def fetch() -> None:
        result["resp"] = send_request(broker.bootstrap, ApiKey.FETCH, 12,
                                      _fetch_body(topic, [0], max_wait_ms=5000,
                                                  min_bytes=3000))
        result["done"] = time.perf_counter()

    thread = threading.Thread(target=fetch)
    thread.start()
    _wait_parked(broker)
    for _ in range(4):
        _produce_raw(broker.bootstrap, topic, 0, b"x" * 1000)
    appended = time.perf_counter()
    thread.join(10)
    assert result["done"] - appended < 0.5
    assert len(result["resp"].responses[0].partitions[0].records) >= 3000
