"""DescribeClientQuotas: the user / client-id quotas a filter selects (KIP-546).

Any broker answers from its image (quotas are cluster-wide, kept in ZooKeeper in a cluster).
A filter Kafka refuses (an unknown entity type, two components of one type) is answered with
its error code and message and no entries.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.cluster.client_quotas import Component, QuotaError, describe
from pybroker.handlers._authz import CLUSTER, Op, require
from pybroker.handlers._base import Handler, RequestContext


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.DESCRIBE_CONFIGS, CLUSTER)  # Kafka's check for the quota APIs
    components = [Component(c.entity_type, c.match_type, c.match)
                  for c in request.components]
    try:
        found = describe(ctx.image.client_quotas, components, request.strict)
    except QuotaError as exc:
        return error_response(ctx, request, exc.code, exc.message)
    return {"error_code": 0, "error_message": None, "entries": [
        {"entity": entity.wire(),
         "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
        for entity, values in found]}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode,
                   message: str | None = None) -> dict:
    return {"error_code": int(code), "error_message": message,
            "entries": None}


HANDLER = Handler(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1, handle, error_response)
