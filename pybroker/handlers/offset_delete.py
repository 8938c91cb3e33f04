"""OffsetDelete: forget a group's committed offsets for some partitions.

Allowed for an Empty group, and for a consumer group's topics none of its members subscribe
to; a subscribed topic's partitions get GROUP_SUBSCRIBED_TO_TOPIC. Unknown partitions get
UNKNOWN_TOPIC_OR_PARTITION, as in Kafka.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers.base import Handler, RequestContext


async def handle(ctx: RequestContext, request: Container) -> dict:
    image = ctx.image
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    known = [tp for tp in wanted if image.partition(*tp) is not None]
    top, results = await ctx.groups.delete_offsets(request.group_id, known)
    if top:
        return {"error_code": int(top), "throttle_time_ms": 0, "topics": []}
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            code = results.get(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            partitions.append({"partition_index": p.partition_index, "error_code": int(code)})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"error_code": 0, "throttle_time_ms": 0, "topics": topics}


HANDLER = Handler(ApiKey.OFFSET_DELETE, 0, 0, handle)
