"""The cluster's settings do what Kafka's do: preferred-leader rebalance, controlled shutdown
and its bounds, the follower's fetch sizes and waits."""
from __future__ import annotations

import time
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer

from tests.cluster.brokers import SESSION_TIMEOUT_MS, running_cluster
from tests.cluster.test_failover import create_topic


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
        preferred = json_replicas(cluster, "pref")[0]
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
        preferred = json_replicas(cluster, "stay")[0]
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
