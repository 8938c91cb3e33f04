"""WriteTxnMarkers: a transaction coordinator (another broker's, or Kafka's Admin
abortTransaction through `kafka-transactions.sh abort`) asks this broker, as the partitions'
leader, to end a transaction on them. Each marker is answered once it is replicated."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._authz import CLUSTER, Op, require
from pybroker.handlers._base import Handler, RequestContext


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.CLUSTER_ACTION, CLUSTER)
    markers = ctx.services.transactions.markers
    out = []
    for marker in request.markers:
        tps = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
        codes = await markers.write_local(marker.producer_id, marker.producer_epoch,
                                          marker.coordinator_epoch,
                                          marker.transaction_result, tps)
        out.append({"producer_id": marker.producer_id, "topics": [
            {"name": t.name, "partitions": [
                {"partition_index": p, "error_code": int(codes[(t.name, p)])}
                for p in t.partition_indexes]} for t in marker.topics]})
    return {"markers": out}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"markers": [{"producer_id": m.producer_id, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p, "error_code": int(code)}
                                        for p in t.partition_indexes]}
        for t in m.topics]} for m in request.markers]}


HANDLER = Handler(ApiKey.WRITE_TXN_MARKERS, 1, 1, handle, error_response)
