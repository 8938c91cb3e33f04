"""CreateTopics, CreatePartitions and DeleteTopics sent to a broker that is not the controller.

A Kafka 4.1 broker forwards them to the controller (KIP-590), so a client never hears
NOT_CONTROLLER from one; a client that sends them to the broker it bootstrapped on (the
raw-wire helpers of many tools, or any client of a `num.cores` node whose first port is a
worker that is not the controller) must get the change made. Three in-process brokers on the
in-memory ZooKeeper (pybroker.testing.Cluster)."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.testing import Cluster
from tests.integration.raw import send_request


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(3) as running:
        yield running


def not_the_controller_id(cluster: Cluster) -> int:
    return min(n for n in cluster.running if n != cluster.controller)


def not_the_controller(cluster: Cluster) -> str:
    return cluster.server(not_the_controller_id(cluster)).bootstrap


def test_a_topic_is_created_grown_and_deleted_through_a_broker_that_is_not_the_controller(
        cluster: Cluster) -> None:
    other = not_the_controller_id(cluster)
    bootstrap = cluster.server(other).bootstrap
    created = send_request(bootstrap, ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": "anywhere", "num_partitions": 2, "replication_factor": 2,
                    "assignments": [], "configs": []}],
        "timeout_ms": 30000, "validate_only": False})
    assert [(t.name, t.error_code, t.num_partitions) for t in created.topics] == [
        ("anywhere", ErrorCode.NONE, 2)]
    # The answer waits until the broker that gives it has the controller's leaders (the
    # controller's own image may see them later: it learns of its writes through its watch).
    image = cluster.server(other).broker.metadata.image
    assert [image.partition("anywhere", p).leader >= 0 for p in (0, 1)] == [True, True]
    assert len(image.partition("anywhere", 1).replicas) == 2

    grown = send_request(bootstrap, ApiKey.CREATE_PARTITIONS, 3, {
        "topics": [{"name": "anywhere", "count": 3, "assignments": None}],
        "timeout_ms": 30000, "validate_only": False})
    assert [(r.name, r.error_code) for r in grown.results] == [("anywhere", ErrorCode.NONE)]
    cluster.wait_until(lambda: cluster.leader_of("anywhere", 2) >= 0, "a leader of partition 2")

    deleted = send_request(bootstrap, ApiKey.DELETE_TOPICS, 4, {
        "topic_names": ["anywhere"], "timeout_ms": 30000})
    assert [(r.name, r.error_code) for r in deleted.responses] == [("anywhere", ErrorCode.NONE)]
    cluster.wait_until(lambda: all("anywhere" not in cluster.server(n).broker.metadata.image.topics
                                   for n in cluster.running), "every broker to drop the topic")


def test_a_name_taken_is_refused_by_any_broker_as_by_the_controller(cluster: Cluster) -> None:
    """Two brokers writing the store: the second creation of a name fails on the store's
    conditional write, TOPIC_ALREADY_EXISTS, as on one broker."""
    body = {"topics": [{"name": "taken", "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": []}],
            "timeout_ms": 30000, "validate_only": False}
    first = send_request(cluster.server(cluster.controller).bootstrap, ApiKey.CREATE_TOPICS, 7,
                         body)
    assert [t.error_code for t in first.topics] == [ErrorCode.NONE]
    again = send_request(not_the_controller(cluster), ApiKey.CREATE_TOPICS, 7, body)
    assert [t.error_code for t in again.topics] == [ErrorCode.TOPIC_ALREADY_EXISTS]
