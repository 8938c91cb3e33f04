"""DescribeGroups: state, protocol and members of groups.

A group that does not exist is described as Dead with no error, as Kafka does up to v5.
Member metadata and assignments are shown only for a Stable group (elsewhere they are in
flux). v3+ may ask for the authorized operations; with no authorizer every group operation
(READ, DELETE, DESCRIBE) is allowed.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.acl_operations import GROUP_OPERATIONS, authorized_operations
from pybroker.handlers._authz import GROUP, Op, allowed, operations_field
from pybroker.handlers._base import Handler, RequestContext


async def handle(ctx: RequestContext, request: Container) -> dict:
    asked = ctx.version >= 3 and request.include_authorized_operations
    operations = authorized_operations(asked, GROUP_OPERATIONS)
    groups = []
    for group_id in request.groups:
        if not allowed(ctx, Op.DESCRIBE, GROUP, group_id):
            groups.append(error_response(ctx, Container(groups=[group_id]),
                                         ErrorCode.GROUP_AUTHORIZATION_FAILED)["groups"][0])
            continue
        if ctx.services.authorizer is not None:
            operations = operations_field(ctx, asked, GROUP, group_id, GROUP_OPERATIONS)
        d = ctx.groups.describe_group(group_id)
        groups.append({
            "error_code": int(d.error), "group_id": d.group_id, "group_state": d.state,
            "protocol_type": d.protocol_type, "protocol_data": d.protocol,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "member_metadata": m.metadata, "member_assignment": m.assignment}
                        for m in d.members],
            "authorized_operations": operations,
        })
    return {"groups": groups}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"groups": [
        {"error_code": int(code), "group_id": g, "group_state": "", "protocol_type": "",
         "protocol_data": "", "members": []} for g in request.groups]}


HANDLER = Handler(ApiKey.DESCRIBE_GROUPS, 0, 5, handle, error_response)
