"""SyncGroup: the leader hands in the assignment; every member gets its own share.

Followers wait until the leader's request arrives; a follower's assignments are ignored, as in
Kafka. v5+ echoes the protocol type and name, and a mismatch is INCONSISTENT_GROUP_PROTOCOL.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.coordinator.group_state import SyncRequest
from pybroker.handlers._authz import GROUP, Op, require
from pybroker.handlers._base import Handler, RequestContext


async def handle(ctx: RequestContext, request: Container) -> dict:
    if ctx.version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        # As Kafka: from v5 both are mandatory, checked before anything else.
        return {"error_code": int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
                "protocol_type": None, "protocol_name": None, "assignment": b""}
    require(ctx, Op.READ, GROUP, request.group_id)
    result = await ctx.groups.sync(SyncRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        generation_id=request.generation_id,
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
        group_instance_id=request.group_instance_id,
        protocol_type=request.protocol_type,
        protocol_name=request.protocol_name))
    return {"error_code": int(result.error),
            "protocol_type": result.protocol_type, "protocol_name": result.protocol_name,
            "assignment": result.assignment}


HANDLER = Handler(ApiKey.SYNC_GROUP, 0, 5, handle)
