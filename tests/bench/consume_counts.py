"""What the A/B's librdkafka consume phase does, counted, for this tree and for a commit REF.

`python tests/bench/consume_counts.py [--ref REF] [--count N] [--rounds R] [--json FILE]`

Each turn (this tree, then REF, then this tree, ...) is `ab.run_turn`'s librdkafka part: a
fresh broker with the A/B's properties and a log dir on disk, `bench_produce` acks=1 and
acks=all (the order alternating by round, as the A/B's), then the acks=1 topic consumed from
the beginning twice:

1. `bench_consume` itself (the timed phase, its settings), while `perf stat` counts the
   system calls and context switches of the broker and of this process (the client:
   librdkafka's threads), the TCP data segments the client's socket received from the
   broker (`tcp:tcp_probe` on the client's side) and the client's socket reads that returned
   bytes (`sock:sock_recv_length`). These are counts, the same at any
   load; the timings printed beside them (MB/s, CPU) are not.
2. The same consumer with librdkafka's `protocol,fetch` debug log, which names each Fetch it
   sends (version, size) and each response (size, rtt) and how many records each gave; and,
   where the broker has /metrics, its own count of Fetch requests and the time it held them.

and the log's batch layout (the .log file walked by header): how many batches the produce
phase left, and of what sizes, which decides how many records a Fetch can carry (a response
holds whole batches, up to max.partition.fetch.bytes, 1 MB, librdkafka's default).

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
from tests.bench.bench_broker import TICKS, bench_consume, bench_produce, consumer  # noqa: E402
from tests.bench.phase_counts import ATTACH_S, _perf_counts  # noqa: E402
from tests.helpers import BrokerProcess  # noqa: E402

TOPIC = "ab-acks1"
BROKER_SYSCALLS = ("read", "readv", "recvfrom", "write", "writev", "sendto", "sendmsg",
                   "sendfile64", "pread64", "epoll_wait", "epoll_ctl", "futex")
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
    """`bench_consume` under perf: system calls of both sides, the client's socket reads and
    the TCP segments its socket received from the broker."""
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
    time.sleep(ATTACH_S)
    threads0 = _thread_cpu()
    threads1: dict[str, tuple[float, float]] = {}
    try:
        done = bench_consume(broker.bootstrap, pid, TOPIC, 1, ab.SIZE, count,
                             before_close=lambda: threads1.update(_thread_cpu()))
    finally:
        for tool in stats:
            tool.send_signal(2)
        outs = [s.communicate()[1] for s in stats]
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
            "records timed": done.records}


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


def turn(build: ab.Build, work: Path, count: int, number: int) -> dict[str, Any]:
    log_dir = work / f"{build.label}-{number}"
    broker = BrokerProcess(log_dir, config=str(work / "server.properties"),
                           python=build.python, source=build.tree).start(timeout=120)
    try:
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
        shutil.rmtree(log_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", help="a commit to run beside this tree")
    parser.add_argument("--count", type=int, default=ab.DEFAULT_COUNT)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write every turn's counts here")
    args = parser.parse_args(argv)
    if shutil.which("perf") is None:
        print("consume_counts: needs perf (linux-perf)", file=sys.stderr)
        return 2
    builds = [ab.this_build()] + ([ab.ref_build(args.ref)] if args.ref else [])
    results = []
    with tempfile.TemporaryDirectory(prefix="pybroker-consume-counts-") as tmp:
        work = Path(tmp)
        (work / "server.properties").write_text(ab.PROPERTIES)
        for number in range(args.rounds):
            for build in builds if number % 2 == 0 else builds[::-1]:
                result = turn(build, work, args.count, number)
                print(json.dumps(result), flush=True)
                results.append(result)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
