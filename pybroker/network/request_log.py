"""The request log: one line per request on `pybroker.request.logger`, Kafka's
`kafka.request.logger`.

Off by default (`request.log.enable=false`): dispatch checks one boolean of its Services and
calls nothing else, so a broker that does not log requests pays nothing for the feature. On,
every answered or failed request gives one INFO line after its response is encoded:

    Completed request: api=Produce version=9 correlation_id=7 client_id="rdkafka"
    client=127.0.0.1:53110 listener=PLAINTEXT principal="User:ANONYMOUS" error=NONE time_ms=0.84

(one line; wrapped here). The client id and the principal are written as JSON strings: any
client can put quotes, spaces or a newline in its id (and a certificate's DN has commas and
spaces), and must not be able to forge a line or a field. With
`log.format=json` the same figures are also a `request` object of the JSON line, so a log
shipper need not parse the message. The line carries no request body: record keys and values
may hold secrets (Kafka logs bodies only at TRACE). The principal is the session's
(`User:ANONYMOUS` until TLS or SASL names someone).

`error` is the top-level error code of the response (NONE when the API has none, or for
acks=0); a request that failed as a whole (its connection was closed, or its task cancelled)
is logged with UNKNOWN_SERVER_ERROR, as /metrics counts it as an error.
"""
from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from protocol.messages import APIS

if TYPE_CHECKING:
    from pybroker.handlers import RequestContext

__all__ = ["REQUEST_LOGGER", "log_request"]

REQUEST_LOGGER = logging.getLogger("pybroker.request.logger")


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def log_request(ctx: "RequestContext", error_code: int, seconds: float) -> None:
    """Write the request's line (see the module docstring)."""
    if not REQUEST_LOGGER.isEnabledFor(logging.INFO):
        return
    header = ctx.header
    api = APIS.get(header.api_key)
    fields = {
        "api": api.name if api is not None else str(header.api_key),
        "version": header.api_version,
        "correlation_id": header.correlation_id,
        "client_id": ctx.client_id,
        "client": f"{ctx.client_host}:{ctx.client_port}",
        "listener": ctx.listener or "",
        "principal": ctx.principal,
        "error": _error_name(error_code),
        "error_code": error_code,
        "time_ms": round(seconds * 1000, 3),
    }
    REQUEST_LOGGER.info(
        "Completed request: api=%s version=%d correlation_id=%d client_id=%s client=%s "
        "listener=%s principal=%s error=%s time_ms=%.3f", fields["api"], header.api_version,
        header.correlation_id, json.dumps(ctx.client_id, ensure_ascii=False), fields["client"],
        fields["listener"] or "-", json.dumps(ctx.principal, ensure_ascii=False), fields["error"], seconds * 1000,
        extra={"request": fields})
