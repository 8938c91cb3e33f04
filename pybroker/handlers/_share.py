"""What ShareFetch and ShareAcknowledge share: the coordinator, topic ids resolved, the
acknowledgements of one request applied, and a partition's answer when it is refused."""
from __future__ import annotations

from typing import Any, Iterable
from uuid import UUID

from construct import Container

from protocol.errors import ErrorCode, KafkaError
from pybroker.coordinator.share_coordinator import ShareCoordinator
from pybroker.coordinator.share_partition import AckBatch
from pybroker.handlers._authz import TOPIC, Op, denied_names
from pybroker.handlers._base import RequestContext
from pybroker.handlers._group_kind import group_kind

NO_LEADER = {"leader_id": -1, "leader_epoch": -1}  # as Kafka: -1/-1, never 0/0
NO_TOPIC_ID = UUID(int=0)  # the id the offsets admin APIs answer for a topic unknown here


def share_coordinator(ctx: RequestContext) -> ShareCoordinator:
    shares = ctx.services.shares
    if shares is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return shares


def ack_batches(partition: Container) -> list[AckBatch]:
    return [AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
            for b in partition.get("acknowledgement_batches") or ()]


class PartitionRefusal:
    """Why each requested partition cannot be served here, worked out once a request:
    unknown topic id, topic not readable, not led by this broker (with the leader to go to)."""

    def __init__(self, ctx: RequestContext, topic_ids: Iterable[UUID]) -> None:
        self.ctx = ctx
        shares = share_coordinator(ctx)
        self.names = {tid: shares.topic_name(tid) for tid in set(topic_ids)}
        known = [n for n in self.names.values() if n is not None]
        self.denied = denied_names(ctx, Op.READ, TOPIC, known)
        self.endpoints: dict[int, dict] = {}

    def topic(self, topic_id: UUID) -> tuple[ErrorCode, str | None]:
        name = self.names.get(topic_id)
        if name is None:
            return ErrorCode.UNKNOWN_TOPIC_ID, None
        if name in self.denied:
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED, name
        return ErrorCode.NONE, name

    def leader(self, topic: str, partition: int) -> dict:
        """CurrentLeader for NOT_LEADER_OR_FOLLOWER, noting the leader's endpoint."""
        state = self.ctx.image.partition(topic, partition)
        if state is None or state.leader < 0:
            return dict(NO_LEADER)
        node = self.ctx.image.brokers.get(state.leader)
        endpoint = node.endpoint(self.ctx.listener) if node is not None else None
        if node is not None and endpoint is not None:
            self.endpoints[node.node_id] = {"node_id": node.node_id, "host": endpoint[0],
                                            "port": endpoint[1], "rack": node.rack}
        return {"leader_id": state.leader, "leader_epoch": state.leader_epoch}

    def node_endpoints(self) -> list[dict]:
        return list(self.endpoints.values())


async def persisted(shares: ShareCoordinator,
                    acks: dict[tuple[UUID, int], tuple[ErrorCode, dict]]
                    ) -> dict[tuple[UUID, int], tuple[ErrorCode, dict]]:
    """Write what the acknowledgements changed before they are answered; when the write
    fails, each acknowledgement that took effect is answered with its error."""
    code = await shares.flush()
    if not code:
        return acks
    return {key: (code if not result else result, leader)
            for key, (result, leader) in acks.items()}


async def apply_acks(ctx: RequestContext, group_id: str, member_id: str,
                     topics: Iterable[Any], refusal: PartitionRefusal
                     ) -> dict[tuple[UUID, int], tuple[ErrorCode, dict]]:
    """Apply each partition's acknowledgements: (topic id, partition) -> (the code, the
    partition's CurrentLeader)."""
    shares = share_coordinator(ctx)
    out: dict[tuple[UUID, int], tuple[ErrorCode, dict]] = {}
    for topic in topics:
        code, name = refusal.topic(topic.topic_id)
        for p in topic.partitions:
            batches = ack_batches(p)
            if not batches:
                continue
            key = (topic.topic_id, p.partition_index)
            if code or name is None:
                out[key] = (code, dict(NO_LEADER))
                continue
            found, sp = await shares.share_partition(group_id, topic.topic_id, name,
                                                     p.partition_index)
            if sp is None:
                leader = (refusal.leader(name, p.partition_index)
                          if found == ErrorCode.NOT_LEADER_OR_FOLLOWER else dict(NO_LEADER))
                out[key] = (found, leader)
                continue
            result = sp.acknowledge(member_id, batches)
            if result == ErrorCode.NONE:
                shares.changed((group_id, topic.topic_id, p.partition_index))
            out[key] = (result, dict(NO_LEADER))
    return out


async def admin_group_error(ctx: RequestContext, shares: ShareCoordinator, group_id: str,
                            *, must_exist: bool) -> ErrorCode:
    """Why the offsets admin APIs cannot act on the group: an empty id (INVALID_GROUP_ID), a
    coordinator elsewhere or loading, an id held by a classic or consumer group
    (GROUP_ID_NOT_FOUND); with `must_exist`, no share group of that id here
    (GROUP_ID_NOT_FOUND); members (NON_EMPTY_GROUP: offsets change only on an empty group)."""
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID
    code = await ctx.groups.coordinates(group_id)
    if code:
        return code
    kind = group_kind(ctx, group_id)
    if kind in ("classic", "consumer") or (must_exist and kind is None):
        return ErrorCode.GROUP_ID_NOT_FOUND
    return ErrorCode.NON_EMPTY_GROUP if shares.has_members(group_id) else ErrorCode.NONE


def error_text(code: ErrorCode, group_id: str) -> str | None:
    """Kafka's message for the group-level errors its tools print."""
    if code == ErrorCode.GROUP_ID_NOT_FOUND:
        return f"Group {group_id} not found."
    if code == ErrorCode.NON_EMPTY_GROUP:
        return "The group is not empty."
    if code == ErrorCode.INVALID_GROUP_ID:
        return "The group id is invalid."
    return None if not code else code.message


def admin_failed(group_id: str, code: ErrorCode) -> dict:
    """Alter/DeleteShareGroupOffsets refused as a whole (their bodies are alike)."""
    return {"error_code": int(code), "error_message": error_text(code, group_id),
            "responses": []}
