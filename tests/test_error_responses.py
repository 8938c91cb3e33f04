"""Every served (API, version) has an error response that encodes.

When a handler fails, the dispatcher answers that one request with UNKNOWN_SERVER_ERROR
wherever the API has room for it; this checks there is always such a body, so a handler bug
never closes a client's connection.
"""
from __future__ import annotations

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages import APIS
from pybroker.dispatch import _error_body
from pybroker.handlers import REGISTRY
from pybroker.handlers.base import RequestContext

CASES = [(key, v) for key, h in REGISTRY.items() for v in range(h.min_version, h.max_version + 1)]


def _request_body(key: int, version: int) -> dict:
    """The default request, except a Produce asks for an answer about one partition: with
    the default acks=0 there is no response at all, so no error body would be checked."""
    body = APIS[key].request.default(version)
    if key == ApiKey.PRODUCE:
        body.update({"acks": 1, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": None}]}]})
    return body


@pytest.mark.parametrize(("key", "version"), CASES)
def test_error_response_encodes(key: int, version: int) -> None:
    message = APIS[key].request
    request = message.decode(message.encode(_request_body(key, version), version), version)
    ctx = RequestContext(None, RequestHeader(key, version, 1, "test"), "127.0.0.1", 1)  # type: ignore[arg-type]
    body = _error_body(REGISTRY[key], ctx, request, ErrorCode.UNKNOWN_SERVER_ERROR)
    if key == ApiKey.PRODUCE:
        assert body is not None, "acks=1 is answered"
    if body is not None:
        response = APIS[key].response
        encoded = response.encode(body, version)
        if key == ApiKey.PRODUCE:
            decoded = response.decode(encoded, version)
            partition = decoded.responses[0].partition_responses[0]
            assert (decoded.responses[0].name, partition.index) == ("t", 0)
            assert partition.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
