"""Replication and failover with real subprocess brokers, a real ZooKeeper and a stock client
(kafka-python): Kafka's three-broker quickstart, and acknowledged records through faults."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import NotEnoughReplicasError

from tests.cluster.brokers import (
    LAG_TIME_MS, SESSION_TIMEOUT_MS, Cluster, create_topic, running_cluster,
)
from tests.cluster.checker import History, check
from tests.cluster.workload import AckedProducer, read_all


def assert_nothing_acked_lost(cluster: Cluster, topic: str, history: History,
                              partitions: int = 1) -> None:
    """After the faults healed: every acknowledged record of `topic` reads back where and
    as it was acknowledged (the checker finds nothing), and every broker holds the same bytes
    of each partition (the replicas converged)."""
    read_all(cluster.bootstrap(), topic, history, partitions)
    problems = check(history)
    assert not problems, problems[:10]
    for p in range(partitions):
        copies = {n: cluster.segment_bytes(n, topic, p) for n in cluster.ids}
        assert len(set(copies.values())) == 1, {n: len(b) for n, b in copies.items()}


def test_quickstart_kill_the_leader(tmp_path: Path, zookeeper) -> None:  # type: ignore[no-untyped-def]
    """Kafka's quickstart: three brokers, a topic with replication factor 3, two messages,
    kill -9 of the leader: a new leader within the session timeout, an ISR without the dead
    broker, and both messages still there."""
    with running_cluster(tmp_path, zookeeper.connect) as cluster:
        create_topic(cluster, "quick")
        state = cluster.state("quick", 0)
        # brokers, or on nodes (PYBROKER_NUM_CORES) a broker of each node
        assert sorted(map(cluster.node_of, state["isr"])) == [1, 2, 3]
        assert cluster.node_of(state["leader"]) in (1, 2, 3)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap().split(","), acks="all")
        for value in (b"first", b"second"):
            producer.send("quick", value).get(timeout=30)
        producer.close()
        old = cluster.node_of(state["leader"])
        killed_at = time.monotonic()
        cluster.kill(old)
        cluster.wait_until(lambda: cluster.leader("quick", 0) not in (old, -1),
                           SESSION_TIMEOUT_MS / 1000 + 10, "a new leader")
        elected = time.monotonic() - killed_at
        assert elected < SESSION_TIMEOUT_MS / 1000 + 5
        new_state = cluster.state("quick", 0)
        assert old not in map(cluster.node_of, new_state["isr"]) and len(new_state["isr"]) == 2
        assert new_state["leader_epoch"] > state["leader_epoch"]
        consumer = KafkaConsumer("quick", bootstrap_servers=cluster.bootstrap().split(","),
                                 auto_offset_reset="earliest", consumer_timeout_ms=10000)
        got = [m.value for m in consumer]
        consumer.close()
        assert got == [b"first", b"second"]


def test_acked_records_survive_leader_and_controller_kills(tmp_path: Path, zookeeper
                                                           ) -> None:  # type: ignore[no-untyped-def]
    """RF 3, min.insync.replicas 2, acks=all, idempotence: kill -9 a leader, restart it, kill
    -9 the controller, restart it, all under load. Every acknowledged record is read back at
    the offset it was acknowledged at, once, in order; the replicas end byte-identical."""
    with running_cluster(tmp_path, zookeeper.connect) as cluster:
        create_topic(cluster, "jepsen", partitions=3)
        producer = AckedProducer(cluster.bootstrap(), "jepsen", rate=300).start()
        try:
            producer.wait_acked(200)
            for victim in (cluster.leader("jepsen", 0), cluster.controller()):
                before = producer.acked_count()
                cluster.kill(victim)
                producer.wait_acked(before + 300, timeout=SESSION_TIMEOUT_MS / 1000 + 40)
                cluster.start(victim)
                for p in range(3):
                    cluster.wait_isr("jepsen", p, {1, 2, 3}, timeout=60)
        finally:
            history = producer.stop()
        assert_nothing_acked_lost(cluster, "jepsen", history, 3)
        assert len(history.acked) >= 800


def test_two_brokers_down_refuses_acks_all_but_reads_go_on(tmp_path: Path, zookeeper
                                                           ) -> None:  # type: ignore[no-untyped-def]
    """With two of three brokers stopped the ISR is one: acks=all gets NOT_ENOUGH_REPLICAS,
    acks=1 still writes, and what was committed before is still read."""
    with running_cluster(tmp_path, zookeeper.connect) as cluster:
        create_topic(cluster, "two-down")
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap().split(","), acks="all")
        producer.send("two-down", b"committed").get(timeout=30)
        producer.close()
        leader = cluster.leader("two-down", 0)
        others = [n for n in cluster.ids if n != leader]
        for n in others:
            cluster.kill(n)
        cluster.wait_isr("two-down", 0, {leader}, timeout=SESSION_TIMEOUT_MS / 1000 + 20)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap().split(","), acks="all",
                                 retries=0)
        with pytest.raises(NotEnoughReplicasError):
            producer.send("two-down", b"refused").get(timeout=30)
        producer.close()
        consumer = KafkaConsumer("two-down", bootstrap_servers=cluster.bootstrap().split(","),
                                 auto_offset_reset="earliest", consumer_timeout_ms=5000)
        assert [m.value for m in consumer] == [b"committed"]
        consumer.close()


def test_sigterm_moves_leadership_before_exit(tmp_path: Path, zookeeper
                                              ) -> None:  # type: ignore[no-untyped-def]
    """Controlled shutdown: SIGTERM to a leader moves its leaderships to in-sync replicas
    before the process exits (exit code 0), so writes fail over in about a second instead of
    a session timeout."""
    with running_cluster(tmp_path, zookeeper.connect) as cluster:
        create_topic(cluster, "calm")
        leader = cluster.leader("calm", 0)
        epoch = cluster.state("calm", 0)["leader_epoch"]
        started = time.monotonic()
        assert cluster.stop(leader) == 0, "".join(cluster.brokers[leader].stderr_lines[-30:])
        stopped = time.monotonic() - started
        state = cluster.state("calm", 0)
        assert cluster.node_of(state["leader"]) not in (leader, -1)
        assert state["leader_epoch"] > epoch
        assert leader not in map(cluster.node_of, state["isr"])
        assert stopped < SESSION_TIMEOUT_MS / 1000
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap().split(","), acks="all")
        producer.send("calm", b"after").get(timeout=30)
        producer.close()


def test_last_isr_member_down_leaves_the_partition_offline(tmp_path: Path, zookeeper
                                                           ) -> None:  # type: ignore[no-untyped-def]
    """Shrink the ISR to one broker, then kill it: the partition has no leader (the ISR keeps
    its last member, as Kafka never empties it), Metadata says LEADER_NOT_AVAILABLE with
    leader -1, and only that broker can lead again: when it comes back it does, with every
    acknowledged record."""
    with running_cluster(tmp_path, zookeeper.connect) as cluster:
        create_topic(cluster, "last", min_isr=1)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap().split(","), acks="all")
        producer.send("last", b"kept").get(timeout=30)
        producer.close()
        last = cluster.leader("last", 0)
        others = [n for n in cluster.ids if n != last]
        for n in others:
            cluster.kill(n)
        cluster.wait_isr("last", 0, {last}, timeout=SESSION_TIMEOUT_MS / 1000 + 20)
        cluster.kill(last)
        # A broker outside the ISR comes back and becomes controller: it must not lead (no
        # unclean election); the partition goes offline, keeping its last ISR member.
        cluster.start(others[0])
        cluster.wait_until(lambda: cluster.state("last", 0)["leader"] == -1,
                           SESSION_TIMEOUT_MS / 1000 + 20, "the partition to go offline")
        assert [cluster.node_of(b) for b in cluster.state("last", 0)["isr"]] == [last]
        from kafka import KafkaAdminClient
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap().split(","))
        try:
            meta = admin.describe_topics(["last"])[0]
        finally:
            admin.close()
        part = meta["partitions"][0]
        assert part["leader_id"] == -1 and part["error_code"] == 5  # LEADER_NOT_AVAILABLE
        assert sorted(map(cluster.node_of, part["offline_replicas"])) == sorted([last, others[1]])
        cluster.start(last)
        cluster.wait_until(lambda: cluster.leader("last", 0) == last, 30, "the last ISR member")
        consumer = KafkaConsumer("last", bootstrap_servers=cluster.bootstrap().split(","),
                                 auto_offset_reset="earliest", consumer_timeout_ms=10000)
        assert [m.value for m in consumer] == [b"kept"]
        consumer.close()


def test_producer_ids_are_unique_across_brokers(tmp_path: Path, zookeeper
                                                ) -> None:  # type: ignore[no-untyped-def]
    """Idempotent producers on different brokers get different producer ids: blocks come
    from /latest_producer_id_block, claimed conditionally, and a restarted broker claims a
    new block rather than reusing its old one."""
    import trio

    from protocol.api_keys import ApiKey
    from pybroker.client.connection import BrokerConnection

    async def pid_from(port: int) -> int:
        async with trio.open_nursery() as nursery:
            conn = await BrokerConnection.open("127.0.0.1", port, nursery=nursery)
            response = await conn.request(ApiKey.INIT_PRODUCER_ID, {
                "transactional_id": None, "transaction_timeout_ms": 60000,
                "producer_id": -1, "producer_epoch": -1})
            await conn.aclose()
            nursery.cancel_scope.cancel()
            assert response.error_code == 0
            return response.producer_id

    with running_cluster(tmp_path, zookeeper.connect) as cluster:
        pids = [trio.run(pid_from, cluster.brokers[n].port) for n in cluster.ids for _ in range(2)]
        cluster.kill(1)
        cluster.start(1)
        pids.append(trio.run(pid_from, cluster.brokers[1].port))
        assert len(set(pids)) == len(pids), pids
        block = json.loads(cluster.zk.get("/latest_producer_id_block")[0])
        assert block["version"] == 1 and int(block["block_end"]) - int(block["block_start"]) == 999


def test_paused_follower_leaves_the_isr_and_rejoins(tmp_path: Path, zookeeper
                                                    ) -> None:  # type: ignore[no-untyped-def]
    """A follower that stops fetching (SIGSTOP, shorter than the session) leaves the ISR
    within replica.lag.time.max.ms while acks=all writes go on with the other two; resumed,
    it catches up and rejoins, and the copies are identical."""
    with running_cluster(tmp_path, zookeeper.connect) as cluster:
        create_topic(cluster, "lagging")
        leader = cluster.leader("lagging", 0)
        follower = next(n for n in cluster.ids if n != leader)
        producer = AckedProducer(cluster.bootstrap(), "lagging", rate=100).start()
        try:
            producer.wait_acked(50)
            cluster.pause(follower)
            paused = time.monotonic()
            cluster.wait_isr("lagging", 0, set(cluster.ids) - {follower}, timeout=20)
            assert time.monotonic() - paused < LAG_TIME_MS / 1000 + 5
            before = producer.acked_count()
            producer.wait_acked(before + 100, timeout=30)
            cluster.resume(follower)
            cluster.wait_isr("lagging", 0, set(cluster.ids), timeout=30)
        finally:
            history = producer.stop()
        assert_nothing_acked_lost(cluster, "lagging", history)


def test_zombie_leader_paused_past_its_session(tmp_path: Path, zookeeper
                                               ) -> None:  # type: ignore[no-untyped-def]
    """SIGSTOP of a leader for longer than the ZooKeeper session: another broker takes over;
    resumed, the old leader has acknowledged no acks=all write meanwhile, truncates what it
    alone had, rejoins as a follower, and nothing acknowledged is lost."""
    with running_cluster(tmp_path, zookeeper.connect) as cluster:
        create_topic(cluster, "zombie")
        old = cluster.leader("zombie", 0)
        producer = AckedProducer(cluster.bootstrap(), "zombie", rate=100).start()
        try:
            producer.wait_acked(50)
            cluster.pause(old)
            cluster.wait_until(lambda: cluster.leader("zombie", 0) not in (old, -1),
                               SESSION_TIMEOUT_MS / 1000 + 15, "a new leader")
            before = producer.acked_count()
            producer.wait_acked(before + 100, timeout=30)
            cluster.resume(old)
            cluster.wait_isr("zombie", 0, set(cluster.ids), timeout=40)
        finally:
            history = producer.stop()
        assert_nothing_acked_lost(cluster, "zombie", history)
        assert any("registered broker" in ln for ln in cluster.brokers[old].stderr_lines[-200:])


def test_consumer_group_resumes_after_its_coordinator_dies(tmp_path: Path, zookeeper
                                                           ) -> None:  # type: ignore[no-untyped-def]
    """__consumer_offsets is replicated (factor 3): kill -9 the leader of the group's
    offsets partition, and a consumer of the group resumes from its committed offset on the
    new coordinator."""
    with running_cluster(tmp_path, zookeeper.connect) as cluster:
        create_topic(cluster, "orders")
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap().split(","), acks="all")
        for i in range(10):
            producer.send("orders", b"o%d" % i)
        producer.flush()
        consumer = KafkaConsumer("orders", bootstrap_servers=cluster.bootstrap().split(","),
                                 group_id="billing", auto_offset_reset="earliest",
                                 enable_auto_commit=False, consumer_timeout_ms=10000)
        first = []
        for message in consumer:
            first.append(message.value)
            if len(first) == 6:
                break
        consumer.commit()
        consumer.close()
        offsets = json.loads(cluster.zk.get("/brokers/topics/__consumer_offsets")[0])
        assert all(len(r) == 3 for r in offsets["partitions"].values())
        from pybroker.coordinator.internal_topic import partition_for
        index = partition_for("billing", len(offsets["partitions"]))
        coordinator = cluster.leader("__consumer_offsets", index)
        cluster.kill(coordinator)
        cluster.wait_until(lambda: cluster.leader("__consumer_offsets", index)
                           not in (coordinator, -1), SESSION_TIMEOUT_MS / 1000 + 15,
                           "a new coordinator")
        for i in range(10, 12):
            producer.send("orders", b"o%d" % i)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer("orders", bootstrap_servers=cluster.bootstrap(
                                 exclude=(coordinator,)).split(","),
                                 group_id="billing", auto_offset_reset="earliest",
                                 enable_auto_commit=False, consumer_timeout_ms=15000)
        rest = [m.value for m in consumer]
        consumer.close()
        assert first == [b"o%d" % i for i in range(6)]
        assert rest == [b"o%d" % i for i in range(6, 12)]


def test_a_follower_whose_disk_fills_goes_offline_alone(tmp_path: Path, zookeeper
                                                        ) -> None:  # type: ignore[no-untyped-def]
    """A follower's writes start failing (RLIMIT_FSIZE: a full disk): it stops with one
    critical line instead of serving a log it can no longer trust, leaves the ISR, and the
    other two go on acknowledging acks=all writes; nothing acknowledged is lost.

    On nodes (PYBROKER_NUM_CORES=2) the follower is node 3's worker 0 (broker 3), whose one
    log dir failed: the node stops with it rather than restart it onto the same disk
    (pybroker.node.supervisor), saying so once, and its worker 1 (broker 1003) stops cleanly,
    so both of the node's brokers go offline."""
    cluster = Cluster(tmp_path, zookeeper.connect, **{"log.index.size.max.bytes": "4096"})
    try:
        cluster.start(1)
        cluster.start(2)
        cluster.broker(3, file_size_limit=256 * 1024).start(60)
        # Broker 3's registration reaches the controller's image a moment after it listens.
        cluster.wait_until(cluster._all_see_all, 30, "every broker to see every live broker")
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap().split(","))
        try:  # broker 3 a follower: leader 1
            admin.create_topics([NewTopic("full", replica_assignments={0: [1, 2, 3]},
                                          topic_configs={"min.insync.replicas": "2"})])
        finally:
            admin.close()
        cluster.wait_isr("full", 0, {1, 2, 3})
        # 1 KB values: the 256 KiB are sent within a second or so at any load. With 8-byte
        # values they took 20 s at 400 a second, and under load (a producer thread slowed to
        # about 80 a second) the log held 157,000 bytes when the 60 s below ran out.
        producer = AckedProducer(cluster.bootstrap(), "full", rate=400, value_bytes=1000).start()
        try:
            producer.wait_acked(50)
            cluster.wait_until(lambda: cluster.brokers[3].proc.poll() is not None, 60,
                               "the broker with the full disk to stop")
            before = producer.acked_count()
            producer.wait_acked(before + 200, timeout=60)
        finally:
            history = producer.stop()
        assert cluster.brokers[3].proc.returncode == 1
        lines = [ln for ln in cluster.brokers[3].stderr_lines if "CRITICAL" in ln]
        assert len(lines) == 1 and "failed" in lines[0], cluster.brokers[3].stderr_lines[-5:]
        assert 3 not in cluster.state("full", 0)["isr"]
        if cluster.cores > 1:
            _assert_the_node_stopped_for_its_worker_0s_failed_dir(cluster, lines[0])
        read_all(cluster.bootstrap(), "full", history, 1)
        assert not check(history)
    finally:
        cluster.close()


def _assert_the_node_stopped_for_its_worker_0s_failed_dir(cluster: Cluster, critical: str
                                                         ) -> None:
    """Node 3's worker 0 (broker 3) stopped because its one log dir failed: the CRITICAL line
    is its, the node said why in one line and did not restart it, its worker 1 (broker 1003)
    handed over and stopped cleanly, and neither broker is registered any more (broker 3's
    session ends a session timeout after its death, 1003's at its clean stop)."""
    out = cluster.brokers[3].stderr_lines
    log_dir = cluster.dirs_of(3)[0]
    assert f"Shutdown broker because all log dirs in {log_dir} have failed" in critical
    errors = [ln for ln in out if " ERROR " in ln and ln.rstrip().endswith("(pybroker.node)")]
    assert len(errors) == 1 and (
        f"stopping the node: worker 0 (broker 3) stopped because every one of its log dirs "
        f"failed ({log_dir}); a restart would meet the same failed disks" in errors[0]), errors
    assert len([ln for ln in out if "worker 0 (broker 3) started" in ln]) == 1
    assert any("pybroker node 1003 shut down cleanly" in ln for ln in out), out[-20:]
    assert not any("controlled shutdown did not complete" in ln for ln in out)
    live = sorted(b for n in (1, 2) for b in cluster.broker_ids(n))
    cluster.wait_until(lambda: sorted(map(int, cluster.zk.get_children("/brokers/ids"))) == live,
                       SESSION_TIMEOUT_MS / 1000 + 10, "only nodes 1 and 2 to be registered")


def test_follower_cut_off_from_the_leader_leaves_and_rejoins_the_isr(
        tmp_path: Path, zookeeper) -> None:  # type: ignore[no-untyped-def]
    """A network partition between one follower and the leader (both still reach ZooKeeper):
    the leader's advertised address is a proxy that blackholes the follower's fetch
    connections. The ISR shrinks within replica.lag.time.max.ms, acks=all writes go on with
    the other two; healed, the follower catches up and rejoins, nothing acknowledged is lost,
    the copies are identical."""
    from pybroker.testing.broker import free_port_block
    from tests.cluster.link_proxy import LinkProxy

    cluster = Cluster(tmp_path, zookeeper.connect)
    # Broker 1's listener on `real` and its advertised one on the proxy; on a node
    # (PYBROKER_NUM_CORES) worker K listens on real + K and advertises proxy + K, each
    # port with a proxy of its own.
    real = free_port_block("127.0.0.1", 2 * cluster.cores)
    proxies = [LinkProxy(real + k, port=real + cluster.cores + k) for k in range(cluster.cores)]
    try:
        cluster.broker(1, port=real, **{
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxies[0].port}"}).start(60)
        cluster.start(2)
        cluster.start(3)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap().split(","))
        try:
            admin.create_topics([NewTopic("cut", replica_assignments={0: [1, 2, 3]},
                                          topic_configs={"min.insync.replicas": "2"})])
        finally:
            admin.close()
        cluster.wait_isr("cut", 0, {1, 2, 3})
        producer = AckedProducer(cluster.bootstrap(), "cut", rate=100).start()
        try:
            producer.wait_acked(50)
            for proxy in proxies:
                proxy.cut("broker-3-fetcher")
            cut_at = time.monotonic()
            cluster.wait_isr("cut", 0, {1, 2}, timeout=LAG_TIME_MS / 1000 + 15)
            assert time.monotonic() - cut_at < LAG_TIME_MS / 1000 + 10
            before = producer.acked_count()
            producer.wait_acked(before + 100, timeout=30)
            assert cluster.leader("cut", 0) == 1
            for proxy in proxies:
                proxy.heal()
            cluster.wait_isr("cut", 0, {1, 2, 3}, timeout=40)
        finally:
            history = producer.stop()
        assert_nothing_acked_lost(cluster, "cut", history)
    finally:
        cluster.close()
        for proxy in proxies:
            proxy.close()
