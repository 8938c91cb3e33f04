"""Heartbeat: keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from pybroker.handlers._authz import GROUP, Op, require
from pybroker.handlers._base import Handler, RequestContext


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.READ, GROUP, request.group_id)
    code = await ctx.groups.heartbeat(request.group_id, request.member_id,
                                       request.group_instance_id, request.generation_id)
    return {"error_code": int(code)}


HANDLER = Handler(ApiKey.HEARTBEAT, 0, 4, handle)
