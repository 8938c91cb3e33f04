"""A node of num.cores=2 brokers run as an operator runs it (one `python -m pybroker`), and what
its tests read of it: the workers' pids and lines from the supervisor's log, and stock clients
(kafka-python) on its first port; for the standalone node's tests
(tests/integration/test_node_supervisor.py), the node on ZooKeeper's
(tests/cluster/test_node_cluster.py) and the Kafka tools' against a node."""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Callable

from pybroker.testing.broker import BrokerProcess

STARTED = re.compile(r"worker (\d+) \(broker (\d+)\) started, pid (\d+)")


def node(log_dir: Path, **overrides: str) -> BrokerProcess:
    # Kafka's keys, none one of BrokerProcess's own keywords (mypy holds the str values
    # against all of those, as in tests/cluster/brokers.py)
    broker = BrokerProcess(log_dir, num_cores="2", **overrides)  # type: ignore[arg-type]
    return broker.start(timeout=120)


def worker_pids(broker: BrokerProcess) -> dict[int, int]:
    """The pid of each worker's latest process, from the supervisor's log."""
    pids: dict[int, int] = {}
    for line in list(broker.stderr_lines):
        m = STARTED.search(line)
        if m:
            pids[int(m.group(1))] = int(m.group(3))
    return pids


def wait_until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def logged(broker: BrokerProcess, text: str) -> bool:
    return any(text in line for line in list(broker.stderr_lines))


def brokers_seen(bootstrap: str) -> tuple[list[int], set[str]]:
    """The broker ids and racks a client bootstrapping on `bootstrap` sees (DescribeCluster)."""
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        brokers = admin.describe_cluster()["brokers"]
    finally:
        admin.close()
    return sorted(b["broker_id"] for b in brokers), {b["rack"] for b in brokers}


def create_topic(bootstrap: str, name: str, partitions: int) -> dict[int, int]:
    """Create `name` and wait until every partition has a leader; partition -> leader."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])

        def leaders() -> dict[int, int] | None:
            found = {p["partition_index"]: p["leader_id"]
                     for p in admin.describe_topics([name])[0]["partitions"]}
            ok = len(found) == partitions and all(v >= 0 for v in found.values())
            return found if ok else None
        return wait_until(leaders, 30, f"leaders of {name}")
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, values: list[bytes], acks: int | str,
            partitions: int) -> list[bytes]:
    """Send each value, round-robin over the partitions; the values the node acknowledged."""
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, retries=5)
    try:
        futures = [(v, producer.send(topic, value=v, partition=i % partitions))
                   for i, v in enumerate(values)]
        producer.flush(30)
        acked = []
        for value, future in futures:
            try:
                future.get(0)
            except Exception:  # noqa: BLE001 - not acknowledged: not promised either
                continue
            acked.append(value)
        return acked
    finally:
        producer.close(5)


def read_all(bootstrap: str, topic: str, expected: int, timeout: float = 60) -> list[bytes]:
    from kafka import KafkaConsumer
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, group_id=None,
                             consumer_timeout_ms=2000)
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and time.monotonic() < deadline:
            values += [m.value for m in consumer]
        return values
    finally:
        consumer.close()
