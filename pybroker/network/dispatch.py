"""From a request frame to a response frame: decode, route to the handler, encode.

Bad input never takes the broker down. An ApiVersions request of a version we do not serve is
answered with UNSUPPORTED_VERSION in a v0 body, as Kafka does (KIP-511); any other malformed or
unsupported request closes only its own connection (`CloseConnection`). A handler that fails
answers that one request with UNKNOWN_SERVER_ERROR where the API has somewhere to say it.
"""
from __future__ import annotations

import logging
import struct
from time import monotonic, perf_counter
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
from protocol.metadata_response import EncodedBody
from protocol.schema import Versions
from pybroker.handlers import REGISTRY, RequestContext, Services
from pybroker.network.errors import CloseConnection
from pybroker.security.sasl_session import (
    authenticated, begins_reauthentication, failed, frame_limit,
)
from pybroker.security.sasl.authenticator import SaslState
from pybroker.security.sasl.mechanisms import AuthenticationFailed
from pybroker.security.session import Session
from pybroker.network.request_hooks import DELAY, DROP, HookRequest, RequestHooks, complete_response
from pybroker.network.request_log import log_request
from pybroker.quota.request_quota import RequestQuota

log = logging.getLogger(__name__)

# The real handler answers (None is taken: no response).
_NOT_HOOKED: Any = object()


async def dispatch(services: Services, frame: bytes | bytearray, host: str, port: int,
                   listener: str | None = None, session: Session | None = None,
                   hooks: RequestHooks | None = None) -> list[Any] | None:
    """The response frame for one request frame, as buffers for one gathered send, or None
    when no response is due (acks=0). `hooks`: a test broker's request hooks, which may
    answer before the handler; None in production, where they cost one check a request.
    They come from the server, not `Services`, so handlers never see them."""
    if session is not None and not session.authenticated:
        limit = frame_limit(services.config.sasl_listeners, session)
        if limit is not None and len(frame) > limit:
            raise CloseConnection(f"a {len(frame)}-byte frame before SASL authentication "
                                  f"(sasl.server.max.receive.size is {limit})")
        if session.sasl is not None and session.sasl.raw_tokens:
            return _raw_token(session, frame, host)
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
    out_of_exchange = session is not None and (
        not session.authenticated or session.expires_at is not None) and \
        _sasl_gate(session, header.api_key)
    handler = REGISTRY.get(header.api_key)
    ctx = RequestContext(services, header, host, port, REGISTRY, services.metadata.image,
                         listener, session if session is not None else Session(listener),
                         request_size=len(frame))
    if handler is None:
        raise CloseConnection(f"no handler for API key {header.api_key}")
    if out_of_exchange:
        ctx.session.close_after_response = True
        return encode_response_parts(header.api_key, header.api_version, header.correlation_id,
                                     _error_body(handler, ctx, request.body,
                                                 ErrorCode.ILLEGAL_SASL_STATE))
    # Counted for /metrics as plain integers (request_stats.py): from the decoded request to
    # the encoded response, so a long-poll fetch counts its wait. Failed: answered with a
    # top-level error code, or not answered because of an error (left at
    # UNKNOWN_SERVER_ERROR when an exception leaves). The request log gets the same code.
    start = perf_counter()
    error = -1
    try:
        if hooks is not None:  # a test broker's hooks may answer instead
            hooked = await _consult_hooks(hooks, handler, ctx, request.body)
            if hooked is None:
                error = 0
                return None
            if hooked is not _NOT_HOOKED:
                error = hooked.get("error_code", 0) if isinstance(hooked, dict) else 0
                return encode_response_parts(header.api_key, header.api_version,
                                             header.correlation_id, hooked)
        if not (handler.serves(header.api_version) and handler.enabled(services.features)):
            error = ErrorCode.UNSUPPORTED_VERSION
            body = _error_body(handler, ctx, request.body, error)
        else:
            try:
                body = await handler.handle(ctx, request.body)
                error = body.get("error_code", 0) if isinstance(body, dict) else 0
            except KafkaError as exc:
                error = exc.code
                body = _error_body(handler, ctx, request.body, exc.code)
            except Exception:
                log.exception("handler for %s v%d failed", ApiKey(header.api_key).name,
                              header.api_version)
                body = _error_body(handler, ctx, request.body, ErrorCode.UNKNOWN_SERVER_ERROR)
        # A handler that needed its throttle early (Fetch) has charged the request already.
        if services.request_quota is not None and not ctx.request_time_recorded:
            _charge_request_time(services.request_quota, ctx, request.body, body)
        if body is None:
            return None
        if ctx.throttle_ms:
            body = _with_throttle(ctx, body)
        return encode_response_parts(header.api_key, header.api_version,
                                     header.correlation_id, body)
    finally:
        if ctx.throttle_ms:  # over a quota: the connection reads nothing more until then
            ctx.session.throttle_ms = ctx.throttle_ms
        elapsed = perf_counter() - start
        services.stats.request(header.api_key, elapsed, error != 0)
        if services.request_log:
            log_request(ctx, error, elapsed)


def _charge_request_time(quota: RequestQuota, ctx: RequestContext, request: Container,
                         body: Any) -> None:
    """Charge the request's loop time to its client's request_percentage (Kafka charges
    neither an unanswered acks=0 produce nor a follower's fetch); over it, the response says
    the longer of this throttle and a byte-rate one, and the connection is muted as long."""
    exempt = body is None or (ctx.header.api_key == ApiKey.FETCH and request.replica_id >= 0)
    ctx.throttle_ms = max(ctx.throttle_ms, quota.record(ctx, exempt))


def _with_throttle(ctx: RequestContext, body: Any) -> Any:
    """The response saying `ctx.throttle_ms`, the one place that writes throttle_time_ms:
    handlers only set the context's throttle. A version without the field says nothing (the
    connection is muted all the same), and a hooked answer is not passed through here."""
    versions = _THROTTLE_FIELD.get(ctx.header.api_key)
    if versions is None or ctx.version not in versions:
        return body
    if isinstance(body, EncodedBody):  # the one such body, Metadata v3+, opens with it
        return EncodedBody(_THROTTLE.pack(ctx.throttle_ms) + body[4:])
    if isinstance(body, dict):
        body["throttle_time_ms"] = ctx.throttle_ms
    return body


_THROTTLE = struct.Struct(">i")
# The versions of each response that carry throttle_time_ms; an API missing has no such field.
_THROTTLE_FIELD: dict[int, Versions] = {
    key: fl.versions for key, api in APIS.items() for fl in api.response.fields
    if fl.name == "throttle_time_ms"}

_BEFORE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE,
                                    ApiKey.SASL_AUTHENTICATE})


def _sasl_gate(session: Session, api_key: int) -> bool:
    """Kafka's SASL rules; True when the request is to be answered with its error body
    (ILLEGAL_SASL_STATE) and the connection then closed.

    Until a SASL connection has authenticated, only ApiVersions and the SASL APIs are served;
    any other request closes it, unanswered. Once a handshake has chosen a mechanism, only
    SaslAuthenticate: another request is answered ILLEGAL_SASL_STATE, then the connection
    closed (Kafka's SaslServerAuthenticator, for a first authentication as for a
    re-authentication); after a re-authentication named another mechanism, whatever comes
    closes it. An authenticated session that has outlived its lifetime (KIP-368) is closed
    at its next request unless that request is a SaslHandshake beginning re-authentication
    (Kafka's SocketServer asks that first, so a late re-authentication is still accepted)."""
    if not session.authenticated:
        state = session.sasl.state if session.sasl is not None else SaslState.HANDSHAKE
        if state is SaslState.AUTHENTICATE:
            return api_key != ApiKey.SASL_AUTHENTICATE
        if api_key not in _BEFORE_AUTHENTICATION or state is SaslState.BAD_MECHANISM:
            name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else api_key
            raise CloseConnection(f"unexpected {name} request before SASL authentication")
        return False
    now = monotonic()
    if api_key == ApiKey.SASL_HANDSHAKE and begins_reauthentication(session, now):
        return False
    if session.expires_at is not None and now > session.expires_at:
        raise CloseConnection("the SASL session expired without re-authentication "
                              "(connections.max.reauth.ms)")
    return False


def _raw_token(session: Session, frame: bytes | bytearray, host: str) -> list[Any]:
    """After SaslHandshake v0 the client sends its tokens as bare size-prefixed frames (no
    Kafka header) and reads the answers the same way; a failure just closes the connection."""
    sasl = session.sasl
    try:
        challenge = sasl.authenticate(bytes(frame))
    except AuthenticationFailed as exc:
        failed(session, host, sasl.mechanism, str(exc))
        raise CloseConnection(f"SASL authentication failed ({sasl.mechanism})") from None
    if sasl.complete:
        authenticated(session, sasl, host)
    return [len(challenge).to_bytes(4, "big"), challenge]


async def _consult_hooks(hooks: RequestHooks, handler: Any, ctx: RequestContext,
                         request: Container) -> Any:
    """A test broker's answer from its hooks (pybroker.network.request_hooks), or _NOT_HOOKED when
    the real handler is to answer."""
    header = ctx.header
    outcome = hooks.consult(HookRequest(header.api_key, APIS[header.api_key].name,
                                        header.api_version, ctx.client_id, request,
                                        ctx.principal))
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
