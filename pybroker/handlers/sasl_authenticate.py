"""SaslAuthenticate: one client token in, the mechanism's answer out (KIP-152).

Success sets the session's principal and, from v1, tells the client how long its session
lasts (KIP-368). A failure answers SASL_AUTHENTICATION_FAILED with the mechanism's message
and closes the connection; a token before any handshake, ILLEGAL_SASL_STATE. A token on a
connection already authenticated (not re-authenticating) is answered ILLEGAL_SASL_STATE and
the connection kept, as Kafka's request handler answers it.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._base import Handler, RequestContext
from pybroker.security.sasl_session import authenticated, authenticator_of, failed
from pybroker.security.sasl.authenticator import IllegalSaslState
from pybroker.security.sasl.mechanisms import AuthenticationFailed


async def handle(ctx: RequestContext, request: Container) -> dict:
    services = ctx.services
    sasl = authenticator_of(services.config.sasl_listeners, services.scram.get, ctx.session)
    if sasl is None or ctx.session.authenticated:
        return _error(ErrorCode.ILLEGAL_SASL_STATE,
                      "SaslAuthenticate request received after successful authentication")
    try:
        challenge = sasl.authenticate(bytes(request.auth_bytes))
    except IllegalSaslState as exc:
        failed(ctx.session, ctx.client_host, sasl.mechanism, str(exc))
        return _error(ErrorCode.ILLEGAL_SASL_STATE, str(exc))
    except AuthenticationFailed as exc:
        failed(ctx.session, ctx.client_host, sasl.mechanism, str(exc))
        return _error(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc))
    lifetime = authenticated(ctx.session, sasl, ctx.client_host) if sasl.complete else 0
    return {"error_code": 0, "error_message": None, "auth_bytes": challenge,
            "session_lifetime_ms": lifetime}


def _error(code: ErrorCode, message: str) -> dict:
    return {"error_code": int(code), "error_message": message, "auth_bytes": b"",
            "session_lifetime_ms": 0}


HANDLER = Handler(ApiKey.SASL_AUTHENTICATE, 0, 2, handle)
