"""ConsumerGroupDescribe (API 69, v0-1): a KIP-848 group's epochs, members, their current and
target assignments (`kafka-consumer-groups --describe` on a consumer group). v1 adds each
member's MemberType: 0 for a classic-protocol member of the group (online migration), 1 for a
consumer-protocol member.

A group id that is no consumer group here gets GROUP_ID_NOT_FOUND, as Kafka answers for a
missing or classic group. DESCRIBE on the group is required.
"""
from __future__ import annotations

import uuid
from collections.abc import Mapping

from construct import Container

from protocol.acl_operations import GROUP_OPERATIONS
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.cluster.features import GROUP_VERSION
from pybroker.handlers._authz import GROUP, Op, allowed, operations_field
from pybroker.handlers._base import Handler, RequestContext

# ConsumerGroupDescribeResponse v1 MemberType: 0 classic protocol, 1 consumer protocol.
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1


def _assignment(ctx: RequestContext, partitions: Mapping[uuid.UUID, frozenset[int]]) -> dict:
    names = {info.topic_id: name for name, info in ctx.image.topics.items()}
    return {"topic_partitions": [
        {"topic_id": t, "topic_name": names.get(t, ""), "partitions": sorted(ps)}
        for t, ps in sorted(partitions.items(), key=lambda kv: str(kv[0])) if ps]}


def _error(group_id: str, code: ErrorCode, message: str | None = None) -> dict:
    """A group described with an error: the other fields at their defaults (0 and ""), as
    Kafka 4.1.1 answers them (tests/reference/test_kafka_group_migration_downgrade.py)."""
    return {"error_code": int(code), "error_message": message, "group_id": group_id,
            "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
            "members": []}


async def handle(ctx: RequestContext, request: Container) -> dict:
    described = []
    for group_id in request.group_ids:
        if not allowed(ctx, Op.DESCRIBE, GROUP, group_id):
            described.append(_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        code = await ctx.groups.coordinates(group_id)
        group = ctx.groups.consumer.group(group_id)
        if code or group is None:
            described.append(_error(group_id, code or ErrorCode.GROUP_ID_NOT_FOUND,
                                    None if code else f"Group {group_id} not found."))
            continue
        described.append({
            "error_code": 0, "error_message": None, "group_id": group_id,
            "group_state": group.state, "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor_name": group.assignor(ctx.groups.consumer.machine.config.assignors[0]),
            "members": [{
                "member_id": m.member_id, "instance_id": m.subscription.instance_id,
                "rack_id": m.subscription.rack_id, "member_epoch": m.member_epoch,
                "client_id": m.subscription.client_id,
                "client_host": m.subscription.client_host,
                "subscribed_topic_names": list(m.subscription.topic_names),
                "subscribed_topic_regex": m.subscription.topic_regex,
                "assignment": _assignment(ctx, m.assigned),
                "target_assignment": _assignment(ctx, group.target.get(m.member_id, {})),
                "member_type": CLASSIC_MEMBER if m.uses_classic_protocol else CONSUMER_MEMBER,
            } for m in group.members.values()],
            "authorized_operations": operations_field(
                ctx, request.include_authorized_operations, GROUP, group_id, GROUP_OPERATIONS),
        })
    return {"groups": described}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"groups": [_error(g, code) for g in request.group_ids]}


HANDLER = Handler(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, handle, error_response,
                  feature=(GROUP_VERSION, 1))
