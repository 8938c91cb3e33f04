"""The first group and transactional clients of a new ZooKeeper cluster (issue #35 §2): the
broker FindCoordinator names answers COORDINATOR_LOAD_IN_PROGRESS while it loads the
partition, not NOT_COORDINATOR (which librdkafka hands to the application from OffsetFetch),
and a confluent-kafka consumer and transactional producer that meet it loading get no error.
Three brokers on a real ZooKeeper, in process so that their loads can be held
(tests/integration/test_coordinator_loading.py holds them on one broker)."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode as E
from pybroker.testing import Cluster
from tests.cluster.brokers import running_cluster
from tests.integration.coordinator_load import HeldLoad, until_answered
from tests.integration.group_harness import wait_until
from tests.integration.raw import send_request


def _answered(cluster: Cluster, node: int, api: int) -> int:
    stats = cluster.server(node).broker.services.stats.apis.get(api)
    return 0 if stats is None else stats.requests


def _find(cluster: Cluster, key: str, key_type: int) -> Any:
    first = f"127.0.0.1:{cluster.ports[0]}"
    found = until_answered(lambda: send_request(first, ApiKey.FIND_COORDINATOR, 3,
                                                {"key": key, "key_type": key_type}))
    assert found.error_code == 0
    return found


def test_first_clients_of_a_new_cluster_meet_loading_coordinators(zookeeper) -> None:  # type: ignore[no-untyped-def]
    import confluent_kafka
    with Cluster(3, zookeeper=zookeeper.connect) as cluster:
        # Groups: every broker's load of the group's __consumer_offsets partition is held.
        held = [HeldLoad(cluster.server(i).broker.groups,
                         only=cluster.server(i).broker.groups.partition_for("g"))
                for i in cluster.running]
        found = _find(cluster, "g", 0)
        coordinator = f"{found.host}:{found.port}"
        errors: list[Any] = []
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": cluster.bootstrap, "group.id": "g",
            "enable.auto.commit": False, "error_cb": errors.append})
        box: dict = {}
        try:
            fetched = send_request(coordinator, ApiKey.OFFSET_FETCH, 7,
                                   {"group_id": "g", "topics": None, "require_stable": False})
            assert fetched.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
            joined = send_request(coordinator, ApiKey.JOIN_GROUP, 5, {
                "group_id": "g", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
                "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}]})
            assert joined.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
            before = _answered(cluster, found.node_id, ApiKey.OFFSET_FETCH)
            partition = confluent_kafka.TopicPartition("__consumer_offsets", 0)

            def committed() -> None:
                try:
                    box["committed"] = consumer.committed([partition], timeout=60)
                except Exception as exc:  # what the application would be handed
                    box["error"] = exc
            asking = threading.Thread(target=committed, daemon=True)
            asking.start()
            wait_until(lambda: _answered(cluster, found.node_id, ApiKey.OFFSET_FETCH) > before
                       or not asking.is_alive(), what="the consumer's OffsetFetch")
        finally:
            for h in held:
                h.release()
        asking.join(60)
        consumer.close()
        assert "error" not in box, box["error"]
        assert box["committed"][0].error is None
        assert errors == []

        # Transactions: every broker's load of the id's __transaction_state partition is held.
        held = [HeldLoad(cluster.server(i).broker.transactions,
                         only=cluster.server(i).broker.transactions.partition_for("tx"))
                for i in cluster.running]
        found = _find(cluster, "tx", 1)
        coordinator = f"{found.host}:{found.port}"
        producer = confluent_kafka.Producer({
            "bootstrap.servers": cluster.bootstrap, "transactional.id": "tx",
            "error_cb": errors.append})
        try:
            init = send_request(coordinator, ApiKey.INIT_PRODUCER_ID, 3, {
                "transactional_id": "tx", "transaction_timeout_ms": 10_000,
                "producer_id": -1, "producer_epoch": -1})
            assert init.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
            before = _answered(cluster, found.node_id, ApiKey.INIT_PRODUCER_ID)
            initialising = threading.Thread(target=lambda: producer.init_transactions(60),
                                            daemon=True)
            initialising.start()
            wait_until(lambda: _answered(cluster, found.node_id, ApiKey.INIT_PRODUCER_ID)
                       > before or not initialising.is_alive(),
                       what="the producer's InitProducerId")
        finally:
            for h in held:
                h.release()
        initialising.join(60)
        producer.begin_transaction()
        producer.produce("first-txn", b"v")
        producer.commit_transaction(60)
        assert errors == []


def test_a_consumer_group_is_the_very_first_client_of_a_new_cluster(
        tmp_path: Path, zookeeper) -> None:  # type: ignore[no-untyped-def]
    """As a user meets it, nothing held: three fresh broker processes, a confluent-kafka
    consumer with a group is the first client (it creates __consumer_offsets), then a
    producer; the consumer reads every record and no error reaches the application."""
    import confluent_kafka
    with running_cluster(tmp_path, zookeeper.connect) as cluster:
        bootstrap = cluster.bootstrap()
        errors: list[Any] = []
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": "first",
            "auto.offset.reset": "earliest", "error_cb": errors.append,
            "topic.metadata.refresh.interval.ms": 500})
        try:
            consumer.subscribe(["first-topic"])
            producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
            for i in range(10):
                producer.produce("first-topic", f"v{i}".encode())
            assert producer.flush(30) == 0
            got: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(got) < 10 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    errors.append(msg.error())
                else:
                    got.append(msg.value())
        finally:
            consumer.close()
        assert sorted(got) == sorted(f"v{i}".encode() for i in range(10))
        assert errors == []
