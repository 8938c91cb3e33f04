"""ListOffsets: earliest, latest, max timestamp, or the first offset at or after a timestamp."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._authz import TOPIC, Op, denied_names
from pybroker.handlers._base import Handler, RequestContext, partition_error_response

# The special timestamps and the version each needs (Kafka's ReplicaManager): latest (-1),
# earliest (-2), max timestamp (-3, KIP-734), earliest local (-4), latest tiered (-5). Any
# other negative timestamp, or one older than its version, is UNSUPPORTED_VERSION.
SPECIAL_SINCE = {-1: 1, -2: 1, -3: 7, -4: 8, -5: 9}


async def handle(ctx: RequestContext, request: Container) -> dict:
    manager = ctx.replicas
    topics = []
    denied = denied_names(ctx, Op.DESCRIBE, TOPIC, {t.name for t in request.topics})
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            if topic.name in denied:
                partitions.append({"partition_index": p.partition_index, "timestamp": -1,
                                   "offset": -1, "leader_epoch": -1, "error_code": int(
                                       ErrorCode.TOPIC_AUTHORIZATION_FAILED)})
                continue
            if p.timestamp < 0 and ctx.version < SPECIAL_SINCE.get(p.timestamp, 1 << 15):
                partitions.append({"partition_index": p.partition_index, "timestamp": -1,
                                   "offset": -1, "leader_epoch": -1,
                                   "error_code": int(ErrorCode.UNSUPPORTED_VERSION)})
                continue
            code, offset, ts, epoch = manager.list_offset(
                topic.name, p.partition_index, p.timestamp, request.isolation_level,
                p.current_leader_epoch)
            partitions.append({"partition_index": p.partition_index, "error_code": int(code),
                               "timestamp": ts, "offset": offset, "leader_epoch": epoch})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"topics": topics}


HANDLER = Handler(ApiKey.LIST_OFFSETS, 1, 9, handle, partition_error_response())
