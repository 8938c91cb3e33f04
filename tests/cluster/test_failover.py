"""Replication and failover with real subprocess brokers, a real ZooKeeper and a stock client
(kafka-python): Kafka's three-broker quickstart, and acknowledged records through faults."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import NotEnoughReplicasError

from tests.cluster.brokers import SESSION_TIMEOUT_MS, Cluster, running_cluster
from tests.cluster.checker import check
from tests.cluster.workload import AckedProducer, read_all



def create_topic(cluster: Cluster, name: str, partitions: int = 1, rf: int = 3,
                 min_isr: int = 2) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap().split(","))
    try:
        admin.create_topics([NewTopic(name, partitions, rf, topic_configs={
            "min.insync.replicas": str(min_isr)})])
    finally:
        admin.close()
    for p in range(partitions):
        cluster.wait_until(lambda p=p: len(cluster.state(name, p)["isr"]) == rf, 30,
                           f"{name}-{p} to have a full ISR")


def test_quickstart_kill_the_leader(tmp_path: Path, zookeeper) -> None:  # type: ignore[no-untyped-def]
    """Kafka's quickstart: three brokers, a topic with replication factor 3, two messages,
    kill -9 of the leader: a new leader within the session timeout, an ISR without the dead
    broker, and both messages still there."""
    with running_cluster(tmp_path, zookeeper.connect) as cluster:
        create_topic(cluster, "quick")
        state = cluster.state("quick", 0)
        assert sorted(state["isr"]) == [1, 2, 3] and state["leader"] in (1, 2, 3)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap().split(","), acks="all")
        for value in (b"first", b"second"):
            producer.send("quick", value).get(timeout=30)
        producer.close()
        old = state["leader"]
        killed_at = time.monotonic()
        cluster.kill(old)
        cluster.wait_until(lambda: cluster.leader("quick", 0) not in (old, -1),
                           SESSION_TIMEOUT_MS / 1000 + 10, "a new leader")
        elected = time.monotonic() - killed_at
        assert elected < SESSION_TIMEOUT_MS / 1000 + 5
        new_state = cluster.state("quick", 0)
        assert old not in new_state["isr"] and len(new_state["isr"]) == 2
        assert new_state["leader_epoch"] > state["leader_epoch"]
        consumer = KafkaConsumer("quick", bootstrap_servers=cluster.bootstrap().split(","),
                                 auto_offset_reset="earliest", consumer_timeout_ms=10000)
        got = [m.value for m in consumer]
        consumer.close()
        assert got == [b"first", b"second"]


def test_acked_records_survive_leader_and_controller_kills(tmp_path: Path, zookeeper
                                                           ) -> None:  # type: ignore[no-untyped-def]
    """RF 3, min.insync.replicas 2, acks=all, idempotence: kill -9 a leader, restart it, kill
    -9 the controller, restart it, all under load. Every acknowledged record is read back at
    the offset it was acknowledged at, once, in order; the replicas end byte-identical."""
    with running_cluster(tmp_path, zookeeper.connect) as cluster:
        create_topic(cluster, "jepsen", partitions=3)
        producer = AckedProducer(cluster.bootstrap(), "jepsen", rate=300).start()
        try:
            producer.wait_acked(200)
            for victim in (cluster.leader("jepsen", 0), cluster.controller()):
                before = producer.acked_count()
                cluster.kill(victim)
                producer.wait_acked(before + 300, timeout=SESSION_TIMEOUT_MS / 1000 + 40)
                cluster.start(victim)
                for p in range(3):
                    cluster.wait_isr("jepsen", p, {1, 2, 3}, timeout=60)
        finally:
            history = producer.stop()
        read_all(cluster.bootstrap(), "jepsen", history, 3)
        problems = check(history)
        assert not problems, problems[:10]
        assert len(history.acked) >= 800
        for p in range(3):  # after healing: the same bytes everywhere
            copies = {n: cluster.segment_bytes(n, "jepsen", p) for n in (1, 2, 3)}
            assert len(set(copies.values())) == 1, {n: len(b) for n, b in copies.items()}


def test_two_brokers_down_refuses_acks_all_but_reads_go_on(tmp_path: Path, zookeeper
                                                           ) -> None:  # type: ignore[no-untyped-def]
    """With two of three brokers stopped the ISR is one: acks=all gets NOT_ENOUGH_REPLICAS,
    acks=1 still writes, and what was committed before is still read."""
    with running_cluster(tmp_path, zookeeper.connect) as cluster:
        create_topic(cluster, "two-down")
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap().split(","), acks="all")
        producer.send("two-down", b"committed").get(timeout=30)
        producer.close()
        leader = cluster.leader("two-down", 0)
        others = [n for n in cluster.ids if n != leader]
        for n in others:
            cluster.kill(n)
        cluster.wait_isr("two-down", 0, {leader}, timeout=SESSION_TIMEOUT_MS / 1000 + 20)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap().split(","), acks="all",
                                 retries=0)
        with pytest.raises(NotEnoughReplicasError):
            producer.send("two-down", b"refused").get(timeout=30)
        producer.close()
        consumer = KafkaConsumer("two-down", bootstrap_servers=cluster.bootstrap().split(","),
                                 auto_offset_reset="earliest", consumer_timeout_ms=5000)
        assert [m.value for m in consumer] == [b"committed"]
        consumer.close()


def test_sigterm_moves_leadership_before_exit(tmp_path: Path, zookeeper
                                              ) -> None:  # type: ignore[no-untyped-def]
    """Controlled shutdown: SIGTERM to a leader moves its leaderships to in-sync replicas
    before the process exits (exit code 0), so writes fail over in about a second instead of
    a session timeout."""
    with running_cluster(tmp_path, zookeeper.connect) as cluster:
        create_topic(cluster, "calm")
        leader = cluster.leader("calm", 0)
        epoch = cluster.state("calm", 0)["leader_epoch"]
        started = time.monotonic()
        assert cluster.stop(leader) == 0, "".join(cluster.brokers[leader].stderr_lines[-30:])
        stopped = time.monotonic() - started
        state = cluster.state("calm", 0)
        assert state["leader"] not in (leader, -1) and state["leader_epoch"] > epoch
        assert leader not in state["isr"]
        assert stopped < SESSION_TIMEOUT_MS / 1000
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap().split(","), acks="all")
        producer.send("calm", b"after").get(timeout=30)
        producer.close()
