"""SaslHandshake: the client names a mechanism; the answer lists what this listener offers.

v0 means the tokens that follow come as raw frames (dispatch hands them to the exchange),
v1 that they come in SaslAuthenticate requests. An unoffered mechanism is answered with
UNSUPPORTED_SASL_MECHANISM and the enabled list, and the connection closed, as Kafka does.

On an authenticated connection a handshake begins re-authentication (KIP-368) when the
session may (see sasl_session.begins_reauthentication); otherwise Kafka's request handler
answers it: ILLEGAL_SASL_STATE with no mechanisms, the connection kept.
"""
from __future__ import annotations

import time

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._base import Handler, RequestContext
from pybroker.security.sasl_session import (
    authenticator_of, begins_reauthentication, failed, reauthentication_started,
)
from pybroker.security.sasl.authenticator import IllegalSaslState


async def handle(ctx: RequestContext, request: Container) -> dict:
    services = ctx.services
    sasl = authenticator_of(services.config.sasl_listeners, services.scram.get, ctx.session)
    if sasl is None:  # not a SASL listener: Kafka answers as for an authenticated channel
        return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": []}
    now = time.monotonic()
    reauthenticating = ctx.session.authenticated
    if reauthenticating and not begins_reauthentication(ctx.session, now):
        return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": []}
    mechanisms = list(sasl.config.mechanisms)
    try:
        offered = sasl.handshake(request.mechanism, ctx.version, now)
    except IllegalSaslState as exc:
        failed(ctx.session, ctx.client_host, request.mechanism, str(exc))
        return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": mechanisms}
    if not offered:
        failed(ctx.session, ctx.client_host, None,
               f"Unsupported SASL mechanism {request.mechanism}")
        return {"error_code": int(ErrorCode.UNSUPPORTED_SASL_MECHANISM),
                "mechanisms": mechanisms}
    if reauthenticating:
        reauthentication_started(ctx.session)
    return {"error_code": 0, "mechanisms": mechanisms}


HANDLER = Handler(ApiKey.SASL_HANDSHAKE, 0, 1, handle)
