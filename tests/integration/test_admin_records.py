"""Where a partition's records start and end, through the stock clients and raw requests:
DeleteRecords, ListOffsets (every spec, through the consumers and the admin clients) and
OffsetForLeaderEpoch.
"""
from __future__ import annotations

from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.records.record import Record, build_batch
from tests.integration.admin_helpers import T, TIMEOUT, ck_code, raw_produce, topic_name
from tests.integration.clients import CONFLUENT, KAFKA_PYTHON, Rec
from tests.integration.raw import create_topic, leader_address, send_request


# -- DeleteRecords -----------------------------------------------------------------------------

def test_delete_records(broker, ck: AdminClient, kp) -> None:
    from kafka import TopicPartition as KpTP
    name = topic_name("dr")
    create_topic(broker.bootstrap, name, 2)
    CONFLUENT.produce(broker.bootstrap, name,
                      [Rec(b"k", f"v{i}".encode(), partition=p) for p in (0, 1) for i in range(10)])
    fs = ck.delete_records([TopicPartition(name, 0, 4)])
    deleted = next(iter(fs.values())).result(TIMEOUT)
    assert deleted.low_watermark == 4
    got = KAFKA_PYTHON.consume(broker.bootstrap, name, [0], 6)
    assert [g.offset for g in got] == list(range(4, 10))
    assert [g.value for g in got] == [f"v{i}".encode() for i in range(4, 10)]
    # confluent consumer from earliest starts there too
    assert [g.offset for g in CONFLUENT.consume(broker.bootstrap, name, [0], 6)] == \
        list(range(4, 10))

    result = kp.delete_records({KpTP(name, 1): 7})
    assert result[KpTP(name, 1)]["low_watermark"] == 7
    # beyond the high watermark: refused, nothing moves
    fs = ck.delete_records([TopicPartition(name, 0, 11)])
    assert ck_code(next(iter(fs.values()))) == KafkaError.OFFSET_OUT_OF_RANGE
    lo = ck.list_offsets({TopicPartition(name, 0): OffsetSpec.earliest()})
    assert next(iter(lo.values())).result(TIMEOUT).offset == 4
    # -1: everything up to the high watermark
    fs = ck.delete_records([TopicPartition(name, 0, -1)])
    assert next(iter(fs.values())).result(TIMEOUT).low_watermark == 10
    lo = ck.list_offsets({TopicPartition(name, 0): OffsetSpec.earliest()})
    assert next(iter(lo.values())).result(TIMEOUT).offset == 10


# -- ListOffsets -------------------------------------------------------------------------------

# (batch of timestamps) in append order: offsets 0-2, 3-4, 5
BATCHES = [[T + 1000, T + 2000, T + 3000], [T + 2500, T + 5000], [T + 4000]]


def _timestamped_topic(broker) -> str:  # type: ignore[no-untyped-def]
    name = topic_name("lo")
    create_topic(broker.bootstrap, name, 1)
    for stamps in BATCHES:
        batch = build_batch([Record(b"k", b"v", (), ts) for ts in stamps])
        assert raw_produce(broker.bootstrap, name, 0, batch).error_code == 0
    return name


def test_list_offsets_confluent_admin(broker, ck: AdminClient) -> None:
    name = _timestamped_topic(broker)
    tp = TopicPartition(name, 0)

    def offset(spec) -> tuple[int, int]:  # type: ignore[no-untyped-def]
        info = next(iter(ck.list_offsets({tp: spec}).values())).result(TIMEOUT)
        return info.offset, info.timestamp

    assert offset(OffsetSpec.earliest())[0] == 0
    assert offset(OffsetSpec.latest())[0] == 6
    assert offset(OffsetSpec.max_timestamp()) == (4, T + 5000)
    assert offset(OffsetSpec.for_timestamp(T + 1500)) == (1, T + 2000)
    assert offset(OffsetSpec.for_timestamp(T + 2200)) == (2, T + 3000)  # inside a batch
    assert offset(OffsetSpec.for_timestamp(T + 3500)) == (4, T + 5000)
    assert offset(OffsetSpec.for_timestamp(T)) == (0, T + 1000)
    assert offset(OffsetSpec.for_timestamp(T + 9000))[0] == -1
    from confluent_kafka import IsolationLevel
    info = next(iter(ck.list_offsets({tp: OffsetSpec.latest()},
                                     isolation_level=IsolationLevel.READ_COMMITTED)
                     .values())).result(TIMEOUT)
    assert info.offset == 6
    missing = TopicPartition(name, 3)  # librdkafka knows from metadata and fails it locally
    assert ck_code(next(iter(ck.list_offsets({missing: OffsetSpec.latest()}).values()))) != 0
    body = {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": name, "partitions": [{"partition_index": 3, "current_leader_epoch": -1,
                                       "timestamp": -1}]}]}
    raw = send_request(broker.bootstrap, ApiKey.LIST_OFFSETS, 7, body)
    assert raw.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_list_offsets_confluent_consumer(broker) -> None:
    from confluent_kafka import Consumer
    name = _timestamped_topic(broker)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        lo, hi = consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=TIMEOUT)
        assert (lo, hi) == (0, 6)
        found = consumer.offsets_for_times(
            [TopicPartition(name, 0, T + 2200)], timeout=TIMEOUT)
        assert found[0].offset == 2 and found[0].error is None
        found = consumer.offsets_for_times(
            [TopicPartition(name, 0, T + 4500)], timeout=TIMEOUT)
        assert found[0].offset == 4
        found = consumer.offsets_for_times(
            [TopicPartition(name, 0, T + 99999)], timeout=TIMEOUT)
        assert found[0].offset == -1  # OFFSET_END: no such record
    finally:
        consumer.close()


def test_list_offsets_kafka_python(broker) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTP
    name = _timestamped_topic(broker)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        tp = KpTP(name, 0)
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 6}
        found = consumer.offsets_for_times({tp: T + 2200})[tp]
        assert (found.offset, found.timestamp) == (2, T + 3000)
        assert consumer.offsets_for_times({tp: T + 99999})[tp] is None
    finally:
        consumer.close()


def test_list_offsets_kafka_python_admin_specs(broker, kp) -> None:
    """Every spec kafka-python's admin offers, including EARLIEST_LOCAL (-4, KIP-405) and
    LATEST_TIERED (-5, KIP-1005), which a broker without tiered storage answers too."""
    from kafka import TopicPartition as KpTP
    from kafka.admin import OffsetSpec as KpSpec
    name = _timestamped_topic(broker)
    tp = KpTP(name, 0)

    def offset(spec) -> int:  # type: ignore[no-untyped-def]
        return kp.list_partition_offsets({tp: spec})[tp].offset

    assert offset(KpSpec.EARLIEST) == 0
    assert offset(KpSpec.LATEST) == 6
    assert offset(KpSpec.MAX_TIMESTAMP) == 4
    assert offset(KpSpec.EARLIEST_LOCAL) == 0
    assert offset(KpSpec.LATEST_TIERED) == -1
    kp.delete_records({tp: 2})
    assert offset(KpSpec.EARLIEST) == 2 and offset(KpSpec.EARLIEST_LOCAL) == 2


# -- OffsetForLeaderEpoch ----------------------------------------------------------------------

def test_offset_for_leader_epoch(broker) -> None:
    name = topic_name("ofle")
    create_topic(broker.bootstrap, name, 1)
    leader = leader_address(broker.bootstrap, name, 0)  # a node's worker leads it

    def ask(partition: int, leader_epoch: int, current: int = -1, topic: str = name):
        body = {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": partition, "current_leader_epoch": current,
             "leader_epoch": leader_epoch}]}]}
        resp = send_request(leader, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, body)
        return resp.topics[0].partitions[0]

    # As after Kafka's makeLeader, the leader's epoch starts at its log end from creation,
    # so the first append has no leader-epoch-checkpoint to rewrite (and fsync).
    p = ask(0, 0)
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 0)
    checkpoint = broker.partition_dir(f"{name}-0") / "leader-epoch-checkpoint"
    assert checkpoint.read_text().split("\n")[2] == "0 0"
    before = checkpoint.stat()
    for i in range(3):
        assert raw_produce(broker.bootstrap, name, 0,
                           build_batch([Record(None, b"v%d" % i)])).error_code == 0
    after = checkpoint.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)

    p = ask(0, 0)
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 3)
    p = ask(0, 0, current=0)
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 3)
    assert ask(0, 0, current=5).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert ask(1, 0).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert ask(0, 0, topic="no-such-topic").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
