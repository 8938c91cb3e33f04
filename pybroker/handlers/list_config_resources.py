"""ListConfigResources (API 74; KIP-1142, Kafka 4.1): the resources that configs can be
described for, by type. v0 (Kafka's ListClientMetricsResources) lists client-metrics
resources only, of which pybroker has none; v1 lists, for each type asked (every type when
none is), groups with configs of their own, broker ids (BROKER_LOGGER and BROKER) and topics,
in Kafka's order. A type outside TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS and GROUP is
UNSUPPORTED_VERSION, as Kafka answers it. DESCRIBE_CONFIGS on the cluster is required.

Kafka 4.1.1's `kafka-configs --entity-type groups --entity-name G --describe` asks it (with
ListGroups) to tell whether G exists or has configs.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.config_resources import ResourceType
from protocol.errors import ErrorCode
from pybroker.handlers._authz import CLUSTER, Op, allowed
from pybroker.handlers._base import Handler, RequestContext

_SUPPORTED = {0: (ResourceType.CLIENT_METRICS,),
              1: (ResourceType.TOPIC, ResourceType.BROKER, ResourceType.BROKER_LOGGER,
                  ResourceType.CLIENT_METRICS, ResourceType.GROUP_CONFIG)}


async def handle(ctx: RequestContext, request: Container) -> dict:
    if not allowed(ctx, Op.DESCRIBE_CONFIGS, CLUSTER):
        return error_response(ctx, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    supported = _SUPPORTED[min(ctx.version, 1)]
    asked = list(request.get("resource_types") or []) or [int(t) for t in supported]
    if any(t not in supported for t in asked):
        return error_response(ctx, request, ErrorCode.UNSUPPORTED_VERSION)
    brokers = [str(node) for node in sorted(ctx.image.brokers)]
    found: list[tuple[str, ResourceType]] = []
    if ResourceType.GROUP_CONFIG in asked:
        found += [(g, ResourceType.GROUP_CONFIG) for g in sorted(ctx.image.group_configs)]
    if ResourceType.BROKER_LOGGER in asked:
        found += [(b, ResourceType.BROKER_LOGGER) for b in brokers]
    if ResourceType.BROKER in asked:
        found += [(b, ResourceType.BROKER) for b in brokers]
    if ResourceType.TOPIC in asked:
        found += [(t, ResourceType.TOPIC) for t in sorted(ctx.image.topics)]
    return {"error_code": 0, "config_resources": [
        {"resource_name": name, "resource_type": int(kind)} for name, kind in found]}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"error_code": int(code), "config_resources": []}


HANDLER = Handler(ApiKey.LIST_CONFIG_RESOURCES, 0, 1, handle, error_response)
