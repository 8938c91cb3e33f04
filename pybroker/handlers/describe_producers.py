"""DescribeProducers: the idempotent producers a partition knows, with their last sequence."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers.base import Handler, RequestContext


async def handle(ctx: RequestContext, request: Container) -> dict:
    broker = ctx.broker
    topics = []
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            state = broker.metadata.image.partition(topic.name, index)
            plog = broker.partition_log(topic.name, index)
            entry: dict = {"partition_index": index, "error_code": 0, "error_message": None,
                           "active_producers": []}
            if state is None:
                entry["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif plog is None or state.leader != broker.node_id:
                entry["error_code"] = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            else:
                entry["active_producers"] = [
                    {"producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
                     "last_sequence": p.last_sequence, "last_timestamp": p.last_timestamp,
                     "coordinator_epoch": -1, "current_txn_start_offset": -1}
                    for p in plog.active_producers()]
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


HANDLER = Handler(ApiKey.DESCRIBE_PRODUCERS, 0, 0, handle)
