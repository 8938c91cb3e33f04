"""Every served (API, version) has an error response that encodes.

When a handler fails, the dispatcher answers that one request with UNKNOWN_SERVER_ERROR
wherever the API has room for it; this checks there is always such a body, so a handler bug
never closes a client's connection.
"""
from __future__ import annotations

import pytest

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages import APIS
from pybroker.dispatch import _error_body
from pybroker.handlers import REGISTRY
from pybroker.handlers.base import RequestContext

CASES = [(key, v) for key, h in REGISTRY.items() for v in range(h.min_version, h.max_version + 1)]


@pytest.mark.parametrize(("key", "version"), CASES)
def test_error_response_encodes(key: int, version: int) -> None:
    message = APIS[key].request
    request = message.decode(message.encode(message.default(version), version), version)
    ctx = RequestContext(None, RequestHeader(key, version, 1, "test"), "127.0.0.1", 1)  # type: ignore[arg-type]
    body = _error_body(REGISTRY[key], ctx, request, ErrorCode.UNKNOWN_SERVER_ERROR)
    if body is not None:
        APIS[key].response.encode(body, version)
