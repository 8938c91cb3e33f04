"""AlterShareGroupOffsets (KIP-932): set the start offset (SPSO) of share-partitions of a
share group without members, as `kafka-share-groups.sh --reset-offsets` does.

Each partition named starts afresh at its offset: nothing in flight, no delivery counts,
written to __share_group_state before the answer, so a restart keeps it. A group with
members is refused (NON_EMPTY_GROUP); an id no group holds gets state, so the share group
exists from then on (Kafka creates it too); an id held by a classic or consumer group is
GROUP_ID_NOT_FOUND. Per partition: an unknown topic or partition is
UNKNOWN_TOPIC_OR_PARTITION (the topic with the zero id), a negative offset INVALID_REQUEST;
the state is set at the key's share coordinator, whichever broker coordinates it or leads
the partition (COORDINATOR_NOT_AVAILABLE when it cannot be reached). Needs READ on the group (else
GROUP_AUTHORIZATION_FAILED for the request) and on each topic (else
TOPIC_AUTHORIZATION_FAILED on its partitions).
"""
from __future__ import annotations

from uuid import UUID

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.cluster.features import SHARE_VERSION
from pybroker.handlers._authz import GROUP, TOPIC, Op, denied_names, require
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._share import (
    NO_TOPIC_ID, admin_failed, admin_group_error, share_coordinator,
)
_UNKNOWN = "This server does not host this topic-partition."


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.READ, GROUP, request.group_id)
    shares = share_coordinator(ctx)
    code = await admin_group_error(ctx, shares, request.group_id, must_exist=False)
    if code:
        return admin_failed(request.group_id, code)
    denied = denied_names(ctx, Op.READ, TOPIC, {t.topic_name for t in request.topics})
    codes: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[UUID, int], int] = {}
    for topic in request.topics:
        found = shares.lookup(topic.topic_name)
        for p in topic.partitions:
            key = (topic.topic_name, p.partition_index)
            if topic.topic_name in denied:
                codes[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif found is None or not 0 <= p.partition_index < found[1]:
                codes[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif p.start_offset < 0:
                codes[key] = ErrorCode.INVALID_REQUEST
            else:
                offsets[(found[0], p.partition_index)] = p.start_offset
    altered = await shares.alter_start_offsets(request.group_id, offsets)
    responses = []
    for topic in request.topics:
        found = shares.lookup(topic.topic_name)
        topic_id = found[0] if found is not None else NO_TOPIC_ID
        partitions = []
        for p in topic.partitions:
            code = codes.get((topic.topic_name, p.partition_index)) or \
                altered.get((topic_id, p.partition_index), ErrorCode.NONE)
            partitions.append({"partition_index": p.partition_index, "error_code": int(code),
                               "error_message": _message(code)})
        responses.append({"topic_name": topic.topic_name, "topic_id": topic_id,
                          "partitions": partitions})
    return {"error_code": 0, "responses": responses}


def _message(code: ErrorCode) -> str | None:
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return _UNKNOWN
    return code.message if code else None


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return admin_failed(request.group_id, code)


HANDLER = Handler(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0, handle, error_response,
                  feature=(SHARE_VERSION, 1))
