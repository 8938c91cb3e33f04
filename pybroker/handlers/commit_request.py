"""What OffsetCommit and TxnOffsetCommit share: both list `topics` by `name` with
`partitions` by `partition_index`, refuse partitions that do not exist with
UNKNOWN_TOPIC_OR_PARTITION (as Kafka does, before the group is asked), and answer every
partition asked about in the request's order."""
from __future__ import annotations

from typing import Callable

from construct import Container

from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from pybroker.coordinator.group_records import OffsetAndMetadata
from pybroker.handlers.base import RequestContext


def offsets_asked(ctx: RequestContext, request: Container, now: int, expire: int | None = None
                  ) -> tuple[dict[TopicPartition, OffsetAndMetadata], set[TopicPartition]]:
    """The offsets to store, and the partitions that do not exist. Null metadata is stored
    as "" (Kafka's NO_METADATA)."""
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    unknown: set[TopicPartition] = set()
    for topic in request.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if ctx.image.partition(topic.name, p.partition_index) is None:
                unknown.add(tp)
                continue
            offsets[tp] = OffsetAndMetadata(p.committed_offset, p.committed_metadata or "",
                                            now, p.committed_leader_epoch, expire)
    return offsets, unknown


def commit_response(request: Container, unknown: set[TopicPartition],
                    results: dict[TopicPartition, ErrorCode],
                    for_version: Callable[[ErrorCode], ErrorCode] = lambda code: code) -> dict:
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            code = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                    else for_version(results.get(tp, ErrorCode.NONE)))
            partitions.append({"partition_index": p.partition_index, "error_code": int(code)})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
