"""The testing kit's time and fencing verbs with real clients (issue #16): `advance_time(ms)`
expires a group member's session, an open transaction and old segments and offsets without
sleeping for them; `fence_producer(id)` fences a transactional producer as a successor would.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError as CkError, KafkaException, Producer, \
    TopicPartition
from confluent_kafka.admin import AdminClient

from protocol.errors import ErrorCode, KafkaError
from pybroker.testing import DROP, Broker, Cluster

pytestmark = pytest.mark.in_process(
    "tests the kit's in-process verbs (control, advance_time, compact, ...)")

# How librdkafka reports a producer whose epoch was bumped under it.
FENCED = {CkError._FENCED, CkError.PRODUCER_FENCED, CkError.INVALID_PRODUCER_EPOCH}


def _wait(done: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _txn_producer(bootstrap: str, txn_id: str, timeout_ms: int = 60_000) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": timeout_ms, "linger.ms": 0})
    producer.init_transactions(30)
    return producer


def _read_committed(bootstrap: str, topic: str) -> list[bytes]:
    """Every value read_committed sees from the start of partition 0 to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4()}",
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == CkError._PARTITION_EOF, msg.error()
                return values
            values.append(msg.value())
        raise AssertionError("no end of partition within 20 s")
    finally:
        consumer.close()


def _stable_offset(broker: Broker, topic: str) -> int:
    plog = broker.server_info.broker.logs.get(topic, 0)
    return plog.last_stable_offset


def _commit_fails_fenced(producer: Producer) -> None:
    with pytest.raises(KafkaException) as failed:
        producer.commit_transaction(10)
    error = failed.value.args[0]
    assert error.code() in FENCED, error
    assert error.fatal(), error


def test_advance_time_expires_a_silent_members_session() -> None:
    """A member whose heartbeats never arrive keeps its partitions until its session runs out:
    advancing the clock past session.timeout.ms removes it, and the member waiting to join
    gets every partition in a new generation."""
    with Broker() as broker:
        broker.create_topic("sessions", partitions=2)
        group = "g-sessions"
        broker.control("Heartbeat",
                       lambda request: DROP if request.client_id == "silent" else None,
                       times=None)
        common = {"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "session.timeout.ms": 30_000, "heartbeat.interval.ms": 200}
        silent = Consumer({**common, "client.id": "silent"})
        survivor = Consumer({**common, "client.id": "survivor"})
        groups = broker.server_info.broker.groups
        try:
            silent.subscribe(["sessions"])
            _wait(lambda: silent.poll(0.1) is None and len(silent.assignment()) == 2,
                  "the first member to get both partitions")
            generation = groups.state.groups[group].generation
            survivor.subscribe(["sessions"])
            # The rebalance waits for the silent member, which never hears of it.
            _wait(lambda: survivor.poll(0.1) is None
                  and groups.describe_group(group).state == "PreparingRebalance",
                  "the survivor's join to start a rebalance")
            time.sleep(0.5)
            assert survivor.assignment() == []
            broker.advance_time(30_001)
            _wait(lambda: survivor.poll(0.1) is None and len(survivor.assignment()) == 2,
                  "the survivor to get both partitions")
            state = groups.state.groups[group]
            assert state.generation > generation
            assert [m.client_id for m in state.members.values()] == ["survivor"]
        finally:
            broker.hooks.clear()
            survivor.close()
            silent.close()


def test_advance_time_aborts_an_open_transaction_and_fences_its_producer() -> None:
    with Broker() as broker:
        broker.create_topic("open-txn")
        producer = _txn_producer(broker.bootstrap, "tx-open", timeout_ms=60_000)
        producer.begin_transaction()
        producer.produce("open-txn", value=b"never committed", partition=0)
        assert producer.flush(10) == 0
        assert _stable_offset(broker, "open-txn") == 0
        broker.advance_time(59_000)  # not yet past transaction.timeout.ms
        time.sleep(0.2)
        assert _stable_offset(broker, "open-txn") == 0
        broker.advance_time(1_001)
        _wait(lambda: _stable_offset(broker, "open-txn") == 2, "the abort marker")
        assert _read_committed(broker.bootstrap, "open-txn") == []
        _commit_fails_fenced(producer)


def test_fence_producer_fails_the_current_producers_commit() -> None:
    with Broker() as broker:
        broker.create_topic("fenced")
        producer = _txn_producer(broker.bootstrap, "tx-fenced")
        producer.begin_transaction()
        producer.produce("fenced", value=b"zombie", partition=0)
        assert producer.flush(10) == 0
        before = broker.server_info.broker.transactions.state.describe("tx-fenced")
        producer_id, epoch = broker.fence_producer("tx-fenced")
        assert producer_id == before.producer_id and epoch > before.producer_epoch
        _commit_fails_fenced(producer)
        assert _read_committed(broker.bootstrap, "fenced") == []
        # A successor initialising the id carries on from the bumped epoch.
        successor = _txn_producer(broker.bootstrap, "tx-fenced")
        successor.begin_transaction()
        successor.produce("fenced", value=b"successor", partition=0)
        successor.commit_transaction(10)
        assert _read_committed(broker.bootstrap, "fenced") == [b"successor"]
        with pytest.raises(KafkaError) as unknown:
            broker.fence_producer("tx-nobody")
        assert unknown.value.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_advance_time_applies_retention_ms_and_expires_committed_offsets() -> None:
    hour = 3_600_000
    with Broker(log_retention_check_interval_ms=hour) as broker:
        broker.create_topic("aging", config={"retention.ms": hour, "segment.bytes": 4096})
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for i in range(120):  # a batch each: segments of 4 KiB roll every ~30 records
            producer.produce("aging", value=b"%03d" % i + b"x" * 100)
            assert producer.flush(10) == 0
        plog = broker.server_info.broker.logs.get("aging", 0)
        assert len(plog.segments) > 2
        assert broker.apply_retention() == 0  # nothing is an hour old yet
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "idle",
                             "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition("aging", 0, 7)], asynchronous=False)
        consumer.close()

        broker.advance_time(hour + 1)  # retention runs as its periodic check would
        assert len(plog.segments) == 1 and plog.log_start_offset > 0
        reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "from-start",
                           "auto.offset.reset": "earliest"})
        try:
            low, high = reader.get_watermark_offsets(TopicPartition("aging", 0), timeout=10)
            assert (low, high) == (plog.log_start_offset, 120)
            reader.assign([TopicPartition("aging", 0, 0)])  # 0 is below the log start now
            msg = None
            while msg is None or msg.error():
                msg = reader.poll(5)
                assert msg is not None
            assert msg.offset() == low and msg.value().startswith(b"%03d" % low)
        finally:
            reader.close()

        checker = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "idle"})
        try:
            [kept] = checker.committed([TopicPartition("aging", 0)], timeout=10)
            assert kept.offset == 7  # offsets.retention.minutes is a week
            broker.advance_time(7 * 24 * hour)
            [gone] = checker.committed([TopicPartition("aging", 0)], timeout=10)
            assert gone.offset < 0
        finally:
            checker.close()


def test_advance_time_needs_a_broker_in_this_process() -> None:
    with pytest.raises(RuntimeError, match="thread mode"):
        Broker(process=True).advance_time(1)
    with pytest.raises(ValueError, match="forward"):
        with Broker() as broker:
            broker.advance_time(-1)


def test_cluster_advance_time_reaches_the_coordinator_on_any_broker() -> None:
    """The brokers share one clock: the transaction coordinator, wherever it is, aborts the
    open transaction once the cluster's time passed its timeout."""
    with Cluster(2) as cluster:
        cluster.create_topic("cluster-txn", replication_factor=2)
        producer = _txn_producer(cluster.bootstrap, "tx-cluster", timeout_ms=10_000)
        producer.begin_transaction()
        producer.produce("cluster-txn", value=b"open", partition=0)
        assert producer.flush(10) == 0
        cluster.advance_time(10_001)
        assert all(cluster.server(n).broker.clock.now_ms() >= int(time.time() * 1000) + 10_000
                   for n in cluster.running)
        _commit_fails_fenced(producer)


def test_produce_and_fetch_never_read_the_timers_clock() -> None:
    """The clock seam stays off the hot paths: producing and fetching 2,000 records reads it
    only from the periodic passes (the once-a-second removal of `.deleted` files).

    The consumer needs a group.id, and the group coordinator reads the clock when it loads the
    `__consumer_offsets` partitions its FindCoordinator creates (3 reads per partition). Whether
    that load fell inside the counted span depended on whether FindCoordinator beat the
    consumer's close (CI: 15 reads in 0.03 s), so the coordinator is loaded first: an admin
    describe of the group waits until it answers."""
    with Broker() as broker:
        broker.create_topic("hot")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.describe_consumer_groups(["unused"])["unused"].result(timeout=30)
        reads = [0]
        wall = broker.clock._wall

        def counted() -> float:
            reads[0] += 1
            return wall()
        broker.clock._wall = counted
        started = time.monotonic()
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1})
        for i in range(2000):
            producer.produce("hot", value=b"%d" % i, partition=0)
            if i % 100 == 99:
                producer.poll(0)
        assert producer.flush(10) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                             "enable.auto.commit": False, "max.partition.fetch.bytes": 4096})
        consumer.assign([TopicPartition("hot", 0, 0)])
        got = 0
        while got < 2000:
            got += sum(1 for m in consumer.consume(500, timeout=5) if m.error() is None)
        consumer.close()
        seconds = time.monotonic() - started
        assert reads[0] <= seconds + 2, (reads[0], seconds)
        before = reads[0]
        broker.advance_time(0)  # the spy sees the timers' reads
        assert reads[0] > before
