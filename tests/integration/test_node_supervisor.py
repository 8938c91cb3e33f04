"""A node of num.cores=2 brokers (pybroker/node/supervisor.py) as an operator runs it: one
`python -m pybroker` with no ZooKeeper (the standalone default: the supervisor serves the node's
metadata store), and stock clients (kafka-python) on its first port. Signals, kill -9 of the
node and of one worker, repeated deaths. The node with ZooKeeper: tests/cluster/
test_node_cluster.py."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pybroker.testing.broker import BrokerProcess, process_running as running
from tests.helpers import ROOT
from tests.integration.node_process import (
    STARTED, brokers_seen, create_topic, logged, node, produce, read_all, wait_until, worker_pids,
)


def test_a_client_on_the_first_port_sees_every_broker_and_uses_them_all(
        tmp_path: Path) -> None:
    broker = node(tmp_path / "logs")
    try:
        assert brokers_seen(broker.bootstrap) == ([0, 1000], {socket.gethostname()})
        leaders = create_topic(broker.bootstrap, "spread", 4)
        assert set(leaders.values()) == {0, 1000}  # leaders spread over the node's brokers
        values = [b"v%d" % i for i in range(200)]
        assert produce(broker.bootstrap, "spread", values, "all", 4) == values
        assert sorted(read_all(broker.bootstrap, "spread", 200)) == sorted(values)
        # One line per worker at start: its id, listeners and dirs.
        assert logged(broker, f"worker 1: broker 1000, listeners PLAINTEXT://127.0.0.1:"
                              f"{broker.port + 1}, log.dirs {tmp_path / 'logs'}-1")
    finally:
        broker.kill()


def test_sigterm_stops_every_worker_cleanly_and_exits_0(tmp_path: Path) -> None:
    broker = node(tmp_path / "logs", some_unknown_key="1")
    # The node's config is reported once (by the supervisor), not once more per worker.
    assert len([ln for ln in broker.stderr_lines
                if "Unknown configuration 'some.unknown.key'" in ln]) == 1
    pids = worker_pids(broker)
    assert len(pids) == 2 and all(running(p) for p in pids.values())
    create_topic(broker.bootstrap, "t", 2)
    assert broker.stop() == 0
    assert not [p for p in pids.values() if running(p)]
    assert logged(broker, "pybroker node 0 shut down cleanly")
    assert logged(broker, "pybroker node 1000 shut down cleanly")
    assert not logged(broker, "controlled shutdown did not complete")
    # Each worker's log dir was closed cleanly (Kafka's marker).
    assert (tmp_path / "logs" / ".kafka_cleanshutdown").exists()
    assert (tmp_path / "logs-1" / ".kafka_cleanshutdown").exists()


def test_without_controlled_shutdown_no_worker_speaks_of_one(tmp_path: Path) -> None:
    """controlled.shutdown.enable=false: each worker stops without asking the controller, and
    as Kafka's broker it says nothing of a controlled shutdown (the worker's cue to the
    supervisor once said it was done with one); the workers still stop one after the other,
    cleanly."""
    broker = node(tmp_path / "logs", controlled_shutdown_enable="false")
    create_topic(broker.bootstrap, "t", 2)
    assert broker.stop() == 0
    assert logged(broker, "pybroker node 0 shut down cleanly")
    assert logged(broker, "pybroker node 1000 shut down cleanly")
    assert [ln for ln in broker.stderr_lines if "controlled shutdown" in ln] == []


def test_a_node_whose_stderr_reader_is_gone_still_stops_every_worker_on_sigterm(
        tmp_path: Path) -> None:
    """Its parent read the node's stderr and went away (the pipe's read end closed), then a
    SIGTERM: the supervisor's next forwarded line meets a broken pipe; it stops every worker,
    each cleanly, and exits 0. (It used to lose the reader thread of the first worker it
    stopped, with that worker's handover and exit: the others served on, the node never
    exited.)"""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pybroker", "--defaults",
         "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={tmp_path / 'logs'}", "--override", "num.cores=2"],
        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        lines: list[str] = []
        for line in proc.stderr:
            lines.append(line)
            if "brokers ready" in line:
                break
        pids = {int(m.group(1)): int(m.group(3)) for ln in lines if (m := STARTED.search(ln))}
        assert len(pids) == 2 and all(running(p) for p in pids.values()), "".join(lines)
        proc.stderr.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        assert not [p for p in pids.values() if running(p)]
        assert (tmp_path / "logs" / ".kafka_cleanshutdown").exists()
        assert (tmp_path / "logs-1" / ".kafka_cleanshutdown").exists()
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("acks", ["all", 1])
def test_kill_9_of_the_node_takes_every_worker_and_loses_no_acked_record(
        tmp_path: Path, acks: int | str) -> None:
    broker = node(tmp_path / "logs")
    pids = worker_pids(broker)
    create_topic(broker.bootstrap, "durable", 4)
    acked = produce(broker.bootstrap, "durable", [b"r%d" % i for i in range(300)], acks, 4)
    assert len(acked) == 300
    broker.kill()  # SIGKILL to the supervisor alone
    wait_until(lambda: not [p for p in pids.values() if running(p)], 10,
               "the workers to die with their supervisor")
    broker = node(tmp_path / "logs")
    try:
        got = read_all(broker.bootstrap, "durable", len(acked))
        assert sorted(got) == sorted(acked)
    finally:
        broker.kill()


def test_a_killed_worker_is_restarted_and_clients_carry_on(tmp_path: Path) -> None:
    from kafka import KafkaProducer
    broker = node(tmp_path / "logs")
    try:
        create_topic(broker.bootstrap, "carry", 4)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=20,
                                 retry_backoff_ms=200, request_timeout_ms=10000)
        before = [producer.send("carry", b"before-%d" % i) for i in range(50)]
        producer.flush(30)
        assert all(f.get(0) for f in before)
        old = worker_pids(broker)[1]
        os.kill(old, signal.SIGKILL)
        wait_until(lambda: logged(broker, "worker 1 (broker 1000) is serving again"), 90,
                   "worker 1 to be restarted and serve")
        assert worker_pids(broker)[1] != old
        assert logged(broker, "worker 1 (broker 1000) died (killed by SIGKILL); restarting it")
        # The same producer carries on: the partitions of broker 1000 are back with it.
        after = [producer.send("carry", b"after-%d" % i) for i in range(50)]
        producer.flush(60)
        assert all(f.get(0) for f in after)
        producer.close(5)
        assert len(read_all(broker.bootstrap, "carry", 100)) == 100
        assert broker.proc is not None and broker.proc.poll() is None
    finally:
        broker.kill()


def test_a_worker_dying_again_and_again_stops_the_whole_node_with_exit_1(
        tmp_path: Path) -> None:
    broker = node(tmp_path / "logs")
    first = worker_pids(broker)
    for death in range(4):  # three restarts are allowed in a minute; the fourth death is not
        pid = worker_pids(broker)[1]
        os.kill(pid, signal.SIGKILL)
        if death < 3:
            wait_until(lambda: worker_pids(broker)[1] != pid, 30, f"restart {death + 1}")
    assert broker.proc is not None
    assert broker.proc.wait(90) == 1
    assert logged(broker, "stopping the node: worker 1 (broker 1000) died (killed by SIGKILL) "
                          "after 3 restarts in a minute")
    pids = [first[0]] + [worker_pids(broker)[1]]
    assert not [p for p in pids if running(p)]  # never half-alive


SECURED = {"authorizer_class_name": "kafka.security.authorizer.AclAuthorizer",
           "super_users": "User:ANONYMOUS"}


def test_a_node_over_a_single_brokers_log_dir_serves_what_the_broker_kept(
        tmp_path: Path) -> None:
    """num.cores 1 -> 2 over one log dir: the node imports the broker's metadata (pybroker/
    node/metadata_import.py), and stock clients find their records, offsets, configs and
    ACLs; new topics and partitions spread over both workers; one broker is refused after."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AclBinding, AclBindingFilter, AclOperation, \
        AclPermissionType, AdminClient, ConfigResource, NewPartitions, NewTopic, \
        ResourcePatternType, ResourceType
    logs = tmp_path / "logs"
    grant = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice",
                       "*", AclOperation.READ, AclPermissionType.ALLOW)
    single = BrokerProcess(logs, num_cores="1", **SECURED).start(timeout=60)
    try:
        admin = AdminClient({"bootstrap.servers": single.bootstrap})
        for f in admin.create_topics([NewTopic("orders", 3, 1, config={
                "retention.ms": "123456789"})]).values():
            f.result(30)
        for f in admin.create_acls([grant]).values():
            f.result(30)
        values = [f"r{i}".encode() for i in range(30)]
        assert produce(single.bootstrap, "orders", values, "all", 3) == values
        committer = Consumer({"bootstrap.servers": single.bootstrap, "group.id": "resume",
                              "enable.auto.commit": False})
        committer.commit(offsets=[TopicPartition("orders", p, 4) for p in range(3)],
                         asynchronous=False)
        committer.close()
    finally:
        assert single.stop() == 0

    broker = node(logs, **SECURED)
    try:
        assert sorted(read_all(broker.bootstrap, "orders", 30)) == sorted(values)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "resume",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        resumed: list[tuple[int, int]] = []
        try:
            consumer.subscribe(["orders"])
            deadline = time.monotonic() + 60
            while len(resumed) < 18 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    resumed.append((msg.partition(), msg.offset()))
        finally:
            consumer.close()
        # 10 records a partition; the group had committed offset 4 in each.
        assert sorted(resumed) == [(p, o) for p in range(3) for o in range(4, 10)]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        resource = ConfigResource(ConfigResource.Type.TOPIC, "orders")
        configs = admin.describe_configs([resource])[resource].result(30)
        assert configs["retention.ms"].value == "123456789"
        acls = admin.describe_acls(AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
            AclPermissionType.ANY)).result(30)
        assert grant in acls
        ids, _ = brokers_seen(broker.bootstrap)
        assert len(ids) == 2
        assert set(create_topic(broker.bootstrap, "spread", 4).values()) == set(ids)
        admin.create_partitions([NewPartitions("orders", 6)])["orders"].result(30)

        def new_leaders() -> set[int] | None:
            from kafka import KafkaAdminClient
            client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
            try:
                found = {p["partition_index"]: p["leader_id"]
                         for p in client.describe_topics(["orders"])[0]["partitions"]}
            finally:
                client.close()
            added = {found.get(p, -1) for p in range(3, 6)}
            return added if -1 not in added else None
        assert wait_until(new_leaders, 30, "leaders of the new partitions") == set(ids)
    finally:
        assert broker.stop() == 0
    assert (logs / "pybroker-metadata.json.imported").exists()
    with pytest.raises(RuntimeError) as caught:
        BrokerProcess(logs, num_cores="1", **SECURED).start(timeout=60)
    assert ("__node-metadata holds the metadata of the node that ran on this log dir "
            "(num.cores=2), which a single broker does not read") in str(caught.value)


def test_a_node_over_a_corrupt_single_broker_file_names_it_and_changes_nothing(
        tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    single = BrokerProcess(logs, num_cores="1").start(timeout=60)
    create_topic(single.bootstrap, "kept", 1)
    assert single.stop() == 0
    metadata = logs / "pybroker-metadata.json"
    metadata.write_bytes(metadata.read_bytes()[:40])  # cut short
    before = sorted(p.name for p in logs.iterdir())
    with pytest.raises(RuntimeError) as caught:
        node(logs)
    assert (f"pybroker-server: {metadata} cannot be imported into the node's metadata store: "
            "it is not JSON") in str(caught.value)
    assert sorted(p.name for p in logs.iterdir()) == before  # no store, no core count


def test_a_worker_that_cannot_start_stops_the_node_with_its_one_line_reason(
        tmp_path: Path) -> None:
    import subprocess
    import sys
    with socket.socket() as taken:  # worker 1's port (worker 0's + 1) is someone else's
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "pybroker", "--defaults", "--override", "num.cores=2",
             "--override", f"listeners=PLAINTEXT://127.0.0.1:{port - 1}",
             "--override", f"log.dirs={tmp_path / 'logs'}"],
            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    last = result.stderr.splitlines()[-1]
    assert last.startswith("pybroker-server: [Errno 98] listener PLAINTEXT://127.0.0.1:"), last
    assert last.endswith("cannot be bound: Address already in use"), last
