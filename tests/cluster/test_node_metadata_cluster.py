"""Three real broker processes whose metadata store is a node's metadata service
(`zookeeper.connect=unix:<socket>`, no ZooKeeper): the cluster code runs on it as on
ZooKeeper. A stock client (kafka-python) writes acks=all to a topic of replication factor 3
while the leader is killed -9 and, once it is back, the next leader is SIGSTOPped (its
session expires by missed pings, as a paused process's does on ZooKeeper); every
acknowledged record is read back, once, in order."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pybroker.node.metadata_service import MetadataService
from tests.cluster.brokers import SESSION_TIMEOUT_MS, Cluster, create_topic
from tests.cluster.checker import check
from tests.cluster.workload import AckedProducer, read_all

TOPIC = "node-store"


@pytest.fixture
def node_cluster(tmp_path: Path) -> Iterator[tuple[Cluster, MetadataService]]:
    service = MetadataService(tmp_path / "meta.sock", tmp_path / "metadata", SESSION_TIMEOUT_MS)
    service.start()
    cluster = Cluster(tmp_path, service.connect, chroot="")
    try:
        cluster.start()
        yield cluster, service
    finally:
        cluster.close()
        service.close()


def _registered(cluster: Cluster) -> list[int]:
    return sorted(int(n) for n in cluster.zk.get_children("/brokers/ids"))


def _gone(cluster: Cluster, node: int) -> bool:
    """Whether no broker of `node` is registered (a node runs PYBROKER_NUM_CORES of them)."""
    return not set(cluster.broker_ids(node)) & set(_registered(cluster))


def _back(cluster: Cluster, node: int) -> bool:
    return set(cluster.broker_ids(node)) <= set(_registered(cluster))


def test_failover_on_the_node_metadata_service(
        node_cluster: tuple[Cluster, MetadataService]) -> None:
    cluster, service = node_cluster
    assert _registered(cluster) == sorted(b for n in (1, 2, 3) for b in cluster.broker_ids(n))
    create_topic(cluster, TOPIC, partitions=3)
    producer = AckedProducer(cluster.bootstrap(), TOPIC, rate=300).start()
    failover_s = SESSION_TIMEOUT_MS / 1000 + 40
    try:
        producer.wait_acked(200)
        killed = cluster.leader(TOPIC, 0)
        cluster.kill(killed)  # its connection closes: its registration goes at once
        cluster.wait_until(lambda: _gone(cluster, killed), 10,
                           f"broker {killed}'s registration to go")
        cluster.wait_until(lambda: cluster.leader(TOPIC, 0) not in (killed, -1), 30,
                           "a new leader of partition 0")
        before = producer.acked_count()
        producer.wait_acked(before + 300, timeout=failover_s)
        cluster.start(killed)
        for p in range(3):
            cluster.wait_isr(TOPIC, p, {1, 2, 3}, timeout=60)

        paused = cluster.leader(TOPIC, 0)
        cluster.pause(paused)  # no pings: the session expires after SESSION_TIMEOUT_MS
        try:
            cluster.wait_until(lambda: _gone(cluster, paused),
                               SESSION_TIMEOUT_MS / 1000 + 10,
                               f"paused broker {paused}'s session to expire")
            cluster.wait_until(lambda: cluster.leader(TOPIC, 0) not in (paused, -1), 30,
                               "a leader in place of the paused one")
            before = producer.acked_count()
            producer.wait_acked(before + 300, timeout=failover_s)
        finally:
            cluster.resume(paused)
        # Awake, it learns its session is gone, registers again and catches up.
        cluster.wait_until(lambda: _back(cluster, paused), 30,
                           f"broker {paused} to register again")
        for p in range(3):
            cluster.wait_isr(TOPIC, p, {1, 2, 3}, timeout=60)
    finally:
        history = producer.stop()
    read_all(cluster.bootstrap(), TOPIC, history, 3)
    problems = check(history)
    assert not problems, problems[:10]
    assert len(history.acked) >= 800
    for p in range(3):  # after healing: the same bytes everywhere
        copies = {n: cluster.segment_bytes(n, TOPIC, p) for n in (1, 2, 3)}
        assert len(set(copies.values())) == 1, {n: len(b) for n, b in copies.items()}
    assert service.failure is None
