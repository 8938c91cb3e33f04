"""OffsetForLeaderEpoch: where a leader epoch ends, so a follower or consumer can find
where its log diverges from the leader's (answered from the leader-epoch checkpoint).

As Kafka since KIP-320: CLUSTER_ACTION on the cluster (a follower) allows every topic;
otherwise each topic needs DESCRIBE (a consumer), else TOPIC_AUTHORIZATION_FAILED."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._authz import CLUSTER, TOPIC, Op, allowed, denied_names
from pybroker.handlers._base import Handler, RequestContext


async def handle(ctx: RequestContext, request: Container) -> dict:
    topics = []
    denied = set() if allowed(ctx, Op.CLUSTER_ACTION, CLUSTER) else \
        denied_names(ctx, Op.DESCRIBE, TOPIC, {t.topic for t in request.topics})
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            code, plog = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None) if topic.topic in denied \
                else ctx.replicas.leader_log(topic.topic, p.partition, p.current_leader_epoch)
            entry = {"partition": p.partition, "error_code": int(code), "leader_epoch": -1,
                     "end_offset": -1}
            if plog is not None:
                epoch, end = plog.end_offset_for_epoch(p.leader_epoch)
                entry.update(leader_epoch=epoch, end_offset=end)
            partitions.append(entry)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"topics": topics}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"topics": [
        {"topic": t.topic, "partitions": [
            {"partition": p.partition, "error_code": int(code)} for p in t.partitions]}
        for t in request.topics]}

HANDLER = Handler(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4, handle, error_response)
