"""OffsetDelete: forget a group's committed offsets for some partitions.

Allowed for an Empty group, and for a consumer group's topics none of its members subscribe
to; a subscribed topic's partitions get GROUP_SUBSCRIBED_TO_TOPIC. Unknown partitions get
UNKNOWN_TOPIC_OR_PARTITION, as in Kafka. Needs DELETE on the group (else
GROUP_AUTHORIZATION_FAILED for the whole request) and READ on each topic (else
TOPIC_AUTHORIZATION_FAILED on its partitions, which are left alone). A share group's id is
GROUP_ID_NOT_FOUND for the request, as Kafka 4.1.1 answers it.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._authz import GROUP, TOPIC, Op, denied_names, require
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._group_kind import refused_as_share_group


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.DELETE, GROUP, request.group_id)
    if refused := await refused_as_share_group(ctx, request.group_id):
        return {"error_code": int(refused), "topics": []}
    denied = denied_names(ctx, Op.READ, TOPIC, {t.name for t in request.topics})
    image = ctx.image
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions
              if t.name not in denied]
    known = [tp for tp in wanted if image.partition(*tp) is not None]
    top, results = await ctx.groups.delete_offsets(request.group_id, known)
    if top:
        return {"error_code": int(top), "topics": []}
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED if topic.name in denied \
                else results.get(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            partitions.append({"partition_index": p.partition_index, "error_code": int(code)})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"error_code": 0, "topics": topics}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"error_code": int(code), "topics": []}


HANDLER = Handler(ApiKey.OFFSET_DELETE, 0, 0, handle, error_response)
