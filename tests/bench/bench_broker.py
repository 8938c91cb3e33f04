"""Whole-broker figures (issue #3 item 8): latency, throughput, CPU, memory, start time.

Not a test (pytest does not collect `bench_*.py`); run it by hand:

    cd /work/main && .venv/bin/python tests/bench/bench_broker.py [--quick] [--profile DIR]

pybroker runs as a child process (`python -m pybroker`) on an ephemeral port with a temporary
log dir; stock confluent-kafka (librdkafka) clients drive it from this process. The figures:

- end-to-end latency p50/p99/p99.9: a producer thread sends 100-byte records at 5,000/s
  (acks=1, linger.ms 0 and 5) for 10 s (3 s with --quick) after a 1 s warm-up; a consumer
  thread with the default fetch.wait.max.ms (500) receives them. Both threads share one clock
  (perf_counter_ns, carried in the record value); the time is from `produce()` to `poll()`
  returning the record, so it includes both clients' queues, not only the broker.
- produce throughput (acks=1, linger.ms=5, batch.size=1000000, no compression, explicit
  round-robin partition) with 1 KB and 100 B records, to 1 and 8 partitions; then consume
  throughput from the beginning (assign, no group membership; librdkafka insists on a
  group.id but nothing is committed), timed from the first records received (librdkafka
  spends ~0.5 s before its first fetch). MB is 10^6 bytes of record values.
- broker CPU-seconds per million records (utime+stime of the broker from /proc/<pid>/stat);
  the client's own CPU is shown beside it, since both share the machine.
- idle RSS (VmRSS after start, no traffic) and peak RSS of each phase (VmHWM, reset before the
  phase through /proc/<pid>/clear_refs).
- time from `Popen` to the "listening on" log line: with an empty log dir, with 1,000
  partitions on disk, and after the throughput runs' data (clean shutdown).

Targets are issue #3's (p99 <= 10 ms) and, for reference, issue #6's later ones (idle RSS <=
50 MB, produce RSS <= 150 MB, start <= 1 s with 1,000 partitions). `--profile DIR` records the
broker with py-spy during each phase (collapsed stacks in DIR/<phase>.txt) when py-spy is on PATH
or in the venv, and prints the top functions by self time; there `EpollIOManager.get_events` is
trio waiting in epoll and `_SocketType._nonblocking_helper` is the send/recv system calls.
Broker and clients share the machine's CPUs, so run it on a quiet machine (the table shows the
load average). Linux only (/proc).
"""
from __future__ import annotations

import argparse
import ctypes
import itertools
import math
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from pybroker.runtime.malloc_tuning import tune_malloc  # noqa: E402
from tests.helpers import BrokerProcess  # noqa: E402

MB = 1_000_000
TICKS = os.sysconf("SC_CLK_TCK")
STAMP = struct.Struct(">qI")  # send time (perf_counter_ns), sequence number
PRIMER = 0xFFFFFFFF
DRAIN = 1000  # records taken at once by bench_latency's consumer after the one it waited for
# A confluent-kafka client's settings, as its stubs type them.
ClientConfig = Mapping[str, str | int | float | bool]
QUIET = {"log_level": 3, "log.connection.close": False}
_RUNS = itertools.count()


# --- the broker process, seen through /proc -----------------------------------------------

def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` (all its threads, exited ones too) in seconds, read from the
    process's CPU-time clock (clock_getcpuclockid(3)) to the nanosecond: /proc/<pid>/stat
    counts clock ticks of 10 ms, a step of 2-3 % in a phase that costs a few hundred ms,
    which the A/B gate (tests/bench/ab.py) could not tell from a change. /proc where the
    clock cannot be had."""
    clock = ctypes.c_int()
    if _LIBC is not None and _LIBC.clock_getcpuclockid(pid, ctypes.byref(clock)) == 0:
        try:
            return time.clock_gettime(clock.value)
        except OSError:  # the process exited between the two calls
            pass
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # fields 14 and 15 of stat(5)


try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - no C library to call
    _LIBC = None


def user_seconds(pid: int) -> float:
    """utime of `pid` (all its threads) in seconds, from /proc/<pid>/stat's clock ticks: no
    clock gives the user part alone to the nanosecond, so a phase must run long enough for
    its ticks (10 ms) to be a small step."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICKS


def status_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def reset_peak_rss(pid: int) -> None:
    """Reset VmHWM to the current RSS (proc(5): clear_refs, value 5)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def client_cpu() -> float:
    t = os.times()
    return t.user + t.system


STEADY_MMAP_THRESHOLD = 32 << 20  # glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX, 64-bit)
STEADY_TRIM_THRESHOLD = 512 << 20


def steady_client_allocator() -> bool:
    """Keep this process's (the client's) freed memory for reuse: allocations below 32 MB
    come from the heap, and the heap is not handed back to the kernel until 512 MB of it
    are free. Why: librdkafka holds each Fetch response (~1 MB) in a buffer of its own, and
    with glibc's defaults (a 128 KB mmap threshold, raised only by frees of larger mmapped
    chunks, and a trim of the heap's top whenever twice that is free) a freed buffer may go
    back to the kernel and the next be faulted in again. How often depends on what this
    process allocated and freed before, not on the broker: a consume turn cost the client
    159-176 page faults per response in some turns and 14-55 in others, and its Python
    thread 0.3-0.5 s of system time per million records more, 15-21 % of the client's CPU
    (docs/PERFORMANCE.md, "Consume against 706cf02"). Consume MB/s is the client's speed,
    so that moved the A/B's consume figure turn by turn. The brokers are other processes,
    which tune their own allocator (both builds: `tune_malloc`'s defaults, a 32 MB mmap
    threshold and 4 MB kept at the heap's top, enough for a broker's buffers, not for a
    client draining a 64 MB queue of them). False where there is no glibc mallopt, or where
    the MALLOC_*_ environment variables decide."""
    return tune_malloc(STEADY_MMAP_THRESHOLD, STEADY_TRIM_THRESHOLD)


STARTED: list[BrokerProcess] = []


def start_broker(log_dir: Path) -> tuple[BrokerProcess, float]:
    """A started broker and the seconds from Popen to its "listening on" line."""
    t0 = time.perf_counter()
    broker = BrokerProcess(log_dir)
    STARTED.append(broker)
    broker.start(timeout=120)
    return broker, time.perf_counter() - t0


class Profiler:
    """py-spy in the background on the broker pid, one collapsed-stack file per phase."""

    def __init__(self, out_dir: Path | None) -> None:
        self.out_dir = out_dir
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.exe = exe if out_dir is not None and os.path.exists(exe) else None
        self.files: list[Path] = []
        if out_dir is not None and self.exe is None:
            print("py-spy not found: --profile ignored", file=sys.stderr)
        if self.exe:
            out_dir.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]

    @contextmanager
    def phase(self, name: str, pid: int) -> Iterator[None]:
        if not self.exe:
            yield
            return
        out = self.out_dir / f"{name}.txt"  # type: ignore[operator]
        proc = subprocess.Popen([self.exe, "record", "--pid", str(pid), "--rate", "250",
                                 "--format", "raw", "-o", str(out)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # let it attach
        try:
            yield
        finally:
            proc.send_signal(2)
            proc.wait(30)
            self.files.append(out)

    def summarise(self, top: int = 12) -> None:
        """Per phase, the functions with the most samples on top of the stack (self time)."""
        for path in self.files:
            if not path.exists():
                continue
            own: dict[str, int] = {}
            total = 0
            for line in path.read_text().splitlines():
                stack, _, count = line.rpartition(" ")
                if not stack:
                    continue
                leaf = stack.rsplit(";", 1)[-1]
                leaf = leaf.rsplit(":", 1)[0] + ")" if ":" in leaf else leaf
                own[leaf] = own.get(leaf, 0) + int(count)
                total += int(count)
            print(f"\npy-spy {path.stem}: {total} samples, self time")
            for name, n in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
                print(f"  {100 * n / total:5.1f}%  {name}")


# --- clients ------------------------------------------------------------------------------

def create_topic(bootstrap: str, name: str, partitions: int, replication: int = 1,
                 client: ClientConfig | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET, **(client or {})})
    for future in admin.create_topics([NewTopic(name, partitions, replication)],
                                      operation_timeout=60, request_timeout=120).values():
        future.result()


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    for future in admin.delete_topics(topics, operation_timeout=60).values():
        try:
            future.result()
        except Exception:  # already gone, or the broker cannot: only memory is at stake
            pass


def consumer(bootstrap: str, **extra: object) -> Consumer:
    # librdkafka requires a group.id; assign() never joins the group and nothing is committed.
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     **QUIET, **extra})


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return math.nan
    return sorted_values[min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))]


@dataclass
class Latency:
    sent: int
    received: int
    rate: float
    p50: float
    p99: float
    p999: float
    max: float
    broker_cpu: float


def bench_latency(bootstrap: str, pid: int, *, linger_ms: int, seconds: float,
                  rate: int = 5000, size: int = 100, warmup: float = 1.0, acks: str | int = 1,
                  replication: int = 1, cpu_pids: tuple[int, ...] = ()) -> Latency:
    """`cpu_pids`: the brokers whose CPU time is summed (default: `pid` alone)."""
    topic = f"latency-linger{linger_ms}-{next(_RUNS)}"
    create_topic(bootstrap, topic, 1, replication)
    pids = cpu_pids or (pid,)
    warm_count = int(rate * warmup)
    total = warm_count + int(rate * seconds)
    latencies: list[int] = []
    got = [0]
    ready = threading.Event()
    done = threading.Event()

    def consume() -> None:
        c = consumer(bootstrap)  # fetch.wait.max.ms left at its default (500)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        ready.set()
        deadline = None
        while got[0] < total:
            # Wait for one record, then take what else is queued without waiting (consume()
            # with a timeout would hold the batch back until it is full): at 50,000 rec/s a
            # poll() per record costs this thread more than the broker's share of the wait.
            # The clock is read once per batch, as soon as librdkafka hands it over.
            msg = c.poll(0.1)
            now = time.perf_counter_ns()
            if done.is_set():
                deadline = deadline or time.monotonic() + 5
                if time.monotonic() > deadline:
                    break
            if msg is None:
                continue
            batch = [(now, msg)]
            more = c.consume(DRAIN, 0)
            if more:
                now = time.perf_counter_ns()
                batch.extend((now, m) for m in more)
            for now, m in batch:
                if m.error():
                    continue
                value = m.value()
                assert value is not None, "every record here carries a stamp"
                sent_ns, seq = STAMP.unpack_from(value)
                if seq == PRIMER:
                    continue
                got[0] += 1
                if seq >= warm_count:
                    latencies.append(now - sent_ns)
        c.close()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    ready.wait(30)
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": linger_ms,
                  **QUIET})
    # Connect and fetch metadata before the clock starts; the consumer skips this record.
    p.produce(topic, STAMP.pack(0, PRIMER) + b"x" * (size - STAMP.size))
    p.flush(30)
    pad = b"p" * (size - STAMP.size)
    period_ns = 1_000_000_000 // rate
    start = time.perf_counter_ns()
    cpu0 = sum(map(cpu_seconds, pids))
    sent = 0
    while sent < total:
        now = time.perf_counter_ns()
        due = (now - start) // period_ns + 1
        while sent < min(due, total):
            p.produce(topic, STAMP.pack(time.perf_counter_ns(), sent) + pad)
            sent += 1
        p.poll(0)
        time.sleep(0.0002)
    elapsed = (time.perf_counter_ns() - start) / 1e9
    p.flush(30)
    done.set()
    thread.join(30)
    cpu = sum(map(cpu_seconds, pids)) - cpu0
    lat = sorted(x / 1e6 for x in latencies)
    return Latency(sent, len(latencies), sent / elapsed, percentile(lat, 0.50),
                   percentile(lat, 0.99), percentile(lat, 0.999), lat[-1] if lat else math.nan,
                   cpu)


@dataclass
class Throughput:
    records: int
    size: int
    seconds: float
    broker_cpu: float
    client_cpu: float
    peak_rss_kb: int
    # The broker's user-mode share of broker_cpu (/proc ticks): the Python work, without the
    # kernel's copies into the page cache and out of the socket, whose cost on a shared VM
    # moves with other processes' writeback (issue #28's gate reads this).
    broker_user: float = 0.0

    @property
    def user_per_million(self) -> float:
        return self.broker_user / self.records * 1e6

    @property
    def mb_s(self) -> float:
        return self.records * self.size / MB / self.seconds

    @property
    def rec_s(self) -> float:
        return self.records / self.seconds

    @property
    def cpu_per_million(self) -> float:
        return self.broker_cpu / self.records * 1e6

    @property
    def cpu_per_gb(self) -> float:
        """Broker CPU seconds per 10^9 bytes of record values."""
        return self.broker_cpu / (self.records * self.size / 1e9)


def bench_produce(bootstrap: str, pid: int, topic: str, partitions: int, size: int,
                  count: int, acks: str | int = 1, replication: int = 1,
                  cpu_pids: tuple[int, ...] = (),
                  client: ClientConfig | None = None,
                  create: bool = True) -> Throughput:
    """Produce `count` records round-robin over the partitions and wait for every ack.
    Delivery is checked by delivery reports (errors only, so the client pays nothing per
    record), not by the topic's high watermark: the peer's ListOffsets(latest) lags a batch
    behind what it stores. `cpu_pids`: the brokers whose CPU time and peak RSS are summed
    (default: `pid` alone). `client`: the client's security settings
    (security.protocol, ssl.ca.location, ...). `create=False`: the caller made the topic
    (and waited until it is ready)."""
    if create:
        create_topic(bootstrap, topic, partitions, replication, client)
    pids = cpu_pids or (pid,)
    failed: list[str] = []

    def on_error(err: Any, msg: Any) -> None:
        if err is not None and len(failed) < 5:
            failed.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                  "batch.size": 1_000_000, "compression.type": "none",
                  "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 1_048_576,
                  "delivery.report.only.error": True, "on_delivery": on_error, **QUIET,
                  **(client or {})})
    p.list_topics(topic, timeout=30)  # connected, metadata known
    payload = os.urandom(size)
    send = p.produce
    for each in pids:
        reset_peak_rss(each)
    user0 = sum(map(user_seconds, pids))
    cpu0, ccpu0, t0 = sum(map(cpu_seconds, pids)), client_cpu(), time.perf_counter()
    for i in range(count):
        while True:
            try:
                send(topic, payload, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.005)
    left = p.flush(300)
    elapsed = time.perf_counter() - t0
    cpu, ccpu = sum(map(cpu_seconds, pids)) - cpu0, client_cpu() - ccpu0
    user = sum(map(user_seconds, pids)) - user0
    hwm = sum(status_kb(each, "VmHWM") for each in pids)
    if left or failed:
        raise RuntimeError(f"{topic}: {left} records not delivered; errors: {failed}")
    return Throughput(count, size, elapsed, cpu, ccpu, hwm, user)


def bench_consume(bootstrap: str, pid: int, topic: str, partitions: int, size: int,
                  count: int, client: ClientConfig | None = None,
                  cpu_pids: tuple[int, ...] = (), stall_seconds: float = 30,
                  before_close: Callable[[], object] | None = None) -> Throughput:
    """Read `count` records from the beginning. The clock starts at the first records received,
    which are not counted: librdkafka takes ~0.5 s after assign() before its first fetch
    (group coordinator lookup, ListOffsets), a client start-up cost, not the broker's. Each
    `consume()` asks for no more than the records still due: librdkafka's consume(n, timeout)
    waits out its whole timeout when fewer than n records are left, which would add up to
    0.5 s to every run and flatten the comparison. `cpu_pids`: the brokers whose CPU time and
    peak RSS are summed (default: `pid` alone; a cluster's followers fetch meanwhile).
    RuntimeError after `stall_seconds` without a record (Kafka with 10,000 partitions kept a
    consumer waiting 38 s for its last 13 partitions). `before_close`: called once the records
    are in, while the consumer's threads still run (tests/bench/consume_counts.py reads their
    CPU time)."""
    pids = cpu_pids or (pid,)
    # librdkafka stops fetching a partition for fetch.queue.backoff.ms (default 1 s) whenever
    # its local queue passes queued.min.messages (100,000): a client-side pause, not the broker's.
    c = consumer(bootstrap, **{"fetch.queue.backoff.ms": 1, **(client or {})})
    c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(partitions)])
    got, last = 0, time.monotonic()
    while not got:  # a small first batch, so that most of `count` is left to time
        got = sum(1 for m in c.consume(min(1_000, max(1, count // 10)), 0.5)
                  if not m.error())
        if time.monotonic() - last > stall_seconds:
            raise RuntimeError(f"{topic}: consumer got nothing in {stall_seconds:g} s")
    first = got
    for each in pids:
        reset_peak_rss(each)
    user0 = sum(map(user_seconds, pids))
    cpu0, ccpu0, t0 = sum(map(cpu_seconds, pids)), client_cpu(), time.perf_counter()
    while got < count:
        msgs = c.consume(min(10_000, count - got), 0.5)
        if msgs:
            got += sum(1 for m in msgs if not m.error())
            last = time.monotonic()
        elif time.monotonic() - last > stall_seconds:
            raise RuntimeError(f"{topic}: consumer stalled at {got}/{count} for "
                               f"{stall_seconds:g} s")
    elapsed = time.perf_counter() - t0
    cpu, ccpu = sum(map(cpu_seconds, pids)) - cpu0, client_cpu() - ccpu0
    user = sum(map(user_seconds, pids)) - user0
    hwm = sum(status_kb(each, "VmHWM") for each in pids)
    if before_close is not None:
        before_close()
    c.close()
    return Throughput(got - first, size, elapsed, cpu, ccpu, hwm, user)


def python_start_seconds(code: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)
    return time.perf_counter() - t0


# --- the run ------------------------------------------------------------------------------

def print_rows(rows: list[tuple[str, ...]], notes: list[str], left: Callable[[int, int], bool],
               file: Any = sys.stdout) -> None:
    """A table of text cells (the first row its header), columns aligned, `left(i, n)` saying
    which of the n columns are left-aligned (the rest are figures, right-aligned); then the
    notes."""
    n = len(rows[0])
    widths = [max(len(r[i]) for r in rows) for i in range(n)]
    for k, row in enumerate(rows):
        print("  ".join(c.ljust(w) if left(i, n) else c.rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths))).rstrip(), file=file)
        if k == 0:
            print("  ".join("-" * w for w in widths), file=file)
    for note in notes:
        print(note, file=file)


def markdown_rows(rows: list[tuple[str, ...]], notes: list[str],
                  left: Callable[[int, int], bool]) -> str:
    """The same table in Markdown, the notes as a list under it."""
    n = len(rows[0])
    lines = ["| " + " | ".join(rows[0]) + " |",
             "|" + "|".join("---" if left(i, n) else "---:" for i in range(n)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines) + "\n\n" + "\n".join(f"- {note}" for note in notes) + "\n"


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str]] = []

    def add(self, name: str, value: str, target: str = "") -> None:
        self.rows.append((name, value, target))
        print(f"  {name}: {value}" + (f"   [target {target}]" if target else ""),
              file=sys.stderr, flush=True)

    def section(self, title: str) -> None:
        self.rows.append((title, "", "\0"))

    def print(self) -> None:
        w0 = max(len(r[0]) for r in self.rows if r[2] != "\0")
        w1 = max(len(r[1]) for r in self.rows)
        print(f"\n{'figure':<{w0}}  {'value':<{w1}}  target")
        print(f"{'-' * w0}  {'-' * w1}  {'-' * 22}")
        for name, value, target in self.rows:
            if target == "\0":
                print(f"\n{name}")
            else:
                print(f"{name:<{w0}}  {value:<{w1}}  {target}")


def bench_many_partitions(log_dir: Path) -> tuple[float, float]:
    """Median restart time (s) with a 1,000-partition topic on disk, and the idle RSS (MB)."""
    broker, _ = start_broker(log_dir)
    create_topic(broker.bootstrap, "many", 1000)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **QUIET})
    for i in range(1000):
        p.produce("many", b"r", partition=i)
    if p.flush(120):
        raise RuntimeError("records to 1,000 partitions not delivered")
    broker.stop()
    restarts, rss = [], 0.0
    for _ in range(3):
        broker, s = start_broker(log_dir)
        restarts.append(s)
        time.sleep(1)
        rss = status_kb(broker.proc.pid, "VmRSS") / 1024  # type: ignore[union-attr]
        broker.stop()
    return statistics.median(restarts), rss


def _reason(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:120]


def mark(value: float, limit: float) -> str:
    return "ok" if value <= limit else "MISSED"


def run(quick: bool, profile_dir: Path | None, keep: bool) -> None:
    seconds = 3.0 if quick else 10.0
    kb_count = 100_000 if quick else 500_000
    small_count = 500_000 if quick else 2_000_000
    table = Table()
    prof = Profiler(profile_dir)
    tmp = Path(tempfile.mkdtemp(prefix="bench-broker-"))
    print(f"log dirs under {tmp}; {os.cpu_count()} CPUs shared by broker and clients",
          file=sys.stderr)
    try:
        table.section("machine")
        table.add("CPUs / load average (1 min) at start",
                  f"{os.cpu_count()} / {os.getloadavg()[0]:.2f}")
        # Start time, empty log dir: median of 3 fresh starts.
        table.section("start (Popen to 'listening on')")
        starts = []
        for i in range(3):
            b, s = start_broker(tmp / f"empty{i}")
            starts.append(s)
            b.stop()
        table.add("start, empty log dir (median of 3)",
                  f"{statistics.median(starts) * 1000:.0f} ms")
        table.add("  for comparison: python -c pass",
                  f"{python_start_seconds('pass') * 1000:.0f} ms")
        table.add("  for comparison: python -c 'import pybroker.server'",
                  f"{python_start_seconds('import pybroker.server') * 1000:.0f} ms")

        broker, _ = start_broker(tmp / "main")
        pid = broker.proc.pid  # type: ignore[union-attr]
        time.sleep(2)
        table.section("memory")
        table.add("idle RSS (VmRSS 2 s after start)",
                  f"{status_kb(pid, 'VmRSS') / 1024:.1f} MB", "<= 50 MB (issue #6)")

        table.section(f"end-to-end latency, 5,000 rec/s x {seconds:.0f} s, 100 B, acks=1, "
                      f"consumer fetch.wait.max.ms=500")
        for linger in (0, 5):
            with prof.phase(f"latency-linger{linger}", pid):
                lat = bench_latency(broker.bootstrap, pid, linger_ms=linger, seconds=seconds)
            table.add(f"linger.ms={linger}: p50 / p99 / p99.9 / max",
                      f"{lat.p50:.2f} / {lat.p99:.2f} / {lat.p999:.2f} / {lat.max:.1f} ms",
                      f"p99 <= 10 ms: {mark(lat.p99, 10)}")
            table.add(f"linger.ms={linger}: sent / received / rate",
                      f"{lat.sent} / {lat.received} measured after warm-up / {lat.rate:.0f} rec/s")
            table.add(f"linger.ms={linger}: broker CPU",
                      f"{lat.broker_cpu / (lat.sent / lat.rate) * 100:.0f} % of a core")

        peak_produce_kb = 0
        for size, count in ((1024, kb_count), (100, small_count)):
            for partitions in (1, 8):
                plural = "s" if partitions > 1 else ""
                label = f"{size} B x {count:,}, {partitions} partition{plural}"
                topic = f"tp-{size}b-{partitions}p"
                table.section(f"throughput, {label}")
                with prof.phase(f"produce-{size}b-{partitions}p", pid):
                    prod = bench_produce(broker.bootstrap, pid, topic, partitions, size, count)
                if size == 1024:
                    peak_produce_kb = max(peak_produce_kb, prod.peak_rss_kb)
                table.add("produce", f"{prod.mb_s:.1f} MB/s, {prod.rec_s:,.0f} rec/s "
                                     f"({prod.seconds:.2f} s)")
                table.add("produce: broker CPU-s per 1M records",
                          f"{prod.cpu_per_million:.2f} s (client {prod.client_cpu:.1f} s total,"
                          f" broker {prod.broker_cpu:.1f} s)")
                table.add("produce: peak RSS (VmHWM)", f"{prod.peak_rss_kb / 1024:.1f} MB",
                          "<= 150 MB (issue #6)" if size == 1024 else "")
                with prof.phase(f"consume-{size}b-{partitions}p", pid):
                    cons = bench_consume(broker.bootstrap, pid, topic, partitions, size, count)
                table.add("consume from beginning", f"{cons.mb_s:.1f} MB/s, {cons.rec_s:,.0f} "
                                                    f"rec/s ({cons.seconds:.2f} s)")
                table.add("consume: broker CPU-s per 1M records",
                          f"{cons.cpu_per_million:.2f} s (client {cons.client_cpu:.1f} s total,"
                          f" broker {cons.broker_cpu:.1f} s)")
                table.add("consume: peak RSS (VmHWM)", f"{cons.peak_rss_kb / 1024:.1f} MB")

        table.section("memory")
        table.add("peak RSS during 1 KB produce (VmHWM)", f"{peak_produce_kb / 1024:.1f} MB",
                  f"<= 150 MB (issue #6): {mark(peak_produce_kb / 1024, 150)}")
        table.add("RSS after all runs (VmRSS)", f"{status_kb(pid, 'VmRSS') / 1024:.1f} MB")
        broker.stop()
        table.section("restart")
        try:
            data_mb = sum(f.stat().st_size for f in (tmp / "main").rglob("*") if f.is_file()) / MB
            broker, s = start_broker(tmp / "main")
            table.add(f"restart after clean stop, {data_mb:,.0f} MB of bench data",
                      f"{s * 1000:.0f} ms")
            broker.stop()
        except Exception as exc:  # a broker that cannot restart is itself a finding
            table.add("restart after clean stop", f"FAILED: {_reason(exc)}")
        try:
            start_s, rss = bench_many_partitions(tmp / "many")
            table.add("restart, 1,000 partitions (1 record each; median of 3)",
                      f"{start_s * 1000:.0f} ms", f"<= 1 s (issue #6): {mark(start_s, 1)}")
            table.add("idle RSS with 1,000 partitions", f"{rss:.1f} MB", "<= 50 MB (issue #6)")
        except Exception as exc:
            table.add("restart, 1,000 partitions", f"FAILED: {_reason(exc)}")
        table.section("machine")
        table.add("load average (1 min) at end", f"{os.getloadavg()[0]:.2f}")
        table.print()
        if prof.exe:
            prof.summarise()
    finally:
        for b in STARTED:  # anything left running after a failure
            if b.proc is not None and b.proc.poll() is None:
                b.kill()
        if keep:
            print(f"log dirs kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs (3 s latency, "
                        "100k 1 KB and 500k 100 B records; full: 10 s, 500k and 2M)")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="record the broker with py-spy during each phase into DIR")
    parser.add_argument("--keep", action="store_true", help="keep the temporary log dirs")
    args = parser.parse_args()
    run(args.quick, args.profile, args.keep)


if __name__ == "__main__":
    main()
