"""Request fields the broker used to decode and ignore (issue 21): each is now acted on, as
Kafka acts on it, and shown with a stock client."""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient

from tests.integration.raw import create_topic

TIMEOUT = 10
# Kafka's AclEntry.supportedOperations per resource type: with no authorizer, all are allowed.
TOPIC_OPS = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
             AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
             AclOperation.ALTER_CONFIGS}
CLUSTER_OPS = {AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
               AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
               AclOperation.DESCRIBE}


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("include", [True, False])
def test_authorized_operations_of_topics_and_cluster(broker, include: bool) -> None:
    """confluent-kafka's describe_topics (Metadata) and describe_cluster (DescribeCluster)
    with include_authorized_operations get every operation of the resource type, in Kafka's
    bit layout; without it, none (Kafka's "not requested")."""
    topic = topic_name("authops")
    create_topic(broker.bootstrap, topic, 1)
    ck = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = ck.describe_topics(TopicCollection([topic]), request_timeout=TIMEOUT,
                                   include_authorized_operations=include)[topic].result(TIMEOUT)
    cluster = ck.describe_cluster(request_timeout=TIMEOUT,
                                  include_authorized_operations=include).result(TIMEOUT)
    if include:
        assert set(described.authorized_operations) == TOPIC_OPS
        assert set(cluster.authorized_operations) == CLUSTER_OPS
    else:
        assert not described.authorized_operations
        assert not cluster.authorized_operations


def test_authorized_operations_through_kafka_python(broker) -> None:
    """kafka-python's describe_cluster asks for the cluster's operations (Metadata v8-10 or
    DescribeCluster) and names them."""
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    assert set(cluster["authorized_operations"]) == {op.name for op in CLUSTER_OPS}
