"""A producer that records what it was told, and a reader that reads everything back, with a
stock client (kafka-python), for the fault tests and the fault-schedule script."""
from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.cluster.checker import History


class AckedProducer:
    """Sends numbered values with acks=all and idempotence from a thread, at most `rate` a
    second, recording each acknowledgement (partition, offset) and each failure. Values are
    padded to `value_bytes`, for a test that needs an amount of data written sooner than a
    client slowed by the machine's load would send it in small records."""

    def __init__(self, bootstrap: str, topic: str, rate: float = 200.0, *,
                 value_bytes: int = 0) -> None:
        self.topic = topic
        self.rate = rate
        self.value_bytes = value_bytes
        self.history = History()
        self.failures = 0
        self.errors: dict[str, int] = defaultdict(int)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._producer = KafkaProducer(
            bootstrap_servers=bootstrap.split(","), acks="all", enable_idempotence=True,
            retries=2**31 - 1, request_timeout_ms=15000, delivery_timeout_ms=120000,
            max_in_flight_requests_per_connection=5, linger_ms=5,
            reconnect_backoff_max_ms=500, metadata_max_age_ms=2000)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.sent = 0

    def start(self) -> "AckedProducer":
        self._thread.start()
        return self

    def _run(self) -> None:
        interval = 1.0 / self.rate
        while not self._stop.is_set():
            value = f"v{self.sent:07d}".encode().ljust(self.value_bytes, b".")
            self.history.sent_order[value] = self.sent
            self.sent += 1
            future = self._producer.send(self.topic, value)
            future.add_callback(self._acked, value)
            future.add_errback(self._failed)
            time.sleep(interval)

    def _acked(self, value: bytes, metadata: Any) -> None:  # kafka-python's RecordMetadata
        with self._lock:
            self.history.acked[value] = (metadata.partition, metadata.offset)

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            self.failures += 1
            self.errors[type(exc).__name__] += 1

    def acked_count(self) -> int:
        with self._lock:
            return len(self.history.acked)

    def wait_acked(self, at_least: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.acked_count() < at_least:
            if time.monotonic() > deadline:
                raise AssertionError(f"only {self.acked_count()} of {at_least} acknowledged; "
                                     f"errors {dict(self.errors)}")
            time.sleep(0.05)

    def stop(self) -> History:
        self._stop.set()
        self._thread.join(10)
        self._producer.flush(timeout=120)
        self._producer.close(timeout=10)
        return self.history


def read_all(bootstrap: str, topic: str, history: History, partitions: int,
             timeout: float = 60) -> None:
    """Every record of `topic` from the beginning to the end offsets, into `history.read`."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), enable_auto_commit=False,
                             group_id=None, request_timeout_ms=30000)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError("reading back timed out: "
                                     f"{[(tp.partition, consumer.position(tp), ends[tp]) for tp in tps]}")
            for tp, records in consumer.poll(timeout_ms=500).items():
                for record in records:
                    history.read[tp.partition].append((record.offset, record.value))
    finally:
        consumer.close()
