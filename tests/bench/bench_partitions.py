"""The `partitions` workload of bin/pybroker-bench (issue #19): many partitions on one broker.

For each count N (1,000 / 10,000 / 50,000), on a fresh log dir: create a topic of N
partitions, produce one 100-byte record to each (acks=all, confluent-kafka), measure RSS
and RSS per partition (over the broker's idle RSS before the topic), stop cleanly
(SIGTERM to exit), start again (Popen to "listening on", every log loaded), then kill -9 and
start again (recovery from the recovery points). The peer keeps no files and is not run.
Targets (the issue's): 50,000 partitions on one broker, clean stop <= 2 s, start after
kill -9 <= 30 s, RSS per idle partition <= 4 KB.
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer

from tests.bench.bench_broker import QUIET, create_topic, start_broker, status_kb

COUNTS = (1_000, 10_000, 50_000)
QUICK_COUNTS = (1_000, 10_000)


@dataclass
class PartitionsRun:
    partitions: int
    create_s: float
    produce_s: float
    delivered: int
    rss_mb: float
    rss_per_partition_kb: float
    clean_stop_s: float
    start_after_clean_s: float
    start_after_kill_s: float


def _produce_one_each(bootstrap: str, topic: str, partitions: int) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                         "batch.num.messages": 100_000,
                         "queue.buffering.max.messages": max(100_000, 2 * partitions),
                         **QUIET})
    delivered = 0

    def on_delivery(err, msg):  # type: ignore[no-untyped-def]
        nonlocal delivered
        if err is None:
            delivered += 1

    value = b"x" * 100
    for p in range(partitions):
        producer.produce(topic, value=value, partition=p, on_delivery=on_delivery)
        if p % 10_000 == 0:
            producer.poll(0)
    producer.flush(300)
    return delivered


def bench_partitions(log_dir: Path, partitions: int) -> PartitionsRun:
    broker, _ = start_broker(log_dir)
    try:
        time.sleep(1)
        idle_kb = status_kb(broker.proc.pid, "VmRSS")  # type: ignore[union-attr]
        t0 = time.perf_counter()
        create_topic(broker.bootstrap, "wide", partitions)
        create_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        delivered = _produce_one_each(broker.bootstrap, "wide", partitions)
        produce_s = time.perf_counter() - t0
        time.sleep(1)
        rss_kb = status_kb(broker.proc.pid, "VmRSS")  # type: ignore[union-attr]
        t0 = time.perf_counter()
        if broker.stop() != 0:
            raise RuntimeError("the broker did not stop cleanly:\n"
                               + "".join(broker.stderr_lines[-5:]))
        clean_stop_s = time.perf_counter() - t0
        broker, start_after_clean_s = start_broker(log_dir)
        broker.kill()
        broker, start_after_kill_s = start_broker(log_dir)
        if not any("no clean shutdown marker" in line for line in broker.stderr_lines):
            raise RuntimeError("the broker did not recover after kill -9")
        broker.stop()
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.kill()
        shutil.rmtree(log_dir, ignore_errors=True)
    return PartitionsRun(partitions, create_s, produce_s, delivered, rss_kb / 1024,
                         (rss_kb - idle_kb) / partitions, clean_stop_s, start_after_clean_s,
                         start_after_kill_s)
