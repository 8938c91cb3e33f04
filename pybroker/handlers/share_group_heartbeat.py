"""ShareGroupHeartbeat (KIP-932): join, stay in and leave a share group; the response carries
the member's epoch and, when it changed, its assignment."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.cluster.features import SHARE_VERSION
from pybroker.coordinator.share_group import invalid_heartbeat
from pybroker.handlers._authz import GROUP, Op, require
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._group_kind import group_kind
from pybroker.handlers._share import share_coordinator


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.READ, GROUP, request.group_id)
    shares = share_coordinator(ctx)
    # Validated before the coordinator is looked for, as Kafka's GroupCoordinatorService does
    invalid = invalid_heartbeat(request.group_id, request.member_id, request.member_epoch,
                                request.rack_id, request.subscribed_topic_names)
    if invalid is not None:
        return _error(ErrorCode.INVALID_REQUEST, invalid)
    code = await ctx.groups.coordinates(request.group_id) if request.group_id else ErrorCode.NONE
    if code:
        return _error(code)
    if group_kind(ctx, request.group_id) in ("classic", "consumer"):
        return _error(ErrorCode.GROUP_ID_NOT_FOUND)
    result = await shares.heartbeat(request.group_id, request.member_id, request.member_epoch,
                                    request.rack_id, request.subscribed_topic_names,
                                    client_id=ctx.client_id, client_host=ctx.client_host)
    if result.error:
        return _error(result.error, result.error_message)
    assignment = None if result.assignment is None else {"topic_partitions": [
        {"topic_id": topic_id, "partitions": list(partitions)}
        for topic_id, partitions in sorted(result.assignment.items())]}
    return {"error_code": 0, "member_id": result.member_id,
            "member_epoch": result.member_epoch,
            "heartbeat_interval_ms":
                shares.groups.config_for(request.group_id).heartbeat_interval_ms,
            "assignment": assignment}


def _error(code: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": int(code), "error_message": message, "member_id": None,
            "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return _error(code)


HANDLER = Handler(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1, handle, error_response,
                  feature=(SHARE_VERSION, 1))
