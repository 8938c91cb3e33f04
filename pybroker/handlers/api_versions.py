"""ApiVersions: what we serve, computed from the handler registry.

From v3 the client names its software; Kafka answers INVALID_REQUEST when the name or
version is not made of letters, digits, dots and dashes (librdkafka then retries with v0).
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._base import Handler, RequestContext

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def advertised(registry: Mapping[int, Handler]) -> list[dict]:
    """Every API of the registry the request was dispatched with, as served."""
    return [{"api_key": key,
             "min_version": h.advertised_min if h.advertised_min is not None else h.min_version,
             "max_version": h.max_version}
            for key, h in registry.items()]


async def handle(ctx: RequestContext, request: Container) -> dict:
    if ctx.version >= 3 and not (_SOFTWARE.match(request.client_software_name or "")
                                 and _SOFTWARE.match(request.client_software_version or "")):
        return {"error_code": int(ErrorCode.INVALID_REQUEST), "api_keys": advertised(ctx.registry)}
    return {"error_code": 0, "api_keys": advertised(ctx.registry)}


HANDLER = Handler(ApiKey.API_VERSIONS, 0, 4, handle)
