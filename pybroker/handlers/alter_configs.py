"""AlterConfigs (the legacy API): a topic's overrides, a broker's dynamic configs at one
level, or a group's configs are replaced by the given set."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._configs_common import alter_configs, alter_error_response


def _replace(current: dict[str, str], resource: Container, kind: str) -> dict[str, str]:
    return {c.name: c.value for c in resource.configs if c.value is not None}


async def handle(ctx: RequestContext, request: Container) -> dict:
    return await alter_configs(ctx, request, _replace)


HANDLER = Handler(ApiKey.ALTER_CONFIGS, 0, 2, handle, alter_error_response)
