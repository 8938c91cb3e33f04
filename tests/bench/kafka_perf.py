"""Kafka's own load generators (issue #15 §3): `kafka-producer-perf-test` and
`kafka-consumer-perf-test`, the Java client, as a second load generator beside confluent-kafka.

A figure made with one client only says how that client and the broker get on; librdkafka and
the Java client batch, pipeline and fetch differently, so peer_bench runs the same workloads
with both (`--loadgen confluent,kafka-perf`). The tools run from their jars
(compat/kafka_tools.py) as `bin/kafka-*-perf-test.sh` runs them: a 512 MB heap and
kafka-run-class.sh's performance flags (G1, full JIT), not the quick-start flags the suite's
CLI tests use, which would stop the JIT at C1 and make the client the bottleneck.

The producer gets the settings bench_broker.bench_produce gives librdkafka, so the two
generators are comparable: acks, linger.ms=5, batch.size=1000000, no compression, and a
round-robin partitioner (librdkafka's runs name the partition i % n). Records are the tool's
random letters; the broker treats them as opaque bytes either way.

The figures are the tools' own summary lines: the producer's records/sec (its clock runs from
the first send to the producer's close, so it includes the last acknowledgement; the JVM's
start and the producer's construction are outside it) and the consumer's fetch.time.ms (from
the end of the group join to the last record; the join and the JVM's start are outside it,
as librdkafka's start-up is outside bench_consume's clock). Both tools report MB as 2^20
bytes; the tables count 10^6 bytes of record values, so the byte counts are checked against
records x size and MB/s is recomputed. Broker CPU and peak RSS cover the tool's whole JVM
(the broker is idle while the JVM starts: a few hundredths of a CPU-second).
"""
from __future__ import annotations

import re
import resource
import subprocess
from dataclasses import dataclass

from compat import kafka_tools
from compat.apache_kafka import JVM_FLAGS
from tests.bench.bench_broker import Throughput, cpu_seconds, create_topic, reset_peak_rss, \
    status_kb

# bin/kafka-producer-perf-test.sh's KAFKA_HEAP_OPTS and kafka-run-class.sh's
# KAFKA_JVM_PERFORMANCE_OPTS.
PERF_JVM = ("-Xmx512M", *JVM_FLAGS)
MIB = 1024 * 1024
ROUND_ROBIN = "org.apache.kafka.clients.producer.RoundRobinPartitioner"
CONSUMER_IDLE_MS = 30_000  # --timeout: the longest wait between records before giving up
TOOL_TIMEOUT = 900.0  # seconds for one tool's whole run

# ProducerPerformance's Stats.printTotal line.
_PRODUCER_TOTAL = re.compile(
    r"^(?P<records>\d+) records sent, (?P<rec_s>[\d.]+) records/sec \((?P<mib_s>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th\.$", re.M)
_CONSUMER_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                    "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


class PerfToolError(RuntimeError):
    """A perf tool failed, printed no summary, or reported other than what was asked."""


@dataclass(frozen=True)
class ProducerSummary:
    records: int
    rec_s: float
    mib_s: float
    avg_ms: float
    p99_ms: int


@dataclass(frozen=True)
class ConsumerSummary:
    records: int
    mib: float
    rebalance_ms: int
    fetch_ms: int
    fetch_mib_s: float
    fetch_rec_s: float


def parse_producer_summary(stdout: str) -> ProducerSummary:
    """The last total line of ProducerPerformance (its 5-second window lines lack the
    percentiles, so they do not match)."""
    found = list(_PRODUCER_TOTAL.finditer(stdout))
    if not found:
        raise PerfToolError(f"no summary line from kafka-producer-perf-test:\n{stdout[-2000:]}")
    m = found[-1]
    return ProducerSummary(int(m["records"]), float(m["rec_s"]), float(m["mib_s"]),
                           float(m["avg"]), int(m["p99"]))


def parse_consumer_summary(stdout: str) -> ConsumerSummary:
    """The row of ten comma-separated columns under ConsumerPerformance's header (a WARNING
    line comes between them when the tool gave up waiting for records)."""
    lines = [line.strip() for line in stdout.splitlines()]
    if _CONSUMER_HEADER not in lines:
        raise PerfToolError(f"no header from kafka-consumer-perf-test:\n{stdout[-2000:]}")
    rows = [line.split(", ") for line in lines[lines.index(_CONSUMER_HEADER) + 1:]]
    fields = next((row for row in rows if len(row) == 10), None)
    if fields is None:
        raise PerfToolError(f"no summary row from kafka-consumer-perf-test:\n{stdout[-2000:]}")
    try:
        return ConsumerSummary(records=int(fields[4]), mib=float(fields[2]),
                               rebalance_ms=int(fields[6]), fetch_ms=int(fields[7]),
                               fetch_mib_s=float(fields[8]), fetch_rec_s=float(fields[9]))
    except ValueError:
        raise PerfToolError(f"unreadable summary row: {', '.join(fields)}") from None


def producer_args(bootstrap: str, topic: str, size: int, count: int, acks: str) -> list[str]:
    return ["--topic", topic, "--num-records", str(count), "--record-size", str(size),
            "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}",
            f"acks={acks}", "linger.ms=5", "batch.size=1000000", "compression.type=none",
            f"partitioner.class={ROUND_ROBIN}"]


def consumer_args(bootstrap: str, topic: str, count: int) -> list[str]:
    return ["--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(count),
            "--timeout", str(CONSUMER_IDLE_MS)]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(tool: str, args: list[str], pid: int) -> tuple[str, float, float, int]:
    """Run a perf tool to its end: its stdout, the broker's CPU-seconds and the tool's over
    the run, and the broker's peak RSS (KB)."""
    cmd = kafka_tools.command(tool, args, jvm=PERF_JVM)
    reset_peak_rss(pid)
    cpu0, ccpu0 = cpu_seconds(pid), _children_cpu()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise PerfToolError(f"{tool} still running after {TOOL_TIMEOUT:.0f} s") from None
    cpu, ccpu = cpu_seconds(pid) - cpu0, _children_cpu() - ccpu0
    hwm = status_kb(pid, "VmHWM")
    if done.returncode != 0:
        raise PerfToolError(f"{tool} exited {done.returncode}:\n{done.stdout[-2000:]}\n"
                            f"{done.stderr[-2000:]}")
    return done.stdout, cpu, ccpu, hwm


def _check_bytes(tool: str, reported_mib: float, expected_mib: float, rounding: float) -> None:
    """The tool's own byte count (MB of 2^20, rounded to `rounding`) must be the records'
    values: a tool that sent or read other records than asked is refused."""
    if abs(reported_mib - expected_mib) > rounding + 0.001 * expected_mib:
        raise PerfToolError(f"{tool} reported {reported_mib} MB where the records' values "
                            f"make {expected_mib:.4f} MB")


def perf_produce(bootstrap: str, pid: int, topic: str, partitions: int, size: int,
                 count: int, acks: str) -> Throughput:
    """Create the topic, then `count` records from kafka-producer-perf-test, every one
    acknowledged (the tool counts only acknowledged records)."""
    create_topic(bootstrap, topic, partitions)
    out, cpu, ccpu, hwm = _run("kafka-producer-perf-test",
                               producer_args(bootstrap, topic, size, count, acks), pid)
    s = parse_producer_summary(out)
    if s.records != count or s.rec_s <= 0:
        raise PerfToolError(f"{topic}: {s.records} of {count} records acknowledged\n{out}")
    # MB/sec is printed to 2 decimals, records/sec to 1.
    _check_bytes("kafka-producer-perf-test", s.mib_s, s.rec_s * size / MIB,
                 0.005 + 0.05 * size / MIB)
    return Throughput(s.records, size, s.records / s.rec_s, cpu, ccpu, hwm)


def perf_consume(bootstrap: str, pid: int, topic: str, size: int, count: int) -> Throughput:
    """Read `count` records of `topic` from the beginning with kafka-consumer-perf-test (a
    group of its own, subscribed to the topic); fewer is an error, not a short figure."""
    out, cpu, ccpu, hwm = _run("kafka-consumer-perf-test",
                               consumer_args(bootstrap, topic, count), pid)
    s = parse_consumer_summary(out)
    if s.records != count:
        raise PerfToolError(f"{topic}: consumed {s.records} of {count} records\n{out}")
    _check_bytes("kafka-consumer-perf-test", s.mib, s.records * size / MIB, 0.00005)
    return Throughput(s.records, size, max(s.fetch_ms, 1) / 1000, cpu, ccpu, hwm)
