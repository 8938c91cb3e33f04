"""From a request frame to a response frame: decode, route to the handler, encode.

Bad input never takes the broker down. An ApiVersions request of a version we do not serve is
answered with UNSUPPORTED_VERSION in a v0 body, as Kafka does (KIP-511); any other malformed or
unsupported request closes only its own connection (`CloseConnection`). A handler that fails
answers that one request with UNKNOWN_SERVER_ERROR where the API has somewhere to say it.
"""
from __future__ import annotations

import logging
from typing import Any

import trio
from construct import Container

from protocol.api_keys import ApiKey
from protocol.codec import (
    ProtocolError, TrailingBytes, UnsupportedVersion, api_versions_error_body, decode_request,
    encode_response, encode_response_parts,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import APIS
from pybroker.handlers import REGISTRY
from pybroker.handlers.base import RequestContext, Services
from pybroker.request_hooks import DELAY, DROP, HookRequest, RequestHooks, complete_response

log = logging.getLogger(__name__)

# The real handler answers (None is taken: no response).
_NOT_HOOKED: Any = object()


class CloseConnection(Exception):
    """The request cannot be answered; the connection is closed, nothing else is affected."""


async def dispatch(services: Services, frame: bytes, host: str, port: int,
                   listener: str | None = None, mute: list[int] | None = None
                   ) -> list[Any] | None:
    """The response frame for one request frame, as buffers for one gathered send, or None
    when no response is due (acks=0). When the client went over a quota, the throttle time
    (ms) is put in `mute[0]`: the connection reads nothing more for that long."""
    try:
        request = decode_request(frame)
    except TrailingBytes as exc:
        # Kafka ignores bytes after a complete body; librdkafka 2.16 relies on it (Metadata
        # v12 for all topics carries three), so the decoded request is served.
        log.debug("ignoring trailing bytes from %s:%s: %s", host, port, exc)
        request = exc.request
    except UnsupportedVersion as exc:
        header = exc.header
        if header is not None and header.api_key == ApiKey.API_VERSIONS:
            api_versions = REGISTRY[ApiKey.API_VERSIONS]
            body = api_versions_error_body(api_versions.min_version, api_versions.max_version)
            return [encode_response(ApiKey.API_VERSIONS, 0, header.correlation_id, body)]
        raise CloseConnection(str(exc)) from None
    except ProtocolError as exc:
        raise CloseConnection(str(exc)) from None

    header = request.header
    handler = REGISTRY.get(header.api_key)
    ctx = RequestContext(services, header, host, port, REGISTRY, services.metadata.image,
                         listener)
    if handler is None:
        raise CloseConnection(f"no handler for API key {header.api_key}")
    if services.hooks is not None:  # a test broker's hooks may answer instead
        hooked = await _consult_hooks(services.hooks, handler, ctx, request.body)
        if hooked is None:
            return None
        if hooked is not _NOT_HOOKED:
            return encode_response_parts(header.api_key, header.api_version,
                                         header.correlation_id, hooked)
    if not handler.serves(header.api_version):
        body = _error_body(handler, ctx, request.body, ErrorCode.UNSUPPORTED_VERSION)
    else:
        try:
            body = await handler.handle(ctx, request.body)
        except KafkaError as exc:
            body = _error_body(handler, ctx, request.body, exc.code)
        except Exception:
            log.exception("handler for %s v%d failed", ApiKey(header.api_key).name,
                          header.api_version)
            body = _error_body(handler, ctx, request.body, ErrorCode.UNKNOWN_SERVER_ERROR)
    if ctx.throttle_ms and mute is not None:
        mute[0] = ctx.throttle_ms
    if body is None:
        return None
    return encode_response_parts(header.api_key, header.api_version, header.correlation_id,
                                 body)


async def _consult_hooks(hooks: RequestHooks, handler: Any, ctx: RequestContext,
                         request: Container) -> Any:
    """A test broker's answer from its hooks (pybroker.request_hooks), or _NOT_HOOKED when
    the real handler is to answer."""
    header = ctx.header
    outcome = hooks.consult(HookRequest(header.api_key, APIS[header.api_key].name,
                                        header.api_version, ctx.client_id, request))
    if outcome is None:
        return _NOT_HOOKED
    if isinstance(outcome, DELAY):
        await trio.sleep(outcome.seconds)
        return _NOT_HOOKED
    if outcome is DROP:
        raise CloseConnection(f"a hook dropped {APIS[header.api_key].name}")
    if header.api_key == ApiKey.PRODUCE and request.acks == 0:
        return None  # acks=0 is never answered, not even by a hook
    if isinstance(outcome, ErrorCode):
        return _error_body(handler, ctx, request, outcome)
    return complete_response(header.api_key, header.api_version, outcome)


def _error_body(handler: Any, ctx: RequestContext, request: Container, code: ErrorCode) -> Any:
    if handler.error_response is not None:
        return handler.error_response(ctx, request, code)
    response = APIS[handler.api_key].response
    if any(fl.name == "error_code" for fl in response.fields):
        body = response.default(ctx.version)
        body["error_code"] = int(code)
        return body
    raise CloseConnection(f"{ApiKey(handler.api_key).name} failed with {code.name}")
