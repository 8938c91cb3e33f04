"""Exactly-once under faults (issue #12): a consume-transform-produce processor killed with
kill -9 midway and restarted with the same transactional id; a broker killed with kill -9
while transactions are open or being committed. Processes are real: the processor is a
confluent-kafka program in a subprocess, the broker `python -m pybroker` in another.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

from tests.helpers import BrokerProcess
from tests.integration.raw import create_topic
from tests.integration.txn_clients import (
    READ_COMMITTED, READ_UNCOMMITTED, ck_producer, ck_read, ck_watermarks,
)

PROCESSOR = textwrap.dedent('''
    """Read `src` under read_committed, write each value upper-cased to `sink`, ten records
    and their input offsets per transaction (Kafka's exactly-once loop)."""
    import sys, time
    from confluent_kafka import Consumer, Producer, TopicPartition

    bootstrap, src, sink, group, txn_id, total = sys.argv[1:]
    total = int(total)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "linger.ms": 1})
    producer.init_transactions(30)  # fences a previous incarnation, aborts its transaction
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest"})
    committed = consumer.committed([TopicPartition(src, 0)], timeout=30)[0].offset
    position = max(committed, 0)
    consumer.assign([TopicPartition(src, 0, position)])
    while position < total:
        producer.begin_transaction()
        taken = 0
        while taken < 10 and position < total:
            msg = consumer.poll(5)
            if msg is None or msg.error():
                continue
            producer.produce(sink, value=msg.value().upper(), partition=0)
            position = msg.offset() + 1
            taken += 1
        producer.send_offsets_to_transaction([TopicPartition(src, 0, position)],
                                             consumer.consumer_group_metadata(), 30)
        producer.flush(30)
        time.sleep(0.02)  # leave room for a kill between produce and commit
        producer.commit_transaction(30)
        print("committed", position, flush=True)
    consumer.close()
    print("done", flush=True)
''')


def _run_processor(tmp_path: Path, bootstrap: str, src: str, sink: str, group: str,
                   txn_id: str, total: int) -> subprocess.Popen:
    script = tmp_path / "processor.py"
    script.write_text(PROCESSOR)
    return subprocess.Popen([sys.executable, str(script), bootstrap, src, sink, group, txn_id,
                             str(total)], stdout=subprocess.PIPE, text=True)


def test_processor_killed_midway_outputs_every_input_exactly_once(broker, tmp_path) -> None:
    from confluent_kafka import Producer

    total = 300
    src, sink = f"eos-src-{uuid.uuid4().hex[:6]}", f"eos-sink-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, src, 1)
    create_topic(broker.bootstrap, sink, 1)
    plain = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    inputs = [b"value-%04d" % i for i in range(total)]
    for value in inputs:
        plain.produce(src, value=value, partition=0)
    assert plain.flush(20) == 0
    args = (broker.bootstrap, src, sink, "eos-group", "eos-processor", total)
    kills = 0
    for attempt in range(6):
        proc = _run_processor(tmp_path, *args)
        assert proc.stdout is not None
        commits = 0
        killed = False
        for line in proc.stdout:
            if line.startswith("done"):
                break
            commits += 1
            if attempt < 2 and commits == 4 + attempt * 3:
                os.kill(proc.pid, signal.SIGKILL)  # mid-transaction, after some commits
                killed = True
                kills += 1
                break
        proc.wait(30)
        if not killed:
            assert proc.returncode == 0
            break
    assert kills == 2
    out = ck_read(broker.bootstrap, sink, READ_COMMITTED)[0]
    assert out == [v.upper() for v in inputs]  # each once, in order
    # The zombies' aborted writes are in the log: read_uncommitted shows duplicates.
    assert len(ck_read(broker.bootstrap, sink, READ_UNCOMMITTED)[0]) >= total


def test_broker_killed_with_transactions_open_and_committing(tmp_path) -> None:
    """kill -9 while one transaction is open and others commit: after the restart each
    transaction is all or nothing, the open one is aborted by its successor, and nothing a
    read_committed consumer saw before the crash is gone after it."""
    from confluent_kafka import Producer

    broker = BrokerProcess(tmp_path / "logs").start()
    port = broker.port
    topic = f"crash-{uuid.uuid4().hex[:6]}"
    try:
        create_topic(broker.bootstrap, topic, 1)
        committing = ck_producer(broker.bootstrap, "crash-committing")
        committed: list[bytes] = []
        for n in range(4):
            committing.begin_transaction()
            values = [b"t%d-%d" % (n, i) for i in range(5)]
            for value in values:
                committing.produce(topic, value=value, partition=0)
            committing.commit_transaction(30)
            committed += values
        seen_before = ck_read(broker.bootstrap, topic, READ_COMMITTED)[0]
        assert seen_before == committed
        opened = ck_producer(broker.bootstrap, "crash-open")
        opened.begin_transaction()
        for i in range(3):
            opened.produce(topic, value=b"open-%d" % i, partition=0)
        opened.flush(10)
        # The last transaction is being committed as the broker dies.
        committing.begin_transaction()
        last = [b"last-%d" % i for i in range(5)]
        for value in last:
            committing.produce(topic, value=value, partition=0)
        committing.flush(10)
        thread = threading.Thread(target=lambda: _try(committing.commit_transaction, 5))
        thread.start()
        time.sleep(0.005)
        broker.kill()
        thread.join(30)
        broker = BrokerProcess(tmp_path / "logs", port=port).start()
        # The open transaction holds read_committed readers at its first offset.
        assert ck_read(broker.bootstrap, topic, READ_COMMITTED)[0] == seen_before
        _, lso = ck_watermarks(broker.bootstrap, topic, READ_COMMITTED)
        assert lso == len(committed) + 4  # the data and the four markers
        # New incarnations resolve both: the committing one completes or aborts the last
        # transaction (as its coordinator decided before the crash), the open one is aborted.
        ck_producer(broker.bootstrap, "crash-committing")
        successor = ck_producer(broker.bootstrap, "crash-open")
        successor.begin_transaction()
        successor.produce(topic, value=b"successor", partition=0)
        successor.commit_transaction(30)
        final = ck_read(broker.bootstrap, topic, READ_COMMITTED)[0]
        assert final in (committed + last + [b"successor"], committed + [b"successor"]), final
        plain = Producer({"bootstrap.servers": broker.bootstrap})
        plain.produce(topic, value=b"plain", partition=0)
        assert plain.flush(10) == 0
    finally:
        broker.stop()


def _try(fn, *args) -> None:  # type: ignore[no-untyped-def]
    try:
        fn(*args)
    except Exception:
        pass
