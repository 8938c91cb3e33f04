"""The cluster's settings do what Kafka's do: preferred-leader rebalance, controlled shutdown
and its bounds, the follower's fetch sizes and waits."""
from __future__ import annotations

import time
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer

from tests.cluster.brokers import SESSION_TIMEOUT_MS, create_topic, running_cluster


def test_leadership_returns_to_the_preferred_replica(tmp_path: Path, zookeeper
                                                     ) -> None:  # type: ignore[no-untyped-def]
    """auto.leader.rebalance.enable with leader.imbalance.check.interval.seconds=1 and
    leader.imbalance.per.broker.percentage=0: after its preferred leader is killed and comes
    back in sync, the partition is led by it again, without anyone asking."""
    with running_cluster(tmp_path, zookeeper.connect, **{
            "auto.leader.rebalance.enable": "true",
            "leader.imbalance.check.interval.seconds": "1",
            "leader.imbalance.per.broker.percentage": "0"}) as cluster:
        create_topic(cluster, "pref")
        preferred = cluster.node_of(json_replicas(cluster, "pref")[0])  # its node
        assert cluster.leader("pref", 0) == preferred
        cluster.kill(preferred)
        cluster.wait_until(lambda: cluster.leader("pref", 0) not in (preferred, -1),
                           SESSION_TIMEOUT_MS / 1000 + 10, "a new leader")
        cluster.start(preferred)
        cluster.wait_until(lambda: cluster.leader("pref", 0) == preferred, 30,
                           "leadership back on the preferred replica")


def test_without_rebalance_leadership_stays_where_it_moved(tmp_path: Path, zookeeper
                                                           ) -> None:  # type: ignore[no-untyped-def]
    with running_cluster(tmp_path, zookeeper.connect, **{
            "auto.leader.rebalance.enable": "false",
            "leader.imbalance.check.interval.seconds": "1"}) as cluster:
        create_topic(cluster, "stay")
        preferred = cluster.node_of(json_replicas(cluster, "stay")[0])  # its node
        cluster.kill(preferred)
        cluster.wait_until(lambda: cluster.leader("stay", 0) not in (preferred, -1),
                           SESSION_TIMEOUT_MS / 1000 + 10, "a new leader")
        moved = cluster.leader("stay", 0)
        cluster.start(preferred)
        cluster.wait_isr("stay", 0, set(cluster.ids))
        time.sleep(3)
        assert cluster.leader("stay", 0) == moved


def test_controlled_shutdown_is_bounded_and_can_be_turned_off(tmp_path: Path, zookeeper
                                                              ) -> None:  # type: ignore[no-untyped-def]
    """With the controller paused nobody moves the leadership: SIGTERM waits
    (controlled.shutdown.max.retries + 1) * controlled.shutdown.retry.backoff.ms, says the
    controlled shutdown did not complete, and stops anyway. With
    controlled.shutdown.enable=false a broker stops at once without asking."""
    with running_cluster(tmp_path, zookeeper.connect, **{
            "controlled.shutdown.max.retries": "1",
            "controlled.shutdown.retry.backoff.ms": "1000"}) as cluster:
        create_topic(cluster, "bounded", partitions=3)
        controller = cluster.controller()
        led = {cluster.leader("bounded", p) for p in range(3)} - {controller}
        victim = sorted(led)[0]
        cluster.pause(controller)
        try:
            started = time.monotonic()
            assert cluster.stop(victim) == 0
            took = time.monotonic() - started
        finally:
            cluster.resume(controller)
        assert 1.8 < took < 15, took
        assert any("controlled shutdown did not complete" in ln
                   for ln in cluster.brokers[victim].stderr_lines)
    with running_cluster(tmp_path / "off", zookeeper.connect, chroot="/off",
                         **{"controlled.shutdown.enable": "false"}) as cluster:
        create_topic(cluster, "abrupt")
        leader = cluster.leader("abrupt", 0)
        assert cluster.stop(leader) == 0
        assert not any("controlled shutdown" in ln for ln in cluster.brokers[leader].stderr_lines)


def test_tiny_fetch_limits_still_replicate_large_batches(tmp_path: Path, zookeeper
                                                         ) -> None:  # type: ignore[no-untyped-def]
    """replica.fetch.max.bytes and replica.fetch.response.max.bytes far below a batch: the
    first batch still comes whole (Kafka's rule), so followers keep up; with
    replica.fetch.wait.max.ms, replica.fetch.min.bytes and replica.socket.timeout.ms set, the
    ISR stays full and acks=all succeeds."""
    with running_cluster(tmp_path, zookeeper.connect, **{
            "replica.fetch.max.bytes": "1024", "replica.fetch.response.max.bytes": "1024",
            "replica.fetch.wait.max.ms": "100", "replica.fetch.min.bytes": "1",
            "replica.socket.timeout.ms": "5000"}) as cluster:
        create_topic(cluster, "big")
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap().split(","), acks="all",
                                 batch_size=200_000, linger_ms=50,
                                 max_request_size=2_000_000)
        for i in range(20):
            producer.send("big", b"x" * 50_000 + b"%d" % i)
        producer.flush(timeout=60)
        producer.close()
        copies = {n: cluster.segment_bytes(n, "big", 0) for n in cluster.ids}
        assert len(set(copies.values())) == 1 and len(copies[1]) > 1_000_000
        consumer = KafkaConsumer("big", bootstrap_servers=cluster.bootstrap().split(","),
                                 auto_offset_reset="earliest", consumer_timeout_ms=10000)
        assert len(list(consumer)) == 20
        consumer.close()


def json_replicas(cluster, topic: str) -> list[int]:  # type: ignore[no-untyped-def]
    import json
    raw, _ = cluster.zk.get(f"/brokers/topics/{topic}")
    return json.loads(raw)["partitions"]["0"]


def test_reassignment_moves_a_partition_to_other_brokers(tmp_path: Path, zookeeper
                                                         ) -> None:  # type: ignore[no-untyped-def]
    """Four brokers, a partition on [1, 2, 3] moved to [2, 3, 4] with kafka-python's
    AlterPartitionReassignments: listed as in progress while broker 4 catches up (adding 4,
    removing 1), then done: replicas [2, 3, 4], broker 1's copy removed, broker 4's
    byte-identical to the others, every record readable. Cancelling when nothing moves is
    NO_REASSIGNMENT_IN_PROGRESS."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import NoReassignmentInProgressError

    with running_cluster(tmp_path, zookeeper.connect, size=4) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap().split(","))
        try:
            admin.create_topics([NewTopic("moving", replica_assignments={0: [1, 2, 3]},
                                          topic_configs={"min.insync.replicas": "2"})])
            cluster.wait_isr("moving", 0, {1, 2, 3})
            producer = KafkaProducer(bootstrap_servers=cluster.bootstrap().split(","),
                                     acks="all", linger_ms=20)
            for i in range(3000):
                producer.send("moving", b"%06d" % i + b"." * 500)
            producer.flush(timeout=60)
            tp = TopicPartition("moving", 0)
            cluster.pause(4)  # registered still, but cannot catch up: the move waits
            try:
                result = admin.alter_partition_reassignments({tp: [2, 3, 4]})
                assert result == {tp: None}
                ongoing = admin.list_partition_reassignments()
            finally:
                cluster.resume(4)
            assert ongoing == {tp: {"replicas": [2, 3, 4, 1], "adding_replicas": [4],
                                    "removing_replicas": [1]}}, ongoing
            cluster.wait_until(lambda: json_replicas(cluster, "moving") == [2, 3, 4], 60,
                               "the reassignment to complete")
            cluster.wait_isr("moving", 0, {2, 3, 4})
            assert cluster.leader("moving", 0) in (2, 3, 4)
            assert admin.list_partition_reassignments() == {}
            result = admin.alter_partition_reassignments({tp: None})
            assert result[tp] is NoReassignmentInProgressError
            producer.send("moving", b"after").get(timeout=30)
            producer.close()
        finally:
            admin.close()
        cluster.wait_until(lambda: not (tmp_path / "broker-1" / "moving-0").exists(), 30,
                           "broker 1's copy to be removed")
        copies = {n: cluster.segment_bytes(n, "moving", 0) for n in (2, 3, 4)}
        assert len(set(copies.values())) == 1
        consumer = KafkaConsumer("moving", bootstrap_servers=cluster.bootstrap().split(","),
                                 auto_offset_reset="earliest", consumer_timeout_ms=10000)
        assert len(list(consumer)) == 3001
        consumer.close()
