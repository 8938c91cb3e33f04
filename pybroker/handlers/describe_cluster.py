"""DescribeCluster: the cluster id, the controller and the brokers (for the admin client).

Anyone may ask (Kafka authorizes nothing here). Asked for the cluster's authorized operations,
it answers those the principal may do, every one without an authorizer — and, as Kafka, none
(0) to a principal that may not DESCRIBE the cluster."""
from __future__ import annotations

from construct import Container

from protocol.acl_operations import CLUSTER_OPERATIONS
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.security.acl.model import CLUSTER_NAME
from pybroker.handlers._authz import CLUSTER, Op, allowed, operations_field
from pybroker.handlers._base import Handler, RequestContext

BROKERS_ENDPOINT = 1


async def handle(ctx: RequestContext, request: Container) -> dict:
    image = ctx.image
    if request.endpoint_type != BROKERS_ENDPOINT:
        return {"error_code": int(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
                "error_message": "Only the brokers endpoint type is served",
                "endpoint_type": request.endpoint_type, "cluster_id": image.cluster_id}
    return {"error_code": 0, "endpoint_type": BROKERS_ENDPOINT,
            "cluster_id": image.cluster_id, "controller_id": image.controller_id,
            "brokers": [{"broker_id": b.node_id, "host": ep[0], "port": ep[1], "rack": b.rack}
                        for b in image.brokers.values()
                        for ep in (b.endpoint(ctx.listener),) if ep is not None],
            "cluster_authorized_operations": _cluster_operations(ctx, request)}


def _cluster_operations(ctx: RequestContext, request: Container) -> int:
    requested = request.include_cluster_authorized_operations
    if requested and not allowed(ctx, Op.DESCRIBE, CLUSTER):
        return 0
    return operations_field(ctx, requested, CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)


HANDLER = Handler(ApiKey.DESCRIBE_CLUSTER, 0, 1, handle)
