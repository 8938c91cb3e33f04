"""Share-group (KIP-932) administration, as Kafka's Admin does it for `kafka-share-groups`:
list (ListGroups v5, type "share"), describe (ShareGroupDescribe), and read, set and delete
the start offsets of its share-partitions (DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets), each asked of the group's coordinator.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from protocol.api_keys import ApiKey
from protocol.errors import KafkaError
from pybroker.client.cluster import BrokerNode, TopicPartition
from pybroker.client.errors import KafkaConnectionError, KafkaTimeoutError
from pybroker.client.group_admin import GroupAdminMixin, assigned_partitions

__all__ = ["ShareGroupAdminMixin", "ShareMemberDescription", "ShareGroupDescription",
           "SharePartitionOffset", "SHARE_GROUP_TYPE"]

SHARE_GROUP_TYPE = "share"


@dataclass(frozen=True)
class ShareMemberDescription:
    member_id: str
    client_id: str
    host: str
    member_epoch: int
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ShareGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    members: tuple[ShareMemberDescription, ...]
    coordinator: BrokerNode | None


@dataclass(frozen=True)
class SharePartitionOffset:
    """A share-partition's start offset (SPSO) and the leader epoch it was written at; None
    for a share-partition the group has no state for (Kafka's -1)."""
    start_offset: int | None
    leader_epoch: int | None


class ShareGroupAdminMixin(GroupAdminMixin):
    """Mixed into Admin: the group admin, share groups included (their ids are group ids,
    their coordinator the group coordinator)."""

    async def describe_share_groups(self, group_ids: Iterable[str]) -> dict[str, Any]:
        """group id -> ShareGroupDescription, or the KafkaError that describing it met
        (GROUP_ID_NOT_FOUND for a group that does not exist)."""
        out: dict[str, Any] = {}
        for group_id in group_ids:
            try:
                node, g = await self._describe_one(group_id, ApiKey.SHARE_GROUP_DESCRIBE)
            except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as exc:
                out[group_id] = exc
                continue
            if g.error_code:
                out[group_id] = KafkaError(g.error_code, g.error_message)
                continue
            out[group_id] = ShareGroupDescription(
                g.group_id, g.group_state, g.group_epoch, g.assignment_epoch,
                tuple(ShareMemberDescription(m.member_id, m.client_id, m.client_host,
                                             m.member_epoch, assigned_partitions(m.assignment))
                      for m in g.members), node)
        return out

    async def list_share_group_offsets(self, group_id: str
                                       ) -> dict[TopicPartition, SharePartitionOffset]:
        """Every share-partition the group has state for; raises KafkaError."""
        _, resp = await self._coordinator_request(
            group_id, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
            {"groups": [{"group_id": group_id, "topics": None}]},
            group_error=lambda r: r.groups[0].error_code if r.groups else 0)
        g = resp.groups[0]
        if g.error_code:
            raise KafkaError(g.error_code, g.error_message)
        out: dict[TopicPartition, SharePartitionOffset] = {}
        for t in g.topics:
            for p in t.partitions:
                if p.error_code:
                    raise KafkaError(p.error_code, p.error_message)
                known = p.start_offset >= 0
                out[TopicPartition(t.topic_name, p.partition_index)] = SharePartitionOffset(
                    p.start_offset if known else None, p.leader_epoch if known else None)
        return out

    async def alter_share_group_offsets(self, group_id: str,
                                        offsets: Mapping[TopicPartition, int]
                                        ) -> dict[TopicPartition, KafkaError | None]:
        """Set start offsets (the group must have no members); the group-level error is
        raised, each partition's is returned."""
        topics: dict[str, list[dict]] = {}
        for tp, offset in offsets.items():
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition,
                                                    "start_offset": offset})
        _, resp = await self._coordinator_request(
            group_id, ApiKey.ALTER_SHARE_GROUP_OFFSETS,
            {"group_id": group_id, "topics": [{"topic_name": t, "partitions": ps}
                                              for t, ps in topics.items()]},
            group_error=lambda r: r.error_code)
        if resp.error_code:
            raise KafkaError(resp.error_code, resp.error_message)
        return {TopicPartition(t.topic_name, p.partition_index):
                KafkaError(p.error_code, p.error_message) if p.error_code else None
                for t in resp.responses for p in t.partitions}

    async def delete_share_group_offsets(self, group_id: str, topics: Iterable[str]
                                         ) -> dict[str, KafkaError | None]:
        """Drop the group's state for whole topics; the group-level error is raised, each
        topic's is returned."""
        _, resp = await self._coordinator_request(
            group_id, ApiKey.DELETE_SHARE_GROUP_OFFSETS,
            {"group_id": group_id, "topics": [{"topic_name": t} for t in topics]},
            group_error=lambda r: r.error_code)
        if resp.error_code:
            raise KafkaError(resp.error_code, resp.error_message)
        return {t.topic_name: KafkaError(t.error_code, t.error_message) if t.error_code
                else None for t in resp.responses}
