"""FindCoordinator: which broker coordinates a group or a transactional id.

v0-3 ask about one key; v4+ batch several (`coordinator_keys`) and answer each separately.
Asking starts the creation of `__consumer_offsets` (groups) or `__transaction_state`
(transactional ids) if needed and answers COORDINATOR_NOT_AVAILABLE without waiting for it, as
Kafka 4.1.1 does (`coordinator/internal_topic.py`); the coordinator is the leader of the key's
partition of that topic, named once it has one.
v6 adds the share key type (KIP-932), which brokers ask with "group:topicId:partition" for
the share coordinator of a share-partition's state (`__share_group_state`), with
CLUSTER_ACTION on the cluster, as Kafka's persister does.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._authz import CLUSTER, GROUP, TXN, Op, allowed
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._share import share_coordinator

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2


async def _lookup(ctx: RequestContext, key: str, key_type: int) -> dict:
    message: str | None
    if key_type in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE) and not allowed(
            ctx, Op.DESCRIBE, TXN if key_type == TRANSACTION_KEY_TYPE else GROUP, key):
        code = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                if key_type == TRANSACTION_KEY_TYPE else ErrorCode.GROUP_AUTHORIZATION_FAILED)
        return {"key": key, "error_code": int(code), "error_message": code.message,
                "node_id": -1, "host": "", "port": -1}
    if key_type == SHARE_KEY_TYPE and ctx.version >= 6:
        if not allowed(ctx, Op.CLUSTER_ACTION, CLUSTER):
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return {"key": key, "error_code": int(code), "error_message": code.message,
                    "node_id": -1, "host": "", "port": -1}
        code, node, host, port = await share_coordinator(ctx).store.coordinator_for(
            key, ctx.listener)
        message = code.message if code else None
    elif key_type == TRANSACTION_KEY_TYPE:
        code, node, host, port = await ctx.services.transactions.coordinator_for(
            key, ctx.listener)
        message = code.message if code else None
    elif key_type != GROUP_KEY_TYPE:
        code, node, host, port = ErrorCode.INVALID_REQUEST, -1, "", -1
        message = f"Unknown coordinator key type {key_type}"
    else:
        code, node, host, port = await ctx.groups.coordinator_for(key, ctx.listener)
        message = code.message if code else None
    return {"key": key, "error_code": int(code), "error_message": message, "node_id": node,
            "host": host, "port": port}


async def handle(ctx: RequestContext, request: Container) -> dict:
    if ctx.version >= 4:
        return {"coordinators": [
            await _lookup(ctx, key, request.key_type) for key in request.coordinator_keys]}
    found = await _lookup(ctx, request.key, request.key_type)
    del found["key"]
    return found


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    entry = {"error_code": int(code), "error_message": code.message, "node_id": -1, "host": "",
             "port": -1}
    if ctx.version >= 4:
        return {"coordinators": [{"key": k, **entry} for k in request.coordinator_keys]}
    return entry


HANDLER = Handler(ApiKey.FIND_COORDINATOR, 0, 6, handle, error_response)
