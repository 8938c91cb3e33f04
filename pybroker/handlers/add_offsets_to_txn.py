"""AddOffsetsToTxn: a consumer group's offsets partition joins the transaction, so that its
TxnOffsetCommit is committed or aborted with the transaction's records."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._authz import GROUP, TXN, Op, require
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._txn_errors import fenced_for


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.WRITE, TXN, request.transactional_id)
    require(ctx, Op.READ, GROUP, request.group_id)
    if not request.transactional_id:  # as Kafka's coordinator, before it looks the id up
        return {"error_code": int(ErrorCode.INVALID_REQUEST)}
    code = await ctx.services.transactions.add_offsets(
        request.transactional_id, request.producer_id, request.producer_epoch,
        request.group_id)
    return {"error_code": int(fenced_for(code, ctx.version, 2))}


HANDLER = Handler(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4, handle)
