"""Produce: append each partition's batch; acks=0 gets no response.

Advertised from v0 (librdkafka before 2.11.1 enables gzip, snappy and lz4 only when Produce v0
is in range) but served from v3, as Kafka 4 does: v0-2 get UNSUPPORTED_VERSION per partition.
On one broker acks=-1 is answered as soon as the batch is in the log: the high watermark has
already passed it.
"""
from __future__ import annotations

from collections.abc import Sequence

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers.base import Handler, RequestContext


def _partition_response(index: int, code: ErrorCode, base_offset: int = -1,
                        append_time: int = -1, log_start: int = -1,
                        message: str | None = None,
                        record_errors: Sequence[tuple[int, str]] = ()) -> dict:
    return {"index": index, "error_code": int(code), "base_offset": base_offset,
            "log_append_time_ms": append_time, "log_start_offset": log_start,
            "record_errors": [{"batch_index": i, "batch_index_error_message": why}
                              for i, why in record_errors],
            "error_message": message}


async def handle(ctx: RequestContext, request: Container) -> dict | None:
    if request.acks not in (-1, 0, 1):  # as Kafka: nothing is written
        return error_response(ctx, request, ErrorCode.INVALID_REQUIRED_ACKS)
    manager = ctx.broker.replicas
    responses = []
    for topic in request.topic_data:
        partitions = []
        for pd in topic.partition_data:
            if request.transactional_id is not None:
                partitions.append(_partition_response(
                    pd.index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    message="Transactions are not supported by this broker yet"))
                continue
            result = manager.append(topic.name, pd.index, pd.records,
                                    produce_version=ctx.version, acks=request.acks)
            partitions.append(_partition_response(
                pd.index, result.error, result.base_offset, result.log_append_time,
                result.log_start_offset, result.message, result.record_errors))
        responses.append({"name": topic.name, "partition_responses": partitions})
    if request.acks == 0:
        return None
    return {"responses": responses, "throttle_time_ms": 0}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict | None:
    if request.acks == 0:
        return None
    return {"responses": [
        {"name": t.name,
         "partition_responses": [_partition_response(p.index, code) for p in t.partition_data]}
        for t in request.topic_data], "throttle_time_ms": 0}


HANDLER = Handler(ApiKey.PRODUCE, 3, 11, handle, error_response, advertised_min=0)
