"""ListGroups: every group this coordinator owns, optionally filtered by state (v4+) and by
type (v5+): classic, consumer (KIP-848) and share (KIP-932) groups, as Kafka 4.1 lists them;
a share group's ProtocolType is "share" at every version."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from pybroker.handlers._authz import CLUSTER, GROUP, Op, allowed
from pybroker.handlers._base import Handler, RequestContext


async def handle(ctx: RequestContext, request: Container) -> dict:
    states, types = request.states_filter or (), request.types_filter or ()
    listed = ctx.groups.list_groups(states, types)
    if ctx.services.shares is not None:
        listed += ctx.services.shares.listings(states, types, ctx.groups.owns)
    if not allowed(ctx, Op.DESCRIBE, CLUSTER):  # else only the groups it may describe
        listed = [g for g in listed if allowed(ctx, Op.DESCRIBE, GROUP, g.group_id)]
    return {"error_code": 0, "groups": [
        {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state,
         "group_type": g.group_type} for g in listed]}


HANDLER = Handler(ApiKey.LIST_GROUPS, 0, 5, handle)
