"""A producer held to a byte-rate quota, and its rate as the broker bounds it: the load of the
quota tests (tests/integration/test_quotas.py, whose docstring says why the rate is measured
so) and of the benchmark that runs the same load against Apache Kafka
(tests/bench/bench_quota_vs_kafka.py)."""
from __future__ import annotations

import statistics
import time

from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME, KafkaError, Message, Producer as CkProducer, ThrottleEvent,
)

RATE = 1024 * 1024
VALUE = b"x" * 10_000
WARMUP_S, MEASURE_S = 2.0, 6.0
QUOTA_WINDOW_S = 2.0  # quota.window.num (2) x quota.window.size.seconds (1)


def _steady_rate(timed: list[tuple[float, int]], start: float) -> float:
    """The client's rate as the broker bounds it: bytes per second over one quota window,
    the median over that window's positions (every 0.1 s) between WARMUP_S and the end of
    MEASURE_S (`start` on the clock the times were taken with). See tests/integration/
    test_quotas.py's docstring for why not one slice of the whole span."""
    begin = start + WARMUP_S
    slices = int(round((MEASURE_S - QUOTA_WINDOW_S) / 0.1)) + 1
    rates = []
    for i in range(slices):
        low = begin + i * 0.1
        rates.append(sum(n for t, n in timed if low <= t < low + QUOTA_WINDOW_S)
                     / QUOTA_WINDOW_S)
    return statistics.median(rates)


class Produced:
    """What a producer of the byte-rate test saw: each acknowledged record's (LogAppendTime
    in s, bytes), and how many throttled responses (throttle_time_ms > 0) it counted."""

    def __init__(self) -> None:
        self.acked: list[tuple[float, int]] = []
        self.throttled = 0


def _produce_kafka_python(bootstrap: str, topic: str, client_id: str, out: Produced) -> None:
    from kafka import KafkaProducer
    # 64 KiB batches, as the confluent case's: kafka-python's default of 16 KiB made a
    # request of each 10 KB record, and a loaded machine's Python sender could then not keep
    # up with the quota (0.72 and 0.80 of it, measured in a loop under load average 11-19).
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=client_id, linger_ms=5,
                             batch_size=65536, max_block_ms=30000)
    try:
        end = time.monotonic() + WARMUP_S + MEASURE_S + 0.5
        sent = 0
        while time.monotonic() < end:
            if sent - len(out.acked) > 200:  # kafka-python buffers without bound: keep ~2 MB
                time.sleep(0.005)            # queued and leave its I/O thread the GIL
                continue
            producer.send(topic, VALUE).add_callback(  # timestamp: the broker's LogAppendTime
                lambda md: out.acked.append((md.timestamp / 1000, len(VALUE))))
            sent += 1
        metrics = producer.metrics() or {}
        out.throttled = int(metrics.get("producer-metrics", {}).get("throttle-time-max", 0) > 0)
    finally:
        # kafka-python's close flushes first, and a flush that times out raises and leaves the
        # producer open (its I/O thread then logs ECONNREFUSED into later tests once this
        # broker stops): the ~2 MB still queued drains at the quota, under this test's own
        # client id, in ~2 s.
        producer.close(timeout=30)


def _produce_confluent(bootstrap: str, topic: str, client_id: str, out: Produced) -> None:
    def throttled(event: ThrottleEvent) -> None:
        out.throttled += event.throttle_time > 0
    producer = CkProducer({"bootstrap.servers": bootstrap, "client.id": client_id,
                           "linger.ms": 5, "queue.buffering.max.kbytes": 4096,
                           "batch.size": 65536, "throttle_cb": throttled})

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            kind, ms = msg.timestamp()
            assert kind == TIMESTAMP_LOG_APPEND_TIME, (kind, ms)
            out.acked.append((ms / 1000, len(VALUE)))
    end = time.monotonic() + WARMUP_S + MEASURE_S + 0.5
    while time.monotonic() < end:
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.purge()
    producer.flush(1)
