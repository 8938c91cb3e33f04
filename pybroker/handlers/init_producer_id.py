"""InitProducerId: a producer id and epoch for an idempotent producer.

A producer that already has an id (v3+, after a fatal sequence error) gets the same id with
the next epoch, as Kafka does (KIP-360). Transactional ids need the transaction coordinator,
which this broker does not have yet: they are refused with a non-retriable error.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers.base import Handler, RequestContext

MAX_EPOCH = 32767


async def handle(ctx: RequestContext, request: Container) -> dict:
    if request.transactional_id is not None:
        return {"throttle_time_ms": 0,
                "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                "producer_id": -1, "producer_epoch": -1}
    if request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": request.producer_id,
                "producer_epoch": request.producer_epoch + 1}
    pid = ctx.broker.producer_ids.next_id()
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": 0}


HANDLER = Handler(ApiKey.INIT_PRODUCER_ID, 0, 5, handle)
