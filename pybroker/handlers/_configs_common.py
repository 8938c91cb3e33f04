"""What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs share: resource lookup, and
the alter path of a topic's overrides, of a broker's dynamic configs (KIP-226) and of a
group's configs (KIP-848/932: resource type 32, any group id, existing or not)."""
from __future__ import annotations

from typing import Any, Callable

from protocol.acl_operations import AclOperation
from protocol.config_resources import ResourceType
from protocol.errors import ErrorCode
from pybroker.config import ConfigError, validate_topic_configs
from pybroker.config.dynamic import DynamicConfigError
from pybroker.config.group import check_group_configs
from pybroker.handlers import _authz as authz
from pybroker.handlers._base import RequestContext


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
    elif resource_type == ResourceType.GROUP_CONFIG:
        if not authz.allowed(ctx, operation, authz.GROUP, name):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED
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
            if altering:  # Kafka's ConfigAdminManager: a broker alters only its own configs
                return (ErrorCode.INVALID_REQUEST,
                        f"Unexpected broker id, expected {node_id}, but received {name}")
            return ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {node_id}"
        return ErrorCode.NONE, None
    if resource_type == ResourceType.GROUP_CONFIG:
        if not name:
            return ErrorCode.INVALID_REQUEST, "Group name must not be empty"
        return ErrorCode.NONE, None
    return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}"


def result(code: ErrorCode, message: str | None, resource_type: int, name: str) -> dict:
    return {"error_code": int(code), "error_message": message, "resource_type": resource_type,
            "resource_name": name}


async def alter_configs(ctx: RequestContext, request: Any,
                        new_configs: Callable[[dict[str, str], Any, str], dict[str, str]]
                        ) -> dict:
    """AlterConfigs and IncrementalAlterConfigs: per resource, compute its new set with
    `new_configs(current, resource, kind)` (kind: topic, broker or group), validate it, and
    store it unless the request only validates. A topic's set is its overrides (a
    ConfigError is INVALID_CONFIG); a broker's its dynamic configs at the resource's level, ""
    for the cluster default and "<id>" for this broker (a refused change is INVALID_REQUEST,
    as in Kafka); a group's its configs (a ConfigError is INVALID_CONFIG)."""
    responses = []
    for res in request.resources:
        refused = unauthorized(ctx, res.resource_type, res.resource_name,
                               AclOperation.ALTER_CONFIGS)
        if refused is not None:
            responses.append(result(refused, None, res.resource_type, res.resource_name))
            continue
        code, message = check_resource(ctx, res.resource_type, res.resource_name,
                                       altering=True)
        if code == ErrorCode.NONE and res.resource_type == ResourceType.BROKER:
            code, message = await _alter_broker(ctx, res, new_configs, request.validate_only)
        elif code == ErrorCode.NONE and res.resource_type == ResourceType.GROUP_CONFIG:
            current = dict(ctx.image.group_configs.get(res.resource_name, {}))
            try:
                configs = new_configs(current, res, "group")
                check_group_configs(configs, ctx.config)
            except ConfigError as exc:
                code, message = ErrorCode.INVALID_CONFIG, str(exc)
            else:
                if not request.validate_only:
                    await ctx.services.metadata.set_group_configs(res.resource_name, configs)
        elif code == ErrorCode.NONE:
            current = dict(ctx.image.topics[res.resource_name].configs)
            try:
                configs = new_configs(current, res, "topic")
                validate_topic_configs(configs)
            except ConfigError as exc:
                code, message = ErrorCode.INVALID_CONFIG, str(exc)
            else:
                if not request.validate_only:
                    await ctx.topics.set_topic_configs(res.resource_name, configs)
        responses.append(result(code, message, res.resource_type, res.resource_name))
    return {"responses": responses}


async def _alter_broker(ctx: RequestContext, res: Any,
                        new_configs: Callable[[dict[str, str], Any, str], dict[str, str]],
                        validate_only: bool) -> tuple[ErrorCode, str | None]:
    dynamic = ctx.services.dynamic_config
    if dynamic is None:  # a Services built without a broker (tests of a handler alone)
        return ErrorCode.INVALID_REQUEST, "This broker has no dynamic configuration"
    try:
        await dynamic.alter(res.resource_name, lambda stored: new_configs(stored, res, "broker"),
                            validate_only=validate_only)
    except ConfigError as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    except DynamicConfigError as exc:
        return ErrorCode.INVALID_REQUEST, str(exc)
    return ErrorCode.NONE, None


def alter_error_response(ctx: Any, request: Any, code: ErrorCode) -> dict:
    return {"responses": [
        result(code, None, r.resource_type, r.resource_name) for r in request.resources]}
