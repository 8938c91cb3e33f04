"""AlterConfigs (the legacy API): a topic's overrides are replaced by the given set."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.config import ConfigError, validate_topic_configs
from pybroker.handlers.base import Handler, RequestContext
from pybroker.handlers.configs_common import check_resource, result


async def handle(ctx: RequestContext, request: Container) -> dict:
    broker = ctx.broker
    responses = []
    for res in request.resources:
        code, message = check_resource(broker, res.resource_type, res.resource_name,
                                       altering=True)
        if code == ErrorCode.NONE:
            configs = {c.name: c.value for c in res.configs if c.value is not None}
            try:
                validate_topic_configs(configs)
            except ConfigError as exc:
                code, message = ErrorCode.INVALID_CONFIG, str(exc)
            else:
                if not request.validate_only:
                    broker.set_topic_configs(res.resource_name, configs)
        responses.append(result(code, message, res.resource_type, res.resource_name))
    return {"throttle_time_ms": 0, "responses": responses}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "responses": [
        result(code, None, r.resource_type, r.resource_name) for r in request.resources]}

HANDLER = Handler(ApiKey.ALTER_CONFIGS, 0, 2, handle, error_response)
