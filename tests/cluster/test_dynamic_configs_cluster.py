"""Dynamic broker configs on a three-broker cluster (KIP-226, issue #35 §7): a cluster
default (`kafka-configs --entity-default`) reaches every broker through ZooKeeper's
/config/brokers/<default> and its /config/changes notification, a broker stopped meanwhile
starts with it; a per-broker config (`--entity-name 1`) changes that broker alone — on the
in-memory ZooKeeper and on a real one (bin/test installs it)."""
from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from compat.wire import request
from protocol.api_keys import ApiKey
from pybroker.testing.cluster import Cluster
from pybroker.tools import configs

DYNAMIC_BROKER, DYNAMIC_DEFAULT, DEFAULT = 2, 3, 5


@pytest.fixture(params=["memory", "zookeeper"])
def cluster(request, tmp_path):  # type: ignore[no-untyped-def]
    if request.param == "zookeeper":
        # A chroot of the session's ZooKeeper (tests/cluster/conftest.py).
        zk = request.getfixturevalue("zookeeper").connect
        c = Cluster(3, zookeeper=zk, log_dir=tmp_path)
    else:
        c = Cluster(3, log_dir=tmp_path)
    with c:
        yield c


def _on(cluster: Cluster, node: int) -> str:
    return f"127.0.0.1:{cluster.server(node).port}"


def _current(cluster: Cluster, node: int) -> Any:
    return cluster.server(node).broker.dynamic_config.current


def _source(cluster: Cluster, node: int, key: str) -> tuple[str | None, int]:
    """(value, source) of `key` as broker `node` describes its own configs."""
    body = {"resources": [{"resource_type": 4, "resource_name": str(node),
                           "configuration_keys": [key]}],
            "include_synonyms": False, "include_documentation": False}
    entry = request(_on(cluster, node), ApiKey.DESCRIBE_CONFIGS, 4, body).results[0].configs[0]
    return entry.value, entry.config_source


def _produce(bootstrap: str, topic: str, partition: int, size: int) -> KafkaError | None:
    results: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000,
                         "linger.ms": 0})
    producer.produce(topic, b"x" * size, partition=partition,
                     on_delivery=lambda e, m: results.append(e))
    producer.flush(15)
    return results[0]


def test_a_cluster_default_reaches_every_broker(cluster: Cluster) -> None:
    cluster.create_topic("spread", partitions=3)
    leaders = {p: cluster.leader_of("spread", p) for p in range(3)}
    cluster.stop_broker(2)
    assert configs.main(["--bootstrap-server", _on(cluster, 0), "--alter", "--entity-type",
                         "brokers", "--entity-default", "--add-config",
                         "message.max.bytes=2000"]) == 0
    cluster.start_broker(2)  # reads /config/brokers/<default> as it starts
    cluster.wait_until(lambda: all(_current(cluster, n).message_max_bytes == 2000
                                   for n in cluster.running), "every broker to apply it")
    for node in cluster.running:
        assert _source(cluster, node, "message.max.bytes") == ("2000", DYNAMIC_DEFAULT)
    for partition, leader in leaders.items():
        refused = _produce(cluster.bootstrap, "spread", partition, 3000)
        assert refused is not None and refused.code() == KafkaError.MSG_SIZE_TOO_LARGE, leader
    zk = cluster.server(0).broker.zk_store.zk
    assert json.loads(zk.get("/config/brokers/<default>")[0]) == {
        "version": 1, "config": {"message.max.bytes": "2000"}}
    notices = [json.loads(zk.get(f"/config/changes/{c}")[0])
               for c in zk.get_children("/config/changes")]
    assert {"version": 2, "entity_path": "brokers/<default>"} in notices


def test_a_per_broker_config_changes_that_broker_alone(cluster: Cluster) -> None:
    cluster.create_topic("two", partitions=2)
    cluster.move_leader("two", 0, 1)
    cluster.move_leader("two", 1, 2)
    # sent through broker 0: the tool routes a broker's own configs to that broker
    assert configs.main(["--bootstrap-server", _on(cluster, 0), "--alter", "--entity-type",
                         "brokers", "--entity-name", "1", "--add-config",
                         "message.max.bytes=2000,log.cleaner.threads=2"]) == 0
    cluster.wait_until(lambda: _current(cluster, 1).message_max_bytes == 2000,
                       "broker 1 to apply its config")
    cluster.wait_until(lambda: all("1" in cluster.server(n).broker.metadata.image.broker_configs
                                   for n in cluster.running), "every broker to read it")
    assert _source(cluster, 1, "log.cleaner.threads") == ("2", DYNAMIC_BROKER)
    for node in (0, 2):
        assert _current(cluster, node).message_max_bytes == 1048588
        assert _source(cluster, node, "log.cleaner.threads") == ("1", DEFAULT)
    refused = _produce(cluster.bootstrap, "two", 0, 3000)  # led by broker 1
    assert refused is not None and refused.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert _produce(cluster.bootstrap, "two", 1, 3000) is None  # led by broker 2
