"""ListTransactions: the transactions this broker coordinates (the admin client asks every
broker and merges), filtered by state, producer id and (v1) running time — and, as Kafka, to
the transactional ids the principal may DESCRIBE."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.coordinator.txn_state import TxnState
from pybroker.handlers._authz import TXN, Op, denied_names
from pybroker.handlers._base import Handler, RequestContext

_KNOWN_STATES = {s.kafka_name for s in TxnState}


async def handle(ctx: RequestContext, request: Container) -> dict:
    states = list(request.state_filters or [])
    found = ctx.services.transactions.list(states, request.producer_id_filters or [],
                                           request.get("duration_filter", -1))
    hidden = denied_names(ctx, Op.DESCRIBE, TXN, {t.transactional_id for t in found})
    found = [t for t in found if t.transactional_id not in hidden]
    unknown = [s for s in states if s not in _KNOWN_STATES]
    return {"error_code": 0, "unknown_state_filters": unknown,
            "transaction_states": [
                {"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                 "transaction_state": t.state.kafka_name} for t in found]}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"error_code": int(code), "unknown_state_filters": [],
            "transaction_states": []}


HANDLER = Handler(ApiKey.LIST_TRANSACTIONS, 0, 1, handle, error_response)
