"""EndTxn: commit or abort the producer's transaction.

Answered once the decision is durable in `__transaction_state` and the markers are on every
partition (or after a bounded wait for an unreachable leader: the decision stands and the
markers keep being retried). v5 (Kafka 4's transaction version 2, which bumps the epoch at
every end) is not served: none of the clients speak it.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._authz import TXN, Op, require
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._txn_errors import fenced_for


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.WRITE, TXN, request.transactional_id)
    if not request.transactional_id:  # as Kafka's coordinator, before it looks the id up
        return {"error_code": int(ErrorCode.INVALID_REQUEST)}
    code = await ctx.services.transactions.end_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch,
        request.committed)
    return {"error_code": int(fenced_for(code, ctx.version, 2))}


HANDLER = Handler(ApiKey.END_TXN, 0, 4, handle)
