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
