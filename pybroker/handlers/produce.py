"""Produce: append each partition's batch; acks=0 gets no response.

Advertised from v0 (librdkafka before 2.11.1 enables gzip, snappy and lz4 only when Produce v0
is in range) but served from v3, as Kafka 4 does: v0-2 get UNSUPPORTED_VERSION per partition.
acks=-1 appends, then waits until the high watermark passes every batch, for at most the
request's timeout_ms (REQUEST_TIMED_OUT after it); on one broker the append itself commits, so
the wait ends at once without yielding.
"""
from __future__ import annotations

from collections.abc import Sequence

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from pybroker.handlers.base import Handler, RequestContext
from pybroker.replica_manager import AppendResult


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
    manager = ctx.replicas
    refused = ErrorCode.NONE if request.transactional_id is None else \
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    appended: list[tuple[TopicPartition, AppendResult]] = []
    for topic in request.topic_data:
        for pd in topic.partition_data:
            if refused != ErrorCode.NONE:
                result = AppendResult(
                    refused, message="Transactions are not supported by this broker yet")
            else:
                result = manager.append(topic.name, pd.index, pd.records,
                                        produce_version=ctx.version, acks=request.acks)
            appended.append(((topic.name, pd.index), result))
    if request.acks == 0:
        return None
    if request.acks == -1:
        await manager.wait_for_commit(appended, request.timeout_ms)
    results = iter(appended)
    return {"responses": [
        {"name": topic.name, "partition_responses": [
            _partition_response(pd.index, r.error, r.base_offset, r.log_append_time,
                                r.log_start_offset, r.message, r.record_errors)
            for pd in topic.partition_data for _, r in (next(results),)]}
        for topic in request.topic_data], "throttle_time_ms": 0}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict | None:
    if request.acks == 0:
        return None
    return {"responses": [
        {"name": t.name,
         "partition_responses": [_partition_response(p.index, code) for p in t.partition_data]}
        for t in request.topic_data], "throttle_time_ms": 0}


HANDLER = Handler(ApiKey.PRODUCE, 3, 11, handle, error_response, advertised_min=0)
