"""What /metrics' counting costs the produce path, as a fraction of a Produce request's broker
CPU: the counting calls timed alone (timeit), and the broker's CPU per Produce request
measured on a broker subprocess (/proc) while confluent-kafka produces small batches (linger 0,
many requests, so the per-request cost shows rather than hides behind 1 MB batches).

Throughput runs with the counting on and off differ by less than the noise of a shared
machine; this prints the ratio of the two measured costs instead.

    python tests/bench/bench_metrics_cost.py [--records N]
"""
from __future__ import annotations

import argparse
import os
import time
import timeit
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from protocol.api_keys import ApiKey
from pybroker.stats.request_stats import RequestStats
from pybroker.testing import Broker


def counting_cost_us(partitions: int) -> float:
    """µs of counting for one Produce request touching `partitions` partitions."""
    stats = RequestStats()
    loops = 200_000

    def one() -> None:
        stats.request(ApiKey.PRODUCE, 0.0001, False)
        for _ in range(partitions):
            stats.produced("t", 1000, 10)
    return timeit.timeit(one, number=loops) / loops * 1e6


def _broker_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _produce_requests(http_port: int) -> int:
    body = urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=10).read()
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == "pybroker_requests_total" and sample.labels.get("api") == "Produce":
                return int(sample.value)
    return 0


def cpu_per_produce_us(records: int) -> tuple[float, int]:
    """The broker subprocess's CPU µs per Produce request while `records` 100 B records are
    produced (its CPU from /proc, its request count from its own /metrics)."""
    with Broker(process=True, http_listeners="http://127.0.0.1:0") as broker:
        broker.create_topic("cost", partitions=1)
        proc = broker._proc
        assert proc is not None and proc.proc is not None and proc.http_port is not None
        pid, http_port = proc.proc.pid, proc.http_port
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                             "acks": 1, "batch.num.messages": 10})
        before_n, before = _produce_requests(http_port), _broker_cpu_s(pid)
        for _ in range(records):
            while True:
                try:
                    producer.produce("cost", b"x" * 100)
                    break
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
        producer.flush(60)
        cpu, requests = _broker_cpu_s(pid) - before, _produce_requests(http_port) - before_n
    return cpu / max(requests, 1) * 1e6, requests


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=50_000)
    args = parser.parse_args()
    count = counting_cost_us(1)
    began = time.monotonic()
    per_request, requests = cpu_per_produce_us(args.records)
    print(f"counting per Produce request (1 partition): {count:.2f} µs (timeit)")
    print(f"broker CPU per Produce request: {per_request:.1f} µs over {requests} requests "
          f"({time.monotonic() - began:.1f} s)")
    print(f"counting / CPU per request: {count / per_request * 100:.2f} % (target < 3 %)")


if __name__ == "__main__":
    main()
