"""What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs share: resource lookup."""
from __future__ import annotations

from typing import Any, Callable

from protocol.acl_operations import AclOperation
from protocol.config_resources import ResourceType
from protocol.errors import ErrorCode
from pybroker.config import ConfigError, validate_topic_configs
from pybroker.handlers import authz
from pybroker.handlers.base import RequestContext


def unauthorized(ctx: RequestContext, resource_type: int, name: str,
                 operation: AclOperation) -> ErrorCode | None:
    """The resource's authorization error, or None (Kafka's ConfigHelper and
    handleAlterConfigsRequest): a broker's configs need `operation` on the cluster, a topic's
    on the topic; asked before whether the resource exists."""
    if resource_type == ResourceType.TOPIC:
        if not authz.allowed(ctx, operation, authz.TOPIC, name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif resource_type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER):
        if not authz.allowed(ctx, operation, authz.CLUSTER):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return None


def check_resource(ctx: RequestContext, resource_type: int, name: str,
                   *, altering: bool) -> tuple[ErrorCode, str | None]:
    """NONE if the resource exists and can be described (or altered) here."""
    if resource_type == ResourceType.TOPIC:
        if name not in ctx.image.topics:
            return (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"Topic '{name}' does not exist.")
        return ErrorCode.NONE, None
    if resource_type == ResourceType.BROKER:
        node_id = ctx.services.node_id
        if name not in ("", str(node_id)):
            return ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {node_id}"
        if altering:
            return (ErrorCode.INVALID_REQUEST,
                    "Dynamic broker configs are not supported: edit server.properties")
        return ErrorCode.NONE, None
    return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}"


def _only_deletes(resource: Any) -> bool:
    """IncrementalAlterConfigs of nothing but DELETEs, or AlterConfigs of an empty set
    (which replaces every dynamic config with none): on a broker that has no dynamic
    configs, there is nothing to do."""
    return all(getattr(c, "config_operation", None) == 1 for c in resource.configs)


def result(code: ErrorCode, message: str | None, resource_type: int, name: str) -> dict:
    return {"error_code": int(code), "error_message": message, "resource_type": resource_type,
            "resource_name": name}


async def alter_topic_configs(ctx: RequestContext, request: Any,
                        new_configs: Callable[[dict[str, str], Any], dict[str, str]]) -> dict:
    """AlterConfigs and IncrementalAlterConfigs: per resource, compute the topic's new
    overrides with `new_configs(current, resource)`, validate them, and apply them unless the
    request only validates. ConfigError from either step is INVALID_CONFIG for that resource."""
    responses = []
    for res in request.resources:
        refused = unauthorized(ctx, res.resource_type, res.resource_name,
                               AclOperation.ALTER_CONFIGS)
        if refused is not None:
            responses.append(result(refused, None, res.resource_type, res.resource_name))
            continue
        if res.resource_type == ResourceType.BROKER and _only_deletes(res):
            # Nothing dynamic to delete: done (Kafka's tools clear replication throttles on
            # every broker this way when a reassignment completes).
            code, message = check_resource(ctx, res.resource_type, res.resource_name,
                                           altering=False)
            responses.append(result(code, message, res.resource_type, res.resource_name))
            continue
        code, message = check_resource(ctx, res.resource_type, res.resource_name,
                                       altering=True)
        if code == ErrorCode.NONE:
            current = ctx.image.topics[res.resource_name].configs
            try:
                configs = new_configs(current, res)
                validate_topic_configs(configs)
            except ConfigError as exc:
                code, message = ErrorCode.INVALID_CONFIG, str(exc)
            else:
                if not request.validate_only:
                    await ctx.topics.set_topic_configs(res.resource_name, configs)
        responses.append(result(code, message, res.resource_type, res.resource_name))
    return {"throttle_time_ms": 0, "responses": responses}


def alter_error_response(ctx: Any, request: Any, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "responses": [
        result(code, None, r.resource_type, r.resource_name) for r in request.resources]}
