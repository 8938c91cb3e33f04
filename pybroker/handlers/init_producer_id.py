"""InitProducerId: a producer id and epoch for an idempotent or transactional producer.

Without a transactional id the answer is always a fresh producer id at epoch 0, whatever id
and epoch the request names (v3+, KIP-360): Kafka's transaction coordinator "blindly accepts"
such a request, because nothing proves the caller owns the id it names, and bumping that id's
epoch would let one client fence another's idempotent producer. A producer recovering from a
sequence error simply continues under the new id. With a transactional id the transaction
coordinator answers: the id's producer id with its epoch bumped, fencing the previous
incarnation (and aborting its open transaction: CONCURRENT_TRANSACTIONS until that is done).
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError
from pybroker.handlers._authz import CLUSTER, TOPIC, TXN, Op, allowed, allowed_any, require
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._txn_errors import fenced_for


async def handle(ctx: RequestContext, request: Container) -> dict:
    if request.transactional_id is not None:
        require(ctx, Op.WRITE, TXN, request.transactional_id)
        txn = ctx.services.transactions
        code, pid, epoch = await txn.init_producer_id(
            request.transactional_id, request.transaction_timeout_ms,
            request.get("producer_id", -1), request.get("producer_epoch", -1))
        return {"error_code": int(fenced_for(code, ctx.version, 4)),
                "producer_id": pid, "producer_epoch": epoch}
    # Idempotent only: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (Kafka 3.9).
    if not allowed(ctx, Op.IDEMPOTENT_WRITE, CLUSTER) and not allowed_any(ctx, Op.WRITE, TOPIC):
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    pid = await ctx.services.producer_ids.next_id()
    return {"error_code": 0, "producer_id": pid, "producer_epoch": 0}


HANDLER = Handler(ApiKey.INIT_PRODUCER_ID, 0, 5, handle)
