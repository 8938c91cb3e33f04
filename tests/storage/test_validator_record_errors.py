"""Kafka's per-record errors (KIP-467) from the validator: which records are named, which code
the batch gets, and the message that shows at most three of them."""
from __future__ import annotations

import time

import pytest

from protocol.errors import ErrorCode
from protocol.records.record import Record, build_batch
from pybroker.config import TopicConfig, load_broker_config, resolve_topic_config
from pybroker.storage.validator import Rejected, validate_records


def _topic(**configs: str) -> TopicConfig:
    return resolve_topic_config(load_broker_config(None, {}), configs)


def _rejected(records: bytes, topic: TopicConfig, now: int) -> Rejected:
    with pytest.raises(Rejected) as exc:
        validate_records(records, topic, produce_version=9, internal=False, now_ms=now,
                         topic_partition=("t", 3))
    return exc.value


def test_every_keyless_record_is_named_and_the_message_shows_three() -> None:
    now = int(time.time() * 1000)
    records = build_batch([Record(None if i % 2 else b"k", b"v", timestamp=now)
                           for i in range(10)])
    rejected = _rejected(records, _topic(**{"cleanup.policy": "compact"}), now)
    why = "Compacted topic cannot accept message without key in topic partition t-3"
    assert rejected.code == ErrorCode.INVALID_RECORD
    assert rejected.record_errors == [(i, why) for i in (1, 3, 5, 7, 9)]
    assert rejected.message is not None
    assert rejected.message.startswith("One or more records have been rejected due to 5 record "
                                       "errors in total, and only showing the first three")
    assert rejected.message.count("RecordError(") == 3


def test_a_bad_timestamp_among_keyless_records_makes_it_invalid_timestamp() -> None:
    """Kafka checks a record's key before its timestamp, and any timestamp error decides the
    batch's code."""
    now = int(time.time() * 1000)
    records = build_batch([Record(None, b"v", timestamp=now + 7_200_000),
                           Record(b"k", b"v", timestamp=now + 7_200_000),
                           Record(b"k", b"v", timestamp=now)])
    rejected = _rejected(records, _topic(**{"cleanup.policy": "compact,delete"}), now)
    assert rejected.code == ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in rejected.record_errors] == [0, 1]
    assert "without key" in rejected.record_errors[0][1]
    assert "out of range" in rejected.record_errors[1][1]


def test_keyed_records_pass_and_a_delete_topic_takes_keyless_ones() -> None:
    now = int(time.time() * 1000)
    keyed = build_batch([Record(b"k", b"v", timestamp=now)])
    assert validate_records(keyed, _topic(**{"cleanup.policy": "compact"}), produce_version=9,
                            internal=False, now_ms=now).records == keyed
    keyless = build_batch([Record(None, b"v", timestamp=now)])
    assert validate_records(keyless, _topic(), produce_version=9, internal=False,
                            now_ms=now).records == keyless


def test_a_batch_its_producer_stamped_log_append_time_is_refused_record_by_record() -> None:
    """Kafka's validateTimestamp: a producer may not set LogAppendTime. On a LogAppendTime
    topic every record is refused; on a CreateTime topic only records without a timestamp
    (which it cannot range-check), each read with the batch's max timestamp."""
    from protocol.records.batch import LOG_APPEND_TIME
    now = int(time.time() * 1000)
    stamped = build_batch([Record(b"k", b"a", timestamp=now), Record(None, b"bb", timestamp=now)],
                          timestamp_type=LOG_APPEND_TIME)
    rejected = _rejected(stamped, _topic(**{"message.timestamp.type": "LogAppendTime"}), now)
    assert rejected.code == ErrorCode.INVALID_TIMESTAMP
    assert rejected.record_errors == [
        (0, f"Invalid timestamp type in message DefaultRecord(offset=0, timestamp={now}, "
            "key=1 bytes, value=1 bytes). Producer should not set timestamp type to "
            "LogAppendTime."),
        (1, f"Invalid timestamp type in message DefaultRecord(offset=1, timestamp={now}, "
            "key=0 bytes, value=2 bytes). Producer should not set timestamp type to "
            "LogAppendTime.")]
    unstamped = build_batch([Record(b"k", b"a", timestamp=-1)], timestamp_type=LOG_APPEND_TIME)
    assert _rejected(unstamped, _topic(), now).record_errors[0][1].startswith(
        "Invalid timestamp type in message DefaultRecord(offset=0, timestamp=-1,")
    assert validate_records(stamped, _topic(), produce_version=9, internal=False,
                            now_ms=now).records == stamped  # CreateTime, stamped: range-checked
