"""Dispatch owns throttle_time_ms: handlers set `ctx.throttle_ms`, dispatch writes it.

One writer means a response cannot say less than the connection is muted for, and no handler
can forget the field. The wire side is held by the quota tests (tests/integration/test_quotas.py
and test_controller_mutation_quota.py: Produce, Fetch, Metadata and the topic mutations come
back throttled to raw and stock clients).
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.headers import RequestHeader
from protocol.messages import APIS
from protocol.metadata_response import encode_metadata_response
from pybroker.handlers import REGISTRY, RequestContext
from pybroker.network.dispatch import _charge_request_time, _with_throttle

HANDLERS = Path(__file__).parent.parent / "pybroker" / "handlers"
FIELD = "throttle_time_ms"


def _writes_the_field(path: Path) -> list[int]:
    """Lines where a module names the field as a key or keyword (its docstrings and comments
    may mention it)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and node.value == FIELD:
            lines.append(node.lineno)
        elif isinstance(node, ast.keyword) and node.arg == FIELD:
            lines.append(node.lineno)
    return lines


def test_no_handler_writes_throttle_time_ms() -> None:
    found = {p.name: _writes_the_field(p) for p in sorted(HANDLERS.rglob("*.py"))}
    found = {name: lines for name, lines in found.items() if lines}
    assert not found, f"set ctx.throttle_ms instead; dispatch writes {FIELD}: {found}"


def test_the_check_sees_a_key_and_a_keyword(tmp_path: Path) -> None:
    module = tmp_path / "handler.py"
    module.write_text(f'"""Mentions {FIELD}."""\n# {FIELD}\n'
                      f'a = {{"{FIELD}": 0}}\nb = dict({FIELD}=0)\n')
    assert _writes_the_field(module) == [3, 4]


def _ctx(key: int, version: int, throttle_ms: int) -> RequestContext:
    ctx = RequestContext(None, RequestHeader(key, version, 1, "test"), "127.0.0.1", 1)  # type: ignore[arg-type]
    ctx.throttle_ms = throttle_ms
    return ctx


def _request(key: int, version: int) -> Any:
    message = APIS[key].request
    body = message.default(version)
    if key == ApiKey.PRODUCE:
        body["acks"] = 1  # acks=0 has no answer to throttle
    return message.decode(message.encode(body, version), version)


CASES = [(key, v) for key, h in REGISTRY.items() for v in range(h.min_version, h.max_version + 1)]


@pytest.mark.parametrize(("key", "version"), CASES)
def test_every_response_with_the_field_says_the_throttle(key: int, version: int) -> None:
    """Whatever a handler answered, dispatch's throttle reaches the bytes in every version
    whose schema has the field; a version or API without it encodes as before."""
    ctx = _ctx(key, version, 1234)
    response = APIS[key].response
    body = response.default(version)
    unthrottled = response.encode(body, version)
    decoded = response.decode(response.encode(_with_throttle(ctx, body), version), version)
    field = next((fl for fl in response.fields if fl.name == FIELD), None)
    if field is not None and version in field.versions:
        assert decoded[FIELD] == 1234
    else:
        assert response.encode(decoded, version) == unthrottled


@pytest.mark.parametrize("version", [0, 2, 3, 9, 12])
def test_metadata_encoded_by_its_handler_says_the_throttle_from_v3(version: int) -> None:
    body = encode_metadata_response(version, [(1, "h", 9092, None)], "c", 1, [])
    sent = _with_throttle(_ctx(ApiKey.METADATA, version, 77), body)
    decoded = APIS[ApiKey.METADATA].response.decode(bytes(sent), version)
    if version >= 3:
        assert decoded[FIELD] == 77
        assert sent[4:] == body[4:]
    else:
        assert sent == body


class _Quota:
    """A request quota that answers one throttle."""

    def __init__(self, throttle_ms: int) -> None:
        self.throttle_ms = throttle_ms

    def record(self, ctx: RequestContext, exempt: bool = False) -> int:
        return 0 if exempt else self.throttle_ms


@pytest.mark.parametrize(("handler_ms", "request_ms", "said"),
                         [(0, 0, 0), (500, 0, 500), (0, 300, 300), (500, 300, 500),
                          (300, 500, 500)])
def test_the_longer_of_a_byte_rate_and_the_request_quota_throttle(
        handler_ms: int, request_ms: int, said: int) -> None:
    ctx = _ctx(ApiKey.PRODUCE, 9, handler_ms)
    request = _request(ApiKey.PRODUCE, 9)
    body = {"responses": []}
    _charge_request_time(_Quota(request_ms), ctx, request, body)  # type: ignore[arg-type]
    assert ctx.throttle_ms == said
    response = APIS[ApiKey.PRODUCE].response
    assert response.decode(response.encode(_with_throttle(ctx, body), 9), 9)[FIELD] == said
