"""The multicore workload's prototypes (tests/bench/multicore/) serve a stock client correctly:
a figure from a prototype that lost or misrouted records would compare nothing.

- frontends: two SO_REUSEPORT routers in front of one broker show the client one broker id
  on the routers' port, and every record produced through them is read back through them.
- shards: two routers in front of two brokers on a real ZooKeeper; the client sees one
  broker, yet the partitions are led by both brokers and each holds what was sent to it.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from pybroker.testing.zookeeper import ZooKeeperNotInstalled, zookeeper_home
from tests.bench.bench_multicore import PARTITIONS, create_topics, stored
from tests.bench.multicore.node import start_node
from tests.bench.multicore.router import ROUTER_NODE_ID

COUNT = 2_000
QUIET = {"log_level": 3}


def _produce(bootstrap: str, topic: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, **QUIET})
    for i in range(COUNT):
        p.produce(topic, f"record-{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(60) == 0


def _one_broker(bootstrap: str, topic: str) -> None:
    meta = AdminClient({"bootstrap.servers": bootstrap, **QUIET}).list_topics(topic, timeout=30)
    port = int(bootstrap.rsplit(":", 1)[1])
    assert [(b.id, b.port) for b in meta.brokers.values()] == [(ROUTER_NODE_ID, port)]
    assert {p.leader for p in meta.topics[topic].partitions.values()} == {ROUTER_NODE_ID}


def test_frontends_show_one_broker_and_return_every_record(tmp_path: Path) -> None:
    with start_node("frontends", 2, tmp_path) as node:
        topic = "front"
        create_topics(node, [topic])
        _one_broker(node.bootstrap, topic)
        _produce(node.bootstrap, topic)
        c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "t",
                      "enable.auto.commit": False, **QUIET})
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got: set[bytes] = set()
        for _ in range(600):
            for m in c.consume(500, 0.1):
                assert m.error() is None, m.error()
                got.add(m.value() or b"")
            if len(got) == COUNT:
                break
        c.close()
        assert got == {f"record-{i}".encode() for i in range(COUNT)}


def test_shards_split_produce_over_the_brokers(tmp_path: Path) -> None:
    try:
        zookeeper_home()
    except ZooKeeperNotInstalled as exc:
        pytest.skip(str(exc))
    with start_node("shards", 2, tmp_path) as node:
        topic = "sharded"
        create_topics(node, [topic])
        _one_broker(node.bootstrap, topic)
        backends = AdminClient({"bootstrap.servers": node.admin_bootstrap, **QUIET}) \
            .list_topics(topic, timeout=30)
        leaders = {p.leader for p in backends.topics[topic].partitions.values()}
        assert leaders == {1, 2}  # behind the one id, both brokers lead partitions
        _produce(node.bootstrap, topic)
        assert stored(node, topic) == COUNT


def test_node_setup_is_num_cores_and_every_record_comes_back(tmp_path: Path) -> None:
    """The `node` setup is pybroker-server with num.cores=2: two brokers under one supervisor,
    both leading partitions; every record its producer had acknowledged is read back by its
    consumer and held by the topic (run_point raises otherwise)."""
    from tests.bench.bench_multicore import run_point

    with start_node("node", 2, tmp_path) as node:
        point = run_point(node, 1, COUNT, "node-test")
        meta = AdminClient({"bootstrap.servers": node.bootstrap, **QUIET}).list_topics(
            "mc-node-test-1p-0", timeout=30)
        assert len(meta.brokers) == 2
        assert {p.leader for p in meta.topics["mc-node-test-1p-0"].partitions.values()} == \
            set(meta.brokers)
        workers = [r for r in point.shares if r.startswith("node child")]
        assert len(workers) == 2, point.shares
        assert point.consume_mb_s > 0
