"""DescribeConfigs: every config of a topic, the broker or a group, with value, source and
synonyms."""
from __future__ import annotations

from construct import Container

from protocol.acl_operations import AclOperation
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.config import describe_broker_config, describe_topic_config
from pybroker.config.group import describe_group_config
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._configs_common import ResourceType, check_resource, result, unauthorized


async def handle(ctx: RequestContext, request: Container) -> dict:
    results = []
    for res in request.resources:
        refused = unauthorized(ctx, res.resource_type, res.resource_name,
                               AclOperation.DESCRIBE_CONFIGS)
        code, message = (refused, refused.message) if refused is not None else \
            check_resource(ctx, res.resource_type, res.resource_name, altering=False)
        entry = result(code, message, res.resource_type, res.resource_name)
        entry["configs"] = []
        if code == ErrorCode.NONE:
            if res.resource_type == ResourceType.TOPIC:
                overrides = ctx.image.topics[res.resource_name].configs
                rows = describe_topic_config(ctx.config, overrides)
            elif res.resource_type == ResourceType.GROUP_CONFIG:
                rows = describe_group_config(
                    ctx.config, ctx.image.group_configs.get(res.resource_name, {}))
            else:
                # "" is the cluster default: its dynamic configs alone, as Kafka answers.
                rows = describe_broker_config(ctx.config, per_broker=res.resource_name != "")
            keys = set(res.configuration_keys) if res.configuration_keys else None
            entry["configs"] = [
                {"name": row.name, "value": row.value, "read_only": row.read_only,
                 "is_default": row.is_default, "config_source": int(row.source),
                 "is_sensitive": row.is_sensitive,
                 "synonyms": [{"name": s.name, "value": s.value, "source": int(s.source)}
                              for s in row.synonyms] if request.include_synonyms else [],
                 "config_type": int(row.config_type),
                 "documentation": row.documentation if request.include_documentation else None}
                for row in rows if keys is None or row.name in keys]
        results.append(entry)
    return {"results": results}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"results": [
        {**result(code, None, r.resource_type, r.resource_name), "configs": []}
        for r in request.resources]}

HANDLER = Handler(ApiKey.DESCRIBE_CONFIGS, 1, 4, handle, error_response)
