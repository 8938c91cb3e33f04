"""The `cluster` workload of bin/pybroker-bench (issue #11): three brokers on a real ZooKeeper,
and, with `--peers kafka` (issue #15 §3), three Apache Kafka nodes beside them.

The brokers are the shipped example, `config/cluster/server-{1,2,3}.properties` (6 s ZooKeeper
sessions, RF 3, min.insync.replicas 2, Kafka's 30 s replica lag), each a `python -m pybroker`
child process with only its port (a free one), log dir and `zookeeper.connect` (the bench's own
ZooKeeper, pybroker/testing/zookeeper.py, chroot /pybroker) overridden. The Kafka peer is
compat/apache_kafka.py's ApacheKafkaCluster: three KRaft nodes, each broker and controller,
1 GB heap, shipped defaults, with min.insync.replicas 2 as in pybroker's example. The client
is confluent-kafka (librdkafka) in this process, as in the other workloads. Figures:

- failover (pybroker only): a prober produces one 100-byte record every 5 ms with acks=all
  (retries without limit) to a one-partition RF 3 topic; the partition's leader (read from
  ZooKeeper) is killed with SIGKILL, or stopped with SIGTERM (controlled shutdown: the broker
  hands its leaderships over before it exits). The figure is the longest stall of the writes
  around the signal: the largest gap between two successive acknowledgements, from 1 s before
  the signal until writes flow again after the broker exited. After kill -9 that is the time
  from the kill (the last acknowledgement before it, at most 5 ms earlier) to the first
  acks=all write that succeeds again; after SIGTERM, the pause while the leadership moves, if
  any. After each round the broker is started again and the ISR waited for to be full. Median
  and max over `--rounds` rounds of each.
- idle RSS: the sum over the brokers' processes, 2 s after they all answer.
- throughput: `count` 1 KB records, acks=all, linger.ms 5 (bench_broker.bench_produce), to a
  topic of RF 3 on the three brokers (and on the three Kafka nodes), and to a topic of RF 1 on a
  single broker (the shipped config/standalone/server.properties); then the topic is read from the
  beginning (bench_broker.bench_consume) and deleted. The ratio cluster / single is the issue's
  aim (>= 0.4). Broker CPU and peak RSS are sums over the brokers (utime + stime from
  /proc/<pid>/stat, VmHWM): each MB produced is written three times, once by the leader and
  once by each follower, and the followers keep fetching while a consumer reads.
- latency: end-to-end p50/p99 (produce() to the consumer's poll(), which returns a record
  only once the high watermark passed it, i.e. once the in-sync replicas have it) at 5,000
  records/s of 1 KB, acks=all, linger.ms 5 (librdkafka's default), RF 3 against RF 1 on the
  single broker (bench_broker.bench_latency). Not linger.ms 0: then every record is a request
  of its own, a connection's requests are served one at a time (as in Kafka), and each
  acks=all request waits for a follower's round trip, so even at 1,000 requests/s the queue
  grew without bound on a 2-CPU machine (p50 3.5 s) and the figure measured the backlog.

The load runs `load_rounds` times; with the Kafka peer both clusters run at once (each idle
while the other is measured) and take turns at going first, so drift in the machine's load
hits both alike. The single broker runs once the clusters have stopped, and the page cache is
synced before each throughput run.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import functools
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from confluent_kafka import KafkaError, Message, Producer
from kazoo.client import KazooClient

from compat.apache_kafka import ApacheKafkaCluster, classpath, java
from tests.bench.bench_broker import (
    QUIET, Latency, Throughput, bench_consume, bench_latency, bench_produce, create_topic,
    delete_topics, status_kb,
)
from pybroker.testing.zookeeper import run_zookeeper
from tests.helpers import ROOT, BrokerProcess

CLUSTER_CONFIG = ROOT / "config" / "cluster"
SINGLE_CONFIG = ROOT / "config" / "standalone" / "server.properties"
CHROOT = "/pybroker"
SIZE = 1024
PROBE_PERIOD_S = 0.005
LATENCY_RATE = 5000
LATENCY_LINGER_MS = 5
# pybroker's example sets min.insync.replicas 2 for the broker; so does the Kafka peer.
Progress = Callable[[str, str], None]  # progress(phase, text): a figure as it comes
KAFKA_OVERRIDES = {"min.insync.replicas": 2}


@dataclass
class Load:
    """One round of one system's load; throughput by partition count."""

    produce: dict[int, Throughput] = field(default_factory=dict)
    consume: dict[int, Throughput] = field(default_factory=dict)
    latency: Latency | None = None


@dataclass
class ClusterRun:
    """What bench_cluster measured, by system: "cluster" is RF 3 on three pybroker brokers,
    "single" one broker, "kafka" RF 3 on three Apache Kafka nodes."""

    kill_s: list[float] = field(default_factory=list)  # failover after SIGKILL, per round
    term_s: list[float] = field(default_factory=list)  # failover after SIGTERM, per round
    idle_rss_mb: dict[str, float] = field(default_factory=dict)  # summed over the brokers
    loads: dict[str, list[Load]] = field(default_factory=dict)  # one per round


@dataclass(frozen=True)
class System:
    """A system under load: its name in ClusterRun, where to connect, its brokers' pids."""

    name: str
    bootstrap: str
    pids: tuple[int, ...]
    replication: int


class ThreeBrokers:
    """The shipped three-broker example on the bench's ZooKeeper."""

    def __init__(self, work_dir: Path, zk_connect: str) -> None:
        self.work_dir = work_dir
        self.zk_connect = zk_connect + CHROOT
        self.brokers: dict[int, BrokerProcess] = {}
        self.zk = KazooClient(hosts=self.zk_connect)

    def start(self, node: int | None = None) -> None:
        for n in [node] if node is not None else [1, 2, 3]:
            old = self.brokers.get(n)
            broker = BrokerProcess(self.work_dir / f"broker-{n}", port=old.port if old else 0,
                                   config=str(CLUSTER_CONFIG / f"server-{n}.properties"),
                                   zookeeper_connect=self.zk_connect)
            self.brokers[n] = broker.start(timeout=120)
        if not self.zk.connected:
            self.zk.start(timeout=10)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(b.proc.pid for b in self.brokers.values()
                     if b.proc is not None and b.proc.poll() is None)

    def state(self, topic: str) -> dict:
        raw, _ = self.zk.get(f"/brokers/topics/{topic}/partitions/0/state")
        return json.loads(raw)

    def wait_full_isr(self, topic: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if len(self.state(topic)["isr"]) == 3:
                    return
            except Exception:  # the state znode is not written yet
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{topic}: ISR not full after {timeout} s: {self.state(topic)}")

    def close(self) -> None:
        for b in self.brokers.values():
            if b.proc is not None and b.proc.poll() is None:
                b.kill()
        if self.zk.connected:
            self.zk.stop()
        self.zk.close()


class Prober:
    """acks=all records every PROBE_PERIOD_S from a thread; remembers when each was produced
    and when its success was reported."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "linger.ms": 0, "message.timeout.ms": 120_000,
                                  "retry.backoff.ms": 20, "retry.backoff.max.ms": 200,
                                  "topic.metadata.refresh.fast.interval.ms": 50, **QUIET})
        self.acked: list[tuple[float, float]] = []  # (produced at, acknowledged at)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        def report(err: KafkaError | None, msg: Message, sent: float) -> None:
            if err is None:
                self.acked.append((sent, time.monotonic()))
            elif len(self.errors) < 5:
                self.errors.append(str(err))

        due = time.monotonic()
        while not self._stop.is_set():
            sent = time.monotonic()
            self.producer.produce(self.topic, b"p" * 100,
                                  on_delivery=functools.partial(report, sent=sent))
            due += PROBE_PERIOD_S
            while (left := due - time.monotonic()) > 0:  # poll() returns at each report
                self.producer.poll(left)
            due = max(due, time.monotonic() - PROBE_PERIOD_S)  # no burst after a stall
        self.producer.flush(60)

    def start(self) -> "Prober":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)

    def wait_acked_after(self, t: float, timeout: float) -> None:
        """Until a record produced at or after `t` is acknowledged."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(sent >= t for sent, _ in list(self.acked)):
                return
            time.sleep(0.01)
        raise RuntimeError(f"no acks=all write succeeded within {timeout} s; errors: "
                           f"{self.errors}")

    def longest_stall(self, start: float, end: float) -> float:
        """The largest gap between successive acknowledgements in [start, end]."""
        times = sorted(acked for _, acked in list(self.acked) if start <= acked <= end)
        return max((b - a for a, b in zip(times, times[1:])), default=end - start)


def measure_failover(cluster: ThreeBrokers, rounds: int, progress: Progress
                     ) -> tuple[list[float], list[float]]:
    create_topic(cluster.bootstrap, "failover", 1, 3)
    cluster.wait_full_isr("failover")
    prober = Prober(cluster.bootstrap, "failover").start()
    kills: list[float] = []
    terms: list[float] = []
    try:
        prober.wait_acked_after(time.monotonic(), 60)
        for rnd in range(rounds):
            for how, out in ((signal.SIGKILL, kills), (signal.SIGTERM, terms)):
                leader = int(cluster.state("failover")["leader"])
                proc = cluster.brokers[leader].proc
                assert proc is not None
                time.sleep(1.5)  # a steady prober before the signal
                t = time.monotonic()
                proc.send_signal(how)
                proc.wait(60)
                # Until writes flow again: one produced a second after the exit is acked.
                prober.wait_acked_after(time.monotonic() + 1, 60)
                out.append(prober.longest_stall(t - 1, time.monotonic()))
                progress(f"failover {rnd + 1}/{rounds}",
                         f"{how.name} of leader {leader}: acks=all writes stalled "
                         f"{out[-1]:.2f} s")
                cluster.start(leader)
                cluster.wait_full_isr("failover")
    finally:
        prober.stop()
    return kills, terms


def bench_cluster(work_dir: Path, rounds: int, count: int, partitions: tuple[int, ...],
                  latency_seconds: float, progress: Progress, load_rounds: int = 1,
                  kafka: bool = False) -> ClusterRun:
    """Failover of the three-broker cluster, then `load_rounds` of throughput and latency of
    it (and of three Kafka nodes when `kafka`), then of one broker. `progress(phase, text)` is
    told each figure as it comes. ApacheKafkaUnavailable before anything runs when `kafka`
    and Apache Kafka cannot run here."""
    if kafka:
        java()
        classpath()  # fetched now, not after the failover rounds
    run = ClusterRun()
    work_dir.mkdir(parents=True, exist_ok=True)
    try:
        with run_zookeeper(work_dir / "zookeeper") as zookeeper:
            cluster = ThreeBrokers(work_dir / "cluster", zookeeper.connect)
            nodes = ApacheKafkaCluster(work_dir / "kafka", 3, overrides=KAFKA_OVERRIDES) \
                if kafka else None
            try:
                cluster.start()
                run.idle_rss_mb["cluster"] = idle_rss_mb(cluster.pids)
                if rounds:
                    run.kill_s, run.term_s = measure_failover(cluster, rounds, progress)
                systems = [System("cluster", cluster.bootstrap, cluster.pids, 3)]
                if nodes is not None:
                    nodes.start(timeout=180)
                    progress("kafka start", f"3 nodes answering in {nodes.start_seconds:.1f} s")
                    run.idle_rss_mb["kafka"] = idle_rss_mb(nodes.pids)
                    systems.append(System("kafka", nodes.bootstrap, nodes.pids, 3))
                for rnd in range(load_rounds):
                    shift = rnd % len(systems)  # each goes first in turn
                    for system in systems[shift:] + systems[:shift]:
                        run.loads.setdefault(system.name, []).append(
                            _load(system, rnd, count, partitions, latency_seconds, progress))
            finally:
                try:
                    cluster.close()
                finally:
                    if nodes is not None:
                        nodes.stop()
        single = BrokerProcess(work_dir / "single", config=str(SINGLE_CONFIG)).start(120)
        try:
            pid = single.proc.pid  # type: ignore[union-attr]
            run.idle_rss_mb["single"] = idle_rss_mb((pid,))
            system = System("single", single.bootstrap, (pid,), 1)
            for rnd in range(load_rounds):
                run.loads.setdefault("single", []).append(
                    _load(system, rnd, count, partitions, latency_seconds, progress))
        finally:
            single.stop()
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    return run


def idle_rss_mb(pids: tuple[int, ...]) -> float:
    """The brokers' resident memory summed, 2 s after they started answering."""
    time.sleep(2)
    return sum(status_kb(pid, "VmRSS") for pid in pids) / 1024


def _load(system: System, rnd: int, count: int, partitions: tuple[int, ...],
          latency_seconds: float, progress: Progress) -> Load:
    load = Load()
    name, bootstrap, pids, rf = system.name, system.bootstrap, system.pids, system.replication
    for n in partitions:
        # The page cache writes back what the run before left dirty (gigabytes), not during
        # this one (peer_bench.settle).
        os.sync()
        time.sleep(1)
        topic = f"{name}-{n}p-r{rnd}"
        t = bench_produce(bootstrap, pids[0], topic, n, SIZE, count, "all", replication=rf,
                          cpu_pids=pids)
        load.produce[n] = t
        progress(f"{name} produce 1 KB acks=all, {n} partition(s), RF {rf}",
                 f"{t.mb_s:.1f} MB/s {t.rec_s:,.0f} rec/s, broker CPU {t.cpu_per_gb:.2f} s/GB, "
                 f"peak RSS {t.peak_rss_kb / 1024:.0f} MB")
        t = bench_consume(bootstrap, pids[0], topic, n, SIZE, count, cpu_pids=pids)
        load.consume[n] = t
        progress(f"{name} consume 1 KB, {n} partition(s)",
                 f"{t.mb_s:.1f} MB/s {t.rec_s:,.0f} rec/s, broker CPU {t.cpu_per_gb:.2f} s/GB")
        delete_topics(bootstrap, [topic])  # the next round's data is not on top of it
    if latency_seconds:
        lat = bench_latency(bootstrap, pids[0], linger_ms=LATENCY_LINGER_MS,
                            seconds=latency_seconds, rate=LATENCY_RATE, size=SIZE, acks="all",
                            replication=rf, cpu_pids=pids)
        load.latency = lat
        progress(f"{name} latency", f"p50 {lat.p50:.2f} p99 {lat.p99:.2f} ms "
                                    f"({lat.received} records)")
    return load
