"""OffsetCommit: store consumed positions in __consumer_offsets before acknowledging them.

A member commits with its generation and member id, checked against the group; generation -1
without a member id is a "simple" commit, allowed only for a group without members. Partitions
of topics that do not exist get UNKNOWN_TOPIC_OR_PARTITION, as in Kafka. v2-4 may name a
retention time, stored as an explicit expiry (OffsetCommitValue v1); null metadata is stored as
"" (Kafka's NO_METADATA).
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from pybroker.coordinator.group_records import OffsetAndMetadata
from pybroker.handlers.base import Handler, RequestContext, partition_error_response

DEFAULT_RETENTION = -1


async def handle(ctx: RequestContext, request: Container) -> dict:
    groups = ctx.groups
    image = ctx.image
    now = groups.now()
    expire = None
    if 2 <= ctx.version <= 4 and request.retention_time_ms != DEFAULT_RETENTION:
        expire = now + request.retention_time_ms
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    unknown: set[TopicPartition] = set()
    for topic in request.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if image.partition(topic.name, p.partition_index) is None:
                unknown.add(tp)
                continue
            offsets[tp] = OffsetAndMetadata(
                p.committed_offset, p.committed_metadata or "", now,
                p.committed_leader_epoch, expire)
    results = await groups.commit_offsets(request.group_id, request.member_id,
                                    request.group_instance_id,
                                    request.generation_id_or_member_epoch, offsets)
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            code = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                    else results.get(tp, ErrorCode.NONE))
            partitions.append({"partition_index": p.partition_index, "error_code": int(code)})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


HANDLER = Handler(ApiKey.OFFSET_COMMIT, 2, 9, handle, partition_error_response())
