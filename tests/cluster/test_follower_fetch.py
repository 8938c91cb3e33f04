"""Fetching from the closest replica (KIP-392) on three real brokers, one rack each, on a real
ZooKeeper: a confluent-kafka consumer with client.rack reads from the follower of its rack (the
brokers' /metrics say which broker served it), goes back to the leader when that follower is
killed, and loses nothing; raw Fetch requests pin down each answer (preferred_read_replica,
what a follower serves, its out-of-range and beyond-the-high-watermark answers)."""
from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, Producer, TopicPartition

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.client.connection import BrokerConnection
from pybroker.node.worker import WORKER_ID_STRIDE
from pybroker.testing.broker import free_port_block
from tests.cluster.brokers import Cluster, create_topic

SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SESSION_MS = 10_000
TOPIC = "near"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zk_server: Any) -> Iterator[Cluster]:
    """Brokers 1, 2, 3 in racks rack-1, rack-2, rack-3 with the rack-aware selector, and one
    RF 3 partition. A paused follower stays in the ISR, holding the high watermark back, until
    its ZooKeeper session expires (the lag time is longer): 10 s, so that a busy machine
    still fits a test's steps in, where a dead follower leaves the ISR as soon. Each node
    serves /metrics on a block of ports of its own: worker K of a node on its port + K."""
    c = Cluster(tmp_path_factory.mktemp("follower-fetch"), zk_server.connect,
                **{"replica.selector.class": SELECTOR,
                   "replica.lag.time.max.ms": "60000",
                   "zookeeper.session.timeout.ms": str(SESSION_MS)})
    try:
        for node in c.ids:
            http = free_port_block("127.0.0.1", c.cores)
            c.broker(node, **{"broker.rack": f"rack-{node}",
                              "http.listeners": f"http://127.0.0.1:{http}"}).start()
        c.wait_until(c._all_see_all, 60, "every broker to see every live broker")
        create_topic(c, TOPIC)
        yield c
    finally:
        c.close()


def _roles(cluster: Cluster) -> tuple[int, int, int]:
    """(leader, a follower, the other follower) of the test partition: broker ids (on a
    node, a worker's), one on each node."""
    leader = int(cluster.state(TOPIC, 0)["leader"])
    replicas = json.loads(cluster.zk.get(f"/brokers/topics/{TOPIC}")[0])["partitions"]["0"]
    first, second = [b for b in replicas if b != leader]
    return leader, first, second


def _rack(cluster: Cluster, broker: int) -> str:
    return f"rack-{cluster.node_of(broker)}"


def _port(cluster: Cluster, broker: int) -> int:
    """The Kafka port of `broker` (a node's worker K is not at the node's first port)."""
    return int(cluster.address(broker).rpartition(":")[2])


def _metric(cluster: Cluster, broker: int, series: str) -> int:
    """One series of broker `broker`'s /metrics (0 when absent)."""
    node = cluster.node_of(broker)
    port = (int(cluster.brokers[node].overrides["http_listeners"].rpartition(":")[2])
            + broker // WORKER_ID_STRIDE)
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    found = re.search(r"^%s (\S+)$" % re.escape(series), body, re.M)
    return int(float(found.group(1))) if found else 0


def _bytes_out(cluster: Cluster, node: int) -> int:
    """Record bytes broker `node` returned to consumers for the topic."""
    return _metric(cluster, node, 'pybroker_bytes_out_total{topic="%s"}' % TOPIC)


def _produce(cluster: Cluster, values: list[bytes], acks: str = "all",
             exclude: tuple[int, ...] = ()) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap(exclude), "acks": acks,
                         "enable.idempotence": acks == "all"})
    failed: list[Any] = []
    for value in values:
        producer.produce(TOPIC, value, on_delivery=lambda err, _m: err and failed.append(err))
    assert producer.flush(30) == 0 and not failed, failed


async def _fetch_async(port: int, offset: int, *, version: int = 11, rack: str = "",
                       max_wait_ms: int = 0, timeout: float | None = None) -> Any:
    """One raw consumer Fetch of the test partition: the partition's answer."""
    async with trio.open_nursery() as nursery:
        conn = await BrokerConnection.open("127.0.0.1", port, nursery=nursery)
        response = await conn.request(ApiKey.FETCH, {
            "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1,
            "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "topics": [{"topic": TOPIC, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": rack}, version=version, timeout=timeout)
        await conn.aclose()
        nursery.cancel_scope.cancel()
    return response.responses[0].partitions[0]


def _fetch(cluster: Cluster, broker: int, offset: int, **kwargs: Any) -> Any:
    return trio.run(partial(_fetch_async, _port(cluster, broker), offset, **kwargs))


def _list_latest(cluster: Cluster, broker: int) -> int:
    """The error of a raw ListOffsets (latest) for the test partition at broker `broker`."""
    port = _port(cluster, broker)

    async def run() -> int:
        async with trio.open_nursery() as nursery:
            conn = await BrokerConnection.open("127.0.0.1", port, nursery=nursery)
            response = await conn.request(ApiKey.LIST_OFFSETS, {
                "replica_id": -1, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
                    {"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1,
                     "max_num_offsets": 1}]}]})
            await conn.aclose()
            nursery.cancel_scope.cancel()
        return response.topics[0].partitions[0].error_code
    return trio.run(run)


def _consume(consumer: Consumer, count: int, timeout: float) -> list[tuple[int, bytes]]:
    """Up to `count` records (offset, value), polling for at most `timeout` seconds."""
    got: list[tuple[int, bytes]] = []
    end = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < end:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append((msg.offset(), msg.value()))
    return got


def test_the_leader_points_a_rack_aware_consumer_at_its_racks_follower(cluster: Cluster
                                                                       ) -> None:
    leader, near, _ = _roles(cluster)
    _produce(cluster, [b"raw-%d" % i for i in range(5)])
    answer = _fetch(cluster, leader, 0, rack=_rack(cluster, near))
    assert (answer.error_code, answer.preferred_read_replica) == (ErrorCode.NONE, near)
    assert not answer.records and answer.high_watermark >= 5
    # The leader's own rack, no rack, or a rack no replica is in: the leader serves.
    for rack in (_rack(cluster, leader), "", "rack-9"):
        answer = _fetch(cluster, leader, 0, rack=rack)
        assert answer.preferred_read_replica == -1 and answer.records, rack
    # Fetch v10 has no client metadata: the leader serves, whatever the rack.
    answer = _fetch(cluster, leader, 0, version=10)
    assert answer.error_code == ErrorCode.NONE and answer.records


def test_a_follower_serves_v11_consumers_up_to_its_high_watermark(cluster: Cluster) -> None:
    leader, near, other = _roles(cluster)
    _produce(cluster, [b"hw-%d" % i for i in range(3)])
    committed = _fetch(cluster, leader, 0, version=10).high_watermark
    cluster.wait_until(lambda: _fetch(cluster, near, 0).high_watermark == committed, 30,
                       "the follower to learn the leader's high watermark")
    answer = _fetch(cluster, near, 0, rack=_rack(cluster, near))
    assert answer.error_code == ErrorCode.NONE and answer.preferred_read_replica == -1
    assert answer.records and answer.high_watermark == committed
    hw = committed
    # Below v11 a consumer reads from the leader only (Kafka's fetchOnlyLeader), and
    # ListOffsets is the leader's whatever the version.
    assert _fetch(cluster, near, 0, version=10).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert _list_latest(cluster, near) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # Past the follower's log end: out of range (the client goes back to the leader).
    assert _fetch(cluster, near, hw + 1000).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    # Between the follower's high watermark and its log end: nothing yet, and no error, as
    # Kafka's follower answers. The other follower, paused, holds the high watermark back
    # while `near` copies records produced with acks=1.
    cluster.pause(other)
    try:
        _produce(cluster, [b"uncommitted"], acks="1", exclude=(other,))
        # Until `near` has the record, hw + 1 is past its log end.
        cluster.wait_until(
            lambda: _fetch(cluster, near, hw + 1).error_code == ErrorCode.NONE, 30,
            "the follower to copy the uncommitted record")
        answer = _fetch(cluster, near, hw + 1, max_wait_ms=100)
        assert (answer.error_code, answer.high_watermark, answer.records) == (
            ErrorCode.NONE, hw, b"")
        assert not _fetch(cluster, near, hw).records  # the record at hw is not committed
    finally:
        cluster.resume(other)
    cluster.wait_until(lambda: _fetch(cluster, near, hw).records, 30,
                       "the record to be committed and served by the follower")


def test_a_long_poll_on_a_follower_is_answered_when_its_high_watermark_moves(
        cluster: Cluster) -> None:
    """The follower wakes a waiting consumer when the leader's answer moves its high
    watermark, as the leader does at a commit: the fetch asks to wait 60 s and is answered
    by a produce once it waits (a client timeout of 30 s fails it otherwise)."""
    leader, near, _ = _roles(cluster)
    committed = _fetch(cluster, leader, 0, version=10).high_watermark
    cluster.wait_until(lambda: _fetch(cluster, near, 0).high_watermark == committed, 30,
                       "the follower to learn the leader's high watermark")
    waiting = 'pybroker_purgatory_size{delayed_operation="Fetch"}'
    before = _metric(cluster, near, waiting)

    def produce_once_it_waits() -> None:
        cluster.wait_until(lambda: _metric(cluster, near, waiting) > before, 30,
                           "the consumer's fetch to wait on the follower")
        _produce(cluster, [b"woken"])

    port = _port(cluster, near)

    async def run() -> Any:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, produce_once_it_waits)
            return await _fetch_async(port, committed,
                                      max_wait_ms=60_000, timeout=30)
    answer = trio.run(run)
    assert answer.error_code == ErrorCode.NONE and answer.records
    assert answer.high_watermark == committed + 1


def test_a_consumer_reads_from_its_racks_follower_then_the_leader_when_it_dies(
        cluster: Cluster) -> None:
    """Runs last: it kills a broker of the module's cluster."""
    leader, near, other = _roles(cluster)
    first = [b"first-%d" % i for i in range(200)]
    _produce(cluster, first)
    total = _fetch(cluster, leader, 0, version=10).high_watermark  # with earlier tests' records
    replicas = (leader, near, other)
    before = {n: _bytes_out(cluster, n) for n in replicas}
    # Assigned, not subscribed: no group, so a coordinator lost with the killed broker cannot
    # move the position.
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "near-group",
                         "client.rack": _rack(cluster, near), "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got = _consume(consumer, total, 30)
        values = [v for _, v in got]
        assert values[-200:] == first and [o for o, _ in got] == list(range(total))
        after = {n: _bytes_out(cluster, n) for n in replicas}
        served = {n: after[n] - before[n] for n in replicas}
        assert served[near] > 0 and served[leader] == 0 and served[other] == 0, served
        # The follower dies: the consumer goes back to the leader, and nothing is lost.
        cluster.kill(near)
        second = [b"second-%d" % i for i in range(100)]
        _produce(cluster, second)
        more = _consume(consumer, 100, SESSION_MS / 1000 + 20)
        assert [v for _, v in more] == second
        assert [o for o, _ in more] == list(range(len(got), len(got) + 100))
        assert _bytes_out(cluster, leader) > after[leader]
    finally:
        consumer.close()
