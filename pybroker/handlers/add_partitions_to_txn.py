"""AddPartitionsToTxn: partitions a transactional producer is about to write to join its
transaction (v0-3, the clients' layout), and v4, Kafka's broker-to-broker batch form: a
partition leader verifying a transactional produce (`verify_only`, KIP-890 part 1,
`coordinator/txn_verifier.py`) asks whether partitions are in several transactions at once.
v4 needs CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED as the top-level error
otherwise, as Kafka). v5 (transaction version 2) is not served.

As Kafka: one bad partition fails the whole request — the unknown ones get
UNKNOWN_TOPIC_OR_PARTITION, the rest OPERATION_NOT_ATTEMPTED — and otherwise every partition
gets the coordinator's answer. A verification adds nothing and answers per partition: NONE,
TRANSACTION_ABORTABLE (not in the transaction), or the transaction's own error for all.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from pybroker.handlers._authz import CLUSTER, TOPIC, TXN, Op, allowed, denied_names, require
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._txn_errors import fenced_for


def _response(request: Container, codes: dict[TopicPartition, ErrorCode]) -> dict:
    return {"results_by_topic_v3_and_below": [
        {"name": t.name, "results_by_partition": [
            {"partition_index": p, "partition_error_code": int(codes[(t.name, p)])}
            for p in t.partitions]} for t in request.v3_and_below_topics]}


def _response_v4(request: Container, results: dict[str, dict[TopicPartition, ErrorCode]],
                 code: ErrorCode = ErrorCode.NONE) -> dict:
    by_txn = []
    for txn in request.transactions:
        codes = results.get(txn.transactional_id)
        if codes is None:
            continue
        by_topic: dict[str, list[dict]] = {}
        for (topic, partition), error in codes.items():
            by_topic.setdefault(topic, []).append(
                {"partition_index": partition, "partition_error_code": int(error)})
        by_txn.append({"transactional_id": txn.transactional_id, "topic_results": [
            {"name": name, "results_by_partition": parts} for name, parts in by_topic.items()]})
    return {"error_code": int(code), "results_by_transaction": by_txn}


async def _add(ctx: RequestContext, transactional_id: str, producer_id: int,
               producer_epoch: int, wanted: list[TopicPartition]
               ) -> dict[TopicPartition, ErrorCode]:
    if not allowed(ctx, Op.WRITE, TXN, transactional_id):
        return {tp: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in wanted}
    denied = denied_names(ctx, Op.WRITE, TOPIC, {tp[0] for tp in wanted})
    if denied:  # as Kafka: the others are not attempted
        return {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp[0] in denied
                else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted}
    unknown = {tp for tp in wanted if ctx.image.partition(*tp) is None}
    if unknown:
        return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted}
    code = await ctx.services.transactions.add_partitions(
        transactional_id, producer_id, producer_epoch, wanted)
    code = fenced_for(code, ctx.version, 2)
    return {tp: code for tp in wanted}


async def handle(ctx: RequestContext, request: Container) -> dict:
    if ctx.version >= 4:
        require(ctx, Op.CLUSTER_ACTION, CLUSTER)
        results: dict[str, dict[TopicPartition, ErrorCode]] = {}
        for txn in request.transactions:
            wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
            if txn.verify_only:
                results[txn.transactional_id] = ctx.services.transactions.verify_partitions(
                    txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted)
            else:
                results[txn.transactional_id] = await _add(
                    ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted)
        return _response_v4(request, results)
    wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    require(ctx, Op.WRITE, TXN, request.v3_and_below_transactional_id)
    return _response(request, await _add(
        ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
        request.v3_and_below_producer_epoch, wanted))


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    if ctx.version >= 4:  # as Kafka: the top-level error alone
        return _response_v4(request, {}, code)
    return _response(request, {(t.name, p): code for t in request.v3_and_below_topics
                               for p in t.partitions})


HANDLER = Handler(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 4, handle, error_response)
