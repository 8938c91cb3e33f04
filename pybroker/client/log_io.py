"""Produce and Fetch one request at a time, with record batches as raw bytes.

These are the two data-path calls below the Producer and the Consumer, kept separate so that
replication can use them as they are: a follower fetches with its broker id as `replica_id`
(reading up to the leader's log end, epochs checked) and appends the bytes it gets without
decoding them; a tool or a test produces one prepared batch (`protocol.records.build_batch`)
with the acks it wants. Partition-level errors come back in the results; a failure of the
whole request raises.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.fetch import READ_COMMITTED, READ_UNCOMMITTED
from pybroker.client.client import KafkaClient
from pybroker.client.cluster import TopicPartition

__all__ = ["FetchPosition", "FetchedPartition", "ProduceResult", "fetch", "produce_batch",
           "READ_UNCOMMITTED", "READ_COMMITTED"]



@dataclass(frozen=True)
class FetchPosition:
    """Where to read a partition from; epochs -1 when the caller does not track them."""

    offset: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1


@dataclass(frozen=True)
class FetchedPartition:
    error: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes
    aborted_transactions: tuple[tuple[int, int], ...] = ()  # (producer id, first offset)
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset), for followers


@dataclass(frozen=True)
class ProduceResult:
    base_offset: int
    log_append_time: int
    log_start_offset: int


async def fetch(client: KafkaClient, node_id: int,
                positions: Mapping[TopicPartition, FetchPosition | int], *,
                replica_id: int = -1, max_wait_ms: int = 500, min_bytes: int = 1,
                max_bytes: int = 52428800, partition_max_bytes: int = 1048576,
                isolation_level: int = READ_UNCOMMITTED, timeout: float | None = None
                ) -> dict[TopicPartition, FetchedPartition]:
    """One Fetch to broker `node_id` for `positions` (offsets or FetchPositions)."""
    topics: dict[str, list[dict]] = {}
    for tp, pos in positions.items():
        p = pos if isinstance(pos, FetchPosition) else FetchPosition(pos)
        topics.setdefault(tp.topic, []).append({
            "partition": tp.partition, "current_leader_epoch": p.current_leader_epoch,
            "fetch_offset": p.offset, "last_fetched_epoch": p.last_fetched_epoch,
            "log_start_offset": p.log_start_offset, "partition_max_bytes": partition_max_bytes})
    body = {"replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
            "max_bytes": max_bytes, "isolation_level": isolation_level, "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [], "rack_id": ""}
    if timeout is None:
        timeout = client.request_timeout + max_wait_ms / 1000
    resp = await client.request(ApiKey.FETCH, body, node_id=node_id, timeout=timeout)
    if resp.error_code:
        raise KafkaError(resp.error_code, "Fetch failed")
    out: dict[TopicPartition, FetchedPartition] = {}
    for t in resp.responses:
        for p in t.partitions:
            diverging = p.diverging_epoch
            out[TopicPartition(t.topic, p.partition_index)] = FetchedPartition(
                ErrorCode.from_wire(p.error_code), p.high_watermark, p.last_stable_offset,
                p.log_start_offset, p.records or b"",
                tuple((a.producer_id, a.first_offset) for a in p.aborted_transactions or ()),
                (diverging.epoch, diverging.end_offset)
                if diverging is not None and diverging.epoch >= 0 else None)
    return out


async def produce_batch(client: KafkaClient, tp: TopicPartition, records: bytes, *,
                        acks: int = -1, timeout_ms: int = 30000,
                        transactional_id: str | None = None) -> ProduceResult | None:
    """Append prepared record batches to the partition's leader; None for acks=0.

    Raises KafkaError with the partition's error code (NOT_LEADER_OR_FOLLOWER after a leader
    change: the caller refreshes metadata and tries again).
    """
    leader = await client.leader(tp.topic, tp.partition)
    conn = await client.connection(leader)
    body = {"transactional_id": transactional_id, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": tp.topic, "partition_data": [
                {"index": tp.partition, "records": records}]}]}
    resp = await conn.request(ApiKey.PRODUCE, body, min_version=3, expect_response=acks != 0,
                              timeout=timeout_ms / 1000 + 5)
    if resp is None:
        return None
    for t in resp.responses:
        for p in t.partition_responses:
            if p.error_code:
                raise KafkaError(p.error_code, p.error_message or None)
            return ProduceResult(p.base_offset, p.log_append_time_ms, p.log_start_offset)
    raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no answer for {tp}")
