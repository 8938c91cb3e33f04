"""The `multicore` workload of bin/pybroker-bench (issue #29 item 1): does a node's work spread
over the machine's cores, and what does it cost? Today's single process against the
prototypes of docs/DESIGN.md "One node, every core" (tests/bench/multicore/node.py: `brokers`,
`shards`, `frontends`), in the same run.

For each round, each setup in turn (the first one rotating from round to round), on a fresh
node: for N of --multicore-producers (default 1,2,4), N producer processes
(tests/bench/multicore/producer.py: confluent-kafka, 1 KB, acks=1, linger.ms 5, each its own
topic of 8 partitions, RF 1) and N consumer processes (consumer.py: each reads one producer's
topic from its start while it is written), started together once all have the topic's
metadata and every partition has a leader. The peers `tansu` and `kafka` (peer_bench's) are
setups like the others, so they run side by side in the same run. Figures, per setup and N:

- aggregate produce MB/s: the records' bytes (10^6) of all producers over the time from the
  first producer's start to the last one's final ack;
- aggregate consume MB/s: the same bytes over the time from the first consumer's start to the
  last record any consumer read;
- node CPU as cores in use: the CPU time (utime + stime, bench_broker.cpu_seconds) of every
  process of the node (brokers, routers, ZooKeeper, a supervisor's workers) from the start
  to the last producer's or consumer's end, divided by that time;
- node CPU-s per GB: the same CPU per 10^9 bytes of records (what each design costs, whether
  or not the producers could load it);
- each process's share of that CPU (the smallest share of a broker or router process is the
  issue's ">= 1/4" figure);
- p99 produce-to-ack latency over every 50th record of all producers (under full load: queue
  time in the client included).

Then the cost of the boundary at low load (issue #29 item 5): end-to-end p50 and p99 at 5,000
records/s of 100 B, acks=1, linger.ms 0, one partition (bench_broker.bench_latency, the latency
workload's), after LATENCY_WARMUP_S uncounted. Paired, because on a shared 2-CPU VM one
setup's p99 moved 0.9-24 ms between 5-second windows minutes apart while its p50 held at
0.4 ms: every setup is started once and kept up, and the windows go round the setups (the
first of each turn rotating), so each turn measures them minutes closer together than a round
does. Beside the medians, each setup's p99 over the first setup's in the same turn (its
median): the figure item 5 bounds, read with its range.

Every topic's high watermarks are summed afterwards and must equal what was produced. Medians
of the rounds, with the range (min-max) beside them; the load average at each round's start
is printed, since other work on the machine moves these figures.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.bench.bench_broker import (
    QUIET, bench_latency, cpu_seconds, markdown_rows, percentile, print_rows,
)
from tests.bench.multicore.node import PEER_SETUPS, SETUPS, Node, start_node
from tests.helpers import ROOT

PRODUCERS = (1, 2, 4, 8, 16)
PARTITIONS = 8
SIZE = 1024
COUNT = 200_000  # records per producer
QUICK_COUNT = 60_000
# Records of one producer and one consumer through each setup before its counted points: a
# process's first Produce, Fetch, Metadata and ListOffsets compile their schemas and import
# what they use (the schemas alone ~60 ms a process), which a node of N workers pays N times,
# inside a point of 60-200 MB per producer. The points measure the steady state; a start's
# cost is the `start` workload's.
WARM_COUNT = 5_000
LEADER_WAIT_S = 60
LATENCY_RATE = 5000  # issue #29 item 5: the boundary's cost at low load
# Records of the first seconds are not counted: on a fresh topic of a ZooKeeper node the
# consumer may learn the partition's leader seconds after the producer did, and the records
# it then catches up on would measure that, not the path (smoke run: p50 2.5 s, 3 s runs).
LATENCY_WARMUP_S = 3.0
LATENCY_TURNS = 6  # at least: a p99 of 5 s windows on a shared VM needs pairs, not one reading


@dataclass
class Point:
    """One setup, one N, one round."""

    mb_s: float
    cores: float
    shares: dict[str, float]  # process role -> share of the node's CPU
    p99_ms: float
    load: float
    consume_mb_s: float = 0.0  # 0 without consumers


@dataclass
class MulticoreResults:
    """By setup and producer count, the rounds' points; printed with medians and ranges."""

    cores: int
    count: int
    points: dict[tuple[str, int], list[Point]] = field(default_factory=lambda: defaultdict(list))
    # setup -> the rounds' (p50, p99) end-to-end ms at LATENCY_RATE
    latency: dict[str, list[tuple[float, float]]] = field(
        default_factory=lambda: defaultdict(list))
    # setup -> per turn, its p99 over the first setup's p99 in the same turn
    latency_ratio: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    setups: tuple[str, ...] = SETUPS
    producers: tuple[int, ...] = PRODUCERS
    notes: list[str] = field(default_factory=list)

    def _cell(self, values: list[float], fmt: str) -> str:
        if not values:
            return "-"
        mid = fmt.format(statistics.median(values))
        if len(values) == 1:
            return mid
        return f"{mid} ({fmt.format(min(values))}-{fmt.format(max(values))})"

    def rows(self) -> list[tuple[str, ...]]:
        rows: list[tuple[str, ...]] = [("producers", "figure", *self.setups)]
        figures: list[tuple[str, Callable[[Point], float], str]] = [
            ("aggregate produce MB/s", lambda p: p.mb_s, "{:.1f}"),
            ("aggregate consume MB/s", lambda p: p.consume_mb_s, "{:.1f}"),
            ("node CPU, cores in use", lambda p: p.cores, "{:.2f}"),
            ("node CPU-s per GB", lambda p: p.cores / p.mb_s * 1000, "{:.2f}"),
            ("smallest worker's CPU share", self._least_share, "{:.2f}"),
            ("p99 produce-to-ack (ms)", lambda p: p.p99_ms, "{:.0f}"),
        ]
        for n in self.producers:
            for k, (name, get, fmt) in enumerate(figures):
                rows.append((str(n) if k == 0 else "", name,
                             *(self._cell([get(p) for p in self.points[(s, n)]], fmt)
                               for s in self.setups)))
            roles = sorted({r for s in self.setups for p in self.points[(s, n)] for r in p.shares})
            for role in roles:
                rows.append(("", f"  share: {role}",
                             *(self._cell([p.shares[role] for p in self.points[(s, n)]
                                           if role in p.shares], "{:.2f}")
                               for s in self.setups)))
        if self.latency:
            for k, name in enumerate(("p50", "p99")):
                rows.append(("low load" if k == 0 else "",
                             f"e2e {name} at {LATENCY_RATE:,} rec/s (ms)",
                             *(self._cell([v[k] for v in self.latency[s]], "{:.2f}")
                               for s in self.setups)))
            rows.append(("", f"e2e p99 over {self.setups[0]}'s, same turn",
                         *(self._cell(self.latency_ratio[s], "{:.2f}") for s in self.setups)))
        return rows

    @staticmethod
    def _least_share(p: Point) -> float:
        """The smallest share among the worker processes (brokers and routers; not
        ZooKeeper, nor a node's supervisor, whose workers are its children): 1.0 for a
        single process."""
        workers = [v for r, v in p.shares.items() if r not in ("zookeeper", "node")]
        return min(workers) if workers else 0.0

    @staticmethod
    def _left(i: int, n: int) -> bool:
        return i < 2  # the producers and figure columns; the setups' cells are figures

    def print_table(self, file: Any = sys.stdout) -> None:
        print_rows(self.rows(), self.notes, self._left, file)

    def markdown(self) -> str:
        return markdown_rows(self.rows(), self.notes, self._left)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {f"multicore | {s} | {n} producers": [p.__dict__ for p in pts]
                               for (s, n), pts in self.points.items()}
        out.update({f"multicore | {s} | e2e p50, p99 at {LATENCY_RATE} rec/s": v
                    for s, v in self.latency.items()})
        out.update({f"multicore | {s} | e2e p99 over {self.setups[0]}'s, same turn": v
                    for s, v in self.latency_ratio.items()})
        return out


def create_topics(node: Node, topics: list[str]) -> None:
    """The topics, each of PARTITIONS partitions, and a wait until every partition has a
    leader, seen through the address the producers use (through a router too)."""
    admin = AdminClient({"bootstrap.servers": node.admin_bootstrap, **QUIET})
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics],
                                      operation_timeout=60, request_timeout=120).values():
        future.result()
    front = AdminClient({"bootstrap.servers": node.bootstrap, **QUIET})
    deadline = time.monotonic() + LEADER_WAIT_S
    while True:
        meta = front.list_topics(timeout=30)
        ready = [t for t in topics if t in meta.topics and not meta.topics[t].error
                 and len(meta.topics[t].partitions) == PARTITIONS
                 and all(p.leader >= 0 for p in meta.topics[t].partitions.values())]
        if len(ready) == len(topics):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"leaders not elected after {LEADER_WAIT_S} s: "
                               f"{sorted(set(topics) - set(ready))}")
        time.sleep(0.1)


def stored(node: Node, topic: str) -> int:
    """The records the topic holds: its partitions' high watermarks, summed."""
    c = Consumer({"bootstrap.servers": node.admin_bootstrap, "group.id": "multicore-bench",
                  **QUIET})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                   for p in range(PARTITIONS))
    finally:
        c.close()


def _spawn(module: str, node: Node, topic: str, count: int) -> "subprocess.Popen[str]":
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", f"tests.bench.multicore.{module}",
                             node.bootstrap, topic, str(PARTITIONS), str(count)],
                            cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)


def run_point(node: Node, n: int, count: int, tag: str, consumers: bool = True) -> Point:
    """N producers, each on a topic of its own, and (with `consumers`) N consumers, each
    reading one producer's topic from its start while it is written, all started together."""
    topics = [f"mc-{tag}-{n}p-{i}" for i in range(n)]
    create_topics(node, topics)
    os.sync()  # the last point's writeback does not land in this one
    time.sleep(1)
    producers = [_spawn("producer", node, t, count) for t in topics]
    readers = [_spawn("consumer", node, t, count) for t in topics] if consumers else []
    procs = producers + readers
    try:
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("a producer or consumer did not start")
        load = os.getloadavg()[0]
        pids = node.tree()
        cpu0 = {role: cpu_seconds(pid) for role, pid in pids.items()}
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = []
        for p in producers:
            assert p.stdout is not None
            outs.append(json.loads(p.stdout.readline()))
        reads = []
        for p in readers:
            assert p.stdout is not None
            reads.append(json.loads(p.stdout.readline()))
        cpu = {role: cpu_seconds(pid) - cpu0[role] for role, pid in pids.items()}
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(10)
    bad = [o for o in outs if o["left"] or o["failed"]]
    if bad:
        raise RuntimeError(f"{tag}: producers failed: {bad[0]['failed']} ({bad[0]['left']} left)")
    short = [r for r in reads if r["records"] != count or r["errors"]]
    if short:
        raise RuntimeError(f"{tag}: a consumer read {short[0]['records']} of {count} records "
                           f"(errors {short[0]['errors']})")
    # Tansu's ListOffsets answered a high watermark short of what its consumers had just read
    # in full (16,012 of 20,000, smoke run): a peer is checked by its consumers alone.
    for t in topics if node.setup not in PEER_SETUPS or not reads else ():
        held = stored(node, t)
        if held != count:
            raise RuntimeError(f"{t}: {held} records stored, {count} acknowledged")
    starts = [o["start"] for o in outs + reads]
    wall = max(o["end"] for o in outs + reads) - min(starts)
    produce_wall = max(o["end"] for o in outs) - min(o["start"] for o in outs)
    consume_mb_s = (n * count * SIZE / 1e6 / (max(r["end"] for r in reads)
                                              - min(r["start"] for r in reads))
                    if reads else 0.0)
    total = sum(cpu.values())
    lat = sorted(x for o in outs for x in o["latencies_ms"])
    return Point(mb_s=n * count * SIZE / 1e6 / produce_wall, cores=total / wall,
                 shares={r: v / total for r, v in cpu.items()} if total else {},
                 p99_ms=percentile(lat, 0.99), load=load, consume_mb_s=consume_mb_s)


def bench_multicore(rounds: int, cores: int, producers: tuple[int, ...], setups: tuple[str, ...],
                    count: int, progress: Callable[[str], None],
                    latency_seconds: float = 5.0,
                    latency_turns: int | None = None) -> MulticoreResults:
    """`latency_turns`: the low-load turns (default: `rounds`, at least LATENCY_TURNS)."""
    turns = latency_turns or max(rounds, LATENCY_TURNS)
    results = MulticoreResults(cores=cores, count=count, setups=setups, producers=producers)
    loads = []
    for rnd in range(rounds):
        shift = rnd % len(setups)
        order = setups[shift:] + setups[:shift]
        for setup in order:
            work = Path(tempfile.mkdtemp(prefix=f"multicore-{setup}-"))
            try:
                with start_node(setup, cores, work) as node:
                    run_point(node, 1, WARM_COUNT, f"{setup}-r{rnd}-warm")
                    for n in producers:
                        point = run_point(node, n, count, f"{setup}-r{rnd}")
                        loads.append(point.load)
                        results.points[(setup, n)].append(point)
                        progress(f"round {rnd + 1} {setup:>7} {n} producers: "
                                 f"{point.mb_s:.1f} MB/s, {point.cores:.2f} cores, p99 "
                                 f"{point.p99_ms:.0f} ms, shares " + ", ".join(
                                     f"{r} {v:.2f}" for r, v in point.shares.items())
                                 + f" (load {point.load:.2f})")
            finally:
                shutil.rmtree(work, ignore_errors=True)
    if latency_seconds > 0:
        low_load(results, cores, turns, latency_seconds, progress)
    results.notes.append(
        f"multicore (issue #29): {count:,} records of 1 KB per producer, acks=1, "
        f"linger.ms 5, each producer a process of its own on a topic of {PARTITIONS} "
        f"partitions, and as many consumer processes, each reading one producer's topic "
        f"from its start while it is written (consume MB/s: from their start to their last "
        f"record), after {WARM_COUNT:,} records of one producer and one consumer through "
        f"each setup, uncounted; CPU: every process of the node over the whole point. "
        f"`single` is "
        f"today's one process (num.cores=1), `node` pybroker-server with num.cores={cores} "
        f"({cores} brokers under a supervisor, on the node's own metadata service), "
        f"`brokers` (a prototype) {cores} brokers on one "
        f"ZooKeeper (clients see {cores} broker ids), `shards` the same behind {cores} "
        "SO_REUSEPORT routers showing one broker id (every request forwarded once), "
        f"`frontends` {cores} such routers in front of one broker; `tansu` and `kafka` the "
        "peers (Tansu on memory://, Apache Kafka 4.1.1 in KRaft), one process each. "
        f"Low load: end-to-end at {LATENCY_RATE:,} rec/s, 100 B, acks=1, linger.ms 0, "
        f"one partition, {latency_seconds:g} s after {LATENCY_WARMUP_S:g} s uncounted, "
        f"every setup up at once, {turns} turns going round them (the "
        "first rotating); a ratio is a setup's p99 over the first setup's in the same turn. "
        f"Medians of {rounds} round(s), (min-max); setups alternate first. "
        f"{os.cpu_count()} CPUs shared by the node and the producers; load average (1 min) "
        f"at the points' starts {min(loads, default=0):.2f}-{max(loads, default=0):.2f}.")
    return results


def low_load(results: MulticoreResults, cores: int, turns: int, seconds: float,
             progress: Callable[[str], None]) -> None:
    """Every setup started once and kept up; `turns` times, each one's latency window in
    turn, the first of each turn rotating (with two setups: AB, BA, AB, ...). An idle setup
    beside the measured one costs it little (the node's idle wakeups: docs/DESIGN.md, the cost
    of the boundary) and the same in every turn."""
    setups = results.setups
    with contextlib.ExitStack() as stack:
        nodes = {}
        for setup in setups:
            work = Path(tempfile.mkdtemp(prefix=f"multicore-lowload-{setup}-"))
            stack.callback(shutil.rmtree, work, ignore_errors=True)
            nodes[setup] = stack.enter_context(start_node(setup, cores, work))
        for turn in range(turns):
            shift = turn % len(setups)
            p99: dict[str, float] = {}
            for setup in setups[shift:] + setups[:shift]:
                node = nodes[setup]
                os.sync()
                time.sleep(1)
                lat = bench_latency(node.bootstrap, node.pids[0], linger_ms=0, seconds=seconds,
                                    rate=LATENCY_RATE, warmup=LATENCY_WARMUP_S,
                                    cpu_pids=node.pids)
                results.latency[setup].append((lat.p50, lat.p99))
                p99[setup] = lat.p99
                progress(f"low load turn {turn + 1} {setup:>7} e2e at {LATENCY_RATE:,} rec/s: "
                         f"p50 {lat.p50:.2f} ms, p99 {lat.p99:.2f} ms ({lat.rate:,.0f} rec/s, "
                         f"load {os.getloadavg()[0]:.2f})")
            for setup in setups:
                results.latency_ratio[setup].append(p99[setup] / p99[setups[0]])
