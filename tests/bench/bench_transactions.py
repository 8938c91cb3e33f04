"""Transaction costs (issue #12), against a real broker in a subprocess (`python -m pybroker`,
so the client and the broker do not share a GIL).

Run: PYTHONPATH=. .venv/bin/python tests/bench/bench_transactions.py [--records 20000]

Figures, each the median of --runs runs:
- produce throughput, 1 KB records: idempotent (no transaction) against transactional with
  100 records per transaction (confluent-kafka; every commit waits for EndTxn, which is
  answered once the markers are written);
- commit latency: the time commit_transaction takes (EndTxn until the markers are written,
  plus the client's flush of nothing), p50 and p99 over the transactions of a run;
- consuming a log with no transactions in it: read_committed against read_uncommitted
  (librdkafka reads committed by default, so this must cost ~nothing).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.helpers import BrokerProcess  # noqa: E402
from tests.integration.raw import create_topic  # noqa: E402

VALUE = b"x" * 1024
PER_TXN = 100


def idempotent_run(bootstrap: str, n: int) -> float:
    from confluent_kafka import Producer

    topic = f"idem-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    producer.produce(topic, value=VALUE, partition=0)  # connected, producer id assigned
    assert producer.flush(30) == 0
    started = time.perf_counter()
    for i in range(n):
        producer.produce(topic, value=VALUE, partition=0)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    return n / (time.perf_counter() - started)


def transactional_run(bootstrap: str, n: int) -> tuple[float, list[float]]:
    from confluent_kafka import Producer

    topic = f"txn-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic,
                         "linger.ms": 5})
    producer.init_transactions(30)
    producer.begin_transaction()  # connected to the leader and the coordinator
    producer.produce(topic, value=VALUE, partition=0)
    producer.commit_transaction(30)
    commits = []
    started = time.perf_counter()
    for start in range(0, n, PER_TXN):
        producer.begin_transaction()
        for _ in range(min(PER_TXN, n - start)):
            producer.produce(topic, value=VALUE, partition=0)
        producer.flush(30)
        t0 = time.perf_counter()
        producer.commit_transaction(30)
        commits.append(time.perf_counter() - t0)
    return n / (time.perf_counter() - started), commits


def consume_run(bootstrap: str, topic: str, n: int, isolation: str) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"b-{uuid.uuid4()}",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    started = time.perf_counter()
    while got < n:
        got += len(consumer.consume(1000, 1.0))
    elapsed = time.perf_counter() - started
    consumer.close()
    return n / elapsed


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    n = args.records
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "logs").start()
        try:
            bootstrap = broker.bootstrap
            idem, txn, p50s, p99s = [], [], [], []
            for _ in range(args.runs):
                idem.append(idempotent_run(bootstrap, n))
                rate, commits = transactional_run(bootstrap, n)
                txn.append(rate)
                p50s.append(pct(commits, 0.5) * 1000)
                p99s.append(pct(commits, 0.99) * 1000)
            topic = f"plain-{uuid.uuid4().hex[:6]}"
            create_topic(bootstrap, topic, 1)
            from confluent_kafka import Producer
            producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
            for i in range(n):
                producer.produce(topic, value=VALUE, partition=0)
                if i % 1000 == 0:
                    producer.poll(0)
            assert producer.flush(60) == 0
            uncommitted: list[float] = []
            committed: list[float] = []
            consume_run(bootstrap, topic, n, "read_uncommitted")  # the page cache warmed
            for run in range(args.runs):  # alternating which goes first
                order = ["read_uncommitted", "read_committed"][::1 if run % 2 else -1]
                for isolation in order:
                    rate = consume_run(bootstrap, topic, n, isolation)
                    (committed if isolation == "read_committed" else uncommitted).append(rate)
        finally:
            broker.stop()
    med = statistics.median
    print(f"records: {n} x 1 KB, {args.runs} runs, medians")
    print(f"idempotent produce:            {med(idem):10.0f} records/s")
    print(f"transactional produce ({PER_TXN}/txn): {med(txn):10.0f} records/s "
          f"(ratio {med(txn) / med(idem):.2f})")
    print(f"commit latency:                p50 {med(p50s):.2f} ms, p99 {med(p99s):.2f} ms")
    print(f"consume read_uncommitted:      {med(uncommitted):10.0f} records/s")
    print(f"consume read_committed:        {med(committed):10.0f} records/s "
          f"(ratio {med(committed) / med(uncommitted):.2f})")


if __name__ == "__main__":
    main()
