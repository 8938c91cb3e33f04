"""DescribeProducers: the idempotent producers a partition knows, with their last sequence.
A topic the principal may not READ: TOPIC_AUTHORIZATION_FAILED on each partition (Kafka)."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._authz import TOPIC, Op, denied_names
from pybroker.handlers._base import Handler, RequestContext


async def handle(ctx: RequestContext, request: Container) -> dict:
    topics = []
    denied = denied_names(ctx, Op.READ, TOPIC, {t.name for t in request.topics})
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            code, plog = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None) if topic.name in denied \
                else ctx.replicas.leader_log(topic.name, index)
            entry: dict = {"partition_index": index, "error_code": int(code),
                           "error_message": None, "active_producers": []}
            if plog is not None:
                entry["active_producers"] = [
                    {"producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
                     "last_sequence": p.last_seq, "last_timestamp": p.last_timestamp,
                     "coordinator_epoch": p.coordinator_epoch,
                     "current_txn_start_offset": p.current_txn_first_offset}
                    for p in sorted(plog.producer_state.producers.values(),
                                    key=lambda p: p.producer_id)]
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"topics": topics}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"topics": [
        {"name": t.name, "partitions": [
            {"partition_index": i, "error_code": int(code), "error_message": None,
             "active_producers": []} for i in t.partition_indexes]}
        for t in request.topics]}


HANDLER = Handler(ApiKey.DESCRIBE_PRODUCERS, 0, 0, handle, error_response)
