"""Incremental fetch sessions (KIP-227) against a real broker.

kafka-python (3.x) keeps fetch sessions, as Kafka's Java consumer does; librdkafka 2.x does
not (it sends session id 0, epoch -1 on every fetch, checked by
`test_librdkafka_fetches_sessionless`), so the stock client here is kafka-python. It consumes
a hundred partitions while data arrives on a few of them, partitions are added, and its
session is evicted; every record must arrive exactly once, in order per partition, and the
broker must have served incremental fetches (its requests and its session counters say so).
Raw Fetch requests check each session error code.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.runtime.clock import Clock
from pybroker.replica.fetch_session import EVICTION_MS
from tests.helpers import broker_in_thread
from tests.integration.raw import RawConnection, create_topic

PARTITIONS = 100


def _produce(bootstrap: str, topic: str, counts: dict[int, int],
             sent: dict[int, list[bytes]]) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, n in counts.items():
        for _ in range(n):
            value = b"%d:%d" % (partition, len(sent.setdefault(partition, [])))
            sent[partition].append(value)
            producer.produce(topic, value=value, partition=partition)
    assert producer.flush(30) == 0


def _consume_until(consumer: Any, got: dict[int, list[bytes]],
                   sent: dict[int, list[bytes]], timeout: float = 60) -> None:
    """Poll until every sent record arrived (or the time is up); then a little more, so a
    duplicate would show."""
    deadline = time.monotonic() + timeout
    want = sum(len(v) for v in sent.values())
    while sum(len(v) for v in got.values()) < want and time.monotonic() < deadline:
        for tp, records in consumer.poll(200).items():
            got.setdefault(tp.partition, []).extend(r.value for r in records)
    for tp, records in consumer.poll(300).items():
        got.setdefault(tp.partition, []).extend(r.value for r in records)
    assert got == sent


def _fetches(hooks: Any) -> list[Any]:
    return [r.body for r in hooks.requests if r.api_key == ApiKey.FETCH]


@pytest.mark.in_process(
    "records the Fetch requests (request hooks) and moves the session cache's clock")
def test_kafka_python_consumes_many_partitions_through_incremental_fetches(tmp_path: Path
                                                                           ) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewPartitions

    clock = Clock()
    with broker_in_thread(tmp_path / "logs", hooks=True, clock=clock,
                          max_incremental_fetch_session_cache_slots="1") as info:
        bootstrap = f"127.0.0.1:{info.port}"
        services = info.broker.services
        sessions, hooks = services.fetch_sessions, info.hooks
        create_topic(bootstrap, "many", PARTITIONS)
        create_topic(bootstrap, "other", 1)
        sent: dict[int, list[bytes]] = {}
        got: dict[int, list[bytes]] = {}
        _produce(bootstrap, "many", {p: 3 for p in range(PARTITIONS)}, sent)
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=100,
                                 auto_offset_reset="earliest", enable_auto_commit=False)
        try:
            consumer.assign([TopicPartition("many", p) for p in range(PARTITIONS)])
            _consume_until(consumer, got, sent)

            # New data on a few partitions: incremental fetches carry only what changed.
            hooks.clear_requests()
            served = sessions.incremental_fetches
            _produce(bootstrap, "many", {3: 5, 41: 2, 77: 7}, sent)
            _consume_until(consumer, got, sent)
            assert sessions.incremental_fetches > served
            fetches = _fetches(hooks)
            incremental = [f for f in fetches if f.session_epoch > 0]
            assert incremental and all(f.session_id == fetches[-1].session_id
                                       for f in incremental)
            assert max(sum(len(t.partitions) for t in f.topics) for f in incremental) \
                < PARTITIONS
            assert len(sessions) == 1 and sessions.total_partitions == PARTITIONS

            # More partitions: the session takes them in.
            admin = KafkaAdminClient(bootstrap_servers=bootstrap)
            admin.create_partitions({"many": NewPartitions(PARTITIONS + 20)})
            admin.close()
            consumer.assign([TopicPartition("many", p) for p in range(PARTITIONS + 20)])
            _produce(bootstrap, "many", {**{p: 2 for p in range(PARTITIONS, PARTITIONS + 20)},
                                         0: 1}, sent)
            _consume_until(consumer, got, sent)
            assert sessions.total_partitions == PARTITIONS + 20

            # Eviction: once the session is stale (by the broker's clock), a newcomer takes
            # its only slot; the evicted consumer starts over and loses nothing.
            clock.advance(EVICTION_MS + 1)
            other = KafkaConsumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=100,
                                  auto_offset_reset="earliest")
            try:
                other.assign([TopicPartition("other", 0)])
                deadline = time.monotonic() + 30
                while sessions.evictions == 0 and time.monotonic() < deadline:
                    other.poll(100)
                assert sessions.evictions == 1
                hooks.clear_requests()
                _produce(bootstrap, "many", {5: 4, 111: 3}, sent)
                _consume_until(consumer, got, sent)
                # The evicted session was answered FETCH_SESSION_ID_NOT_FOUND and the
                # consumer went back to a full fetch (epoch 0).
                assert any(f.session_epoch == 0 and len(f.topics) == 1
                           and len(f.topics[0].partitions) == PARTITIONS + 20
                           for f in _fetches(hooks))
            finally:
                other.close()
        finally:
            consumer.close()


@pytest.mark.in_process("counts the broker's fetch sessions")
def test_librdkafka_fetches_sessionless(broker: Any) -> None:
    """librdkafka (confluent-kafka) never opens a session: the broker serves it as before,
    through the path that does not touch the session cache."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    bootstrap = f"127.0.0.1:{broker.port}"
    create_topic(bootstrap, "plain", 4)
    sent: dict[int, list[bytes]] = {}
    _produce(bootstrap, "plain", {p: 2 for p in range(4)}, sent)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                         "fetch.wait.max.ms": 50, "enable.auto.commit": False})
    got: dict[int, list[bytes]] = {}
    try:
        consumer.assign([TopicPartition("plain", p, OFFSET_BEGINNING) for p in range(4)])
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < 8 and time.monotonic() < deadline:
            for m in consumer.consume(100, 0.2):
                assert m.error() is None
                got.setdefault(m.partition(), []).append(m.value())
    finally:
        consumer.close()
    assert got == sent
    assert len(broker.broker.services.fetch_sessions) == 0


def _fetch(conn: RawConnection, session_id: int, epoch: int, partitions: list[int],
           version: int = 12, forgotten: list[int] | None = None) -> Any:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": "s", "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20} for p in partitions]}] if partitions else [],
            "forgotten_topics_data": [{"topic": "s", "partitions": forgotten}]
            if forgotten else [], "rack_id": ""}
    return conn.request(ApiKey.FETCH, version, body)


@pytest.mark.in_process("reads and evicts the broker's fetch sessions")
def test_session_errors_on_the_wire(broker: Any) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    create_topic(bootstrap, "s", 3)
    sessions = broker.broker.services.fetch_sessions
    with RawConnection(bootstrap) as conn:
        for version in (7, 12):
            full = _fetch(conn, 0, 0, [0, 1, 2], version)
            sid = full.session_id
            assert full.error_code == 0 and sid > 0 and len(full.responses[0].partitions) == 3
            # Nothing changed: an incremental answer with no partitions.
            same = _fetch(conn, sid, 1, [], version)
            assert (same.error_code, same.session_id, same.responses) == (0, sid, [])
            # The wrong epoch, an unknown session: the error alone, session id 0.
            for session_id, epoch, code in (
                    (sid, 1, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
                    (sid, 7, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
                    (sid + 1, 2, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
                    (0, 2, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)):
                answer = _fetch(conn, session_id, epoch, [0], version)
                assert (answer.error_code, answer.session_id, answer.responses) == \
                    (code, 0, []), (session_id, epoch)
            # Forgetting a partition works at the expected epoch, which errors left as it was.
            forgot = _fetch(conn, sid, 2, [], version, forgotten=[2])
            assert (forgot.error_code, forgot.session_id) == (0, sid)
            assert sessions.get(sid).epoch == 3 and len(sessions.get(sid).partitions) == 2
            # Epoch -1 closes the session: answered sessionless, then the id is unknown.
            closed = _fetch(conn, sid, -1, [0], version)
            assert (closed.error_code, closed.session_id) == (0, 0)
            assert len(closed.responses[0].partitions) == 1
            gone = _fetch(conn, sid, 3, [], version)
            assert gone.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            assert len(sessions) == 0


def test_followers_replicate_through_incremental_fetch_sessions() -> None:
    """pybroker's replica fetchers keep a session with each leader (privileged, as Kafka's
    followers'): every acknowledged acks=all record of 30 partitions is on every replica, and
    the leaders served the followers incremental fetches."""
    from confluent_kafka import Producer

    from pybroker.testing.cluster import Cluster

    with Cluster(3) as cluster:
        cluster.create_topic("replicated", 30, 3)
        caches = [cluster.server(i).broker.services.fetch_sessions for i in cluster.running]
        served = sum(c.incremental_fetches for c in caches)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "linger.ms": 5})
        acked: list[int] = []
        for round_ in range(3):
            for p in range(30):
                producer.produce("replicated", b"%d-%d" % (p, round_), partition=p,
                                 on_delivery=lambda err, msg: acked.append(err is None))
            assert producer.flush(30) == 0
        assert acked == [True] * 90
        for p in range(30):
            cluster.wait_for_isr("replicated", p)
        ends = {(i, p): cluster.server(i).broker.replicas.hosted_partition("replicated", p)
                .log.log_end_offset for i in cluster.running for p in range(30)}
        assert set(ends.values()) == {3}
        sessions = [s for c in caches for s in c.sessions.values()]
        assert sessions and all(s.privileged for s in sessions)
        # One per follower and leader: a fetch that opened a session was never abandoned
        # (while the topic's 30 leaderships arrived) leaving its session unknown.
        assert all(len(c) <= 2 for c in caches), [len(c) for c in caches]
        assert sum(c.incremental_fetches for c in caches) > served
