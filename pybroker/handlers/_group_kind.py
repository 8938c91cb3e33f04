"""Which kind of group a group id names here: classic, consumer (KIP-848) or share (KIP-932).

An id is a group of one kind, never two (Kafka keeps every group in one map of the group
coordinator). Here the three live in three machines (the classic group state, the consumer
groups' façade, the share coordinator), so the handlers that must refuse an id held by
another kind, or route by kind, ask this one function rather than each machine.

When an id is found in two machines, the share group wins: the APIs that create classic,
consumer and share groups (JoinGroup, ConsumerGroupHeartbeat, ShareGroupHeartbeat,
AlterShareGroupOffsets) refuse an id of another kind, and so do the classic offset APIs
(`refused_as_share_group`), so no classic holder of offsets joins a share group's id after
it; one written before (by a broker that still let an OffsetCommit create it) stays hidden
behind the share group. A consumer group wins over the member-less classic group that keeps
its committed offsets under the same id, as the group coordinator routes it.

The answer is meaningful once the group coordinator coordinates the id (its state is loaded).
"""
from __future__ import annotations

from typing import Literal

from protocol.errors import ErrorCode
from pybroker.handlers._base import RequestContext

GroupKind = Literal["classic", "consumer", "share"]


def group_kind(ctx: RequestContext, group_id: str) -> GroupKind | None:
    """The kind of the group of that id here, or None when there is none."""
    shares = ctx.services.shares
    if shares is not None and shares.is_share_group(group_id):
        return "share"
    if ctx.groups.consumer.group(group_id) is not None:
        return "consumer"
    if ctx.groups.has_group(group_id):
        return "classic"
    return None


async def refused_as_share_group(ctx: RequestContext, group_id: str) -> ErrorCode:
    """GROUP_ID_NOT_FOUND when this broker coordinates the id and a share group holds it, else
    NONE: OffsetCommit, TxnOffsetCommit and OffsetDelete answer so for a share group's id, as
    Kafka 4.1.1 does (a share group keeps no committed offsets: its start offsets are
    AlterShareGroupOffsets'; tests/reference/test_kafka_share_group_commits.py). Where
    another broker coordinates the id, NONE: the API's own path answers NOT_COORDINATOR."""
    if ctx.services.shares is None or await ctx.groups.coordinates(group_id):
        return ErrorCode.NONE
    return ErrorCode.GROUP_ID_NOT_FOUND if group_kind(ctx, group_id) == "share" \
        else ErrorCode.NONE
