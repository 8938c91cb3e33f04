"""ConsumerGroupHeartbeat (API 68, v0-1): a KIP-848 consumer joins, heartbeats, reconciles
and leaves (coordinator/consumer_group_state.py decides, consumer_group_coordinator.py runs).

Served while `group.version` >= 1 (the default); otherwise left out of ApiVersions and answered
UNSUPPORTED_VERSION, as Kafka. READ on the group is required (GROUP_AUTHORIZATION_FAILED).
Partitions are named by topic id both ways; the assignor sees the topics of the request's
metadata image.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.cluster.features import GROUP_VERSION
from pybroker.coordinator.consumer_group_coordinator import topics_of
from pybroker.coordinator.consumer_group_state import HeartbeatRequest, HeartbeatResponse
from pybroker.handlers._authz import GROUP, Op, allowed
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._group_kind import group_kind


def _request(ctx: RequestContext, request: Container) -> HeartbeatRequest:
    owned = None if request.topic_partitions is None else {
        t.topic_id: frozenset(t.partitions) for t in request.topic_partitions}
    return HeartbeatRequest(
        request.group_id, request.member_id, request.member_epoch, request.instance_id,
        request.rack_id, request.rebalance_timeout_ms,
        None if request.subscribed_topic_names is None else tuple(request.subscribed_topic_names),
        request.subscribed_topic_regex if ctx.version >= 1 else None,
        request.server_assignor, owned, ctx.client_id, f"/{ctx.client_host}")


def _body(response: HeartbeatResponse) -> dict:
    assignment = None if response.assignment is None else {"topic_partitions": [
        {"topic_id": t, "partitions": sorted(ps)}
        for t, ps in sorted(response.assignment.items(), key=lambda kv: str(kv[0])) if ps]}
    return {"error_code": int(response.error), "error_message": response.error_message,
            "member_id": response.member_id or None, "member_epoch": response.member_epoch,
            "heartbeat_interval_ms": response.heartbeat_interval_ms, "assignment": assignment}


async def handle(ctx: RequestContext, request: Container) -> dict:
    if not allowed(ctx, Op.READ, GROUP, request.group_id):
        return error_response(ctx, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if group_kind(ctx, request.group_id) == "share":
        return _body(HeartbeatResponse(ErrorCode.GROUP_ID_NOT_FOUND, error_message=(
            f"Group {request.group_id} is not a consumer group.")))
    topics = topics_of(ctx.image)
    response = await ctx.groups.consumer.heartbeat(_request(ctx, request), ctx.version, topics)
    return _body(response)


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return _body(HeartbeatResponse(code))


HANDLER = Handler(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, handle, error_response,
                  feature=(GROUP_VERSION, 1))
