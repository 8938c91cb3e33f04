"""Every (API, version, direction) we declare round-trips, compiled and plain alike.

As Kafka's `MessageTest.testAllMessageRoundTrips`: values generated from the declaration itself
(so a new API or version is covered the day it is declared) are encoded with the compiled
construct and with the plain reference, which must agree byte for byte; decoding those bytes
(compiled and plain, which must agree) and re-encoding must give the same bytes again.
"""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from protocol.messages import APIS
from protocol.primitives import WireError
from protocol.schema import Message
from tests.protocol.strategies import assert_carries, message_strategy, plain


def _cases() -> list[Any]:
    cases = []
    for api in APIS.values():
        assert api.versions.high is not None
        for version in range(api.versions.low, api.versions.high + 1):
            for direction in ("request", "response"):
                cases.append(pytest.param(api.key, version, direction,
                                          id=f"{api.name}-v{version}-{direction}"))
    return cases


def _message(key: int, direction: str) -> Message:
    return getattr(APIS[key], direction)


@pytest.mark.parametrize("key,version,direction", _cases())
def test_round_trip(key: int, version: int, direction: str) -> None:
    message = _message(key, direction)

    @settings(max_examples=20, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(message_strategy(message, version))
    def check(value: dict[str, Any]) -> None:
        data = message.encode(value, version)
        assert message.encode_plain(value, version) == data
        decoded = message.decode(data, version)
        assert plain(message.decode_plain(data, version)) == plain(decoded)
        assert_carries(value, decoded)
        assert message.encode(decoded, version) == data
        assert message.encode_plain(decoded, version) == data

    check()


@pytest.mark.parametrize("key,version,direction", _cases())
def test_default_round_trips(key: int, version: int, direction: str) -> None:
    """`Message.default(version)` is a valid message: handlers start from it."""
    message = _message(key, direction)
    value = message.default(version)
    data = message.encode(value, version)
    assert message.encode_plain(value, version) == data
    assert message.encode(message.decode(data, version), version) == data


# -- known bytes: where compiled and plain could agree and both be wrong --------------------

def test_nullable_struct_has_kafkas_marker_byte() -> None:
    """Kafka writes an int8 before a nullable untagged struct: -1 null, 1 present
    (DescribeTopicPartitions `Cursor`; the generated Java reads `readByte() < 0` as null)."""
    request = APIS[75].request
    null = request.encode({"topics": [], "response_partition_limit": 5, "cursor": None}, 0)
    assert null == b"\x01" + b"\x00\x00\x00\x05" + b"\xff" + b"\x00"
    present = request.encode({"topics": [], "response_partition_limit": 5,
                              "cursor": {"topic_name": "t", "partition_index": 2}}, 0)
    assert present == b"\x01\x00\x00\x00\x05" + b"\x01" + b"\x02t\x00\x00\x00\x02\x00" + b"\x00"
    assert request.decode(null, 0).cursor is None
    assert request.decode(present, 0).cursor.partition_index == 2
    assert request.decode_plain(present, 0).cursor.topic_name == "t"


def test_missing_final_tag_section_is_not_read_from_the_previous_byte() -> None:
    """A flexible struct whose tag section is cut off must fail even when the byte before it
    is 0x00 (the compiled fast path once seeked back and read that byte as an empty section)."""
    join = APIS[11].request
    data = join.encode({"group_id": "g", "session_timeout_ms": 1, "rebalance_timeout_ms": 1,
                        "member_id": "", "protocol_type": "consumer",
                        "protocols": [{"name": "range", "metadata": b"\x00"}]}, 7)
    assert data.endswith(b"\x00\x00")
    for decode in (join.decode, join.decode_plain):
        with pytest.raises(WireError):
            decode(data[:-1], 7)
