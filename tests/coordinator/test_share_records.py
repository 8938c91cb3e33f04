"""The records of __share_group_state round-trip, and refuse what they cannot read."""
from __future__ import annotations

import struct
from uuid import UUID

import pytest

from pybroker.coordinator.share_partition import RecordState, StateBatch
from pybroker.coordinator.share_records import (
    ShareSnapshot, ShareStateKey, decode_key, decode_value, encode_key, encode_value,
    state_key_text,
)

KEY = ShareStateKey("grüppe", UUID(int=7), 3)


def test_key_round_trip_and_kafka_partitioning_text() -> None:
    assert decode_key(encode_key(KEY)) == KEY
    # the topic id as Kafka's Uuid.toString: URL-safe base64 without padding
    assert state_key_text(KEY) == "grüppe:AAAAAAAAAAAAAAAAAAAABw:3"


def test_value_round_trip() -> None:
    snap = ShareSnapshot(1, 40, (StateBatch(40, 41, RecordState.AVAILABLE, 2),
                                 StateBatch(42, 42, RecordState.ARCHIVED, 5)))
    assert decode_value(encode_value(snap)) == snap


def test_value_version_1_keeps_the_leader_epoch_and_version_0_reads_as_none() -> None:
    snap = ShareSnapshot(2, 5, (StateBatch(5, 6, RecordState.AVAILABLE, 1),), leader_epoch=9)
    assert decode_value(encode_value(snap)) == snap
    v0 = struct.pack(">hiqi", 0, 2, 5, 1) + struct.pack(">qqbh", 5, 6, 0, 1)
    assert decode_value(v0) == ShareSnapshot(2, 5, snap.batches, leader_epoch=-1)


def test_unknown_key_version_is_skipped_and_a_short_value_refused() -> None:
    assert decode_key(b"\x00\x05rest") is None
    with pytest.raises(ValueError):
        decode_value(encode_value(ShareSnapshot(0, 0, (StateBatch(0, 0, RecordState.ARCHIVED,
                                                                  1),)))[:-1])
