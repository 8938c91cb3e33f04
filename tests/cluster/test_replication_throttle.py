"""Replication quotas on a three-broker cluster over a real ZooKeeper (a chroot of the session's
server): kafka-reassign-partitions --throttle holds a reassignment to its rate while acks=all
produce goes on, to another partition and to the moving one (its in-sync replicas are never
held back), and --verify removes the throttles once it is done.

Scaled to a shared 2-core machine: a partition of ~30 MB copied under a 3 MB/s throttle (both
the leader's and the follower's rate) takes about 10 s, and unthrottled far less. The issue's
1 GB at 10 MB/s belongs in a benchmark, not here.
"""
from __future__ import annotations

import json
import statistics
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from pybroker.quota.replication_quota import UNLIMITED
from pybroker.testing.cluster import Cluster
from tests.cluster.conftest import ZooKeeperChroot
from pybroker.tools import configs, reassign_partitions

VALUE = 500_000
RECORDS = 60  # 30 MB
THROTTLE = 3_000_000


@pytest.fixture
def cluster(zookeeper: ZooKeeperChroot, tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(3, zookeeper=zookeeper.connect, log_dir=tmp_path / "logs",
                 http_listeners="http://127.0.0.1:0") as c:
        yield c


def _throttled_rate(cluster: Cluster, node: int, role: str) -> float:
    """pybroker_replication_throttled_bytes_per_second{role} on `node`'s /metrics."""
    port = cluster.server(node).http_port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return next(s.value for family in text_string_to_metric_families(text)
                for s in family.samples
                if s.name == "pybroker_replication_throttled_bytes_per_second"
                and s.labels == {"role": role})


def _produce(bootstrap: str, topic: str, count: int, size: int, acks: str = "1") -> None:
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "message.max.bytes": 1_000_000, "message.timeout.ms": 30000})
    for _ in range(count):
        producer.produce(topic, b"v" * size, partition=0,
                         on_delivery=lambda e, m: errors.append(e) if e else None)
        producer.poll(0)
    assert producer.flush(60) == 0 and errors == []


def _reassign(cluster: Cluster, plan: Path, *argv: str,
              capsys: pytest.CaptureFixture[str]) -> list[str]:
    capsys.readouterr()
    rc = reassign_partitions.main(["--bootstrap-server", cluster.bootstrap,
                                   "--reassignment-json-file", str(plan), *argv])
    out, err = capsys.readouterr()
    assert (rc, err) == (0, ""), out
    return out.splitlines()


def _move(cluster: Cluster, tmp_path: Path, replicas: list[int], *argv: str,
          capsys: pytest.CaptureFixture[str]) -> tuple[float, list[str], Path]:
    """Run --execute and wait for the move: its duration, the execute output, the plan."""
    plan = tmp_path / f"plan-{'-'.join(map(str, replicas))}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moved", "partition": 0, "replicas": replicas}]}))
    began = time.monotonic()
    lines = _reassign(cluster, plan, "--execute", *argv, capsys=capsys)
    _wait_done(cluster, plan, capsys)
    return time.monotonic() - began, lines, plan


def _done(cluster: Cluster, plan: Path, capsys: pytest.CaptureFixture[str]) -> bool:
    """--verify says the move is done (and then clears the throttles, as Kafka)."""
    verified = _reassign(cluster, plan, "--verify", capsys=capsys)
    return "Reassignment of partition moved-0 is completed." in verified


def _wait_done(cluster: Cluster, plan: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster.wait_until(lambda: _done(cluster, plan, capsys), "the reassignment to finish",
                       timeout=90)


def test_a_throttled_reassignment_keeps_to_its_rate(cluster: Cluster, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    cluster.create_topic("moved", replication_factor=1)
    cluster.create_topic("busy", replication_factor=3)
    (first,) = cluster.replicas_of("moved")
    second, third = sorted({0, 1, 2} - {first})
    _produce(cluster.bootstrap, "moved", RECORDS, VALUE)

    free, _, plan = _move(cluster, tmp_path, [first, second], capsys=capsys)

    plan = tmp_path / "throttled.json"
    began = time.monotonic()
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moved", "partition": 0, "replicas": [first, second, third]}]}))
    lines = _reassign(cluster, plan, "--execute", "--throttle", str(THROTTLE), capsys=capsys)
    assert lines[5:] == [
        "Warning: You must run --verify periodically, until the reassignment completes, to "
        "ensure the throttle is removed.",
        f"The inter-broker throttle limit was set to {THROTTLE} B/s",
        "Successfully started partition reassignment for moved-0"]
    # The lists name the sources as leaders and the new replica as follower; every broker
    # taking part applies the rates.
    config = cluster.server(first).broker.topic_configs.topic_config("moved")
    assert config.leader_replication_throttled_replicas == \
        tuple(sorted(f"0:{b}" for b in (first, second)))
    assert config.follower_replication_throttled_replicas == (f"0:{third}",)
    cluster.wait_until(lambda: all(
        cluster.server(n).broker.dynamic_config.current.leader_replication_throttled_rate
        == THROTTLE for n in (0, 1, 2)), "the brokers to apply the rates")
    # Produce with acks=all to another partition goes on, in sync replicas never throttled.
    # The leader's and the new follower's /metrics show the rate they keep to.
    rates: list[tuple[float, float]] = []
    waits: dict[str, list[float]] = {"busy": [], "moved": []}
    while len(cluster.isr_of("moved")) != 3:
        if time.monotonic() - began > 4 and not rates:
            rates.append((_throttled_rate(cluster, first, "leader"),
                          _throttled_rate(cluster, third, "follower")))
        # To another partition, and to the moving one: its in-sync replicas are in the
        # leader list too, yet never held back, so acks=all is not slowed.
        for topic in ("busy", "moved"):
            sent = time.monotonic()
            _produce(cluster.bootstrap, topic, 1, 1000, acks="all")
            waits[topic].append(time.monotonic() - sent)
        assert time.monotonic() - began < 90, "the throttled reassignment to finish"
        time.sleep(0.2)
    throttled = time.monotonic() - began
    with capsys.disabled():
        print(f"30 MB moved: {free:.1f} s unthrottled, {throttled:.1f} s at {THROTTLE} B/s; "
              f"{2 * len(waits['moved'])} acks=all produces meanwhile; "
              f"leader and follower rates at 4 s {rates}; median acks busy "
              f"{statistics.median(waits['busy']):.3f} s, moved "
              f"{statistics.median(waits['moved']):.3f} s")
    assert 7 <= throttled <= 30
    assert rates and all(THROTTLE * 0.5 < r < THROTTLE * 1.5 for r in rates[0]), rates
    assert free < throttled / 2
    assert len(waits["moved"]) >= 10
    # Were the in-sync follower of "moved" held back with the new one, its acks=all would
    # wait on the throttle (median 0.4 s measured, against 0.007 s for "busy"); measured
    # side by side, so load slows both alike.
    busy, moved = statistics.median(waits["busy"]), statistics.median(waits["moved"])
    assert moved <= 3 * busy + 0.1, waits

    def recorded_done() -> bool:
        state = cluster.server(cluster.controller).broker.metadata.image.partition("moved", 0)
        return state is not None and not state.adding_replicas
    cluster.wait_until(recorded_done, "the move to be recorded done")
    assert _reassign(cluster, plan, "--verify", capsys=capsys) == [
        "Status of partition reassignment:", "Reassignment of partition moved-0 is completed.",
        "", "Clearing broker-level throttles on brokers 0,1,2",
        "Clearing topic-level throttles on topic moved"]

    def cleared() -> bool:
        for n in (0, 1, 2):
            broker = cluster.server(n).broker
            current = broker.dynamic_config.current
            topic = broker.topic_configs.topic_config("moved")
            if (current.leader_replication_throttled_rate,
                    current.follower_replication_throttled_rate) != (UNLIMITED, UNLIMITED) \
                    or topic.leader_replication_throttled_replicas \
                    or topic.follower_replication_throttled_replicas:
                return False
        return True
    cluster.wait_until(cleared, "every broker to drop the throttles")


@pytest.mark.parametrize("role", ["leader", "follower"])
def test_either_side_alone_holds_the_move_to_its_rate(cluster: Cluster, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str],
                                                      role: str) -> None:
    """Set by kafka-configs, one side only: the leader's rate on the source broker, or the
    follower's on the new replica's broker, each with its list; either alone keeps the
    copy to its rate."""
    cluster.create_topic("moved", replication_factor=1)
    (first,) = cluster.replicas_of("moved")
    second = min({0, 1, 2} - {first})
    _produce(cluster.bootstrap, "moved", RECORDS, VALUE)
    throttled_broker = first if role == "leader" else second
    for argv in (["--entity-type", "topics", "--entity-name", "moved", "--add-config",
                  f"leader.replication.throttled.replicas=0:{first},"
                  f"follower.replication.throttled.replicas=0:{second}"],
                 ["--entity-type", "brokers", "--entity-name", str(throttled_broker),
                  "--add-config", f"{role}.replication.throttled.rate={THROTTLE}"]):
        assert configs.main(["--bootstrap-server", cluster.bootstrap, "--alter", *argv]) == 0
    cluster.wait_until(lambda: getattr(
        cluster.server(throttled_broker).broker.dynamic_config.current,
        f"{role}_replication_throttled_rate") == THROTTLE, "the broker to apply the rate")
    took, _, _ = _move(cluster, tmp_path, [first, second], capsys=capsys)
    with capsys.disabled():
        print(f"30 MB moved in {took:.1f} s with only the {role} throttled at {THROTTLE} B/s")
    assert 7 <= took <= 30
