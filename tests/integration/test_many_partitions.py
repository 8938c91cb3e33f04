"""Many partitions on one broker with few descriptors (issue #19): kill -9 and come back.

The broker runs as a subprocess whose open-file limit (soft and hard: it raises soft to hard)
is far below the number of partitions it hosts, so holding a file per partition, or three
per partition while recovering, fails with EMFILE. It takes a record on every partition from
a stock client with acks=all, is killed with SIGKILL, must start again, and must serve every
acknowledged record. PYBROKER_TEST_PARTITIONS changes the count (5,000 by default: ~35 s
here, most of it creating the partitions' files).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.helpers import BrokerProcess

PARTITIONS = int(os.environ.get("PYBROKER_TEST_PARTITIONS", "5000"))
OPEN_FILES = 1024
# One broker process (num.cores=1): the test is about one process's descriptors and its
# recovery line ("recovered 5000 log(s)"); a node splits the partitions, the lines and the
# descriptors over its workers.
ONE_BROKER = {"num_cores": "1"}


def _segment_files_open(pid: int) -> int:
    """Descriptors of the process that point at segment or index files."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.endswith((".log", ".index", ".timeindex")):
            count += 1
    return count


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)],
                        operation_timeout=60)[topic].result(60)


def _produce_one_each(bootstrap: str, topic: str, partitions: int) -> dict[int, bytes]:
    """One record per partition with acks=all; the ones acknowledged, by partition."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                         "batch.num.messages": 100_000, "queue.buffering.max.messages":
                         max(100_000, 2 * partitions)})
    acked: dict[int, bytes] = {}

    def on_delivery(err, msg):  # type: ignore[no-untyped-def]
        if err is None:
            acked[msg.partition()] = msg.value()

    for p in range(partitions):
        producer.produce(topic, value=b"record-of-%d" % p, partition=p, on_delivery=on_delivery)
    assert producer.flush(120) == 0
    return acked


def _read_all(bootstrap: str, topic: str, partitions: int, expected: int,
              timeout: float = 120) -> dict[int, list[bytes]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "many-partitions",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    got: dict[int, list[bytes]] = {}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        seen = 0
        while seen < expected and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                if msg.error() is None:
                    got.setdefault(msg.partition(), []).append(msg.value())
                    seen += 1
    finally:
        consumer.close()
    return got


def test_kill_9_with_more_partitions_than_descriptors(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    broker = BrokerProcess(log_dir, open_files=OPEN_FILES, **ONE_BROKER).start(timeout=60)
    try:
        _create_topic(broker.bootstrap, "wide", PARTITIONS)
        acked = _produce_one_each(broker.bootstrap, "wide", PARTITIONS)
        assert len(acked) == PARTITIONS
        assert broker.proc is not None
        # Segment files are held through a cache sized from the limit, not one per partition.
        assert _segment_files_open(broker.proc.pid) <= OPEN_FILES // 2
        broker.kill()

        t0 = time.monotonic()
        broker = BrokerProcess(log_dir, port=broker.port, open_files=OPEN_FILES,
                               **ONE_BROKER).start(timeout=120)
        recovered_in = time.monotonic() - t0
        log_text = "".join(broker.stderr_lines)
        assert f"no clean shutdown marker; recovered {PARTITIONS} log(s)" in log_text
        assert "open-file limit (RLIMIT_NOFILE): soft 1024, hard 1024" in log_text
        assert "Too many open files" not in log_text
        got = _read_all(broker.bootstrap, "wide", PARTITIONS, len(acked))
        missing = [p for p, value in acked.items() if got.get(p) != [value]]
        assert not missing, f"{len(missing)} acknowledged record(s) lost, e.g. {missing[:5]}"
        assert _segment_files_open(broker.proc.pid) <= OPEN_FILES // 2
        print(f"{PARTITIONS} partitions: start after kill -9 took {recovered_in:.1f} s")
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.kill()


def test_too_low_open_file_limit_is_refused_in_one_line(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "logs", open_files=64)
    with pytest.raises(RuntimeError, match="exited early"):
        broker.start(timeout=30)
    assert broker.proc is not None
    assert broker.proc.wait(10) == 1
    lines = [line for line in broker.stderr_lines if line.startswith("pybroker-server:")]
    assert len(lines) == 1, broker.stderr_lines
    assert "open-file limit (RLIMIT_NOFILE) is 64" in lines[0]
    assert "ulimit -n 128" in lines[0]
