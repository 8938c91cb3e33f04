"""pybroker.testing.cluster.Cluster from a client's point of view: three brokers in one
process, no ZooKeeper server; acks=all produce survives the leader's stop, every acknowledged
record is readable, a restarted broker rejoins the ISR, and a moved leadership is followed.
The same failover with `zookeeper=True` (a real ZooKeeper server and kazoo), where the
machine has ZooKeeper (bin/test installs it), and a session that server expires."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pybroker.testing.cluster import Cluster
from pybroker.testing.zookeeper import ZooKeeperNotInstalled, zookeeper_home


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(3) as running:
        yield running


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> list[int]:
    """acks=all; the offset of each acknowledged record (every one must be)."""
    acked: list[int] = []
    errors: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append(msg.offset())  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 20000, "retry.backoff.ms": 50,
                         "topic.metadata.refresh.interval.ms": 1000})
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert errors == []
    assert len(acked) == len(values)
    return acked


def _consume_all(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes]] = []
    try:
        for _ in range(200):
            if len(got) >= count:
                break
            for msg in consumer.consume(num_messages=count, timeout=0.2):
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return got


def _client_leader(bootstrap: str, topic: str) -> int:
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return meta.topics[topic].partitions[0].leader


@pytest.fixture(scope="module")
def zk_cluster() -> Iterator[Cluster]:
    try:
        zookeeper_home()
    except ZooKeeperNotInstalled as exc:
        pytest.skip(f"{exc} (bin/test installs it)")
    with Cluster(3, zookeeper=True) as running:
        yield running


@pytest.mark.parametrize("which", ["memory", "zookeeper"])
def test_acks_all_survives_the_leaders_stop_and_the_old_leader_rejoins(
        which: str, request: pytest.FixtureRequest) -> None:
    cluster: Cluster = request.getfixturevalue("cluster" if which == "memory" else "zk_cluster")
    topic = "failover"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(15)
    cluster.wait_for_isr(topic, 0)
    first = [f"a{i}".encode() for i in range(50)]
    acked = _produce(cluster.bootstrap, topic, first)
    assert sorted(acked) == list(range(50))

    old = cluster.leader_of(topic, 0)
    cluster.stop_broker(old)
    cluster.wait_until(lambda: cluster.leader_of(topic, 0) not in (-1, old), "a new leader")
    new = cluster.leader_of(topic, 0)
    assert old not in cluster.isr_of(topic, 0)
    assert _client_leader(cluster.bootstrap, topic) == new

    second = [f"b{i}".encode() for i in range(50)]
    acked += _produce(cluster.bootstrap, topic, second)
    got = _consume_all(cluster.bootstrap, topic, 100)
    assert sorted(got) == list(enumerate(first + second))

    cluster.start_broker(old)
    cluster.wait_for_isr(topic, 0, {0, 1, 2})
    # The restarted broker copied what it missed: the ISR has it only once it caught up.
    log = cluster.server(old).broker.logs.get(topic, 0)
    assert log is not None and log.log_end_offset == 100
    assert cluster.leader_of(topic, 0) == new  # no election back without a rebalance


def test_move_leader_is_followed_by_clients(cluster: Cluster) -> None:
    topic = "moving"
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    acked = _produce(cluster.bootstrap, topic, [b"x0", b"x1"])
    old = cluster.leader_of(topic, 0)
    to = next(r for r in cluster.replicas_of(topic, 0) if r != old)
    cluster.move_leader(topic, 0, to)
    assert cluster.leader_of(topic, 0) == to
    assert cluster.replicas_of(topic, 0)[0] == to  # now the preferred replica
    assert _client_leader(cluster.bootstrap, topic) == to
    acked += _produce(cluster.bootstrap, topic, [b"x2", b"x3"])
    assert sorted(acked) == [0, 1, 2, 3]
    assert [v for _, v in sorted(_consume_all(cluster.bootstrap, topic, 4))] == \
        [b"x0", b"x1", b"x2", b"x3"]
    with pytest.raises(ValueError):
        cluster.move_leader(topic, 0, 7)


def test_controller_stop_and_a_leaders_session_expiry(cluster: Cluster) -> None:
    topic = "bounced"
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    controller = cluster.controller
    cluster.stop_broker(controller)
    assert cluster.controller not in (-1, controller)  # a survivor was elected
    assert cluster.leader_of(topic, 0) not in (-1, controller)
    cluster.start_broker(controller)
    cluster.wait_for_isr(topic, 0)
    # A leader whose session expired registers again at once, under a new epoch: the
    # controller handles it as failed and back, and elects another leader.
    leader = next(r for r in cluster.replicas_of(topic, 0) if r != cluster.controller)
    cluster.move_leader(topic, 0, leader)
    cluster.expire_session(leader)
    cluster.wait_until(lambda: cluster.leader_of(topic, 0) not in (-1, leader),
                       "a leader other than the expired one", 10)
    cluster.wait_for_isr(topic, 0)
    assert _produce(cluster.bootstrap, topic, [b"after"]) == [0]


def test_a_real_zookeeper_expires_a_leaders_session(zk_cluster: Cluster) -> None:
    """The server ends the session (not a fake client): the broker's registration goes, the
    controller elects another leader, and the broker registers again under a new session."""
    cluster = zk_cluster
    assert cluster.zookeeper_server is not None and cluster.zookeeper_server.is_ok()
    assert cluster.zookeeper_connect.startswith(cluster.zookeeper_server.connect + "/pybroker-")
    topic = "expired"
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    leader = next(r for r in cluster.replicas_of(topic, 0) if r != cluster.controller)
    cluster.move_leader(topic, 0, leader)
    session = cluster.server(leader).broker.zk_store.zk.client_id  # type: ignore[union-attr]
    cluster.expire_session(leader)
    assert cluster.server(leader).broker.zk_store.zk.client_id[0] != session[0]  # type: ignore[union-attr]
    cluster.wait_until(lambda: cluster.leader_of(topic, 0) not in (-1, leader),
                       "a leader other than the expired one", 20)
    cluster.wait_for_isr(topic, 0)
    assert _produce(cluster.bootstrap, topic, [b"after"]) == [0]


def test_a_cluster_on_an_ensemble_that_runs_keeps_to_its_chroot(zk_cluster: Cluster) -> None:
    """zookeeper="host:port": no server of its own, a chroot of its own: the two clusters on
    one ZooKeeper see only their own brokers and topics."""
    assert zk_cluster.zookeeper_server is not None
    hosts = zk_cluster.zookeeper_server.connect
    with Cluster(1, zookeeper=hosts) as other:
        assert other.zookeeper_server is None
        assert other.zookeeper_connect.startswith(hosts + "/pybroker-")
        assert other.zookeeper_connect != zk_cluster.zookeeper_connect
        other.create_topic("elsewhere", replication_factor=1)
        assert _produce(other.bootstrap, "elsewhere", [b"x"]) == [0]
        assert set(other.server(0).broker.metadata.image.brokers) == {0}
        assert zk_cluster.leader_of("elsewhere", 0) == -1
    assert zk_cluster.zookeeper_server.is_ok()  # left running: not the other cluster's


def test_zookeeper_true_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOOKEEPER_HOME", "/nonexistent")
    with pytest.raises(ZooKeeperNotInstalled,
                       match=r"^zookeeper is not installed \(no /nonexistent/bin/zkEnv.sh\): "
                             r"apt-get install zookeeper$"):
        Cluster(3, zookeeper=True)
