"""Broker keys that take effect, each shown with a real broker and a stock client (issue 21:
no key the docs call honoured is read nowhere)."""
from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
import trio
from confluent_kafka.admin import AdminClient

from protocol.api_keys import ApiKey
from protocol.messages import APIS
from protocol.records.record import iter_records_in
from pybroker.cluster.metadata import InconsistentClusterIdError, read_meta_properties
from pybroker.storage.checkpoint import read_offsets
from pybroker.storage.log_manager import (
    HIGH_WATERMARK_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
)
from pybroker.server import serve
from pybroker.testing.broker import num_cores_default
from tests.helpers import broker_config, serving_broker
from tests.integration.clients import CONFLUENT, Rec
from tests.integration.group_harness import wait_until
from tests.integration.raw import (
    coordinator_address, create_topic, known_topics, leader_address, named_coordinator,
    send_request,
)

TIMEOUT = 10
CLUSTER_ID = "pybroker-test-cluster-1"


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_cluster_id_is_used_for_new_data_and_a_mismatch_is_refused(tmp_path: Path) -> None:
    """cluster.id names a new cluster (what clients see, what meta.properties records); once
    the data has an id, a broker configured with another is refused, as Kafka's
    InconsistentClusterIdException refuses a broker joining the wrong cluster."""
    logs = tmp_path / "logs"
    with serving_broker(logs, cluster_id=CLUSTER_ID) as info:
        ck = AdminClient({"bootstrap.servers": info.bootstrap})
        assert ck.describe_cluster().result(TIMEOUT).cluster_id == CLUSTER_ID
    assert read_meta_properties(logs)["cluster.id"] == CLUSTER_ID
    with serving_broker(logs, cluster_id=CLUSTER_ID):  # the same id: starts
        pass
    with serving_broker(logs) as info:  # unset: the stored id
        from kafka.admin import KafkaAdminClient
        admin = KafkaAdminClient(bootstrap_servers=info.bootstrap)
        try:
            assert admin.describe_cluster()["cluster_id"] == CLUSTER_ID
        finally:
            admin.close()
    if num_cores_default() > 1:  # a node's start fails, its brokers saying why
        with pytest.raises(RuntimeError, match="doesn't match stored clusterId"):
            with serving_broker(logs, cluster_id="another-cluster"):
                pass
        return
    with pytest.raises(BaseExceptionGroup) as refused:  # trio reports the failed start
        with serving_broker(logs, cluster_id="another-cluster"):
            pass
    assert refused.group_contains(InconsistentClusterIdError, match="doesn't match stored",
                                  depth=None)


def _fetch(bootstrap: str, topic: str, offset: int, max_bytes: int) -> bytes:
    """One raw Fetch v12 of partition 0 asking for up to `max_bytes`; its records."""
    body = APIS[ApiKey.FETCH].request.default(12)
    body.update(dict(max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, topics=[
        {"topic": topic, "partitions": [
            {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
             "current_leader_epoch": -1, "log_start_offset": -1, "last_fetched_epoch": -1}]}]))
    part = send_request(leader_address(bootstrap, topic, 0), ApiKey.FETCH, 12,
                        body).responses[0].partitions[0]
    assert part.error_code == 0, part
    return bytes(part.records)


def test_fetch_max_bytes_caps_every_fetch_response(tmp_path: Path) -> None:
    """fetch.max.bytes caps a Fetch response below what the client asks for; a first batch
    larger than the cap still comes whole, so a consumer (confluent-kafka, asking for 50 MB)
    reads everything, batch by batch."""
    from kafka import KafkaProducer
    cap = 4096
    with serving_broker(tmp_path / "logs", fetch_max_bytes=str(cap)) as info:
        topic = topic_name("fetchcap")
        create_topic(info.bootstrap, topic, 1)
        producer = KafkaProducer(bootstrap_servers=info.bootstrap, linger_ms=0)
        sizes = [1000] * 12 + [3 * cap] + [1000] * 3  # one batch each
        for i, size in enumerate(sizes):
            producer.send(topic, value=bytes([65 + i]) * size, partition=0).get(TIMEOUT)
        producer.close(5)
        capped = _fetch(info.bootstrap, topic, 0, 1 << 30)  # would carry all 27 KB
        assert 0 < len(capped) <= cap
        assert [r.offset for r in iter_records_in(capped)] == [0, 1, 2]
        big = _fetch(info.bootstrap, topic, 12, 1 << 30)
        assert [r.offset for r in iter_records_in(big)] == [12]  # over the cap, yet whole
        got = CONFLUENT.consume(info.bootstrap, topic, [0], len(sizes))
        assert [len(g.value) for g in got] == sizes


def _wait_for(predicate, timeout: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_log_start_offset_checkpoint_has_its_own_interval(tmp_path: Path) -> None:
    """log.flush.start.offset.checkpoint.interval.ms drives the log-start-offset checkpoint
    on its own timer: with it short and the recovery-point interval an hour, a DeleteRecords
    (confluent-kafka admin) reaches log-start-offset-checkpoint while the recovery-point and
    high-watermark checkpoints are not rewritten."""
    from confluent_kafka import TopicPartition
    logs = tmp_path / "logs"
    with serving_broker(logs, log_flush_start_offset_checkpoint_interval_ms="100",
                          log_flush_offset_checkpoint_interval_ms="3600000",
                          replica_high_watermark_checkpoint_interval_ms="3600000") as info:
        topic = topic_name("lso-ckpt")
        create_topic(info.bootstrap, topic, 1)
        CONFLUENT.produce(info.bootstrap, topic, [Rec(None, b"v%d" % i, partition=0) for i in range(10)])
        ck = AdminClient({"bootstrap.servers": info.bootstrap})
        for future in ck.delete_records([TopicPartition(topic, 0, 6)]).values():
            future.result(TIMEOUT)
        home = info.partition_dir(f"{topic}-0").parent  # its broker's dir (a node's worker's)
        assert _wait_for(lambda: read_offsets(home / LOG_START_OFFSET_CHECKPOINT).get(
            (topic, 0)) == 6)
        assert (topic, 0) not in read_offsets(home / RECOVERY_POINT_CHECKPOINT)
        assert (topic, 0) not in read_offsets(home / HIGH_WATERMARK_CHECKPOINT)


def test_high_watermark_checkpoint_has_its_own_interval(tmp_path: Path) -> None:
    """replica.high.watermark.checkpoint.interval.ms drives replication-offset-checkpoint
    on its own timer (Kafka's 5 s, apart from the recovery points' minute): with it short
    and the others an hour, records produced (confluent-kafka) reach the high-watermark
    checkpoint while the recovery-point and log-start checkpoints are not rewritten."""
    logs = tmp_path / "logs"
    with serving_broker(logs, replica_high_watermark_checkpoint_interval_ms="100",
                          log_flush_start_offset_checkpoint_interval_ms="3600000",
                          log_flush_offset_checkpoint_interval_ms="3600000") as info:
        topic = topic_name("hw-ckpt")
        create_topic(info.bootstrap, topic, 1)
        CONFLUENT.produce(info.bootstrap, topic, [Rec(None, b"v%d" % i, partition=0) for i in range(7)])
        home = info.partition_dir(f"{topic}-0").parent  # its broker's dir (a node's worker's)
        assert _wait_for(lambda: read_offsets(home / HIGH_WATERMARK_CHECKPOINT).get(
            (topic, 0)) == 7)
        assert (topic, 0) not in read_offsets(home / RECOVERY_POINT_CHECKPOINT)
        assert (topic, 0) not in read_offsets(home / LOG_START_OFFSET_CHECKPOINT)


@pytest.mark.in_process("runs the log cleaner's pass on the broker's loop and watches its threads")
def test_log_cleaner_threads_clean_logs_in_parallel(tmp_path: Path) -> None:
    """log.cleaner.threads=2: two dirty compacted logs (written by kafka-python) are cleaned
    at the same time, each in its own worker thread: each cleaning waits at a barrier for
    the other, which only a parallel pass gets through. Both logs end up compacted."""
    config = broker_config(tmp_path / "logs", log_cleaner_threads="2",
                           log_cleaner_backoff_ms="3600000")  # only the pass run below
    topics = [topic_name("par-a"), topic_name("par-b")]

    def produce(bootstrap: str) -> None:
        from kafka import KafkaProducer
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        for topic in topics:
            create_topic(bootstrap, topic, 1, {
                "cleanup.policy": "compact", "segment.bytes": "2048",
                "min.cleanable.dirty.ratio": "0.01"})
            for i in range(300):
                producer.send(topic, key=b"k%d" % (i % 5), value=b"v%03d" % i, partition=0)
                if i % 50 == 49:
                    producer.flush(10)  # several batches, so several segments
        producer.close(5)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            info = await nursery.start(serve, config)
            await trio.to_thread.run_sync(produce, info.bootstrap)
            cleaner = info.broker.cleaner
            barrier = threading.Barrier(2, timeout=10)
            real_clean = cleaner.clean

            def clean(plan, stop=None):  # type: ignore[no-untyped-def]
                barrier.wait()  # BrokenBarrierError unless both cleanings run at once
                return real_clean(plan, stop)

            cleaner.clean = clean
            before = [info.broker.logs.get(topic, 0).size for topic in topics]
            assert await info.broker.log_jobs.clean_logs() == 2
            after = [info.broker.logs.get(topic, 0).size for topic in topics]
            assert all(a < b // 2 for a, b in zip(after, before)), (before, after)
            nursery.cancel_scope.cancel()

    trio.run(main)


def _coordinator_error(bootstrap: str, group: str) -> int:
    return send_request(bootstrap, ApiKey.FIND_COORDINATOR, 1,
                        {"key": group, "key_type": 0}).error_code


def test_offsets_topic_replication_factor_as_kafka_when_set(tmp_path: Path) -> None:
    """Set to 3 on one broker: as in Kafka, __consumer_offsets is not created and groups get
    COORDINATOR_NOT_AVAILABLE (a confluent-kafka group member never gets an assignment),
    instead of a topic silently created with fewer replicas than configured."""
    from confluent_kafka import Consumer
    with serving_broker(tmp_path / "logs", offsets_topic_replication_factor="3") as info:
        topic = topic_name("no-coord")
        create_topic(info.bootstrap, topic, 1)
        consumer = Consumer({"bootstrap.servers": info.bootstrap, "group.id": "g-rf3",
                             "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                consumer.poll(0.2)
            assert consumer.assignment() == []
        finally:
            consumer.close()
        assert _coordinator_error(info.bootstrap, "g-rf3") == 15  # COORDINATOR_NOT_AVAILABLE
        assert "__consumer_offsets" not in known_topics(info.bootstrap)


@pytest.mark.parametrize("setting", [{}, {"offsets_topic_replication_factor": "1"}],
                         ids=["unset", "1"])
def test_offsets_topic_on_one_broker_unset_or_one(tmp_path: Path,
                                                  setting: dict[str, str]) -> None:
    """Unset (pybroker's documented difference: Kafka's 3 capped at the broker count, one on
    one broker, two on a node of two) or 1 (Kafka's shipped server.properties): groups are
    served."""
    with serving_broker(tmp_path / "logs", **setting) as info:
        named_coordinator(info.bootstrap, "g-one")  # the first ask has it created
        expected = 1 if setting else min(3, len(info.brokers))
        answer = send_request(info.bootstrap, ApiKey.METADATA, 12, {
            "topics": [{"name": "__consumer_offsets", "topic_id": None}],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        (offsets,) = answer.topics
        assert offsets.error_code == 0 and offsets.partitions
        assert {len(p.replica_nodes) for p in offsets.partitions} == {expected}


def test_default_replication_factor_applies_to_topics_without_one(tmp_path: Path) -> None:
    """default.replication.factor=3 on one broker: a topic created without a factor
    (confluent-kafka's NewTopic default of -1) is refused as Kafka refuses it."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic
    with serving_broker(tmp_path / "logs", default_replication_factor="3") as info:
        ck = AdminClient({"bootstrap.servers": info.bootstrap})
        topic = topic_name("rf-default")
        with pytest.raises(KafkaException) as refused:
            ck.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(TIMEOUT)
        assert refused.value.args[0].code() == 38  # INVALID_REPLICATION_FACTOR


def test_group_max_session_timeout_refuses_longer_sessions(tmp_path: Path) -> None:
    """group.max.session.timeout.ms: a member asking for a longer session is refused with
    INVALID_SESSION_TIMEOUT; one within it joins."""
    def join(bootstrap: str, session_ms: int) -> int:
        return send_request(bootstrap, ApiKey.JOIN_GROUP, 5, {
            "group_id": "g-session", "session_timeout_ms": session_ms,
            "rebalance_timeout_ms": 10000, "member_id": "", "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]}).error_code

    with serving_broker(tmp_path / "logs", group_max_session_timeout_ms="10000") as info:
        coordinator = coordinator_address(info.bootstrap, "g-session")  # on a node, any broker
        assert join(coordinator, 20000) == 26  # INVALID_SESSION_TIMEOUT
        assert join(coordinator, 10000) == 79  # MEMBER_ID_REQUIRED: accepted, step one


def _committed(bootstrap: str, group: str, topic: str) -> int:
    """The group's committed offset of partition 0 (kafka-python's committed()); -1 if none."""
    from kafka import KafkaConsumer, TopicPartition as KpTP
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False)
    try:
        offset = consumer.committed(KpTP(topic, 0))
    finally:
        consumer.close(autocommit=False)
    return -1 if offset is None else offset


@pytest.mark.in_process("moves the group coordinator's clock two minutes ahead")
@pytest.mark.parametrize(("minutes", "interval_ms", "expired"), [
    ("1", "100", True), ("10", "100", False), ("1", "3600000", False)],
    ids=["expired-and-checked", "within-retention", "not-checked-yet"])
def test_offsets_retention_minutes_and_check_interval(tmp_path: Path, minutes: str,
                                                      interval_ms: str, expired: bool) -> None:
    """offsets.retention.minutes says when an empty group's committed offsets expire and
    offsets.retention.check.interval.ms how often that is looked at. The group coordinator's
    clock is moved two minutes ahead instead of waiting for them."""
    from kafka import KafkaConsumer, TopicPartition as KpTP
    from kafka.structs import OffsetAndMetadata
    with serving_broker(tmp_path / "logs", offsets_retention_minutes=minutes,
                          offsets_retention_check_interval_ms=interval_ms) as info:
        topic = topic_name("retained")
        create_topic(info.bootstrap, topic, 1)
        consumer = KafkaConsumer(bootstrap_servers=info.bootstrap, group_id="g-retention",
                                 enable_auto_commit=False)
        consumer.commit({KpTP(topic, 0): OffsetAndMetadata(7, "", -1)})
        consumer.close(autocommit=False)
        assert _committed(info.bootstrap, "g-retention", topic) == 7
        groups = info.broker.groups
        groups._clock = lambda: int(time.time() * 1000) + 120_000
        if expired:  # at the next check, 100 ms away on a quiet machine
            wait_until(lambda: _committed(info.bootstrap, "g-retention", topic) == -1, 10,
                       "the offsets to expire")
        else:
            time.sleep(1.0)  # ten checks at 100 ms: none may expire them
            assert _committed(info.bootstrap, "g-retention", topic) == 7


