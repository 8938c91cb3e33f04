"""OffsetFetch: committed offsets of a group (v1-7) or of several groups (v8+).

Null topics (v2+) ask for every committed partition. A partition without a commit gets offset
-1 and empty metadata; metadata comes back exactly as committed. With `require_stable` (v7+)
a partition whose offset is pending in an open transaction gets UNSTABLE_OFFSET_COMMIT, and the
consumer retries it; the group-level error stays NONE (Kafka 3.9, every version).
From v9 a KIP-848 member names itself and its epoch: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH
(a null member id with epoch -1 is the admin client).
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from pybroker.handlers._authz import GROUP, TOPIC, Op, allowed, denied_names
from pybroker.handlers._base import Handler, RequestContext


def _wanted(topics: list | None) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [(t.name, p) for t in topics for p in t.partition_indexes]


def _fetch(ctx: RequestContext, group_id: str, topics: list | None,
           require_stable: bool) -> tuple[ErrorCode, list[dict]]:
    """As Kafka: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), and topics the
    principal may not DESCRIBE are answered TOPIC_AUTHORIZATION_FAILED when named, left out
    when all are asked for."""
    if not allowed(ctx, Op.DESCRIBE, GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    wanted = _wanted(topics)
    denied = denied_names(ctx, Op.DESCRIBE, TOPIC, {t.name for t in topics or ()})
    if denied and wanted is not None:
        wanted = [tp for tp in wanted if tp[0] not in denied]
    code, found = ctx.groups.fetch_offsets(group_id, wanted, require_stable)
    by_topic: dict[str, list[dict]] = {}
    if denied:
        for t in topics or ():
            if t.name in denied:
                by_topic[t.name] = [{"partition_index": p, "committed_offset": -1,
                                     "committed_leader_epoch": -1, "metadata": "",
                                     "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
                                    for p in t.partition_indexes]
    secured = ctx.services.authorizer is not None
    for topic, partition, value in found:
        if topics is None and secured and not allowed(ctx, Op.DESCRIBE, TOPIC, topic):
            continue
        error = value if isinstance(value, ErrorCode) else ErrorCode.NONE
        stored = None if isinstance(value, ErrorCode) else value
        by_topic.setdefault(topic, []).append({
            "partition_index": partition,
            "committed_offset": stored.offset if stored else -1,
            "committed_leader_epoch": stored.leader_epoch if stored else -1,
            "metadata": stored.metadata if stored else "",
            "error_code": int(error),
        })
    return code, [{"name": name, "partitions": parts} for name, parts in by_topic.items()]


async def handle(ctx: RequestContext, request: Container) -> dict:
    if ctx.version >= 8:
        groups = []
        for group in request.groups:
            code = ctx.groups.consumer.validate_fetch(group.group_id, group.member_id,
                                                      group.member_epoch) \
                if ctx.version >= 9 else ErrorCode.NONE
            if code:
                groups.append({"group_id": group.group_id, "topics": [],
                               "error_code": int(code)})
                continue
            code, topics = _fetch(ctx, group.group_id, group.topics, request.require_stable)
            groups.append({"group_id": group.group_id, "topics": topics,
                           "error_code": int(code)})
        return {"groups": groups}
    code, topics = _fetch(ctx, request.group_id, request.topics, request.require_stable)
    return {"topics": topics, "error_code": int(code)}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    if ctx.version >= 8:
        return {"groups": [
            {"group_id": g.group_id, "topics": [], "error_code": int(code)}
            for g in request.groups]}
    topics = [{"name": t.name, "partitions": [
        {"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": int(code)}
        for p in t.partition_indexes]} for t in request.topics or []]
    return {"topics": topics, "error_code": int(code)}


HANDLER = Handler(ApiKey.OFFSET_FETCH, 1, 9, handle, error_response)
