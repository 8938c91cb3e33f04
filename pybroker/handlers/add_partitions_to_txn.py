"""AddPartitionsToTxn: partitions a transactional producer is about to write to join its
transaction (v0-3, the clients' layout; v4+ is Kafka's broker-to-broker verification, which
this broker does in-process).

As Kafka: one bad partition fails the whole request — the unknown ones get
UNKNOWN_TOPIC_OR_PARTITION, the rest OPERATION_NOT_ATTEMPTED — and otherwise every partition
gets the coordinator's answer.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from pybroker.handlers.authz import TOPIC, TXN, Op, denied_names, require
from pybroker.handlers.base import Handler, RequestContext
from pybroker.handlers.txn_errors import fenced_for


def _response(request: Container, codes: dict[TopicPartition, ErrorCode]) -> dict:
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
        {"name": t.name, "results_by_partition": [
            {"partition_index": p, "partition_error_code": int(codes[(t.name, p)])}
            for p in t.partitions]} for t in request.v3_and_below_topics]}


async def handle(ctx: RequestContext, request: Container) -> dict:
    wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    require(ctx, Op.WRITE, TXN, request.v3_and_below_transactional_id)
    denied = denied_names(ctx, Op.WRITE, TOPIC, {tp[0] for tp in wanted})
    if denied:  # as Kafka: the others are not attempted
        return _response(request, {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp[0] in denied
                                   else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted})
    unknown = {tp for tp in wanted if ctx.image.partition(*tp) is None}
    if unknown:
        return _response(request, {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                                   else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted})
    code = await ctx.services.transactions.add_partitions(
        request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
        request.v3_and_below_producer_epoch, wanted)
    code = fenced_for(code, ctx.version, 2)
    return _response(request, {tp: code for tp in wanted})


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return _response(request, {(t.name, p): code for t in request.v3_and_below_topics
                               for p in t.partitions})


HANDLER = Handler(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 3, handle, error_response)
