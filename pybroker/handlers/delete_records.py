"""DeleteRecords: advance a partition's log start offset (-1 means up to the high watermark)."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._authz import TOPIC, Op, denied_names
from pybroker.handlers._base import Handler, RequestContext, partition_error_response


async def handle(ctx: RequestContext, request: Container) -> dict:
    topics = []
    denied = denied_names(ctx, Op.DELETE, TOPIC, {t.name for t in request.topics})
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            low = -1
            if topic.name in denied:
                partitions.append({"partition_index": p.partition_index, "low_watermark": low,
                                   "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)})
                continue
            code, plog = ctx.replicas.leader_log(topic.name, p.partition_index)
            if plog is not None:
                target = plog.high_watermark if p.offset == -1 else p.offset
                if target < 0 or target > plog.high_watermark:
                    code = ErrorCode.OFFSET_OUT_OF_RANGE
                else:
                    if target > plog.log_start_offset:
                        plog.delete_records_before(target)
                    low = plog.log_start_offset
            partitions.append({"partition_index": p.partition_index, "low_watermark": low,
                               "error_code": int(code)})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"topics": topics}


HANDLER = Handler(ApiKey.DELETE_RECORDS, 0, 2, handle,
                  partition_error_response(low_watermark=-1))
