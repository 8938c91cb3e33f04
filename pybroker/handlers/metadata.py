"""Metadata: brokers, the cluster id, and topics with their partitions, leaders and replicas.

Topics a client asks about that do not exist are created when both the request
(`allow_auto_topic_creation`, implied before v4) and `auto.create.topics.enable` allow it.
Creation is synchronous here, so a new topic is returned ready, not LEADER_NOT_AVAILABLE.
Asked for authorized operations (v8+), it answers every topic (and cluster) operation: there
is no authorizer, and Kafka without one allows them all.
"""
from __future__ import annotations

from construct import Container

from protocol.acl_operations import CLUSTER_OPERATIONS, TOPIC_OPERATIONS, authorized_operations
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.cluster.metadata import TopicInfo
from pybroker.cluster.topic_names import invalid_topic_reason
from pybroker.handlers.base import Handler, RequestContext


def topic_entry(info: TopicInfo) -> dict:
    return {
        "error_code": 0, "name": info.name, "topic_id": info.topic_id,
        "is_internal": info.internal,
        "partitions": [{"error_code": 0, "partition_index": p.partition, "leader_id": p.leader,
                        "leader_epoch": p.leader_epoch, "replica_nodes": p.replicas,
                        "isr_nodes": p.isr, "offline_replicas": []}
                       for p in info.partitions],
    }


def _error_entry(name: str | None, code: ErrorCode, topic_id=None) -> dict:
    entry = {"error_code": int(code), "name": name, "partitions": [], "is_internal": False}
    if topic_id is not None:
        entry["topic_id"] = topic_id
    return entry


async def handle(ctx: RequestContext, request: Container) -> dict:
    image = ctx.image
    requested = request.topics
    if ctx.version == 0 and requested == []:
        requested = None  # v0: an empty list means all topics
    topics: list[dict] = []
    if requested is None:
        topics = [topic_entry(t) for t in image.topics.values()]
    else:
        allow_create = request.allow_auto_topic_creation if ctx.version >= 4 else True
        for wanted in requested:
            name = wanted.name
            if name is None:
                info = image.topic_by_id(wanted.topic_id)
                # Names are nullable in responses only from v12; before that, "" stands in.
                topics.append(topic_entry(info) if info else _error_entry(
                    None if ctx.version >= 12 else "", ErrorCode.UNKNOWN_TOPIC_ID,
                    wanted.topic_id))
                continue
            info = image.topics.get(name)
            if info is not None:
                topics.append(topic_entry(info))
            elif invalid_topic_reason(name):
                topics.append(_error_entry(name, ErrorCode.INVALID_TOPIC_EXCEPTION))
            elif allow_create and ctx.config.auto_create_topics_enable:
                code = await ctx.topics.auto_create_topic(name)
                info = image.topics.get(name)
                topics.append(topic_entry(info) if info and code == ErrorCode.NONE
                              else _error_entry(name, code))
            else:
                topics.append(_error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    if ctx.version >= 8 and request.include_topic_authorized_operations:
        operations = authorized_operations(True, TOPIC_OPERATIONS)
        for entry in topics:
            if entry["name"]:  # a topic id nobody knows names no resource to authorize
                entry["topic_authorized_operations"] = operations
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in image.brokers.values()],
        "cluster_id": image.cluster_id,
        "controller_id": image.controller_id,
        "topics": topics,
        "cluster_authorized_operations": authorized_operations(
            8 <= ctx.version <= 10 and request.include_cluster_authorized_operations,
            CLUSTER_OPERATIONS),
    }


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": -1,
            "topics": [_error_entry(t.name if t.name is not None or ctx.version >= 12 else "",
                                    code, t.topic_id) for t in request.topics or []]}


HANDLER = Handler(ApiKey.METADATA, 0, 12, handle, error_response)
