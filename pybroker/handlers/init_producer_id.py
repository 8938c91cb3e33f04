"""InitProducerId: a producer id and epoch for an idempotent producer.

Without a transactional id the answer is always a fresh producer id at epoch 0, whatever id
and epoch the request names (v3+, KIP-360): Kafka's transaction coordinator "blindly accepts"
such a request, because nothing proves the caller owns the id it names, and bumping that id's
epoch would let one client fence another's idempotent producer. A producer recovering from a
sequence error simply continues under the new id. Transactional ids need the transaction
coordinator, which this broker does not have yet: they are refused with a non-retriable error.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers.base import Handler, RequestContext


async def handle(ctx: RequestContext, request: Container) -> dict:
    if request.transactional_id is not None:
        return {"throttle_time_ms": 0,
                "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                "producer_id": -1, "producer_epoch": -1}
    pid = await ctx.services.producer_ids.next_id()
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": 0}


HANDLER = Handler(ApiKey.INIT_PRODUCER_ID, 0, 5, handle)
