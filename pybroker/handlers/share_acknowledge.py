"""ShareAcknowledge (KIP-932): acknowledgements alone, in the member's share session; epoch -1
closes the session and releases what the member still holds."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.cluster.features import SHARE_VERSION
from pybroker.handlers._authz import GROUP, Op, require
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._share import (
    PartitionRefusal, apply_acks, persisted, share_coordinator,
)


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.READ, GROUP, request.group_id or "")
    shares = share_coordinator(ctx)
    if not request.group_id or not request.member_id:
        return _error(ErrorCode.INVALID_REQUEST)
    session = shares.sessions.acknowledge_context(request.group_id, request.member_id,
                                                  request.share_session_epoch)
    if session.error:
        return _error(session.error)
    if session.session is not None:
        session.session.connection = ctx.session  # closing the connection closes the session
    refusal = PartitionRefusal(ctx, [t.topic_id for t in request.topics])
    results = await apply_acks(ctx, request.group_id, request.member_id, request.topics,
                               refusal)
    results = await persisted(shares, results)
    if session.closing:
        shares.sessions.close(request.group_id, request.member_id)
        shares.release_member(request.group_id, request.member_id)
        await shares.flush()
    by_topic: dict = {}
    for (topic_id, partition), (code, leader) in results.items():
        by_topic.setdefault(topic_id, []).append(
            {"partition_index": partition, "error_code": int(code), "current_leader": leader})
    return {"error_code": 0,
            "responses": [{"topic_id": tid, "partitions": ps} for tid, ps in by_topic.items()],
            "node_endpoints": refusal.node_endpoints()}


def _error(code: ErrorCode) -> dict:
    return {"error_code": int(code), "responses": [], "node_endpoints": []}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return _error(code)


HANDLER = Handler(ApiKey.SHARE_ACKNOWLEDGE, 1, 1, handle, error_response,
                  feature=(SHARE_VERSION, 1))
