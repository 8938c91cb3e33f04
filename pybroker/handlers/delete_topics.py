"""DeleteTopics, by name or (v6+) by topic id. The store's change is followed by the replica
manager, which removes the partitions' files in a worker thread. Any broker of a cluster
serves it (the deletion marker, which the controller acts on), as CreateTopics.

`timeout_ms` as Kafka's ZooKeeper-mode broker (ZkAdminManager.deleteTopics) takes it: every
topic is marked for deletion first (under `topic_changes`, released before the wait); then, if
it is above 0, the answer waits up to that long for this broker's image to be without the
topics (DelayedDeleteTopics), and a topic still there by then is answered REQUEST_TIMED_OUT
while its deletion goes on; at 0 or less every topic marked is answered REQUEST_TIMED_OUT at
once (librdkafka's admin client takes that for success when its operation_timeout is 0). A
single broker deletes a topic as it is asked. Kafka 4.1's KRaft brokers differ at 0 or less
(docs/DESIGN.md): the topic is not deleted."""
from __future__ import annotations

import uuid

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.quota.client_quota import MutationQuota
from pybroker.handlers._authz import TOPIC, Op, allowed
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._mutation_quota import THROTTLED, admit, mutation_quota, throttle

_ZERO = uuid.UUID(int=0)


async def handle(ctx: RequestContext, request: Container) -> dict:
    if not ctx.config.delete_topic_enable:
        # As Kafka: TOPIC_DELETION_DISABLED per topic from v3; older versions have no such
        # code, and the whole request fails with INVALID_REQUEST.
        return error_response(ctx, request, ErrorCode.TOPIC_DELETION_DISABLED
                              if ctx.version >= 3 else ErrorCode.INVALID_REQUEST)
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    quota = mutation_quota(ctx, strict_since=5)
    marked: set[str] = set()
    async with ctx.topics.changes:
        responses = await _delete(ctx, wanted, quota, marked)
    if marked:
        gone = await ctx.topics.await_deletions(marked, request.timeout_ms / 1000)
        for entry in responses:
            if entry["name"] in marked and entry["name"] not in gone:
                entry["error_code"] = int(ErrorCode.REQUEST_TIMED_OUT)  # no message: Kafka's
    throttle(ctx, quota)
    return {"responses": responses}


async def _delete(ctx: RequestContext, wanted: list[tuple[str | None, uuid.UUID | None]],
                  quota: MutationQuota, marked: set[str]) -> list[dict]:
    """Each topic's entry; the topics marked for deletion go into `marked`."""
    image = ctx.image
    responses = []
    for name, topic_id in wanted:
        if name is None and topic_id not in (None, _ZERO):
            info = image.topic_by_id(topic_id)
            if info is None:
                responses.append({"name": None, "topic_id": topic_id,
                                  "error_code": int(ErrorCode.UNKNOWN_TOPIC_ID),
                                  "error_message": "This server does not host this topic ID."})
                continue
            name = info.name
        info = image.topics.get(name or "")
        if info is None:
            responses.append({"name": name, "topic_id": topic_id or _ZERO,
                              "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                              "error_message": "This server does not host this "
                                               "topic-partition."})
            continue
        if not allowed(ctx, Op.DELETE, TOPIC, name or ""):
            responses.append({"name": name, "topic_id": info.topic_id,
                              "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                              "error_message": "Authorization failed."})
            continue
        if info.internal:
            responses.append({"name": name, "topic_id": info.topic_id,
                              "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                              "error_message": "Internal topics cannot be deleted."})
            continue
        topic_id = info.topic_id
        if not admit(quota, len(info.partitions)):
            responses.append({"name": name, "topic_id": topic_id,
                              "error_code": int(ErrorCode.THROTTLING_QUOTA_EXCEEDED),
                              "error_message": THROTTLED})
            continue
        code = await ctx.topics.delete_topic(info.name, wait=False)
        if code == ErrorCode.NONE:
            marked.add(info.name)
        responses.append({"name": name, "topic_id": topic_id, "error_code": int(code),
                          "error_message": None})
    return responses


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, _ZERO) for name in request.topic_names]
    return {"responses": [
        {"name": name, "topic_id": topic_id, "error_code": int(code)}
        for name, topic_id in wanted]}

HANDLER = Handler(ApiKey.DELETE_TOPICS, 1, 6, handle, error_response)
