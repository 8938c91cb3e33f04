"""What OffsetCommit and TxnOffsetCommit share: both list `topics` by `name` with
`partitions` by `partition_index`, refuse topics the principal may not READ with
TOPIC_AUTHORIZATION_FAILED and partitions that do not exist with UNKNOWN_TOPIC_OR_PARTITION
(as Kafka does, before the group is asked), and answer every partition asked about in the
request's order."""
from __future__ import annotations

from typing import Callable

from construct import Container

from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from pybroker.coordinator.group_records import OffsetAndMetadata
from pybroker.handlers._authz import TOPIC, Op, denied_names
from pybroker.handlers._base import RequestContext


def offsets_asked(ctx: RequestContext, request: Container, now: int, expire: int | None = None
                  ) -> tuple[dict[TopicPartition, OffsetAndMetadata],
                             dict[TopicPartition, ErrorCode]]:
    """The offsets to store, and the partitions refused before the group is asked. Null
    metadata is stored as "" (Kafka's NO_METADATA)."""
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    refused: dict[TopicPartition, ErrorCode] = {}
    denied = denied_names(ctx, Op.READ, TOPIC, {t.name for t in request.topics})
    for topic in request.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic.name in denied:
                refused[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if ctx.image.partition(topic.name, p.partition_index) is None:
                refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[tp] = OffsetAndMetadata(p.committed_offset, p.committed_metadata or "",
                                            now, p.committed_leader_epoch, expire)
    return offsets, refused


def commit_response(request: Container, refused: dict[TopicPartition, ErrorCode],
                    results: dict[TopicPartition, ErrorCode],
                    for_version: Callable[[ErrorCode], ErrorCode] = lambda code: code) -> dict:
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            code = refused.get(tp) or for_version(results.get(tp, ErrorCode.NONE))
            partitions.append({"partition_index": p.partition_index, "error_code": int(code)})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"topics": topics}
