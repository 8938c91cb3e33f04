"""Which kind of group a group id names here: classic, consumer (KIP-848) or share (KIP-932).

An id is a group of one kind, never two (Kafka keeps every group in one map of the group
coordinator). Here the three live in three machines (the classic group state, the consumer
groups' façade, the share coordinator), so the handlers that must refuse an id held by
another kind, or route by kind, ask this one function rather than each machine.

When an id is found in two machines, the share group wins: the APIs that create classic,
consumer and share groups (JoinGroup, ConsumerGroupHeartbeat, ShareGroupHeartbeat,
AlterShareGroupOffsets) refuse an id of another kind, so a share group can be joined by a
classic group only through an OffsetCommit that creates one (group_offsets.py), after the
share group took the id. A consumer group wins over the member-less classic group that keeps
its committed offsets under the same id, as the group coordinator routes it.

The answer is meaningful once the group coordinator coordinates the id (its state is loaded).
"""
from __future__ import annotations

from typing import Literal

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
