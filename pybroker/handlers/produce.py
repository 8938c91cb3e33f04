"""Produce: append each partition's batch; acks=0 gets no response.

Advertised from v0 (librdkafka before 2.11.1 enables gzip, snappy and lz4 only when Produce v0
is in range) but served from v3, as Kafka 4 does: v0-2 get UNSUPPORTED_VERSION per partition.
acks=-1 appends, then waits until the high watermark passes every batch, for at most the
request's timeout_ms (REQUEST_TIMED_OUT after it); on one broker the append itself commits, so
the wait ends at once without yielding. Transactional batches need the request's transactional
id, and a partition of the producer's ongoing transaction (see `_verify`).
"""
from __future__ import annotations

from collections.abc import Sequence

import trio
from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.records.batch import ATTRIBUTES, HEADER_SIZE, TRANSACTIONAL, BatchHeader
from protocol.topic_partition import TopicPartition
from pybroker.coordinator.verification_errors import produce_error
from pybroker.handlers._authz import TOPIC, TXN, Op, allowed, denied_names
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._duplicate_partitions import merge_duplicates
from pybroker.replica.manager import AppendResult


def _partition_response(index: int, code: ErrorCode, base_offset: int = -1,
                        append_time: int = -1, log_start: int = -1,
                        message: str | None = None,
                        record_errors: Sequence[tuple[int, str]] = (),
                        custom_message: bool = False) -> dict:
    # As Kafka: error_message only where the error has a custom message — beside the records
    # it names (a RecordValidationException), or a transaction verification's refusal; every
    # other error travels as its code alone, the message null.
    return {"index": index, "error_code": int(code), "base_offset": base_offset,
            "log_append_time_ms": append_time, "log_start_offset": log_start,
            "record_errors": [{"batch_index": i, "batch_index_error_message": why}
                              for i, why in record_errors],
            "error_message": message if record_errors or custom_message else None}


async def handle(ctx: RequestContext, request: Container) -> dict | None:
    # The request's fields are read by key: a Container's attribute read first fails as an
    # attribute (an AttributeError formatted and dropped) and then calls its Python
    # __getattr__, ~1 us each, ~25 of them a request; a key read is a dict lookup.
    acks = request["acks"]
    if acks not in (-1, 0, 1):  # as Kafka: nothing is written
        return error_response(ctx, request, ErrorCode.INVALID_REQUIRED_ACKS)
    topics = merge_duplicates(request["topic_data"], "name", "partition_data", "index")
    request["topic_data"] = topics
    manager = ctx.replicas
    txn_id = request["transactional_id"]
    if txn_id is None and _has_transactional_batch(topics):
        # As Kafka: transactional records need a transactional id (the whole request fails).
        return error_response(ctx, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    services = ctx.services
    denied: set[str] = set()
    if services.authorizer is not None:  # the hot path's one check without ACLs
        if txn_id is not None and not allowed(ctx, Op.WRITE, TXN, txn_id):
            return error_response(ctx, request,
                                  ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        denied = denied_names(ctx, Op.WRITE, TOPIC, (t["name"] for t in topics))
    refused: dict[TopicPartition, ErrorCode] = {}
    if txn_id is not None and services.txn_verifier is not None:
        refused = await _verify(ctx, txn_id, request)
    appended: list[tuple[TopicPartition, AppendResult]] = []
    stats = services.stats
    version = ctx.version
    for topic in topics:
        name = topic["name"]
        for pd in topic["partition_data"]:
            index = pd["index"]
            if denied and name in denied:
                result = AppendResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                appended.append(((name, index), result))
                continue
            code = refused.get((name, index)) if refused else None
            if code:
                code, message = produce_error(code)
                result = AppendResult(code, message=message)
            else:
                records = pd["records"]
                result = manager.append(name, index, records, produce_version=version,
                                        acks=acks)
                if result.error == ErrorCode.NONE and records:
                    stats.produced(name, len(records), result.end_offset - result.base_offset)
            appended.append(((name, index), result))
    _record_quota(ctx)
    if acks == 0:
        return None
    if acks == -1:
        await manager.wait_for_commit(appended, request["timeout_ms"])
    results = iter(appended)
    return {"responses": [
        {"name": topic["name"], "partition_responses": [
            _partition_response(pd["index"], r.error, r.base_offset, r.log_append_time,
                                r.log_start_offset, r.message, r.record_errors,
                                custom_message=bool(refused) and tp in refused)
            for pd in topic["partition_data"] for tp, r in (next(results),)]}
        for topic in topics]}


def _record_quota(ctx: RequestContext) -> None:
    """Count the whole request's size (header, topics, records: Kafka's request size, not
    its record bytes) against the client's producer_byte_rate once it is written (Kafka
    records after the append): over the quota, the response says for how long the client is
    held back (dispatch writes `ctx.throttle_ms` into it) and the connection is muted for as
    long (acks=0 too)."""
    quotas = ctx.services.quotas
    if quotas is None or not quotas.produce.enabled():  # no producer_byte_rate anywhere
        return
    ctx.throttle_ms = quotas.produce.record(ctx.client_id, ctx.request_size,
                                            trio.current_time() * 1000,
                                            ctx.session.user)


def _has_transactional_batch(topics: Sequence[Container]) -> bool:
    """Whether a partition's (first) batch is transactional: one byte read per partition,
    the low byte of the big-endian attributes (the hot path stays header-free)."""
    flag = ATTRIBUTES + 1
    for topic in topics:
        for pd in topic["partition_data"]:
            records = pd["records"]
            if records is not None and len(records) > flag and records[flag] & TRANSACTIONAL:
                return True
    return False


async def _verify(ctx: RequestContext, transactional_id: str, request: Container
                  ) -> dict[TopicPartition, ErrorCode]:
    """A transactional batch may only go to a partition of its producer's ongoing
    transaction (Kafka's KIP-890 verification, `coordinator/txn_verifier.py`): the partitions
    refused, and why. A partition not in the transaction is the abortable
    TRANSACTION_ABORTABLE to v11+ and INVALID_TXN_STATE to older clients, which predate it
    (Kafka's AddPartitionsToTxnManager). One header read per partition; the batch's own
    checks (CRC, a fenced epoch) are the log's."""
    verifier = ctx.services.txn_verifier
    assert verifier is not None
    refused: dict[TopicPartition, ErrorCode] = {}
    producer: tuple[int, int] | None = None
    partitions: list[TopicPartition] = []
    for topic in request.topic_data:
        name = topic.name
        for pd in topic.partition_data:
            records = pd.records
            if not records or len(records) < HEADER_SIZE:
                continue
            header = BatchHeader.unpack_from(records, 0)
            if not header.is_transactional:
                continue
            key = (header.producer_id, header.producer_epoch)
            if producer is not None and key != producer:  # batches of several producers
                refused.update(await verifier.verify(transactional_id, *producer, partitions))
                partitions = []
            producer = key
            partitions.append((name, pd.index))
    if producer is not None:
        refused.update(await verifier.verify(transactional_id, *producer, partitions))
    if refused and ctx.version < 11:
        for tp, code in refused.items():
            if code == ErrorCode.TRANSACTION_ABORTABLE:
                refused[tp] = ErrorCode.INVALID_TXN_STATE
    return refused


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict | None:
    if request.acks == 0:
        return None
    return {"responses": [
        {"name": t.name,
         "partition_responses": [_partition_response(p.index, code) for p in t.partition_data]}
        for t in request.topic_data]}


HANDLER = Handler(ApiKey.PRODUCE, 3, 11, handle, error_response, advertised_min=0)
