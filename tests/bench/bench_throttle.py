"""The `throttle` workload of bin/pybroker-bench (issue #32 item 5): a reassignment held to
its replication throttle, and what it costs the producers of other partitions.

Why a benchmark: the throttle's point is a rate over minutes and a latency that does not
move, figures a unit test cannot hold steady on a shared machine. Each system runs the same
steps, pybroker's three brokers (config/cluster, on the bench's ZooKeeper) and, with
`--peers kafka`, three Apache Kafka 4.1.1 KRaft nodes beside them (compat/apache_kafka.py),
each idle while the other is measured:

1. a one-partition topic `moved`, RF 1 on node 1, filled with `volume` bytes of 1 KB records
   (acks=1);
2. end-to-end latency (produce to a consumer's poll) at `LATENCY_RATE` 1 KB records/s, acks=all,
   on a fresh RF 3 topic for `seconds`: the figure without a reassignment;
3. `kafka-reassign-partitions --execute --throttle RATE` moving `moved` from node 1 to node 2
   (each system's own tool: pybroker's `pybroker.tools.reassign_partitions`, Kafka's
   `ReassignPartitionsCommand`), then the same latency run while it copies (the first 3 s of
   each latency run are a warm-up, not counted);
4. meanwhile, from the `--execute`, `--verify` every second until the move is complete (which
   also removes the throttle): the move's time, and the rate it implies.

The issue's aim: about volume / RATE seconds (100 s for 1 GB at 10 MB/s), and p99 during the
move within 20 % of p99 without it.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat import kafka_tools
from compat.apache_kafka import ApacheKafkaCluster, classpath, java
from pybroker.testing.zookeeper import run_zookeeper
from tests.bench.bench_broker import QUIET, Latency, bench_latency, delete_topics
from tests.bench.bench_cluster import KAFKA_OVERRIDES, ThreeBrokers
from tests.helpers import ROOT

RATE = 10 * 1024 * 1024  # bytes/s, the --throttle value
SIZE = 1024
LATENCY_RATE = 1000  # records/s of the other topic's producer
TOPIC = "moved"
SOURCE, DESTINATION = 1, 2  # node ids: both systems number their nodes 1, 2, 3
COMPLETE = f"Reassignment of partition {TOPIC}-0 is completed."


@dataclass
class Move:
    """One system's figures."""

    volume: int = 0  # bytes written to the moved partition
    seconds: float = 0.0  # from --execute to --verify reporting completion
    without: Latency | None = None
    during: Latency | None = None

    @property
    def mb_s(self) -> float:
        return self.volume / self.seconds / 1e6 if self.seconds else 0.0


@dataclass
class ThrottleRun:
    moves: dict[str, Move] = field(default_factory=dict)  # by system: "pybroker", "kafka"


Tool = Callable[[list[str]], str]


def _pybroker_tool(args: list[str]) -> str:
    done = subprocess.run([sys.executable, "-m", "pybroker.tools.reassign_partitions", *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    if done.returncode:
        raise RuntimeError(f"kafka-reassign-partitions {' '.join(args)}: {done.stderr}")
    return done.stdout


def _kafka_tool(args: list[str]) -> str:
    done = kafka_tools.run("kafka-reassign-partitions", args, timeout=120)
    if done.returncode:
        raise RuntimeError(f"Kafka's kafka-reassign-partitions {' '.join(args)}: "
                           f"{done.stdout}{done.stderr}")
    return done.stdout


def _fill(bootstrap: str, volume: int) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    # librdkafka wants the partition count beside an assignment (-1, the default, is refused)
    topic = NewTopic(TOPIC, num_partitions=1, replica_assignment=[[SOURCE]])
    admin.create_topics([topic])[TOPIC].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20,
                         "batch.size": 1_000_000, "compression.type": "none", **QUIET})
    value = b"m" * SIZE
    for _ in range(volume // SIZE):
        while True:
            try:
                producer.produce(TOPIC, value, partition=0)
                break
            except BufferError:  # the client's queue is full: let it drain
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(120):
        raise RuntimeError(f"{TOPIC}: records not acknowledged within 120 s")
    return volume // SIZE * SIZE


def _latency(bootstrap: str, pids: tuple[int, ...], seconds: float) -> Latency:
    return bench_latency(bootstrap, pids[0], linger_ms=5, seconds=seconds, rate=LATENCY_RATE,
                         size=SIZE, acks="all", replication=3, cpu_pids=pids, warmup=3.0)


def measure_move(bootstrap: str, pids: tuple[int, ...], tool: Tool, work_dir: Path,
                 volume: int, seconds: float, progress: Callable[[str, str], None]) -> Move:
    move = Move(volume=_fill(bootstrap, volume))
    progress("fill", f"{move.volume / 1e6:,.0f} MB in {TOPIC}-0 on node {SOURCE}")
    move.without = _latency(bootstrap, pids, seconds)
    progress("latency", f"without a move: p50 {move.without.p50:.2f} ms, "
                        f"p99 {move.without.p99:.2f} ms")
    plan = work_dir / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": 0, "replicas": [DESTINATION]}]}))
    common = ["--bootstrap-server", bootstrap, "--reassignment-json-file", str(plan)]
    began = time.monotonic()
    tool([*common, "--execute", "--throttle", str(RATE)])
    finished: list[float] = []
    failed: list[BaseException] = []

    def verify() -> None:  # beside the latency run, so the move is timed to its end
        limit = began + 3 * volume / RATE + 60
        try:
            while COMPLETE not in tool([*common, "--verify"]):
                if time.monotonic() > limit:
                    raise RuntimeError(f"{TOPIC}-0 not moved within {limit - began:.0f} s")
                time.sleep(1)  # the tool is the one way to ask, as an operator asks
            finished.append(time.monotonic())
        except BaseException as exc:
            failed.append(exc)

    verifier = threading.Thread(target=verify, daemon=True)
    verifier.start()
    move.during = _latency(bootstrap, pids, seconds)
    progress("latency", f"during the move: p50 {move.during.p50:.2f} ms, "
                        f"p99 {move.during.p99:.2f} ms"
                        + (" (the move ended first)" if finished else ""))
    verifier.join()
    if failed:
        raise failed[0]
    move.seconds = finished[0] - began
    progress("move", f"{move.seconds:.1f} s, {move.mb_s:.1f} MB/s")
    delete_topics(bootstrap, [TOPIC])
    return move


def bench_throttle(work_dir: Path, volume: int, seconds: float,
                   progress: Callable[[str, str], None], kafka: bool) -> ThrottleRun:
    """pybroker first, then Kafka (started only then, so its JVMs do not share the
    machine with pybroker's move)."""
    if kafka:
        java()
        classpath()
        kafka_tools.classpath()
    run = ThrottleRun()
    with run_zookeeper(work_dir / "zookeeper") as zookeeper:
        cluster = ThreeBrokers(work_dir / "cluster", zookeeper.connect)
        try:
            cluster.start()
            run.moves["pybroker"] = measure_move(
                cluster.bootstrap, cluster.pids, _pybroker_tool, work_dir, volume, seconds,
                lambda phase, text: progress(f"pybroker {phase}", text))
        finally:
            cluster.close()
    if kafka:
        nodes = ApacheKafkaCluster(work_dir / "kafka", 3, overrides=KAFKA_OVERRIDES)
        try:
            nodes.start(timeout=180)
            run.moves["kafka"] = measure_move(
                nodes.bootstrap, nodes.pids, _kafka_tool, work_dir, volume, seconds,
                lambda phase, text: progress(f"kafka {phase}", text))
        finally:
            nodes.stop()
    return run
