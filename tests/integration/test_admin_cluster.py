"""The cluster-wide admin APIs through the stock clients and raw requests: DescribeCluster,
DescribeLogDirs and ElectLeaders.
"""
from __future__ import annotations

from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from tests.integration.admin_helpers import TIMEOUT, log_dirs, stored_cluster_id, topic_name
from tests.integration.clients import CONFLUENT, Rec
from tests.integration.raw import (
    controller_address, create_topic, leader_address, leader_id, send_request,
)


def test_describe_cluster(broker, ck: AdminClient, kp) -> None:
    desc = ck.describe_cluster().result(TIMEOUT)
    assert desc.cluster_id == stored_cluster_id(broker)
    ids = [broker_id for broker_id, _ in broker.brokers]  # a node's workers: each a broker
    assert desc.controller.id in ids
    assert sorted((n.id, n.host, n.port) for n in desc.nodes) == \
        [(broker_id, "127.0.0.1", port) for broker_id, port in broker.brokers]
    kd = kp.describe_cluster()
    assert kd["cluster_id"] == desc.cluster_id
    assert kd["controller_id"] == desc.controller.id
    assert sorted(b["broker_id"] for b in kd["brokers"]) == ids


def test_describe_log_dirs(broker, kp) -> None:
    name = topic_name("ld")
    create_topic(broker.bootstrap, name, 2)
    CONFLUENT.produce(broker.bootstrap, name, [Rec(b"k", b"v" * 500, partition=0)])
    # One answer a broker (a node's workers each), each of its own log dir; a partition is in
    # its leader's.
    dirs = {broker_id: str(d) for (broker_id, _), d in zip(broker.brokers, log_dirs(broker))}
    results = {result["broker"]: result for result in kp.describe_log_dirs()}
    assert sorted(results) == sorted(dirs)
    sizes, holders = {}, {}
    for broker_id, result in results.items():
        (entry,) = result["log_dirs"]
        assert (entry["error_code"], entry["log_dir"]) == (0, dirs[broker_id])
        assert entry["total_bytes"] >= entry["usable_bytes"] > 0
        for p in (p for t in entry["topics"] if t["name"] == name for p in t["partitions"]):
            sizes[p["partition_index"]] = p["partition_size"]
            holders[p["partition_index"]] = broker_id
    assert sizes[0] > 500 and sizes[1] == 0
    assert holders == {p: leader_id(broker.bootstrap, name, p) for p in (0, 1)}
    # asking for some partitions only (and one that does not exist)
    body = {"topics": [{"topic": name, "partitions": [1, 9]}]}
    raw = send_request(leader_address(broker.bootstrap, name, 1), ApiKey.DESCRIBE_LOG_DIRS, 4,
                       body)
    assert raw.error_code == 0
    (entry,) = raw.results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in entry.topics] == \
        [(name, [1])]


def test_elect_leaders(broker, ck: AdminClient, kp) -> None:
    from confluent_kafka import ElectionType
    name = topic_name("el")
    create_topic(broker.bootstrap, name, 2)
    fut = ck.elect_leaders(ElectionType.PREFERRED, [TopicPartition(name, 0),
                                                    TopicPartition(name, 1)])
    results = fut.result(TIMEOUT)
    codes = {tp.partition: (err.code() if err is not None else 0)
             for tp, err in results.items()}
    assert codes == {0: KafkaError.ELECTION_NOT_NEEDED, 1: KafkaError.ELECTION_NOT_NEEDED}

    body = {"election_type": 0, "topic_partitions": [{"topic": name, "partitions": [0, 7]}],
            "timeout_ms": 1000}
    raw = send_request(controller_address(broker.bootstrap), ApiKey.ELECT_LEADERS, 2, body)
    parts = {p.partition_id: p.error_code for p in raw.replica_election_results[0]
             .partition_result}
    assert parts == {0: ErrorCode.ELECTION_NOT_NEEDED, 7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    kp.elect_leaders(0, {name: [0, 1]})  # ELECTION_NOT_NEEDED is not an error for it
