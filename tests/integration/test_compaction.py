"""Log compaction through a real broker and stock clients: the cleaner runs in the broker's
background (log.cleaner.backoff.ms shortened), and what consumers read afterwards is the
newest value of each key at its original offset; tombstones go after delete.retention.ms;
__consumer_offsets stays small however often a group commits."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from protocol.api_keys import ApiKey
from pybroker.storage.checkpoint import read_offsets
from pybroker.storage.cleaner import CLEANER_CHECKPOINT
from tests.helpers import WireBroker, serving_broker
from tests.integration.clients import CONFLUENT, KAFKA_PYTHON
from tests.integration.raw import RawConnection, create_topic

OFFSETS_TOPIC = "__consumer_offsets"


@pytest.fixture
def cleaning_broker(tmp_path: Path) -> Iterator[Any]:
    with serving_broker(tmp_path / "logs", log_cleaner_backoff_ms="100",
                          offsets_topic_segment_bytes="16384") as info:
        info.log_dir = tmp_path / "logs"
        yield info


def _wait_for(predicate: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _log_dirs(info: Any) -> list[Path]:
    """Every broker's log dir: on a node of several brokers the partition, and so its
    cleaner checkpoint entry, is in the dir of whichever worker holds it."""
    return info.log_dirs() if isinstance(info, WireBroker) else [info.log_dir]


def _first_dirty(info: Any, topic: str, partition: int = 0) -> int:
    found = [offsets[(topic, partition)] for d in _log_dirs(info)
             if (topic, partition) in (offsets := read_offsets(d / CLEANER_CHECKPOINT))]
    assert len(found) <= 1, f"{topic}-{partition} in the checkpoints of {len(found)} dirs"
    return found[0] if found else -1


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]],
             **config: Any) -> list[int]:
    """Send with kafka-python; the offset of each record, from its acknowledgement."""
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10000,
                             linger_ms=5, **config)
    try:
        futures = [producer.send(topic, key=k, value=v, partition=0) for k, v in records]
        producer.flush(30)
        return [f.get(30).offset for f in futures]
    finally:
        producer.close(5)


def _roll(bootstrap: str, topic: str, segment_ms: int) -> int:
    """Make everything produced so far cleanable: once the active segment is older than
    segment.ms, one more record rolls it. Returns that record's offset."""
    time.sleep(segment_ms / 1000 + 0.1)
    return _produce(bootstrap, topic, [(b"zz-roll", b"roll")])[0]


@pytest.mark.in_process("reads the cleaned log's segments in this process")
@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_newest_value_per_key_survives_at_its_original_offset(cleaning_broker: Any,
                                                              codec: str) -> None:
    bootstrap, topic = cleaning_broker.bootstrap, f"compacted-{codec}"
    # A low ratio: the last dirty segment may be small next to the cleaned ones, and this
    # test waits for everything below the roll record to be cleaned.
    create_topic(bootstrap, topic, 1, {"cleanup.policy": "compact", "segment.bytes": "16384",
                                       "segment.ms": "1000", "min.cleanable.dirty.ratio": "0.01"})
    records = [(b"key-%03d" % (i % 100), b"value-%05d" % i) for i in range(10_000)]
    offsets = _produce(bootstrap, topic, records,
                       compression_type=None if codec == "none" else codec)
    newest = {key: (offset, value) for (key, value), offset in zip(records, offsets)}
    roll_offset = _roll(bootstrap, topic, 1000)
    _wait_for(lambda: _first_dirty(cleaning_broker, topic) == roll_offset, "the cleaner")
    plog = cleaning_broker.broker.logs.get(topic, 0)
    assert plog.log_end_offset == roll_offset + 1 and plog.log_start_offset == 0
    assert plog.size < 16384  # from ~10,000 records to 101

    expected = {**newest, b"zz-roll": (roll_offset, b"roll")}
    for consume in (KAFKA_PYTHON.consume, CONFLUENT.consume):
        got = consume(bootstrap, topic, [0], len(expected))
        assert {g.key: (g.offset, g.value) for g in got} == expected, consume.__name__
        assert len(got) == len(expected)
        assert [g.offset for g in got] == sorted(g.offset for g in got)


@pytest.mark.in_process("reads the cleaned log's segments in this process")
def test_tombstones_disappear_after_delete_retention(cleaning_broker: Any) -> None:
    bootstrap, topic = cleaning_broker.bootstrap, "tombstones"
    retention_s = 4
    create_topic(bootstrap, topic, 1, {"cleanup.policy": "compact", "segment.bytes": "16384",
                                       "segment.ms": "500",
                                       "delete.retention.ms": str(retention_s * 1000)})
    live = [(b"key-%02d" % i, b"v") for i in range(20)]
    dead = [(b"key-%02d" % i, None) for i in range(0, 20, 2)]
    offsets = _produce(bootstrap, topic, live + dead)
    roll_offset = _roll(bootstrap, topic, 500)
    _wait_for(lambda: _first_dirty(cleaning_broker, topic) == roll_offset, "the cleaner")
    cleaned_at = time.monotonic()
    got = KAFKA_PYTHON.consume(bootstrap, topic, [0], 21)
    assert time.monotonic() - cleaned_at < retention_s, "too slow to see the tombstones"
    # Compacted, but the deletes are still there for consumers to see.
    assert {g.key: (g.offset, g.value) for g in got} == {
        **{k: (o, v) for (k, v), o in zip(live[1::2], offsets[1:20:2])},
        **{k: (o, None) for (k, _), o in zip(dead, offsets[20:])},
        b"zz-roll": (roll_offset, b"roll")}

    plog = cleaning_broker.broker.logs.get(topic, 0)

    def tombstones_gone() -> bool:
        return plog.size < 300  # 10 live records and the roll record, nothing else

    _wait_for(tombstones_gone, "the tombstones to go", timeout=retention_s + 15)
    assert time.monotonic() - cleaned_at >= retention_s * 0.9
    got = KAFKA_PYTHON.consume(bootstrap, topic, [0], 11)
    assert sorted(g.key for g in got) == [k for k, _ in live[1::2]] + [b"zz-roll"]


@pytest.mark.in_process("sums the __consumer_offsets logs' sizes and ends in this process")
def test_consumer_offsets_stays_small_under_constant_commits(cleaning_broker: Any) -> None:
    """Rounds of 1,000 commits as fast as one connection sends them; after each round the
    cleaner brings __consumer_offsets back under about one segment, however much was
    written before. (How much piles up *during* a round depends on the machine: cleaning
    fsyncs, and a busy disk makes it lag behind a fast committer.)"""
    bootstrap = cleaning_broker.bootstrap
    create_topic(bootstrap, "work", 1)
    rounds, per_round = 6, 1_000
    small = 16384 + 4096  # the active segment and a cleaned one of a few records
    with RawConnection(bootstrap, timeout=30) as conn:
        for r in range(rounds):
            for i in range(r * per_round, (r + 1) * per_round):
                resp = conn.request(ApiKey.OFFSET_COMMIT, 8, {
                    "group_id": "busy", "generation_id_or_member_epoch": -1,
                    "member_id": "", "topics": [{"name": "work", "partitions": [
                        {"partition_index": 0, "committed_offset": i + 1,
                         "committed_metadata": "after record %d" % i}]}]})
                assert resp.topics[0].partitions[0].error_code == 0
                if i == 0:
                    one_commit = _offsets_topic_size(cleaning_broker)
            _wait_for(lambda: _offsets_topic_size(cleaning_broker) < small,
                      f"cleaning after round {r}")
        fetched = conn.request(ApiKey.OFFSET_FETCH, 8, {
            "groups": [{"group_id": "busy", "topics": [{"name": "work",
                                                          "partition_indexes": [0]}]}],
            "require_stable": False})
    assert fetched.groups[0].topics[0].partitions[0].committed_offset == rounds * per_round
    # Every commit was written: uncompacted, the topic would hold ~45 segments.
    assert _offsets_topic_log_end(cleaning_broker) >= rounds * per_round
    assert rounds * per_round * one_commit > 40 * 16384


def _offsets_topic_size(info: Any) -> int:
    broker = info.broker
    topic = broker.metadata.image.topics.get(OFFSETS_TOPIC)
    if topic is None:
        return 0
    return sum(broker.logs.get(OFFSETS_TOPIC, p.partition).size
               for p in topic.partitions)


def _offsets_topic_log_end(info: Any) -> int:
    broker = info.broker
    topic = broker.metadata.image.topics[OFFSETS_TOPIC]
    return sum(broker.logs.get(OFFSETS_TOPIC, p.partition).log_end_offset
               for p in topic.partitions)


@pytest.mark.in_process("reads the log's own config object")
def test_topic_configs_reach_the_log(cleaning_broker: Any) -> None:
    create_topic(cleaning_broker.bootstrap, "configured", 1, {
        "cleanup.policy": "compact,delete", "delete.retention.ms": "1234",
        "min.cleanable.dirty.ratio": "0.25", "min.compaction.lag.ms": "5",
        "max.compaction.lag.ms": "60000", "segment.ms": "120000"})
    config = cleaning_broker.broker.logs.get("configured", 0).config
    assert (config.cleanup_policy, config.delete_retention_ms, config.min_cleanable_dirty_ratio,
            config.min_compaction_lag_ms, config.max_compaction_lag_ms) == \
        ("compact,delete", 1234, 0.25, 5, 60000)
    assert config.segment_ms == 60000  # rolled by max.compaction.lag.ms, as Kafka does


def test_no_cleaning_when_the_cleaner_is_disabled(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs", log_cleaner_backoff_ms="50",
                          log_cleaner_enable="false") as info:
        create_topic(info.bootstrap, "kept", 1, {"cleanup.policy": "compact",
                                                 "segment.bytes": "1024"})
        _produce(info.bootstrap, "kept", [(b"k", b"v%d" % i) for i in range(200)])
        time.sleep(0.5)
        assert len(KAFKA_PYTHON.consume(info.bootstrap, "kept", [0], 200)) == 200
        dirs = _log_dirs(info)
    assert not [d for d in dirs if (d / CLEANER_CHECKPOINT).exists()]


def test_compaction_with_transactions(cleaning_broker: Any) -> None:
    """Committed transactional records are compacted like any others, aborted ones are
    removed, and read_committed and read_uncommitted consumers agree afterwards; the markers
    stay while their transactions' records do."""
    from tests.integration.txn_clients import READ_COMMITTED, READ_UNCOMMITTED, ck_producer
    from confluent_kafka import Consumer, TopicPartition

    bootstrap, topic = cleaning_broker.bootstrap, "compacted-txn"
    create_topic(bootstrap, topic, 1, {"cleanup.policy": "compact", "segment.bytes": "16384",
                                       "segment.ms": "1000", "min.cleanable.dirty.ratio": "0.01"})
    producer = ck_producer(bootstrap, "compacting")
    expected: dict[bytes, bytes] = {}
    for round_ in range(30):
        producer.begin_transaction()
        values = {b"key-%02d" % (i % 20): b"r%02d-%03d" % (round_, i) for i in range(40)}
        for key, value in values.items():
            producer.produce(topic, key=key, value=value, partition=0)
        if round_ % 3 == 2:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            expected.update(values)
    roll_offset = _roll(bootstrap, topic, 1000)
    _wait_for(lambda: _first_dirty(cleaning_broker, topic) == roll_offset, "the cleaner")

    def read(isolation: str) -> list[tuple[bytes, bytes]]:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compacted-reader",
                             "isolation.level": isolation, "enable.partition.eof": True,
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, 0, 0)])
        out = []
        try:
            while True:
                msg = consumer.poll(5)
                assert msg is not None, "no end of partition"
                if msg.error():
                    break
                out.append((msg.key(), msg.value()))
        finally:
            consumer.close()
        return out

    committed = read(READ_COMMITTED)
    assert dict(committed[:-1]) == expected and len(committed) == len(expected) + 1
    assert read(READ_UNCOMMITTED) == committed  # aborted records are gone from the log
