"""AlterPartitionReassignments (KIP-455): move a partition's replicas, or cancel a move.

Served by the controller (NOT_CONTROLLER elsewhere, as Kafka), which adds the target replicas,
waits until they are in sync, then drops the old ones (`controller/reassignment.py`). A single
broker has nowhere to move a replica: a target naming only itself is already done, any other
broker is not alive.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.controller.reassignment import validate_target
from pybroker.handlers._authz import CLUSTER, Op, require
from pybroker.handlers._base import Handler, RequestContext


def _single_broker(ctx: RequestContext, topic: str, index: int, target: list[int] | None
                   ) -> tuple[ErrorCode, str | None]:
    state = ctx.image.partition(topic, index)
    if state is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
    if target is None:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
    problem = validate_target(state, target, (), frozenset(ctx.image.brokers))
    return (problem.code, problem.message) if problem else (ErrorCode.NONE, None)


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.ALTER, CLUSTER)
    wanted = [(t.name, p.partition_index, None if p.replicas is None else list(p.replicas))
              for t in request.topics for p in t.partitions]
    controller = ctx.services.controller
    if controller is not None and not ctx.is_controller:
        return error_response(ctx, request, ErrorCode.NOT_CONTROLLER)
    if controller is None:
        results = {(t, i): _single_broker(ctx, t, i, r) for t, i, r in wanted}
    else:
        results = await controller.alter_reassignments(wanted)
    responses: dict[str, list[dict]] = {}
    for topic, index, _ in wanted:
        code, message = results[(topic, index)]
        responses.setdefault(topic, []).append({
            "partition_index": index, "error_code": int(code), "error_message": message})
    return {"error_code": 0, "error_message": None, "responses": [
        {"name": name, "partitions": parts} for name, parts in responses.items()]}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"error_code": int(code), "error_message": None,
            "responses": [{"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "error_code": int(code),
                 "error_message": None} for p in t.partitions]} for t in request.topics]}


HANDLER = Handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 0, handle, error_response)
