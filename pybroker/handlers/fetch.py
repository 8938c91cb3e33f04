"""Fetch: read each partition from its offset; long-poll until `min_bytes` or `max_wait_ms`.

A fetch with too little data waits in the purgatory for an append to one of its partitions,
then reads again. The first batch found is returned whole even when larger than the limits,
so a consumer can always make progress (Kafka's rule). The response as a whole is capped at
the smaller of the request's max_bytes and the broker's fetch.max.bytes. Incremental fetch
sessions (KIP-227) are `pybroker/replica/fetch_session.py`: it says which partitions a request reads
(a session's, for an incremental one) and which of the answers go back; a sessionless
request (id 0, epoch -1: every client but the session-keeping ones) never touches it.

A consumer's Fetch v11+ may be answered by a follower, and the leader may point it at one
(`preferred_read_replica`, KIP-392): the rules are the replica manager's and the selector's
(`replica/replica_selector.py`); here they are only passed through.

Records need no transforming on the way out (every version served carries magic-2 batches as
stored), so they go from the segment file to the socket with sendfile where the log can say
which byte range they are without reading them: the log hands back a FileRegion when the first
batch is at least SENDFILE_MIN_BATCH bytes, or when the answer is the whole rest of the segment
(a consumer at the tail), at least that long, all below the high watermark. The plaintext
connection sends a region with os.sendfile; the TLS one reads it from the file in pieces to
encrypt it (the copying path). Other reads come into memory with one pread, and the answer
holds a view of their whole batches, not a copy. The response is encoded by hand around the
record sets (protocol/fetch_response.py): header bytes, then each set as it is.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

import trio
from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.fetch_response import encode_fetch_parts
from pybroker.replica.fetch_session import FINAL_EPOCH, INVALID_SESSION_ID, FetchContext
from pybroker.handlers._authz import CLUSTER, TOPIC, Op, allowed, denied_names
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._duplicate_partitions import merge_duplicates
from pybroker.replica.purgatory import Watch
from pybroker.replica.replica_selector import ClientMetadata

SENDFILE_MIN_BATCH = 64 * 1024


@lru_cache(maxsize=256)
def _client_metadata(rack_id: str, listener: str | None) -> ClientMetadata:
    """A consumer's ClientMetadata, one per (rack, listener) in use: it is immutable, and a
    frozen dataclass costs a microsecond to build, on every Fetch of every consumer."""
    return ClientMetadata(rack_id, listener)


def _read_all(ctx: RequestContext, request: Container, topics: Sequence[Any], max_bytes: int,
              denied: set[str], client: ClientMetadata | None
              ) -> tuple[list[dict], int, bool]:
    # The request's own fields are read by key: a Container's attribute access is a call of
    # its Python __getattr__ each time. Its topics and partitions may be a fetch session's
    # (fetch_session.FetchTopic, CachedPartition), so those are read by attribute; a request
    # decoded by hand gives entries with C properties for them (protocol.fetch_request).
    manager = ctx.services.replicas
    read = manager.read
    replica_id = request["replica_id"]
    isolation_level = request["isolation_level"]
    # A follower's fetch under a leader.replication.throttled.rate: while the rate is over,
    # the throttled partitions of a replica out of the ISR answer no records (Kafka's
    # shouldLeaderThrottle); the follower's position is still taken from the request.
    quota = manager.leader_quota if replica_id >= 0 else None
    held_back = quota is not None and quota.is_exceeded(trio.current_time() * 1000)
    remaining = max_bytes
    total = 0
    errors = False
    responses = []
    for topic in topics:
        name = topic.topic
        if denied and name in denied:
            errors = True
            responses.append(_failed(topic, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        partitions = []
        for p in topic.partitions:
            limit = p.partition_max_bytes
            if limit > remaining:
                limit = remaining
            if limit < 0:
                limit = 0
            first = total == 0
            if held_back and quota is not None and quota.is_throttled(name, p.partition) \
                    and not manager.is_in_sync(name, p.partition, replica_id):
                limit, first = 0, False
            result = read(name, p.partition, p.fetch_offset, limit,
                          replica_id=replica_id, isolation_level=isolation_level,
                          min_one_message=first, region_min_batch=SENDFILE_MIN_BATCH,
                          current_leader_epoch=p.current_leader_epoch,
                          last_fetched_epoch=p.get("last_fetched_epoch", -1),
                          replica_log_start_offset=p.get("log_start_offset", -1),
                          client_metadata=client)
            size = len(result.records)
            total += size
            remaining -= size
            failed = result.error != ErrorCode.NONE
            errors = errors or failed
            if failed and replica_id < 0:
                # As Kafka: an error answers a consumer without offsets (-1); a partition
                # that does not exist, refused before any read, with no aborted
                # transactions ([]), a failed read with null. A follower out of range
                # keeps the offsets: it resets to the leader's log start from this answer.
                unknown = result.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                entry = {"partition_index": p.partition, "error_code": int(result.error),
                         "high_watermark": -1, "last_stable_offset": -1,
                         "log_start_offset": -1, "aborted_transactions": [] if unknown else None,
                         "preferred_read_replica": -1, "records": result.records}
                partitions.append(entry)
                continue
            entry = {
                "partition_index": p.partition, "error_code": int(result.error),
                "high_watermark": result.high_watermark,
                "last_stable_offset": result.last_stable_offset,
                "log_start_offset": result.log_start_offset,
                "aborted_transactions": None if result.aborted_transactions is None else [
                    {"producer_id": pid, "first_offset": first}
                    for pid, first in result.aborted_transactions],
                "preferred_read_replica": result.preferred_read_replica,
                "records": result.records,
            }
            # Answer now, as Kafka: the consumer is to fetch elsewhere.
            errors = errors or result.preferred_read_replica >= 0
            if result.diverging_epoch is not None:
                errors = True  # answer now: the follower must truncate before it waits
                entry["diverging_epoch"] = {"epoch": result.diverging_epoch[0],
                                            "end_offset": result.diverging_epoch[1]}
            partitions.append(entry)
        responses.append({"topic": name, "partitions": partitions})
    return responses, total, errors


async def handle(ctx: RequestContext, request: Container) -> dict:
    # The request's fields are read by key (see _read_all), and what only a wait needs (the
    # partitions to watch) is worked out only when the first read falls short.
    deadline = trio.current_time() + max(0, request["max_wait_ms"]) / 1000
    replica_id = request["replica_id"]
    services = ctx.services
    topics: Sequence[Any] = request["topics"]
    merged = merge_duplicates(topics, "topic", "partitions", "partition")
    if merged is not topics:
        request["topics"] = topics = merged
    context = _session_context(ctx, request)
    if context is not None:
        if context.error:
            return {"error_code": int(context.error),
                    "session_id": INVALID_SESSION_ID, "responses": []}
        topics = context.topics
    # As Kafka: the broker's fetch.max.bytes caps what any client asks for (a larger first
    # batch still comes whole), and min_bytes cannot exceed the cap or it would never be met.
    max_bytes = request["max_bytes"]
    max_bytes = min(max_bytes if max_bytes > 0 else 0x7FFFFFFF, ctx.config.fetch_max_bytes)
    quotas = services.quotas if replica_id < 0 else None
    if quotas is not None and quotas.fetch.enabled():
        # As Kafka: one response never carries more than the quota allows in a window.
        most = quotas.fetch.max_value_in_window(ctx.client_id, ctx.session.user)
        if most is not None:
            max_bytes = max(1, min(max_bytes, int(most)))
    min_bytes = min(request["min_bytes"], max_bytes)
    # What a response may hold in memory comes from the memory pool (connection.py accounts
    # it while it is sent): under a flood of large requests fetches get smaller, never
    # refused (the first batch still comes whole).
    pool = services.memory
    # KIP-392: a consumer's Fetch v11+ may be sent to, and served by, a follower.
    client = _client_metadata(request["rack_id"] or "", ctx.listener) \
        if replica_id < 0 and ctx.version >= 11 else None
    denied: set[str] = set()
    if services.authorizer is not None:
        names = [t.topic for t in topics]
        if replica_id >= 0:  # a follower: the cluster's, not a topic's, permission
            denied = set() if allowed(ctx, Op.CLUSTER_ACTION, CLUSTER) else set(names)
        else:
            denied = denied_names(ctx, Op.READ, TOPIC, names)
    wanted: list[tuple[str, int]] | None = None
    while True:
        responses, total, errors = _read_all(ctx, request, topics,
                                             min(max_bytes, pool.available), denied, client)
        if total >= min_bytes or errors:
            break
        if wanted is None:
            wanted = [(t.topic, p.partition) for t in topics for p in t.partitions]
        if not wanted:
            break
        left = deadline - trio.current_time()
        # Consumers may see only committed data; followers wait for the log end (they are
        # what moves the high watermark).
        watch = Watch.LOG_END if replica_id >= 0 else Watch.HIGH_WATERMARK
        if left <= 0 or not await services.purgatory.wait_any(wanted, left, watch):
            responses, total, errors = _read_all(ctx, request, topics,
                                                 min(max_bytes, pool.available), denied, client)
            break
    if quotas is not None:
        # The response is encoded (its size counted) only while some client has a
        # consumer_byte_rate, and the clock read only then: none, nothing to count.
        fetch_quota = quotas.fetch.enabled()  # as it is now, after any wait
        size, now_ms, throttle_ms = 0, 0.0, 0
        if fetch_quota:
            now_ms = trio.current_time() * 1000
            size = _response_size(ctx.version, responses)
            throttle_ms = quotas.fetch.record(ctx.client_id, size, now_ms, ctx.session.user)
        if services.request_quota is not None:  # over either quota: the longer wait
            throttle_ms = max(throttle_ms, services.request_quota.record(ctx))
        if throttle_ms:
            # Kafka's throttled fetch: an empty answer (the bytes are not counted, since
            # they are not sent) and the connection muted for the throttle time.
            if fetch_quota:
                quotas.fetch.unrecord(ctx.client_id, size, now_ms, ctx.session.user)
            ctx.throttle_ms = throttle_ms
            code, session_id = (ErrorCode.NONE, INVALID_SESSION_ID) if context is None \
                else context.throttled()
            return {"error_code": int(code), "session_id": session_id, "responses": []}
    code, session_id = ErrorCode.NONE, INVALID_SESSION_ID
    if context is not None:
        code, session_id, responses = context.finish(responses,
                                                     services.fetch_sessions.now_ms())
    quota = services.replicas.leader_quota if replica_id >= 0 else None
    if quota is not None and total:
        # Every throttled partition's bytes count, in sync or not (Kafka's
        # sizeOfThrottledPartitions), once per response actually sent.
        quota.record(sum(len(p["records"]) for response in responses
                         for p in response["partitions"]
                         if p["records"] and quota.is_throttled(response["topic"],
                                                                p["partition_index"])),
                     trio.current_time() * 1000)
    if replica_id < 0 and total:  # consumers' bytes (Kafka's BytesOutPerSec)
        stats = services.stats
        for response in responses:
            size = 0
            for p in response["partitions"]:
                size += len(p["records"])
            if size:
                stats.fetched(response["topic"], size)
    return {"error_code": int(code), "session_id": session_id,
            "responses": responses}


def _session_context(ctx: RequestContext, request: Container) -> FetchContext | None:
    """The request's fetch session context; None for a sessionless fetch that names no
    session (v4-6 always), which is answered without the cache."""
    if request["session_id"] == INVALID_SESSION_ID and request["session_epoch"] == FINAL_EPOCH:
        return None
    sessions = ctx.services.fetch_sessions
    return sessions.new_context(request.session_id, request.session_epoch, request.topics,
                                request.forgotten_topics_data,
                                privileged=request.replica_id >= 0,
                                uses_topic_ids=ctx.version >= 13,
                                now_ms=sessions.now_ms())



def _response_size(version: int, responses: list[dict]) -> int:
    """What consumer_byte_rate counts: the whole response's size, as Kafka's
    FetchContext.getResponseSize (the body and the correlation id; its topic and partition
    fields too, not only the records). Encoded only under a quota: the record sets are
    referenced, never copied, so this costs the headers' encoding."""
    body = {"error_code": 0, "session_id": 0, "responses": responses}
    parts = encode_fetch_parts(body, version)
    return 4 + sum(len(part) for part in parts)


def _failed(topic: Container, code: ErrorCode) -> dict:
    return {"topic": topic.topic, "partitions": [
        {"partition_index": p.partition, "error_code": int(code), "high_watermark": -1,
         "aborted_transactions": [], "records": b""} for p in topic.partitions]}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"error_code": int(code), "session_id": 0,
            "responses": [_failed(t, code) for t in request.topics]}


HANDLER = Handler(ApiKey.FETCH, 4, 12, handle, error_response)
