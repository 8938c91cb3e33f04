"""ShareGroupDescribe (KIP-932): a share group's state, epochs and members with their
assignments. A group known only by its share-partition state (membership is not durable: after
a restart, until a member rejoins) is described Empty, epoch 0, as ListGroups lists it."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.cluster.features import SHARE_VERSION
from pybroker.coordinator.share_group import ASSIGNOR, ShareGroup
from pybroker.handlers._authz import GROUP, Op, allowed
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._group_kind import group_kind
from pybroker.handlers._share import share_coordinator

_NO_OPERATIONS = -2147483648


async def handle(ctx: RequestContext, request: Container) -> dict:
    shares = share_coordinator(ctx)
    groups = []
    for group_id in request.group_ids:
        if not allowed(ctx, Op.DESCRIBE, GROUP, group_id):
            groups.append(_failed(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        code = await ctx.groups.coordinates(group_id)
        group = shares.groups.groups.get(group_id)
        if group is None and group_kind(ctx, group_id) == "share":
            group = ShareGroup(group_id)
        if code:
            groups.append(_failed(group_id, code))
        elif group is None:
            groups.append(_failed(group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                                  f"Group {group_id} not found."))
        else:
            groups.append({
                "error_code": 0, "group_id": group_id, "group_state": group.state,
                "group_epoch": group.group_epoch, "assignment_epoch": group.group_epoch,
                "assignor_name": ASSIGNOR,
                "members": [{
                    "member_id": m.member_id, "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch, "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_topic_names),
                    "assignment": {"topic_partitions": [
                        {"topic_id": tid, "topic_name": shares.topic_name(tid) or "",
                         "partitions": list(ps)}
                        for tid, ps in sorted(m.assignment.items())]},
                } for m in group.members.values()],
                "authorized_operations": _NO_OPERATIONS,
            })
    return {"groups": groups}


def _failed(group_id: str, code: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": int(code), "error_message": message, "group_id": group_id,
            "group_state": "Dead" if code == ErrorCode.GROUP_ID_NOT_FOUND else "",
            "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": [],
            "authorized_operations": _NO_OPERATIONS}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"groups": [_failed(g, code) for g in request.group_ids]}


HANDLER = Handler(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1, handle, error_response,
                  feature=(SHARE_VERSION, 1))
