"""ApiVersions: what we serve, computed from the handler registry."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from pybroker.handlers.base import Handler, RequestContext


async def handle(ctx: RequestContext, request: Container) -> dict:
    from pybroker.handlers import REGISTRY
    keys = [{"api_key": key,
             "min_version": h.advertised_min if h.advertised_min is not None else h.min_version,
             "max_version": h.max_version}
            for key, h in REGISTRY.items()]
    return {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0}


HANDLER = Handler(ApiKey.API_VERSIONS, 0, 4, handle)
