"""JoinGroup: become (or stay) a member; answered when the rebalance completes.

The request waits in the coordinator until every member has rejoined (or the rebalance
timeout passes). v4+ dynamic members are first handed a member id with MEMBER_ID_REQUIRED and
join again with it (KIP-394); v5+ static members (group.instance.id) skip that step and can
restart without a rebalance (KIP-345). v0 has no rebalance timeout: the session timeout serves.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.coordinator.group_state import JoinRequest
from pybroker.coordinator.group_types import JoinResult
from pybroker.handlers._authz import GROUP, Op, require
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._group_kind import group_kind


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.READ, GROUP, request.group_id)
    version = ctx.version
    if group_kind(ctx, request.group_id) == "share":
        # not a classic group (Kafka's answer to a JoinGroup for a share group's id)
        result = JoinResult(ErrorCode.GROUP_ID_NOT_FOUND, request.member_id)
    else:
        result = await ctx.groups.join(JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            protocol_type=request.protocol_type,
            protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=(request.rebalance_timeout_ms if version >= 1
                                  else request.session_timeout_ms),
            group_instance_id=request.group_instance_id if version >= 5 else None,
            client_id=ctx.client_id,
            client_host=f"/{ctx.client_host}",
            require_known_member_id=version >= 4,
            reason=request.reason))
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""  # not nullable before v7
    return {
        "error_code": int(result.error),
        "generation_id": result.generation_id, "protocol_type": result.protocol_type,
        "protocol_name": protocol_name, "leader": result.leader_id,
        "skip_assignment": result.skip_assignment, "member_id": result.member_id,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                     "metadata": m.metadata} for m in result.members],
    }


HANDLER = Handler(ApiKey.JOIN_GROUP, 0, 9, handle)
