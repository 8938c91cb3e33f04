"""The cluster-wide admin APIs through the stock clients and raw requests: DescribeCluster,
DescribeLogDirs and ElectLeaders.
"""
from __future__ import annotations

from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from tests.integration.admin_helpers import TIMEOUT, log_dir, topic_name
from tests.integration.clients import CONFLUENT, Rec
from tests.integration.raw import create_topic, send_request


def test_describe_cluster(broker, ck: AdminClient, kp) -> None:
    desc = ck.describe_cluster().result(TIMEOUT)
    assert desc.cluster_id == broker.broker.metadata.image.cluster_id
    assert desc.controller.id == 0
    assert [(n.id, n.host, n.port) for n in desc.nodes] == [(0, "127.0.0.1", broker.port)]
    kd = kp.describe_cluster()
    assert kd["cluster_id"] == desc.cluster_id
    assert kd["controller_id"] == 0
    assert [b["broker_id"] for b in kd["brokers"]] == [0]


def test_describe_log_dirs(broker, kp) -> None:
    name = topic_name("ld")
    create_topic(broker.bootstrap, name, 2)
    CONFLUENT.produce(broker.bootstrap, name, [Rec(b"k", b"v" * 500, partition=0)])
    (result,) = kp.describe_log_dirs()
    assert result["broker"] == 0
    (entry,) = result["log_dirs"]
    assert (entry["error_code"], entry["log_dir"]) == (0, str(log_dir(broker)))
    assert entry["total_bytes"] >= entry["usable_bytes"] > 0
    sizes = {p["partition_index"]: p["partition_size"]
             for t in entry["topics"] if t["name"] == name for p in t["partitions"]}
    assert sizes[0] > 500 and sizes[1] == 0
    # asking for some partitions only (and one that does not exist)
    body = {"topics": [{"topic": name, "partitions": [1, 9]}]}
    raw = send_request(broker.bootstrap, ApiKey.DESCRIBE_LOG_DIRS, 4, body)
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
    raw = send_request(broker.bootstrap, ApiKey.ELECT_LEADERS, 2, body)
    parts = {p.partition_id: p.error_code for p in raw.replica_election_results[0]
             .partition_result}
    assert parts == {0: ErrorCode.ELECTION_NOT_NEEDED, 7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    kp.elect_leaders(0, {name: [0, 1]})  # ELECTION_NOT_NEEDED is not an error for it
