"""What the A/B's librdkafka consume phase does, counted, for this tree and for a commit REF.

`python tests/bench/consume_counts.py [--ref REF] [--count N] [--rounds R] [--shared-log]
[--warmup N] [--ref-first] [--steady-allocator] [--property KEY=VALUE] [--json FILE]`

Each turn (this tree, then REF; the order swaps every round) is `ab.run_turn`'s librdkafka
part: a fresh broker with the A/B's properties and a log dir on disk, `bench_produce` acks=1
and acks=all (the order alternating by round, as the A/B's), then the acks=1 topic consumed
from the beginning twice:

1. `bench_consume` itself (the timed phase, its settings), while `perf stat` counts the
   system calls, context switches and page faults of the broker and of this process (the
   client: librdkafka's threads), the TCP data segments the client's socket received from
   the broker (`tcp:tcp_probe` on the client's side) and the client's socket reads that
   returned bytes (`sock:sock_recv_length`); `perf record` times the broker's answer to each
   Fetch (its read of the request, its first and its last write of the answer); the
   client's threads' user and system time are read from /proc. The counts are the same at
   any load; the times printed beside them (MB/s, CPU, ms) are not.
2. The same consumer with librdkafka's `protocol,fetch` debug log, which names each Fetch it
   sends (version, size) and each response (size, rtt) and how many records each gave; and,
   where the broker has /metrics, its own count of Fetch requests and the time it held them.

and the log's batch layout (the .log file walked by header): how many batches the produce
phase left, and of what sizes, which decides how many records a Fetch can carry (a response
holds whole batches, up to max.partition.fetch.bytes, 1 MB, librdkafka's default).

`--shared-log`: the records are produced once, by this tree's broker, and every turn's
broker (of either build) serves that same log dir, so both read identical batches; the
layout of a produced log changes from turn to turn with the producer's timing.
`--warmup N`: first a turn of each build with N records, as the A/B's warm-up.
`--steady-allocator`: this process's malloc keeps its memory, as the A/B's client now does
(`bench_broker.steady_client_allocator`).
`--property`: a line added to both brokers' properties (`socket.send.buffer.bytes=...`).

Why (issue #28 item 3, docs/PERFORMANCE.md "Consume against 706cf02"): the A/B's consume
MB/s read 0.87-0.96x 706cf02's while the broker's CPU per record was the same, on a machine
where timings are noise; counts of what went over the socket say whether the broker's answers
differ, and how.
"""
from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from confluent_kafka import OFFSET_BEGINNING, TopicPartition  # noqa: E402

from tests.bench import ab  # noqa: E402
from tests.bench.bench_broker import (  # noqa: E402
    TICKS, bench_consume, bench_produce, consumer, steady_client_allocator,
)
from tests.bench.phase_counts import ATTACH_S, _perf_counts  # noqa: E402
from tests.helpers import BrokerProcess  # noqa: E402

TOPIC = "ab-acks1"
BROKER_SYSCALLS = ("read", "readv", "recvfrom", "write", "writev", "sendto", "sendmsg",
                   "sendfile64", "pread64", "setsockopt", "epoll_wait", "epoll_ctl", "futex")
CLIENT_SYSCALLS = ("recvmsg", "recvfrom", "read", "sendmsg", "sendto", "write", "writev",
                   "poll", "ppoll", "futex")
BATCH_HEADER = struct.Struct(">qi")  # base offset, batch length (the bytes after it)
FETCH_METRICS = ('pybroker_requests_total{api="Fetch"}',
                 'pybroker_request_duration_seconds_sum{api="Fetch"}')
SENT = re.compile(r"Sent FetchRequest \(v(\d+), (\d+) bytes")
RECEIVED = re.compile(r"Received FetchResponse \(v(\d+), (\d+) bytes, CorrId \d+, rtt ([\d.]+)ms")
ENQUEUED = re.compile(r"Enqueue (\d+) message\(s\) \((\d+) bytes")


def batch_layout(partition_dir: Path) -> dict[str, Any]:
    """The batches of a partition's .log files: how many, and how many of each size class."""
    sizes = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        at = 0
        while at + BATCH_HEADER.size <= len(data):
            _, length = BATCH_HEADER.unpack_from(data, at)
            if length <= 0:
                break
            sizes.append(BATCH_HEADER.size + length)
            at += BATCH_HEADER.size + length
    return {"batches": len(sizes), "mean KB": round(statistics.fmean(sizes) / 1024) if sizes
            else 0, "< 64 KB": sum(s < 65536 for s in sizes),
            "64-512 KB": sum(65536 <= s < 524288 for s in sizes),
            ">= 512 KB": sum(s >= 524288 for s in sizes)}


def _metrics(port: int | None) -> dict[str, float]:
    if port is None:
        return {}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    out = {}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name in FETCH_METRICS:
            out[name] = float(value)
    return out


def counted_consume(broker: BrokerProcess, count: int) -> dict[str, Any]:
    """`bench_consume` under perf: system calls, context switches and page faults of both
    sides, the client's socket reads, the TCP segments its socket received from the broker,
    the broker's time to answer each Fetch, and the client's threads' CPU."""
    assert broker.proc is not None
    pid = broker.proc.pid
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    me = str(os.getpid())
    stats = [subprocess.Popen(
        ["perf", "stat", "-x", ",", "-e", ",".join(
            ("context-switches", "page-faults",
             *(f"syscalls:sys_enter_{s}" for s in names))), "-p", target],
        stderr=subprocess.PIPE, text=True)
        for target, names in ((str(pid), BROKER_SYSCALLS), (me, CLIENT_SYSCALLS))]
    # Counted system-wide, filtered: data segments arriving at the client's socket (its
    # destination port is the broker's), and the client's socket reads that returned bytes.
    stats.append(subprocess.Popen(
        ["perf", "stat", "-x", ",", "-a", "-e", "tcp:tcp_probe", "--filter",
         f"dport == {port} && data_len > 0"], stderr=subprocess.PIPE, text=True))
    stats.append(subprocess.Popen(
        ["perf", "stat", "-x", ",", "-p", me, "-e", "sock:sock_recv_length", "--filter",
         "ret > 0"], stderr=subprocess.PIPE, text=True))
    # The broker's answer to each Fetch in time: its read of the request, its first write of
    # the answer (the header) and its last (the 3-byte trailer of a v12 answer).
    timeline = Path(tempfile.mkdtemp(prefix="consume-counts-")) / "broker.perf"
    record = subprocess.Popen(
        ["perf", "record", "-q", "-p", str(pid), "-o", str(timeline),
         "-e", "syscalls:sys_exit_read", "--filter", "ret > 0",
         "-e", "syscalls:sys_enter_writev", "-e", "syscalls:sys_exit_write"],
        stderr=subprocess.DEVNULL)
    time.sleep(ATTACH_S)
    threads0 = _thread_cpu()
    threads1: dict[str, tuple[float, float]] = {}
    try:
        done = bench_consume(broker.bootstrap, pid, TOPIC, 1, ab.SIZE, count,
                             before_close=lambda: threads1.update(_thread_cpu()))
    finally:
        tools: list[subprocess.Popen[Any]] = [record, *stats]
        for tool in tools:
            tool.send_signal(2)
        record.wait()
        outs = [s.communicate()[1] for s in stats]
    answered = _answer_times(timeline)
    shutil.rmtree(timeline.parent, ignore_errors=True)
    millions = done.records / 1e6
    threads = {name: [round((cpu - threads0.get(name, (0, 0))[i]) / millions, 3)
                      for i, cpu in enumerate(pair)]
               for name, pair in threads1.items()}
    return {"MB/s": round(done.mb_s), "broker CPU-s/M": round(done.cpu_per_million, 3),
            "client CPU-s/M": round(done.client_cpu / millions, 3),
            "client threads user, system s/M": {
                k: v for k, v in threads.items() if v[0] + v[1] >= 0.005},
            "broker": {k: round(v) for k, v in _perf_counts(outs[0]).items() if v},
            "client": {k: round(v) for k, v in _perf_counts(outs[1]).items() if v},
            "segments received": round(_perf_counts(outs[2]).get("tcp_probe", 0)),
            "client socket reads": round(_perf_counts(outs[3]).get("sock_recv_length", 0)),
            "records timed": done.records, **answered}


def _answer_times(trace: Path) -> dict[str, Any]:
    """Per request read by the broker: ms until its answer's first write, and until its
    last write (a write of 3 bytes, the v12 answer's trailing tagged fields), median and
    90th percentile."""
    text = subprocess.run(["perf", "script", "-i", str(trace), "-F", "time,event,trace"],
                          capture_output=True, text=True).stdout
    start: float | None = None
    first: float | None = None
    to_first, to_last = [], []
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        at = float(fields[0].rstrip(":"))
        if "sys_exit_read" in line:
            start, first = at, None
        elif start is not None and "sys_enter_writev" in line and first is None:
            first = at
            to_first.append((at - start) * 1000)
        elif start is not None and "sys_exit_write" in line and line.rstrip().endswith("0x3"):
            to_last.append((at - start) * 1000)
            start = None

    def spread(values: list[float]) -> list[float]:
        values = sorted(values)
        return [round(statistics.median(values), 3),
                round(values[int(len(values) * 0.9)], 3)] if values else []
    return {"answers timed": len(to_last), "ms to first write (median, p90)": spread(to_first),
            "ms to last write (median, p90)": spread(to_last)}


def _thread_cpu() -> dict[str, tuple[float, float]]:
    """User and system seconds of this process's threads by name (librdkafka names its own:
    rdk:main, rdk:broker0, ...), from /proc's clock ticks; threads of one name summed.
    Read before the consumer closes: its threads' time leaves these sums when they exit."""
    out: dict[str, tuple[float, float]] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        user, system = out.get(name, (0.0, 0.0))
        out[name] = (user + int(fields[11]) / TICKS, system + int(fields[12]) / TICKS)
    return out


def described_consume(broker: BrokerProcess, count: int) -> dict[str, Any]:
    """The same consume with librdkafka's debug log: each Fetch sent and answered."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger(f"consume_counts.{time.monotonic_ns()}")
    logger.addHandler(Collect())
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    before = _metrics(broker.http_port)
    c = consumer(broker.bootstrap, **{"fetch.queue.backoff.ms": 1, "debug": "protocol,fetch",
                                      "log_level": 7, "logger": logger})
    c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    got, last = 0, time.monotonic()
    while got < count and time.monotonic() - last < 30:
        msgs = c.consume(min(10_000, count - got), 0.5)
        if msgs:
            got += sum(1 for m in msgs if not m.error())
            last = time.monotonic()
    c.close()
    after = _metrics(broker.http_port)
    sent: collections.Counter[str] = collections.Counter()
    sizes, rtts, records = [], [], []
    for line in lines:
        if (m := SENT.search(line)):
            sent[f"v{m.group(1)}, {m.group(2)} B"] += 1
        elif (m := RECEIVED.search(line)):
            sizes.append(int(m.group(2)))
            rtts.append(float(m.group(3)))
        elif (m := ENQUEUED.search(line)):
            records.append(int(m.group(1)))
    out: dict[str, Any] = {
        "records": got, "Fetch requests sent": dict(sent), "responses": len(sizes),
        "response KB mean": round(statistics.fmean(sizes) / 1024) if sizes else 0,
        "responses < 512 KB": sum(s < 524288 for s in sizes),
        "records per response": round(got / len(sizes)) if sizes else 0,
        "record sets enqueued": len(records),
        "rtt ms median / p90 / max": [round(statistics.median(rtts), 2),
                                      round(sorted(rtts)[int(len(rtts) * 0.9)], 2),
                                      round(max(rtts), 2)] if rtts else []}
    if before and after:
        n = after[FETCH_METRICS[0]] - before.get(FETCH_METRICS[0], 0)
        held = after[FETCH_METRICS[1]] - before.get(FETCH_METRICS[1], 0)
        out["broker: Fetch requests"] = int(n)
        out["broker: ms per Fetch (mean)"] = round(held / n * 1000, 3) if n else None
    return out


def turn(build: ab.Build, work: Path, count: int, number: int,
         shared: Path | None = None) -> dict[str, Any]:
    """One build's turn: its own broker and log, produced as the A/B's turn produces; or,
    with `shared`, a broker on that log dir, which holds the records already (written once,
    by `produce_shared`), so that every turn reads the same batches."""
    log_dir = shared or work / f"{build.label}-{number}"
    broker = BrokerProcess(log_dir, config=str(work / "server.properties"),
                           python=build.python, source=build.tree).start(timeout=120)
    try:
        if shared is not None:
            return {"build": build.label, "turn": number,
                    "layout": batch_layout(broker.partition_dir(f"{TOPIC}-0")),
                    "counted": counted_consume(broker, count),
                    "described": described_consume(broker, count)}
        assert broker.proc is not None
        phases: list[tuple[str, str | int]] = [(TOPIC, 1), ("ab-acksall", "all")]
        if number % 2:
            phases.reverse()
        for topic, acks in phases:
            bench_produce(broker.bootstrap, broker.proc.pid, topic, 1, ab.SIZE, count, acks=acks)
        out: dict[str, Any] = {"build": build.label, "turn": number}
        out["layout"] = batch_layout(broker.partition_dir(f"{TOPIC}-0"))
        out["counted"] = counted_consume(broker, count)
        out["described"] = described_consume(broker, count)
        return out
    finally:
        broker.stop()
        if shared is None:
            shutil.rmtree(log_dir, ignore_errors=True)


def produce_shared(build: ab.Build, work: Path, count: int) -> Path:
    """A log dir holding TOPIC's `count` records, produced by `build` as a turn does with
    acks=1 first; the broker is stopped and the dir kept."""
    log_dir = work / "shared"
    broker = BrokerProcess(log_dir, config=str(work / "server.properties"),
                           python=build.python, source=build.tree).start(timeout=120)
    try:
        assert broker.proc is not None
        bench_produce(broker.bootstrap, broker.proc.pid, TOPIC, 1, ab.SIZE, count, acks=1)
    finally:
        broker.stop()
    return log_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", help="a commit to run beside this tree")
    parser.add_argument("--count", type=int, default=ab.DEFAULT_COUNT)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--ref-first", action="store_true",
                        help="REF takes the first turn (and the odd rounds' first)")
    parser.add_argument("--warmup", type=int, default=0, metavar="N",
                        help="first a turn of each build with N records, as the A/B's "
                             "warm-up (ab.WARMUP_COUNT), printed but not in --json")
    parser.add_argument("--shared-log", action="store_true",
                        help="produce once (this tree's broker), then every turn's broker "
                             "serves that same log: the builds read identical batches")
    parser.add_argument("--steady-allocator", action="store_true",
                        help="this process's malloc keeps its memory, as the A/B's does "
                             "(bench_broker.steady_client_allocator)")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="a line added to both brokers' properties (the A/B's)")
    parser.add_argument("--json", type=Path, help="also write every turn's counts here")
    args = parser.parse_args(argv)
    if shutil.which("perf") is None:
        print("consume_counts: needs perf (linux-perf)", file=sys.stderr)
        return 2
    if args.steady_allocator and not steady_client_allocator():
        print("consume_counts: no glibc mallopt here", file=sys.stderr)
        return 2
    builds = [ab.this_build()] + ([ab.ref_build(args.ref)] if args.ref else [])
    if args.ref_first:
        builds.reverse()
    results = []
    with tempfile.TemporaryDirectory(prefix="pybroker-consume-counts-") as tmp:
        work = Path(tmp)
        (work / "server.properties").write_text(
            ab.PROPERTIES + "".join(f"{line}\n" for line in args.property))
        shared = produce_shared(builds[0], work, args.count) if args.shared_log else None
        for build in builds if args.warmup else ():
            print(json.dumps({"warm-up": turn(build, work, args.warmup, -1, shared)}),
                  flush=True)
        for number in range(args.rounds):
            for build in builds if number % 2 == 0 else builds[::-1]:
                result = turn(build, work, args.count, number, shared)
                print(json.dumps(result), flush=True)
                results.append(result)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
