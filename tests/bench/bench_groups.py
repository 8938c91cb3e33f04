"""Consumer-group speed (issue #4, item 5), against a real broker in this process.

Run: PYTHONPATH=. .venv/bin/python tests/bench/bench_groups.py

Three figures, each the median of a few runs:
- subscribe -> first record: one confluent-kafka consumer, new group, topic already filled;
- settle time: two members are consuming, a third subscribes; from that subscribe until all
  three hold their new assignment (the rebalance: heartbeats tell the others to rejoin, the
  joins complete, the leader assigns, everyone syncs);
- commit throughput: one consumer committing synchronously after every record (each commit
  is a round trip and an append to __consumer_offsets before the answer).

The broker runs with group.initial.rebalance.delay.ms=0 (as config/standalone/server.properties ships;
Kafka's default of 3000 would add 3 s to the first figure) and heartbeats every 100 ms.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.helpers import broker_in_thread  # noqa: E402
from tests.integration.raw import create_topic  # noqa: E402

HEARTBEAT_MS = 100


def _produce(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, value=b"v%d" % i, partition=i % partitions)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def _consumer(bootstrap: str, group: str, **extra: Any) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": HEARTBEAT_MS,
                     "fetch.wait.max.ms": 10, **extra})


def subscribe_to_first_record(bootstrap: str, run: int) -> float:
    consumer = _consumer(bootstrap, f"first-{run}")
    start = time.perf_counter()
    consumer.subscribe(["filled"])
    msg = None
    while msg is None or msg.error():
        msg = consumer.poll(0.01)
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


class _Member(threading.Thread):
    """A consumer polling in its own thread, recording when it was last assigned."""

    def __init__(self, bootstrap: str, group: str) -> None:
        super().__init__(daemon=True)
        self.consumer = _consumer(bootstrap, group)
        self.assigned_at = 0.0
        self.partitions: set[int] = set()
        self.subscribed_at = 0.0
        self.running = True

    def _on_assign(self, _c: Any, parts: list) -> None:
        self.partitions = {p.partition for p in parts}
        self.assigned_at = time.perf_counter()

    def _on_revoke(self, _c: Any, parts: list) -> None:
        self.partitions = set()

    def run(self) -> None:
        self.subscribed_at = time.perf_counter()
        self.consumer.subscribe(["settle"], on_assign=self._on_assign,
                                on_revoke=self._on_revoke)
        while self.running:
            self.consumer.poll(0.01)
        self.consumer.close()


def _wait(predicate: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("group did not settle")
        time.sleep(0.001)


def settle_after_last_join(bootstrap: str, run: int) -> float:
    group = f"settle-{run}"
    first = [_Member(bootstrap, group) for _ in range(2)]
    for m in first:
        m.start()
    _wait(lambda: sorted(len(m.partitions) for m in first) == [3, 3])
    last = _Member(bootstrap, group)
    last.start()
    members = first + [last]
    _wait(lambda: [len(m.partitions) for m in members] == [2, 2, 2])
    _wait(lambda: all(m.assigned_at > last.subscribed_at for m in members))
    elapsed = max(m.assigned_at for m in members) - last.subscribed_at
    for m in members:
        m.running = False
    for m in members:
        m.join(10)
    return elapsed


def commit_per_record(bootstrap: str, run: int, n: int = 2000) -> float:
    consumer = _consumer(bootstrap, f"commit-{run}")
    consumer.subscribe(["filled"])
    msg = None
    while msg is None or msg.error():
        msg = consumer.poll(0.1)
    start = time.perf_counter()
    count = 0
    while count < n:
        if msg is not None and not msg.error():
            consumer.commit(msg, asynchronous=False)
            count += 1
        msg = consumer.poll(0.1)
    elapsed = time.perf_counter() - start
    consumer.close()
    return n / elapsed


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        with broker_in_thread(Path(tmp) / "logs") as info:
            bootstrap = info.bootstrap
            create_topic(bootstrap, "filled", 1)
            create_topic(bootstrap, "settle", 6)
            _produce(bootstrap, "filled", 20_000, 1)
            subscribe_to_first_record(bootstrap, -1)  # warm up: creates __consumer_offsets
            firsts = [subscribe_to_first_record(bootstrap, i) for i in range(5)]
            print(f"subscribe -> first record (confluent-kafka, 1 consumer): "
                  f"median {statistics.median(firsts) * 1000:.0f} ms "
                  f"(min {min(firsts) * 1000:.0f}, max {max(firsts) * 1000:.0f})")
            settles = [settle_after_last_join(bootstrap, i) for i in range(3)]
            print(f"group of 3 settles after the last member subscribes: "
                  f"median {statistics.median(settles) * 1000:.0f} ms "
                  f"(min {min(settles) * 1000:.0f}, max {max(settles) * 1000:.0f}; "
                  f"heartbeat.interval.ms={HEARTBEAT_MS})")
            rates = [commit_per_record(bootstrap, i) for i in range(3)]
            print(f"commit after every record (confluent-kafka, synchronous): "
                  f"median {statistics.median(rates):.0f} commits/s "
                  f"(min {min(rates):.0f}, max {max(rates):.0f})")


if __name__ == "__main__":
    main()
