"""DescribeCluster: the cluster id, the controller and the brokers (for the admin client).

Asked for the cluster's authorized operations, it answers every cluster operation: there is
no authorizer, and Kafka without one allows them all."""
from __future__ import annotations

from construct import Container

from protocol.acl_operations import CLUSTER_OPERATIONS, authorized_operations
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers.base import Handler, RequestContext

BROKERS_ENDPOINT = 1


async def handle(ctx: RequestContext, request: Container) -> dict:
    image = ctx.image
    if request.endpoint_type != BROKERS_ENDPOINT:
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
                "error_message": "Only the brokers endpoint type is served",
                "endpoint_type": request.endpoint_type, "cluster_id": image.cluster_id}
    return {"throttle_time_ms": 0, "error_code": 0, "endpoint_type": BROKERS_ENDPOINT,
            "cluster_id": image.cluster_id, "controller_id": image.controller_id,
            "brokers": [{"broker_id": b.node_id, "host": ep[0], "port": ep[1], "rack": b.rack}
                        for b in image.brokers.values()
                        for ep in (b.endpoint(ctx.listener),) if ep is not None],
            "cluster_authorized_operations": authorized_operations(
                request.include_cluster_authorized_operations, CLUSTER_OPERATIONS)}


HANDLER = Handler(ApiKey.DESCRIBE_CLUSTER, 0, 1, handle)
