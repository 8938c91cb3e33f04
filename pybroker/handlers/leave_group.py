"""LeaveGroup: members leave at once instead of waiting for their session to expire.

v0-2 name one member; v3+ a batch of members, by member id and/or group.instance.id (a static
member leaving by instance id alone is how an operator removes it), each with its own error.
Before v3 the one member's error is the response's error.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.coordinator.group_state import LeavingMember
from pybroker.handlers._authz import GROUP, Op, require
from pybroker.handlers._base import Handler, RequestContext


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.READ, GROUP, request.group_id)
    if ctx.version >= 3:
        leaving = [LeavingMember(m.member_id, m.group_instance_id, m.reason)
                   for m in request.members]
    else:
        leaving = [LeavingMember(request.member_id)]
    result = await ctx.groups.leave(request.group_id, leaving)
    if ctx.version >= 3:
        return {"error_code": int(result.error), "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
             "error_code": int(code)} for m, code in result.members]}
    code = result.error
    if code == ErrorCode.NONE:
        code = next((c for _, c in result.members if c), ErrorCode.NONE)
    return {"error_code": int(code)}


HANDLER = Handler(ApiKey.LEAVE_GROUP, 0, 5, handle)
