"""DescribeShareGroupOffsets (KIP-932): the start offset (SPSO) of a share group's
share-partitions, as Kafka 4.1 answers it.

Null topics ask for every share-partition the group has state for. A named partition without
state, of a group or a topic that does not exist included, is answered with StartOffset -1
and no error (a topic unknown here with the zero topic id), as Kafka does; an id held by a
classic or consumer group is GROUP_ID_NOT_FOUND. Needs DESCRIBE on the group (else
GROUP_AUTHORIZATION_FAILED for it) and on each topic (else TOPIC_AUTHORIZATION_FAILED on its
partitions). The start offsets are read from each share-partition's share coordinator
(ReadShareGroupStateSummary), whichever broker that is, as Kafka's group coordinator reads
them; a partition whose coordinator cannot answer (down, not elected, timed out) is answered
as Kafka 4.1.1 answers it, StartOffset -1 and LeaderEpoch 0 with no error (its group
coordinator treats a failed summary as no offset, as OffsetFetch does), and the other
partitions as usual. The lag is not in version 0 (Kafka 4.1), so it is not here.
"""
from __future__ import annotations

from uuid import UUID

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.cluster.features import SHARE_VERSION
from pybroker.coordinator.share_coordinator import ShareCoordinator, SharePartitionKey
from pybroker.handlers._authz import GROUP, TOPIC, Op, allowed, denied_names
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._group_kind import group_kind
from pybroker.handlers._share import NO_TOPIC_ID, error_text, share_coordinator

NO_OFFSET = -1


async def handle(ctx: RequestContext, request: Container) -> dict:
    shares = share_coordinator(ctx)
    return {"groups": [await _describe(ctx, shares, g) for g in request.groups]}


async def _describe(ctx: RequestContext, shares: ShareCoordinator, group: Container) -> dict:
    group_id = group.group_id
    if not allowed(ctx, Op.DESCRIBE, GROUP, group_id):
        return _failed(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    code = await ctx.groups.coordinates(group_id)
    if not code and group_kind(ctx, group_id) in ("classic", "consumer"):
        code = ErrorCode.GROUP_ID_NOT_FOUND
    if code:
        return _failed(group_id, code)
    asked = None if group.topics is None else [
        (found[0], p) for t in group.topics if (found := shares.lookup(t.topic_name))
        for p in t.partitions if 0 <= p < found[1]]
    answers = await shares.group_start_offsets(group_id, asked)
    if group.topics is None:
        wanted = _with_state(shares, answers)
    else:
        wanted = [(t.topic_name, list(t.partitions)) for t in group.topics]
    denied = denied_names(ctx, Op.DESCRIBE, TOPIC, {name for name, _ in wanted})
    topics = []
    for name, partitions in wanted:
        found = shares.lookup(name)
        topic_id = found[0] if found is not None else NO_TOPIC_ID
        topics.append({"topic_name": name, "topic_id": topic_id, "partitions": [
            _partition(ctx, name, p, answers.get((group_id, topic_id, p)), name in denied)
            for p in partitions]})
    return {"group_id": group_id, "topics": topics, "error_code": 0}


def _with_state(shares: ShareCoordinator,
                answers: dict[SharePartitionKey, tuple[ErrorCode, int]]
                ) -> list[tuple[str, list[int]]]:
    """The partitions a describe of all the group's offsets lists: those with state, and those
    whose coordinator could not answer in a topic where the group has state on another
    partition (Kafka lists each initialized share-partition, its summary failed or not, and
    initializes every partition of a topic the group reads; with no record 15 a failed one of
    a topic with no state elsewhere cannot be told from one the group never read)."""
    read: dict[UUID, list[int]] = {}
    failed: dict[UUID, list[int]] = {}
    for (_, topic_id, partition), (code, start) in sorted(answers.items()):
        if code:
            failed.setdefault(topic_id, []).append(partition)
        elif start >= 0:
            read.setdefault(topic_id, []).append(partition)
    listed = []
    for topic_id, partitions in read.items():
        name = shares.topic_name(topic_id)
        if name is not None:
            listed.append((name, sorted(partitions + failed.get(topic_id, []))))
    return sorted(listed)


def _partition(ctx: RequestContext, topic: str, partition: int,
               answer: tuple[ErrorCode, int] | None, denied: bool) -> dict:
    code, start = answer if answer is not None else (ErrorCode.NONE, NO_OFFSET)
    if denied:
        return {"partition_index": partition, "start_offset": NO_OFFSET, "leader_epoch": 0,
                "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                "error_message": ErrorCode.TOPIC_AUTHORIZATION_FAILED.message}
    if code:  # no start offset read: -1 with no error, as Kafka 4.1.1's group coordinator
        start = NO_OFFSET
    state = ctx.image.partition(topic, partition) if start >= 0 else None
    return {"partition_index": partition, "start_offset": start,
            "leader_epoch": state.leader_epoch if state is not None else 0, "error_code": 0}


def _failed(group_id: str, code: ErrorCode) -> dict:
    return {"group_id": group_id, "topics": [], "error_code": int(code),
            "error_message": error_text(code, group_id)}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"groups": [_failed(g.group_id, code) for g in request.groups]}


HANDLER = Handler(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 0, handle, error_response,
                  feature=(SHARE_VERSION, 1))
