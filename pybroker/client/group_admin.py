"""Consumer-group administration: list, describe, delete groups; read and write their offsets.

Groups live on their coordinators, so every call but ListGroups first finds the group's
coordinator (FindCoordinator) and asks it; ListGroups asks every broker and merges, as Kafka's
admin client does. Offsets written here (`alter_group_offsets`) are an admin commit: generation
-1 and no member id, which a coordinator accepts only while the group has no active members --
the rule `kafka-consumer-groups --reset-offsets` relies on.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Mapping

import trio

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError
from pybroker.client.cluster import BrokerNode, TopicPartition
from pybroker.client.consumer_protocol import PROTOCOL_TYPE, decode_assignment
from pybroker.client.errors import KafkaConnectionError, KafkaTimeoutError

if TYPE_CHECKING:
    from pybroker.client.client import KafkaClient
    from pybroker.client.connection import BrokerConnection

__all__ = ["GroupAdminMixin", "GroupListing", "MemberDescription", "GroupDescription",
           "OffsetAndMetadata"]


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str = ""
    group_type: str = ""

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type in (PROTOCOL_TYPE, "")


def assigned_partitions(assignment: Any) -> tuple[TopicPartition, ...]:
    """The partitions of an Assignment as ConsumerGroupDescribe and ShareGroupDescribe both
    declare it (topic_partitions: topic_name and partitions)."""
    return tuple(TopicPartition(t.topic_name, p)
                 for t in assignment.topic_partitions for p in t.partitions)


# ConsumerGroupDescribe v1's MemberType: 0 a classic member, 1 a consumer-protocol one (-1 or
# v0: not said).
_UPGRADED = {0: False, 1: True}


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...] = ()
    # A KIP-848 member's epoch, its group's assignment epoch and its target (None: classic).
    member_epoch: int | None = None
    target_epoch: int | None = None
    target_assignment: tuple[TopicPartition, ...] | None = None
    # In a consumer group: whether the member speaks the consumer protocol (True) or is a
    # classic member of a group upgraded online (False); None where the broker does not say
    # (ConsumerGroupDescribe v0) or for a classic group. The Java admin's upgraded().
    upgraded: bool | None = None


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]
    # None when the admin reached the coordinator through a group member's own connection
    # (GroupAdminMixin's `coordinator`), which names no node.
    coordinator: BrokerNode | None
    error: ErrorCode = ErrorCode.NONE
    # A consumer group's epoch and target assignment epoch (None: a classic group).
    group_epoch: int | None = None
    assignment_epoch: int | None = None

    @property
    def exists(self) -> bool:
        return self.state != "Dead" and self.error != ErrorCode.GROUP_ID_NOT_FOUND


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = field(default="")


class GroupAdminMixin:
    """Mixed into Admin; needs `self.client`, `self.timeout` and `self.coordinator`.

    `coordinator`, when set, is a group member's own way to its coordinator
    (`GroupMembership.coordinator`); its commits then travel with its other group traffic
    instead of finding the coordinator again on a shared connection.
    """

    client: "KafkaClient"
    timeout: float
    coordinator: "Callable[[], Awaitable[BrokerConnection]] | None"

    async def _coordinator_request(self, group_id: str, api_key: int, body: Mapping[str, Any],
                                   group_error: Any = None, **kwargs: Any) -> Any:
        """Send to the group's coordinator, re-finding it while it moves or loads.

        `group_error(resp)` extracts the group-level code to check for NOT_COORDINATOR and
        friends; other codes are the caller's.
        """
        retry_codes = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)

        async def attempt() -> Any:
            node: BrokerNode | None = None
            if self.coordinator is not None:
                conn = await self.coordinator()
            else:
                node = await self.client.find_coordinator(group_id, timeout=self.timeout)
                conn = await self.client.connection_to(node)
            resp = await conn.request(api_key, body, **kwargs)
            code = group_error(resp) if group_error else 0
            if code in retry_codes:
                raise KafkaError(code)
            return node, resp

        return await self.client.retrying(attempt, timeout=self.timeout, refresh=False)

    async def list_groups(self, *, states: Iterable[str] = (),
                          types: Iterable[str] = ()) -> list[GroupListing]:
        """Every group any broker coordinates, sorted by id (states filter needs v4+, types
        filter v5+)."""
        await self.client.refresh_metadata([])
        found: dict[str, GroupListing] = {}
        errors: list[BaseException] = []
        wanted, wanted_types = list(states), list(types)

        async def ask(node_id: int) -> None:
            try:
                resp = await self.client.request(
                    ApiKey.LIST_GROUPS, {"states_filter": wanted,
                                         "types_filter": wanted_types},
                    node_id=node_id,
                    min_version=5 if wanted_types else 4 if wanted else None)
            except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as exc:
                errors.append(exc)
                return
            if resp.error_code:
                errors.append(KafkaError(resp.error_code))
                return
            for g in resp.groups:
                found[g.group_id] = GroupListing(g.group_id, g.protocol_type,
                                                 g.group_state or "", g.group_type or "")

        async with trio.open_nursery() as nursery:
            for node_id in list(self.client.brokers):
                nursery.start_soon(ask, node_id)
        if errors and not found:
            raise errors[0]
        return [found[g] for g in sorted(found)]

    async def describe_groups(self, group_ids: Iterable[str]) -> dict[str, Any]:
        """group id -> GroupDescription (state "Dead" when the group does not exist), or the
        exception that prevented describing it."""
        out: dict[str, Any] = {}
        for group_id in group_ids:
            try:
                node, resp = await self._coordinator_request(
                    group_id, ApiKey.DESCRIBE_GROUPS,
                    {"groups": [group_id], "include_authorized_operations": False},
                    group_error=lambda r: r.groups[0].error_code if r.groups else 0)
            except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as exc:
                out[group_id] = exc
                continue
            g = resp.groups[0]
            if g.error_code and g.error_code != ErrorCode.GROUP_ID_NOT_FOUND:
                out[group_id] = KafkaError(g.error_code)
                continue
            members = []
            for m in g.members:
                assignment: tuple[TopicPartition, ...] = ()
                if g.protocol_type == PROTOCOL_TYPE:
                    try:
                        assignment = decode_assignment(m.member_assignment).partitions
                    except ValueError:
                        assignment = ()
                members.append(MemberDescription(m.member_id, m.group_instance_id, m.client_id,
                                                 m.client_host, assignment))
            state = "Dead" if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND else g.group_state
            if state == "Dead" and not members:  # maybe a KIP-848 group: no classic one
                consumer_group = await self._describe_consumer_group(group_id)
                if consumer_group is not None:
                    out[group_id] = consumer_group
                    continue
            out[group_id] = GroupDescription(g.group_id or group_id, state, g.protocol_type,
                                             g.protocol_data, tuple(members), node,
                                             ErrorCode.from_wire(g.error_code))
        return out

    async def _describe_one(self, group_id: str, api_key: int) -> tuple[BrokerNode | None, Any]:
        """(the coordinator, its answer's one group) for ConsumerGroupDescribe or
        ShareGroupDescribe, which take the same body, asked of `group_id`'s coordinator one
        group at a time; raises what the request met."""
        node, resp = await self._coordinator_request(
            group_id, api_key, {"group_ids": [group_id], "include_authorized_operations": False},
            group_error=lambda r: r.groups[0].error_code if r.groups else 0)
        return node, resp.groups[0]

    async def _describe_consumer_group(self, group_id: str) -> GroupDescription | None:
        """The KIP-848 consumer group `group_id` (ConsumerGroupDescribe), as the Java admin
        describes one; None when there is none (or the broker predates the API). Its
        protocol is its server assignor, each member's assignment its current one."""
        try:
            node, g = await self._describe_one(group_id, ApiKey.CONSUMER_GROUP_DESCRIBE)
        except (KafkaError, KafkaConnectionError, KafkaTimeoutError):
            return None
        if g.error_code:
            return None
        members = tuple(
            MemberDescription(m.member_id, m.instance_id, m.client_id, m.client_host,
                              assigned_partitions(m.assignment), m.member_epoch,
                              g.assignment_epoch, assigned_partitions(m.target_assignment),
                              _UPGRADED.get(getattr(m, "member_type", -1)))
            for m in g.members)
        return GroupDescription(g.group_id, g.group_state, PROTOCOL_TYPE, g.assignor_name,
                                members, node, group_epoch=g.group_epoch,
                                assignment_epoch=g.assignment_epoch)

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, Any]:
        """group id -> None when deleted, else the KafkaError (e.g. NON_EMPTY_GROUP)."""
        out: dict[str, Any] = {}
        for group_id in group_ids:
            try:
                _, resp = await self._coordinator_request(
                    group_id, ApiKey.DELETE_GROUPS, {"groups_names": [group_id]},
                    group_error=lambda r: r.results[0].error_code if r.results else 0)
            except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as exc:
                out[group_id] = exc
                continue
            code = resp.results[0].error_code if resp.results else 0
            out[group_id] = KafkaError(code) if code else None
        return out

    async def list_group_offsets(self, group_id: str,
                                 partitions: Iterable[TopicPartition] | None = None
                                 ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (all of them, or those asked); raises KafkaError."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        body = {"group_id": group_id, "topics": topics, "require_stable": False,
                "groups": [{"group_id": group_id, "member_id": None, "member_epoch": -1,
                            "topics": topics}]}

        def group_code(r: Any) -> int:
            if r.groups:
                return r.groups[0].error_code
            return r.error_code

        _, resp = await self._coordinator_request(
            group_id, ApiKey.OFFSET_FETCH, body, group_error=group_code,
            min_version=2 if topics is None else None)
        code = group_code(resp)
        if code:
            raise KafkaError(code)
        entries = resp.groups[0].topics if resp.groups else resp.topics
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        for t in entries:
            for p in t.partitions:
                if p.error_code and p.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise KafkaError(p.error_code, f"offset fetch for {t.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                        p.committed_offset, p.committed_leader_epoch, p.metadata)
        return dict(sorted(out.items()))

    async def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int],
                                  *, generation_id: int = -1, member_id: str = "",
                                  group_instance_id: str | None = None
                                  ) -> dict[TopicPartition, Any]:
        """Commit offsets (an admin commit by default); tp -> None or the KafkaError."""
        by_topic: dict[str, list[dict]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": offset,
                "committed_leader_epoch": -1, "commit_timestamp": -1,
                "committed_metadata": ""})
        body = {"group_id": group_id, "generation_id_or_member_epoch": generation_id,
                "member_id": member_id, "group_instance_id": group_instance_id,
                "retention_time_ms": -1,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

        def first_code(r: Any) -> int:
            for t in r.topics:
                for p in t.partitions:
                    return p.error_code
            return 0

        _, resp = await self._coordinator_request(group_id, ApiKey.OFFSET_COMMIT, body,
                                                  group_error=first_code)
        return {TopicPartition(t.name, p.partition_index):
                (KafkaError(p.error_code) if p.error_code else None)
                for t in resp.topics for p in t.partitions}

    async def delete_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition]
                                   ) -> dict[TopicPartition, Any]:
        """OffsetDelete; raises KafkaError for a group-level failure (e.g. NON_EMPTY_GROUP)."""
        by_topic: dict[str, list[dict]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition})
        body = {"group_id": group_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
        _, resp = await self._coordinator_request(group_id, ApiKey.OFFSET_DELETE, body,
                                                  group_error=lambda r: r.error_code)
        if resp.error_code:
            raise KafkaError(resp.error_code)
        return {TopicPartition(t.name, p.partition_index):
                (KafkaError(p.error_code) if p.error_code else None)
                for t in resp.topics for p in t.partitions}
