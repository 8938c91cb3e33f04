"""DescribeTransactions: the coordinator's view of transactional ids (kafka-transactions.sh
describe). Ids coordinated by another broker get NOT_COORDINATOR; unknown ones
TRANSACTIONAL_ID_NOT_FOUND. As Kafka: an id the principal may not DESCRIBE gets
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and only the topics it may DESCRIBE are listed."""
from __future__ import annotations

from collections import defaultdict

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._authz import TOPIC, TXN, Op, allowed, denied_names
from pybroker.handlers._base import Handler, RequestContext


def _describe(ctx: RequestContext, transactional_id: str) -> dict:
    if not allowed(ctx, Op.DESCRIBE, TXN, transactional_id):
        code, txn = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
    else:
        code, txn = ctx.services.transactions.describe(transactional_id)
    if txn is None:
        return {"error_code": int(code), "transactional_id": transactional_id,
                "transaction_state": "", "transaction_timeout_ms": 0,
                "transaction_start_time_ms": -1, "producer_id": -1, "producer_epoch": -1,
                "topics": []}
    by_topic: dict[str, list[int]] = defaultdict(list)
    hidden = denied_names(ctx, Op.DESCRIBE, TOPIC, {t for t, _ in txn.partitions})
    for topic, partition in sorted(txn.partitions):
        if topic not in hidden:
            by_topic[topic].append(partition)
    return {"error_code": 0, "transactional_id": transactional_id,
            "transaction_state": txn.state.kafka_name,
            "transaction_timeout_ms": txn.timeout_ms,
            "transaction_start_time_ms": txn.start_ms, "producer_id": txn.producer_id,
            "producer_epoch": txn.producer_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}


async def handle(ctx: RequestContext, request: Container) -> dict:
    return {"transaction_states": [_describe(ctx, t) for t in request.transactional_ids]}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"transaction_states": [
        {"error_code": int(code), "transactional_id": t, "transaction_state": "",
         "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
         "producer_epoch": -1, "topics": []} for t in request.transactional_ids]}


HANDLER = Handler(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, handle, error_response)
