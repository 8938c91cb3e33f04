"""ListOffsets: earliest, latest, max timestamp, or the first offset at or after a timestamp."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from pybroker.handlers.base import Handler, RequestContext, partition_error_response


async def handle(ctx: RequestContext, request: Container) -> dict:
    manager = ctx.replicas
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            code, offset, ts, epoch = manager.list_offset(
                topic.name, p.partition_index, p.timestamp, request.isolation_level,
                p.current_leader_epoch)
            partitions.append({"partition_index": p.partition_index, "error_code": int(code),
                               "timestamp": ts, "offset": offset, "leader_epoch": epoch})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


HANDLER = Handler(ApiKey.LIST_OFFSETS, 1, 9, handle, partition_error_response())
