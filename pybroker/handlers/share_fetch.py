"""ShareFetch (KIP-932): acknowledge what the member sends back, then acquire records for it
from the partitions of its share session; long-poll until something is acquired or
`max_wait_ms` passes.

Records go out as whole log batches, as the log holds them; `acquired_records` says which of
their offsets this member now holds (the client drops the others). A control batch is never
handed out: its offsets are archived. A request with epoch -1 only acknowledges and closes
the session, releasing what the member still holds.
"""
from __future__ import annotations

from typing import Any
from uuid import UUID

import trio
from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.records.batch import CONTROL, iter_batches
from pybroker.cluster.features import SHARE_VERSION
from pybroker.coordinator.share_coordinator import ShareCoordinator
from pybroker.handlers._authz import GROUP, Op, require
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._share import (
    NO_LEADER, PartitionRefusal, ack_batches, apply_acks, persisted, share_coordinator,
)
from pybroker.replica.purgatory import Watch

DEFAULT_MAX_RECORDS = 500  # the Java client's max.poll.records


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.READ, GROUP, request.group_id or "")
    shares = share_coordinator(ctx)
    if not request.group_id or not request.member_id:
        return _error(ErrorCode.INVALID_REQUEST)
    group_id, member_id = request.group_id, request.member_id
    listed = [(t.topic_id, p) for t in request.topics for p in t.partitions]
    forgotten = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    session = shares.sessions.fetch_context(
        group_id, member_id, request.share_session_epoch,
        [(tid, p.partition_index) for tid, p in listed], forgotten,
        has_acks=any(ack_batches(p) for _, p in listed),
        fetches_data=any(not ack_batches(p) for _, p in listed))
    if session.error or session.session is None:
        return _error(session.error)
    session.session.connection = ctx.session  # closing the connection closes the session
    wanted = sorted(session.session.partitions)
    if request.share_session_epoch == 0:  # a new session: the state may have been reset
        await shares.revalidate(group_id, wanted)
    refusal = PartitionRefusal(ctx, [tid for tid, _ in listed] + [tid for tid, _ in wanted])
    acks = await apply_acks(ctx, group_id, member_id, request.topics, refusal)
    acks = await persisted(shares, acks)
    fetched: dict[tuple[UUID, int], dict] = {}
    if session.closing:
        shares.sessions.close(group_id, member_id)
        shares.release_member(group_id, member_id)
        await shares.flush()
    else:
        fetched = await _fetch(ctx, shares, request, group_id, member_id, wanted, refusal)
    return _response(shares, group_id, acks, fetched, refusal)


async def _fetch(ctx: RequestContext, shares: ShareCoordinator, request: Container,
                 group_id: str, member_id: str, wanted: list[tuple[UUID, int]],
                 refusal: PartitionRefusal) -> dict[tuple[UUID, int], dict]:
    deadline = trio.current_time() + max(0, request.max_wait_ms) / 1000
    max_records = request.max_records if request.max_records > 0 else DEFAULT_MAX_RECORDS
    max_bytes = min(request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF,
                    ctx.config.fetch_max_bytes)
    while True:
        fetched, acquired = await _acquire_all(ctx, shares, group_id, member_id, wanted, refusal,
                                         max_records, max_bytes)
        errors = any(e["error_code"] for e in fetched.values())
        left = deadline - trio.current_time()
        if acquired or errors or left <= 0 or not wanted:
            return fetched
        names = [(name, p) for tid, p in wanted
                 if (name := refusal.names.get(tid)) is not None]
        if not await ctx.services.purgatory.wait_any(names, left, Watch.HIGH_WATERMARK):
            fetched, _ = await _acquire_all(ctx, shares, group_id, member_id, wanted, refusal,
                                      max_records, max_bytes)
            return fetched


async def _acquire_all(ctx: RequestContext, shares: ShareCoordinator, group_id: str, member_id: str,
                 wanted: list[tuple[UUID, int]], refusal: PartitionRefusal, max_records: int,
                 max_bytes: int) -> tuple[dict[tuple[UUID, int], dict], int]:
    out: dict[tuple[UUID, int], dict] = {}
    acquired_total = 0
    size_total = 0
    now = shares.now()
    for topic_id, partition in wanted:
        code, name = refusal.topic(topic_id)
        if code or name is None:
            out[(topic_id, partition)] = _partition(partition, code)
            continue
        found, sp = await shares.share_partition(group_id, topic_id, name, partition)
        if sp is None:
            out[(topic_id, partition)] = _partition(
                partition, found, refusal.leader(name, partition)
                if found == ErrorCode.NOT_LEADER_OR_FOLLOWER else None)
            continue
        if acquired_total >= max_records or size_total >= max_bytes or not sp.can_acquire():
            continue
        result = ctx.replicas.read(name, partition, sp.next_fetch_offset(),
                                   max_bytes - size_total, min_one_message=size_total == 0)
        if result.error:
            out[(topic_id, partition)] = _partition(partition, result.error)
            continue
        records = result.records
        assert isinstance(records, bytes)  # asked without region_min_batch
        acquired: list[dict] = []
        end = 0
        for pos, header in iter_batches(records):
            if acquired_total >= max_records:
                break
            last = header.base_offset + header.last_offset_delta
            if header.attributes & CONTROL:
                sp.archive_control(header.base_offset, last)
            else:
                for run in sp.acquire(member_id, [(header.base_offset, last)],
                                      max_records - acquired_total, now):
                    acquired_total += run.last_offset - run.first_offset + 1
                    prev = acquired[-1] if acquired else None
                    if (prev is not None and prev["last_offset"] + 1 == run.first_offset
                            and prev["delivery_count"] == run.delivery_count):
                        prev["last_offset"] = run.last_offset  # one run across batches
                        continue
                    acquired.append({"first_offset": run.first_offset,
                                     "last_offset": run.last_offset,
                                     "delivery_count": run.delivery_count})
            end = pos + header.batch_length + 12
        if acquired:
            size_total += end
            out[(topic_id, partition)] = _partition(partition, ErrorCode.NONE, None,
                                                    records[:end], acquired)
    if acquired_total:
        shares.acquired(now, group_id)
    return out, acquired_total


def _partition(partition: int, code: ErrorCode, leader: dict | None = None,
               records: bytes = b"", acquired: list[dict] | None = None) -> dict:
    """A partition's answer. Without records it carries empty ones, never null: Kafka's
    MemoryRecords.EMPTY, and librdkafka 2.16 drops a whole response whose Records is null
    ("invalid MessageSetSize -1")."""
    return {"partition_index": partition, "error_code": int(code),
            "acknowledge_error_code": 0, "current_leader": leader or dict(NO_LEADER),
            "records": records, "acquired_records": acquired or []}


def _response(shares: ShareCoordinator, group_id: str,
              acks: dict[tuple[UUID, int], tuple[ErrorCode, dict]],
              fetched: dict[tuple[UUID, int], dict], refusal: PartitionRefusal) -> dict:
    for key, (code, leader) in acks.items():
        entry = fetched.setdefault(key, _partition(key[1], ErrorCode.NONE, leader))
        entry["acknowledge_error_code"] = int(code)
    by_topic: dict[UUID, list[Any]] = {}
    for (topic_id, _), entry in sorted(fetched.items()):
        by_topic.setdefault(topic_id, []).append(entry)
    return {"error_code": 0,
            "acquisition_lock_timeout_ms":
                shares.partition_config_for(group_id).record_lock_duration_ms,
            "responses": [{"topic_id": tid, "partitions": ps} for tid, ps in by_topic.items()],
            "node_endpoints": refusal.node_endpoints()}


def _error(code: ErrorCode) -> dict:
    """A refusal of the whole request: no lock duration, as Kafka 4.1.1's
    ShareFetchRequest.getErrorResponse (AcquisitionLockTimeoutMs 0)."""
    return {"error_code": int(code), "acquisition_lock_timeout_ms": 0, "responses": [],
            "node_endpoints": []}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return _error(code)


HANDLER = Handler(ApiKey.SHARE_FETCH, 1, 1, handle, error_response,
                  feature=(SHARE_VERSION, 1))
