"""The broker's answers to Produce requests it refuses, sent raw or by the stock clients:
unknown partition or topic, min.insync.replicas above the ISR, timestamps out of range,
corrupt CRC, zstd before v7, too large, invalid acks, versions older than served; and acks=0,
which gets no response.
"""
from __future__ import annotations

import time

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.records.batch import Compression
from protocol.records.record import Record, build_batch
from tests.integration.admin_helpers import high_watermark, raw_produce, topic_name
from tests.integration.clients import CONFLUENT, KAFKA_PYTHON, Rec
from tests.integration.raw import RawConnection, create_topic, known_topics, leader_address


def test_produce_to_unknown_partition_and_topic(broker) -> None:
    name = topic_name("pu")
    create_topic(broker.bootstrap, name, 1)
    batch = build_batch([Record(None, b"v")])
    assert raw_produce(broker.bootstrap, name, 5, batch).error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    missing = topic_name("pu-missing")
    assert raw_produce(broker.bootstrap, missing, 0, batch).error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert missing not in known_topics(broker.bootstrap)  # Produce never auto-creates


def test_min_insync_replicas_above_the_isr(broker) -> None:
    """min.insync.replicas=2 on a one-replica partition: acks=all is refused with
    NOT_ENOUGH_REPLICAS and nothing is written; acks=1 is not affected, as in Kafka."""
    from compat.base import ProduceFailed
    name = topic_name("min-isr")
    create_topic(broker.bootstrap, name, 1, {"min.insync.replicas": "2"})
    batch = build_batch([Record(b"k", b"v")])
    part = raw_produce(broker.bootstrap, name, 0, batch, acks=-1)
    assert part.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert part.error_message is None  # as Kafka: a message only beside record_errors
    assert high_watermark(broker, name) == 0
    with pytest.raises(ProduceFailed):
        CONFLUENT.produce(broker.bootstrap, name, [Rec(b"k", b"all", partition=0)],
                          config={"acks": "all", "message.timeout.ms": 3000,
                                  "enable.idempotence": False})
    assert raw_produce(broker.bootstrap, name, 0, batch, acks=1).error_code == 0
    assert high_watermark(broker, name) == 1


def test_produce_timestamps_out_of_range(broker) -> None:
    """message.timestamp.before.max.ms / after.max.ms on a CreateTime topic: a batch with a
    record stamped outside [now - before, now + after] is refused with INVALID_TIMESTAMP and
    the offending records named (record_errors, v8+); nothing is written."""
    from compat.base import ProduceFailed
    name = topic_name("ts-range")
    create_topic(broker.bootstrap, name, 1, {"message.timestamp.before.max.ms": "3600000",
                                             "message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    with pytest.raises(ProduceFailed, match="(?i)timestamp"):
        CONFLUENT.produce(broker.bootstrap, name, [Rec(b"k", b"old", timestamp=now - 7_200_000,
                                                       partition=0)])
    batch = build_batch([Record(b"k", b"ok", timestamp=now),
                         Record(b"k", b"future", timestamp=now + 3_600_000)])
    part = raw_produce(broker.bootstrap, name, 0, batch, version=9)
    assert part.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in part.record_errors] == [1]
    assert "out of range" in part.record_errors[0].batch_index_error_message
    assert high_watermark(broker, name) == 0
    CONFLUENT.produce(broker.bootstrap, name, [Rec(b"k", b"now", partition=0)])
    assert [g.value for g in KAFKA_PYTHON.consume(broker.bootstrap, name, [0], 1)] == [b"now"]


def test_compacted_topic_names_each_keyless_record(broker) -> None:
    """KIP-467: a batch with keyless records on a compacted topic is refused as a whole
    (nothing appended) with INVALID_RECORD, each keyless record named by its index in the
    batch, and Kafka's error_message (v8+); a stock client reports that message."""
    from compat.base import ProduceFailed
    name = topic_name("compact-nokey")
    create_topic(broker.bootstrap, name, 1, {"cleanup.policy": "compact"})
    batch = build_batch([Record(b"k", b"a"), Record(None, b"b"), Record(b"k", b"c"),
                         Record(None, b"d")])
    part = raw_produce(broker.bootstrap, name, 0, batch, version=9)
    assert part.error_code == ErrorCode.INVALID_RECORD
    why = f"Compacted topic cannot accept message without key in topic partition {name}-0"
    assert [(e.batch_index, e.batch_index_error_message) for e in part.record_errors] == \
        [(1, why), (3, why)]
    assert part.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{why}'), "
        f"RecordError(batchIndex=3, message='{why}')]")
    assert part.log_start_offset == 0
    assert high_watermark(broker, name) == 0
    # kafka-python fails each record with its own error: the keyless one with the broker's
    # message, the keyed one of the same batch as a casualty of it.
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError, KafkaError
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=200, retries=0)
    try:
        keyed = producer.send(name, key=b"k", value=b"keyed", partition=0)
        keyless = producer.send(name, value=b"no key", partition=0)
        producer.flush(10)
    finally:
        producer.close(5)
    with pytest.raises(InvalidRecordError, match=f"without key in topic partition {name}-0"):
        keyless.get(5)
    with pytest.raises(KafkaError, match="part of a batch"):
        keyed.get(5)
    with pytest.raises(ProduceFailed, match="INVALID_RECORD"):
        CONFLUENT.produce(broker.bootstrap, name, [Rec(None, b"no key", partition=0)],
                          config={"message.timeout.ms": 5000})
    assert high_watermark(broker, name) == 0
    assert raw_produce(broker.bootstrap, name, 0, build_batch([Record(b"k", b"v")]),
                       version=9).error_code == ErrorCode.NONE


def test_a_batch_stamped_log_append_time_by_its_producer_is_refused(broker) -> None:
    """Only the broker stamps LogAppendTime: on such a topic a producer's batch carrying that
    timestamp type is refused with INVALID_TIMESTAMP, every record named; nothing is
    written. A CreateTime batch is stamped by the broker as usual."""
    from protocol.records.batch import LOG_APPEND_TIME
    name = topic_name("lat-stamped")
    create_topic(broker.bootstrap, name, 1, {"message.timestamp.type": "LogAppendTime"})
    now = int(time.time() * 1000)
    records = [Record(b"k", b"a", timestamp=now), Record(b"k", b"b", timestamp=now)]
    part = raw_produce(broker.bootstrap, name, 0,
                       build_batch(records, timestamp_type=LOG_APPEND_TIME), version=9)
    assert part.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in part.record_errors] == [0, 1]
    assert "Producer should not set timestamp type to LogAppendTime" in \
        part.record_errors[0].batch_index_error_message
    assert high_watermark(broker, name) == 0
    assert raw_produce(broker.bootstrap, name, 0, build_batch(records)).error_code == 0

def test_produce_corrupt_crc(broker) -> None:
    name = topic_name("crc")
    create_topic(broker.bootstrap, name, 1)
    good = build_batch([Record(b"k", b"value-%d" % i) for i in range(5)])
    bad = bytearray(good)
    bad[-3] ^= 0x01  # inside the last record: the CRC no longer matches
    with RawConnection(leader_address(broker.bootstrap, name, 0)) as conn:
        resp = raw_produce(broker.bootstrap, name, 0, bytes(bad), conn=conn)
        assert resp.error_code == ErrorCode.CORRUPT_MESSAGE
        assert high_watermark(broker, name) == 0
        assert [s.stat().st_size for s in broker.partition_dir(f"{name}-0").glob("*.log")] \
            == [0]
        # the connection stays usable and the log unharmed
        resp = raw_produce(broker.bootstrap, name, 0, good, conn=conn)
        assert (resp.error_code, resp.base_offset) == (0, 0)
    got = KAFKA_PYTHON.consume(broker.bootstrap, name, [0], 5)
    assert [g.value for g in got] == [b"value-%d" % i for i in range(5)]


@pytest.mark.parametrize("version", [3, 4, 5, 6, 7, 9])
def test_produce_zstd_needs_v7(broker, version: int) -> None:
    name = topic_name("zstd")
    create_topic(broker.bootstrap, name, 1)
    batch = build_batch([Record(b"k", b"zstd " * 50)], compression=Compression.ZSTD)
    resp = raw_produce(broker.bootstrap, name, 0, batch, version=version)
    if version < 7:
        assert resp.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        assert high_watermark(broker, name) == 0
    else:
        assert resp.error_code == 0 and high_watermark(broker, name) == 1


def test_produce_message_too_large(broker) -> None:
    name = topic_name("big")
    create_topic(broker.bootstrap, name, 1, {"max.message.bytes": "2000"})
    small = build_batch([Record(None, b"x" * 1000)])
    large = build_batch([Record(None, b"x" * 3000)])
    assert raw_produce(broker.bootstrap, name, 0, large).error_code == \
        ErrorCode.MESSAGE_TOO_LARGE
    assert raw_produce(broker.bootstrap, name, 0, small).error_code == 0
    assert high_watermark(broker, name) == 1


def test_produce_acks_zero_gets_no_response(broker) -> None:
    name = topic_name("acks0")
    create_topic(broker.bootstrap, name, 1)
    with RawConnection(leader_address(broker.bootstrap, name, 0)) as conn:
        conn.request(ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": 0, "timeout_ms": 1000, "topic_data": [
                {"name": name, "partition_data": [
                    {"index": 0, "records": build_batch([Record(None, b"fire")])}]}]},
            expect_response=False)
        # the next response on the connection is the next request's
        resp = conn.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "raw",
                                                     "client_software_version": "1"})
        assert resp.error_code == 0
    assert high_watermark(broker, name) == 1


def test_produce_invalid_acks(broker) -> None:
    name = topic_name("acks")
    create_topic(broker.bootstrap, name, 1)
    resp = raw_produce(broker.bootstrap, name, 0, build_batch([Record(None, b"v")]), acks=2)
    assert resp.error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert high_watermark(broker, name) == 0


@pytest.mark.parametrize("version", [0, 1, 2])
def test_old_produce_versions_get_unsupported_version(broker, version: int) -> None:
    name = topic_name("oldproduce")
    create_topic(broker.bootstrap, name, 2)
    body = {"acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": name, "partition_data": [{"index": 0, "records": b""},
                                          {"index": 1, "records": None}]}]}
    with RawConnection(broker.bootstrap) as conn:
        resp = conn.request(ApiKey.PRODUCE, version, body)
        codes = [p.error_code for p in resp.responses[0].partition_responses]
        assert codes == [ErrorCode.UNSUPPORTED_VERSION] * 2
        assert conn.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0  # still open
    assert high_watermark(broker, name) == 0
