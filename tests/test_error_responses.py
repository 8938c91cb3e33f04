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
from pybroker.network.dispatch import _error_body
from pybroker.handlers import REGISTRY
from pybroker.handlers._base import RequestContext

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


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_error_reaches_every_partition_asked_about(version: int) -> None:
    """ElectLeaders v0 has no top-level error code: a failed request (a hook's error, an
    authorization failure) reaches its clients per partition, as Kafka answers them."""
    message = APIS[ApiKey.ELECT_LEADERS].request
    body = message.default(version)
    body.update({"topic_partitions": [{"topic": "t", "partitions": [0, 2]}]})
    request = message.decode(message.encode(body, version), version)
    ctx = RequestContext(None, RequestHeader(ApiKey.ELECT_LEADERS, version, 1, "test"),  # type: ignore[arg-type]
                         "127.0.0.1", 1)
    answer = _error_body(REGISTRY[ApiKey.ELECT_LEADERS], ctx, request,
                         ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    response = APIS[ApiKey.ELECT_LEADERS].response
    decoded = response.decode(response.encode(answer, version), version)
    (topic,) = decoded.replica_election_results
    assert topic.topic == "t"
    assert [(p.partition_id, p.error_code) for p in topic.partition_result] == [
        (0, ErrorCode.CLUSTER_AUTHORIZATION_FAILED), (2, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
    if version >= 1:
        assert decoded.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _one_of_each(fields, version: int) -> dict:
    """A request with every field at its default, except each array holds one element (so
    per-topic and per-partition error answers have something to answer about)."""
    from protocol.schema import ArrayOf, StructOf
    out = {}
    for fl in fields:
        if version not in fl.versions:
            continue
        t = fl.type
        if isinstance(t, ArrayOf):
            item = t.item
            out[fl.name] = [_one_of_each(item.fields, version) if isinstance(item, StructOf)
                            else {"string": "x"}.get(item, 0)]
        elif isinstance(t, StructOf):
            out[fl.name] = _one_of_each(t.fields, version)
        else:
            out[fl.name] = fl.default_value(version)
    return out


def _codes(value) -> list[int]:
    """Every error_code anywhere in a decoded response."""
    if isinstance(value, dict):
        return [c for k, v in value.items() if not k.startswith("_")
                for c in ([v] if k.endswith("error_code") else _codes(v))]
    if isinstance(value, list):
        return [c for v in value for c in _codes(v)]
    return []


def _refusable() -> list[tuple[int, int]]:
    """The (API, version)s whose handler refuses whole requests through _authz.require."""
    import inspect
    return [(key, v) for key, v in CASES
            if "require(" in inspect.getsource(inspect.getmodule(REGISTRY[key].handle))]


@pytest.mark.parametrize(("key", "version"), _refusable())
def test_whole_request_authorization_failure_is_answered_with_its_code(key, version):
    """A refusal never closes the connection: the API's error answer carries the code."""
    message = APIS[key].request
    request = message.decode(message.encode(_one_of_each(message.fields, version), version),
                             version)
    ctx = RequestContext(None, RequestHeader(key, version, 1, "test"), "127.0.0.1", 1)  # type: ignore[arg-type]
    code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    body = _error_body(REGISTRY[key], ctx, request, code)
    response = APIS[key].response
    decoded = response.decode(response.encode(body, version), version)
    assert code in _codes(decoded), decoded


def test_refusable_apis_are_found():
    keys = {k for k, _ in _refusable()}
    assert {ApiKey.OFFSET_DELETE, ApiKey.JOIN_GROUP, ApiKey.END_TXN} <= keys
