"""ListPartitionReassignments (KIP-455): the partitions whose replicas are being moved, with
the replicas being added and removed. Served by the controller; a single broker never has
one in progress."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._authz import CLUSTER, Op, require
from pybroker.handlers._base import Handler, RequestContext


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.DESCRIBE, CLUSTER)
    controller = ctx.services.controller
    if controller is not None and not ctx.is_controller:
        return error_response(ctx, request, ErrorCode.NOT_CONTROLLER)
    ongoing = controller.ongoing_reassignments() if controller is not None else []
    wanted = (None if request.topics is None else
              {(t.name, i) for t in request.topics for i in t.partition_indexes})
    topics: dict[str, list[dict]] = {}
    for name, p in ongoing:
        if wanted is None or (name, p.partition) in wanted:
            topics.setdefault(name, []).append({
                "partition_index": p.partition, "replicas": list(p.replicas),
                "adding_replicas": list(p.adding_replicas),
                "removing_replicas": list(p.removing_replicas)})
    return {"error_code": 0, "error_message": None,
            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"error_code": int(code), "error_message": None,
            "topics": []}


HANDLER = Handler(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, handle, error_response)
