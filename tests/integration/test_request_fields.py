"""Request fields the broker used to decode and ignore (issue 21): each is now acted on, as
Kafka acts on it, and shown with a stock client."""
from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient

from tests.integration.raw import create_topic, known_topics

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


# -- CreateTopics assignments -----------------------------------------------------------------

@pytest.mark.parametrize("assignment", [{0: [5]}, {0: [0, 0]}, {0: [0], 1: []}],
                         ids=["unknown-broker", "broker-twice", "no-replicas"])
def test_create_topics_refuses_an_impossible_assignment(broker, assignment) -> None:
    """kafka-python's replica_assignments naming a broker that does not exist (or one twice)
    is refused with INVALID_REPLICA_ASSIGNMENT, as Kafka refuses it, and nothing is created;
    it used to be counted for the replication factor and then dropped."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import InvalidReplicationAssignmentError
    topic = topic_name("assign-bad")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        with pytest.raises(InvalidReplicationAssignmentError):
            admin.create_topics([NewTopic(topic, replica_assignments=assignment)])
    finally:
        admin.close()
    assert topic not in known_topics(broker.bootstrap)


def test_create_topics_assignment_becomes_the_replicas(broker) -> None:
    """kafka-python's replica_assignments: the partitions are those of the assignment, on the
    brokers it names (this one), leader first, as Metadata then reports them."""
    from kafka.admin import KafkaAdminClient, NewTopic
    topic = topic_name("assign")
    node = broker.brokers[0][0]  # the bootstrap broker (a node's worker 0)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, replica_assignments={0: [node], 1: [node],
                                                                   2: [node]})])
        described = admin.describe_topics([topic])[0]
    finally:
        admin.close()
    partitions = sorted(described["partitions"], key=lambda p: p["partition_index"])
    assert [(p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"])
            for p in partitions] == [(i, node, [node], [node]) for i in range(3)]


def test_create_topics_assignment_partitions_must_be_consecutive(broker) -> None:
    """Partitions 0 and 2 without 1: refused as Kafka refuses it (a raw request, since the
    stock admin clients number the partitions themselves)."""
    from protocol.api_keys import ApiKey
    from tests.integration.raw import send_request
    topic = topic_name("assign-gap")
    resp = send_request(broker.bootstrap, ApiKey.CREATE_TOPICS, 5, {
        "topics": [{"name": topic, "num_partitions": -1, "replication_factor": -1,
                    "assignments": [{"partition_index": 0, "broker_ids": [0]},
                                    {"partition_index": 2, "broker_ids": [0]}],
                    "configs": []}], "timeout_ms": 5000, "validate_only": False})
    assert resp.topics[0].error_code == 39
    assert "consecutive" in resp.topics[0].error_message


# -- JoinGroup / LeaveGroup reasons -----------------------------------------------------------

def _leave_with_a_reason(bootstrap: str, topic: str,
                         caplog: pytest.LogCaptureFixture) -> list[str]:
    """kafka-python's member, once assigned, leaves with a reason; the coordinator's lines.

    The topic has a record so that a poll ends once the member is assigned, and each poll
    waits for the rest of the deadline, as `_first_consumed` in test_groups.py does:
    kafka-python 3.0.12 joins before its topic's metadata is in, so as leader it assigns
    nothing; the metadata then starts a second round, which it drops when that round
    completes after the poll waiting for it gave up (`need_rejoin()` is already False), and
    the member stays unassigned. With 200 ms polls that lost the whole 20 s
    (`test_leave_group_reason_survives_a_lost_join_round` forces it)."""
    from confluent_kafka import Producer
    from kafka import KafkaConsumer
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"v")
    assert producer.flush(10) == 0
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="g-reason",
                             auto_offset_reset="earliest", consumer_timeout_ms=200)
    try:
        deadline = time.monotonic() + 20
        while not consumer.assignment() and (left := deadline - time.monotonic()) > 0:
            consumer.poll(max(1, int(left * 1000)))
        assert consumer.assignment()
        with caplog.at_level(logging.INFO, logger="pybroker.coordinator.group_coordinator"):
            consumer._coordinator.maybe_leave_group(reason="shutting down for a redeploy")
    finally:
        consumer.close()
    return [r.getMessage() for r in caplog.records]


@pytest.mark.in_process("reads the group coordinator's log records (caplog)")
def test_leave_group_reason_is_logged(broker, caplog: pytest.LogCaptureFixture) -> None:
    """kafka-python leaves its group with a reason (LeaveGroup v5): the broker logs it, as
    Kafka's coordinator does, instead of dropping it."""
    lines = _leave_with_a_reason(broker.bootstrap, topic_name("leave-reason"), caplog)
    assert any("leaving group g-reason" in line and "shutting down for a redeploy" in line
               for line in lines), lines


@pytest.mark.in_process("delays Metadata and SyncGroup answers (request hooks)")
def test_leave_group_reason_survives_a_lost_join_round(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The round `_leave_with_a_reason` must get past, forced (`force_a_lost_join_round`:
    the member's Metadata for its topic a second late, so its first join as leader assigns
    nothing, and the SyncGroup of the round its metadata then starts held past a 200 ms
    poll). With 200 ms polls the member was never assigned in its 20 s."""
    from pybroker.testing import RequestHooks
    from tests.helpers import broker_in_thread, force_a_lost_join_round

    hooks = RequestHooks()
    force_a_lost_join_round(hooks.control, "leave-reason")
    with broker_in_thread(tmp_path / "logs", hooks=hooks) as info:
        lines = _leave_with_a_reason(info.bootstrap, "leave-reason", caplog)
    assert any("leaving group g-reason" in line and "shutting down for a redeploy" in line
               for line in lines), lines


@pytest.mark.in_process("reads the group coordinator's log records (caplog)")
def test_join_group_reason_is_logged(broker, caplog: pytest.LogCaptureFixture) -> None:
    """JoinGroup v8+ carries a reason (the Java client sends one on every rejoin); none of
    the stock Python clients sends v8, so a raw request stands in."""
    from protocol.api_keys import ApiKey
    from tests.integration.raw import send_request
    with caplog.at_level(logging.INFO, logger="pybroker.coordinator.group_coordinator"):
        resp = send_request(broker.bootstrap, ApiKey.JOIN_GROUP, 9, {
            "group_id": "g-join-reason", "session_timeout_ms": 10000,
            "rebalance_timeout_ms": 10000, "member_id": "", "group_instance_id": None,
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}],
            "reason": "rebalance failed: the member was fenced"})
    assert resp.error_code == 79  # MEMBER_ID_REQUIRED: the first step of a v4+ join
    lines = [r.getMessage() for r in caplog.records]
    assert any("joining group g-join-reason" in line
               and "rebalance failed: the member was fenced" in line for line in lines), lines


# -- CreateTopics' configs: the controller's view of a key's source ---------------------------

def test_create_topics_reports_retention_from_log_retention_hours_as_static() -> None:
    """With only log.retention.hours in the broker's file, Kafka 4.1 answers CreateTopics with
    retention.ms from static broker config (4) while its DescribeConfigs, trimming the synonyms
    at the unset log.retention.ms, says default (5) — found by the differential corpus."""
    from protocol.api_keys import ApiKey
    from tests.helpers import Broker
    from tests.integration.raw import send_request
    with Broker(**{"log.retention.hours": "100"}) as b:
        topic = topic_name("retention-source")
        created = send_request(b.bootstrap, ApiKey.CREATE_TOPICS, 5, {
            "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": []}],
            "timeout_ms": 5000, "validate_only": False})
        [entry] = [c for c in created.topics[0].configs if c.name == "retention.ms"]
        assert (entry.value, entry.config_source) == (str(100 * 3600 * 1000), 4)
        described = send_request(b.bootstrap, ApiKey.DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": 2, "resource_name": topic,
                           "configuration_keys": ["retention.ms"]}],
            "include_synonyms": True, "include_documentation": False})
        [row] = described.results[0].configs
        assert (row.value, row.config_source, list(row.synonyms)) == (
            str(100 * 3600 * 1000), 5, [])
