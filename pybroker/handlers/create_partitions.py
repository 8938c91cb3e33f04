"""CreatePartitions: grow a topic to `count` partitions (never shrink). Any broker of a cluster
serves it (it writes the new assignment; the controller elects), as CreateTopics, and it takes
`timeout_ms` as CreateTopics does (Kafka's ZkAdminManager.createPartitions: the same
DelayedCreatePartitions wait after the writes, REQUEST_TIMED_OUT at once at 0 or less)."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._authz import TOPIC, Op, allowed
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._mutation_quota import THROTTLED, admit, mutation_quota, throttle


def _check(ctx: RequestContext, name: str, count: int, assignments: list) -> tuple[ErrorCode, str | None]:
    if not allowed(ctx, Op.ALTER, TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
    info = ctx.image.topics.get(name)
    if info is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None  # Kafka's controller: no message
    current = len(info.partitions)
    if count < current:
        return (ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {current} partitions, which is higher than the "
                f"requested {count}.")
    if count == current:
        return ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions."
    if assignments and len(assignments) != count - current:
        return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Increasing the number of partitions by {count - current} but "
                f"{len(assignments)} assignments provided.")
    brokers = set(ctx.image.brokers)
    for a in assignments or []:
        if not set(a.broker_ids) <= brokers:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Unknown broker in the assignment."
    return ErrorCode.NONE, None


async def handle(ctx: RequestContext, request: Container) -> dict:
    results = []
    quota = mutation_quota(ctx, strict_since=3)
    written: dict[str, int] = {}
    async with ctx.topics.changes:
        for topic in request.topics:
            code, message = _check(ctx, topic.name, topic.count, topic.assignments)
            if code == ErrorCode.NONE and not request.validate_only and not admit(
                    quota, topic.count - len(ctx.image.topics[topic.name].partitions)):
                code, message = ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED
            if code == ErrorCode.NONE and not request.validate_only:
                await ctx.topics.add_partitions(
                    topic.name, topic.count,
                    [list(a.broker_ids) for a in topic.assignments] if topic.assignments
                    else None, wait=False)
                written[topic.name] = topic.count
            results.append({"name": topic.name, "error_code": int(code),
                            "error_message": message})
    if written:
        ready = await ctx.topics.await_leaders(written, request.timeout_ms / 1000)
        for result in results:
            if result["name"] in written and result["name"] not in ready:
                result.update(error_code=int(ErrorCode.REQUEST_TIMED_OUT), error_message=None)
    throttle(ctx, quota)
    return {"results": results}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"results": [
        {"name": t.name, "error_code": int(code)} for t in request.topics]}

HANDLER = Handler(ApiKey.CREATE_PARTITIONS, 0, 3, handle, error_response)
