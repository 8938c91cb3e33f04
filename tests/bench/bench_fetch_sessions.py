"""Fetch-path broker CPU with 1,000 mostly idle partitions, with and without fetch sessions
(KIP-227, issue #35 item 9).

One consumer is assigned every partition of a 1,000-partition topic while a producer trickles
records (`--rate` a second, to random partitions). Over a fixed interval the bench reads the
broker process's CPU seconds (utime + stime, /proc/<pid>/stat) and how many Fetch requests it
served (/metrics `pybroker_requests_total{api="Fetch"}`), so the figures are CPU seconds per
interval and CPU milliseconds per fetch. The cases, each on a fresh broker:

- `kafka-python/sessions`: kafka-python 3.x keeps a session (as Kafka's Java consumer):
  after the first full fetch it sends only changed partitions and hears only changed ones.
- `kafka-python/sessionless`: the same client with `enable_incremental_fetch_sessions=False`,
  i.e. every fetch names and answers all 1,000 partitions (what every fetch was before).
- `confluent-kafka`: librdkafka 2.x never opens a session: the before/after of this column
  only says the sessionless path costs nothing more.

`--source DIR` runs the broker from another checkout (e.g. the main branch, before sessions)
for a true before; the default runs this tree. The consumer runs in this process, so its own
CPU (kafka-python's, notably) is not counted. Benchmarks are scripts, not tests:

    .venv/bin/python -m tests.bench.bench_fetch_sessions [--seconds 20] [--source /work/main]
"""
from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 1_000
TOPIC = "idle"


@dataclass
class Figures:
    case: str
    source: str
    cpu_s: float
    fetches: int
    records: int

    @property
    def ms_per_fetch(self) -> float:
        return 1000 * self.cpu_s / self.fetches if self.fetches else float("nan")


class _Broker:
    """`python -m pybroker` from `source`, on ephemeral ports, with /metrics."""

    def __init__(self, source: Path, log_dir: Path) -> None:
        args = [sys.executable, "-m", "pybroker", "--defaults",
                "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                "--override", f"log.dirs={log_dir}",
                "--override", "http.listeners=http://127.0.0.1:0",
                "--override", "offsets.topic.num.partitions=1",
                # One broker process, whatever the machine's CPUs (the default, -1, is a node
                # of one broker a CPU): its CPU and fetches are what is compared.
                "--override", "num.cores=1"]
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, cwd=source,
                                     env=dict(os.environ, PYTHONPATH=str(source)))
        self.port = self.http_port = 0
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self.port:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("broker exited")
            if m := re.search(r"HTTP \(.*\) on http://\S*:(\d+)", line):
                self.http_port = int(m.group(1))
            if m := re.search(r"listening on [\d.]+:(\d+)", line):
                self.port = int(m.group(1))
        stderr = self.proc.stderr  # drained, so the broker never blocks on a full pipe
        threading.Thread(target=lambda: [None for _ in stderr], daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def fetches(self) -> int:
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/metrics",
                                      timeout=10).read().decode()
        m = re.search(r'^pybroker_requests_total\{api="Fetch"\} (\S+)$', text, re.M)
        return int(float(m.group(1))) if m else 0

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def _kafka_python(bootstrap: str, sessions: bool, min_bytes: int
                  ) -> tuple[Callable[[float], int], Callable[[], None]]:
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, fetch_min_bytes=min_bytes,
                             enable_incremental_fetch_sessions=sessions)
    consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])

    def poll(seconds: float) -> int:
        got, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            got += sum(len(v) for v in consumer.poll(100).values())
        return got
    return poll, consumer.close


def _confluent(bootstrap: str, sessions: bool, min_bytes: int
               ) -> tuple[Callable[[float], int], Callable[[], None]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                         "enable.auto.commit": False, "fetch.min.bytes": min_bytes})
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])

    def poll(seconds: float) -> int:
        got, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            got += len(consumer.consume(1000, 0.1))
        return got
    return poll, consumer.close


CASES: dict[str, tuple[Callable[[str, bool, int], tuple[Callable[[float], int],
                                                        Callable[[], None]]], bool]] = {
    "kafka-python/sessions": (_kafka_python, True),
    "kafka-python/sessionless": (_kafka_python, False),
    "confluent-kafka": (_confluent, False),
}


def run_case(case: str, source: Path, seconds: float, rate: float,
             min_bytes: int = 1) -> Figures:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    with tempfile.TemporaryDirectory() as tmp:
        broker = _Broker(source, Path(tmp))
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(120)
            make, sessions = CASES[case]
            poll, close = make(broker.bootstrap, sessions, min_bytes)
            stop = threading.Event()
            producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})

            def trickle() -> None:
                rng = random.Random(1)
                while not stop.wait(1 / rate):
                    producer.produce(TOPIC, b"x" * 100, partition=rng.randrange(PARTITIONS))
                    producer.poll(0)
            poll(5)  # warm up: metadata, offsets, the first full fetches
            thread = threading.Thread(target=trickle, daemon=True)
            thread.start()
            poll(2)
            cpu0, fetches0 = broker.cpu_s(), broker.fetches()
            records = poll(seconds)
            cpu1, fetches1 = broker.cpu_s(), broker.fetches()
            stop.set()
            thread.join()
            producer.flush(10)
            close()
            return Figures(case, source.name, cpu1 - cpu0, fetches1 - fetches0, records)
        finally:
            broker.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=20.0, help="records produced a second")
    parser.add_argument("--source", type=Path, action="append",
                        help="checkout(s) to run the broker from (default: this tree)")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--min-bytes", type=int, default=1,
                        help="the consumer's fetch min bytes: large, every fetch waits its "
                        "max wait (500 ms), so every case fetches at the same rate")
    args = parser.parse_args(argv)
    sources = [s.resolve() for s in args.source or [ROOT]]
    rows = [run_case(case, source, args.seconds, args.rate, args.min_bytes)
            for case in args.cases.split(",") for source in sources]
    print(f"\n{PARTITIONS} partitions, {args.rate:g} records/s, {args.seconds:g} s interval, "
          f"fetch min bytes {args.min_bytes}: broker CPU while one consumer fetches them all")
    print(f"{'case':28} {'broker':18} {'CPU s':>7} {'fetches':>8} {'CPU ms/fetch':>13} "
          f"{'records':>8}")
    for r in rows:
        print(f"{r.case:28} {r.source:18} {r.cpu_s:7.2f} {r.fetches:8d} "
              f"{r.ms_per_fetch:13.2f} {r.records:8d}")


if __name__ == "__main__":
    main()
