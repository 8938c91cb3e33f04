"""The `partitions` workload of bin/pybroker-bench (issue #19): many partitions on one broker.

For each count N (1,000 / 10,000 / 50,000), on a fresh log dir: create a topic of N
partitions, produce one 100-byte record to each (acks=all, confluent-kafka), measure RSS
and RSS per partition (over the broker's idle RSS before the topic), stop cleanly
(SIGTERM to exit), start again (Popen to "listening on", every log loaded), then kill -9 and
start again (recovery from the recovery points). Tansu keeps no files and is not run.
Targets (the issue's): 50,000 partitions on one broker, clean stop <= 2 s, start after
kill -9 <= 30 s, RSS per idle partition <= 4 KB.

Apache Kafka (issue #15 §3, `bench_partitions_kafka`) runs the same steps on its own node
(compat/apache_kafka.py: one KRaft node, shipped defaults, 1 GB heap): its starts are timed
from the JVM's launch to answering ApiVersions and then a Metadata request in which every
partition of the topic has a leader (the topic served again, not only the port open); the
storage format before its first start is not counted.
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from compat.apache_kafka import ApacheKafka
from tests.bench.bench_broker import QUIET, create_topic, start_broker, status_kb
from tests.bench.bench_scaling import create_wide_topic

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


def _wait_topic_served(bootstrap: str, topic: str, partitions: int, timeout: float) -> None:
    """Until a Metadata request shows every partition of `topic` with a leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    deadline = time.monotonic() + timeout
    while True:
        try:
            meta = admin.list_topics(topic, timeout=10).topics.get(topic)
            if meta is not None and meta.error is None and len(meta.partitions) == partitions \
                    and all(p.leader >= 0 and p.error is None
                            for p in meta.partitions.values()):
                return
        except Exception:  # not answering yet: asked again below
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: not every one of {partitions} partitions has a "
                               f"leader after {timeout:.0f} s")
        time.sleep(0.05)


def _kafka_restart(node: ApacheKafka, topic: str, partitions: int) -> float:
    """Seconds from the JVM's launch to the topic served again."""
    t0 = time.perf_counter()
    node.restart(timeout=600)
    _wait_topic_served(node.bootstrap, topic, partitions, 600)
    return time.perf_counter() - t0


def bench_partitions_kafka(work_dir: Path, partitions: int) -> PartitionsRun:
    """bench_partitions's steps on Apache Kafka: create, one record each, RSS, clean stop
    (SIGTERM, its controlled shutdown), start, kill -9, start (log recovery)."""
    node = ApacheKafka(work_dir)
    try:
        node.start(timeout=180)
        assert node.proc is not None
        time.sleep(1)
        idle_kb = status_kb(node.proc.pid, "VmRSS")
        t0 = time.perf_counter()
        # Kafka's controller refuses 10,000 partitions in one CreateTopics (POLICY_VIOLATION):
        # 5,000, then CreatePartitions, counted in the create time.
        create_wide_topic(node.bootstrap, "wide", partitions)
        _wait_topic_served(node.bootstrap, "wide", partitions, 300)
        create_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        delivered = _produce_one_each(node.bootstrap, "wide", partitions)
        produce_s = time.perf_counter() - t0
        time.sleep(1)
        rss_kb = status_kb(node.proc.pid, "VmRSS")
        proc = node.proc
        t0 = time.perf_counter()
        node.stop(timeout=120)
        clean_stop_s = time.perf_counter() - t0
        if proc.returncode == -9:
            raise RuntimeError("Apache Kafka did not stop within 120 s of SIGTERM")
        start_after_clean_s = _kafka_restart(node, "wide", partitions)
        node.kill()
        start_after_kill_s = _kafka_restart(node, "wide", partitions)
    finally:
        node.stop()
        shutil.rmtree(work_dir, ignore_errors=True)
    return PartitionsRun(partitions, create_s, produce_s, delivered, rss_kb / 1024,
                         (rss_kb - idle_kb) / partitions, clean_stop_s, start_after_clean_s,
                         start_after_kill_s)
