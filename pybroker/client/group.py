"""Classic consumer-group membership: join, sync, heartbeat, leave, and the range assignor.

Theory of operation. `join()` runs the classic protocol to completion: JoinGroup (repeated
once with the member id the coordinator hands out, KIP-394), then, if this member was elected
leader, the range assignment of every member's subscription, then SyncGroup, which returns this
member's partitions. A background heartbeat (started by the consumer in the client's nursery)
keeps the membership alive and raises `rejoin_needed` when the coordinator starts a rebalance
or forgets the member; the consumer then commits and calls `join()` again. `leave()` sends
LeaveGroup so the others rebalance at once rather than after the session timeout; a static
member (`group_instance_id`, KIP-345) does not, as Kafka's consumer does not: its partitions
wait for it to come back under the same instance id within the session timeout, without a
rebalance.

Errors that mean "try again" (coordinator moved or loading, rebalance in progress, stale
generation) are retried inside `join()` until its deadline; others raise KafkaError.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import trio

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError
from pybroker.client.client import KafkaClient
from pybroker.client.cluster import BrokerNode, TopicPartition
from pybroker.client.connection import BrokerConnection
from pybroker.client.consumer_protocol import (
    PROTOCOL_TYPE, decode_assignment, decode_subscription, encode_assignment,
    encode_subscription,
)
from pybroker.client.errors import KafkaConnectionError, KafkaTimeoutError

__all__ = ["GroupMembership", "range_assign", "ASSIGNOR"]

ASSIGNOR = "range"
_COORDINATOR_CODES = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
_REJOIN_CODES = frozenset({ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION,
                           ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.MEMBER_ID_REQUIRED})


def range_assign(subscriptions: Mapping[str, Iterable[str]],
                 partition_counts: Mapping[str, int]) -> dict[str, dict[str, list[int]]]:
    """Kafka's RangeAssignor: per topic, members in id order take contiguous ranges, the
    first (partitions % members) of them one partition more."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    by_topic: dict[str, list[str]] = {}
    for member, topics in subscriptions.items():
        for topic in set(topics):
            by_topic.setdefault(topic, []).append(member)
    for topic, members in sorted(by_topic.items()):
        count = partition_counts.get(topic, 0)
        if count <= 0:
            continue
        members.sort()
        per, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            n = per + (1 if i < extra else 0)
            if n:
                out[member][topic] = list(range(start, start + n))
            start += n
    return out


class GroupMembership:
    """This consumer's place in group `group_id`, subscribed to `topics`."""

    def __init__(self, client: KafkaClient, group_id: str, topics: Iterable[str], *,
                 session_timeout_ms: int = 45000, rebalance_timeout_ms: int = 300000,
                 heartbeat_interval_ms: int = 3000, group_instance_id: str | None = None
                 ) -> None:
        self.client = client
        self.group_id = group_id
        self.topics = sorted(set(topics))
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self.group_instance_id = group_instance_id
        self.member_id = ""
        self.generation_id = -1
        self.leader_id = ""
        self.assignment: list[TopicPartition] = []
        self.rejoin_needed = True
        self._coordinator: BrokerNode | None = None
        self._conn: BrokerConnection | None = None

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader_id

    async def coordinator(self) -> BrokerConnection:
        """This member's own connection to the coordinator (found again after it moved).

        Own, as Kafka's consumer has one: the coordinator holds a JoinGroup until every
        member has rejoined, and nothing else of ours may queue behind it meanwhile.
        """
        if self._coordinator is None or self._conn is None or self._conn.closed:
            await self._drop_connection()
            self._coordinator = await self.client.find_coordinator(self.group_id)
            self._conn = await self.client.open_connection(self._coordinator)
        return self._conn

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.aclose()

    async def request(self, api_key: int, body: dict, *, timeout: float | None = None) -> Any:
        """One request to the coordinator over this member's connection."""
        try:
            conn = await self.coordinator()
            return await conn.request(api_key, body, timeout=timeout)
        except KafkaConnectionError:
            self._coordinator = None
            raise


    # -- joining -------------------------------------------------------------------------------

    async def join(self, *, timeout: float | None = None) -> list[TopicPartition]:
        """Join (or rejoin) and return this member's partitions."""
        deadline = trio.current_time() + (
            timeout if timeout is not None else self.rebalance_timeout_ms / 1000 + 30)
        while True:
            try:
                self.assignment = await self._join_once()
                self.rejoin_needed = False
                return self.assignment
            except KafkaError as exc:
                if exc.code in _COORDINATOR_CODES:
                    self._coordinator = None
                elif exc.code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                elif exc.code not in _REJOIN_CODES:
                    raise
                last: Exception = exc
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                self._coordinator = None
                last = exc
            if trio.current_time() >= deadline:
                raise last
            await trio.sleep(0.1)

    async def _join_once(self) -> list[TopicPartition]:
        metadata = encode_subscription(self.topics)
        body = {"group_id": self.group_id, "session_timeout_ms": self.session_timeout_ms,
                "rebalance_timeout_ms": self.rebalance_timeout_ms, "member_id": self.member_id,
                "group_instance_id": self.group_instance_id, "protocol_type": PROTOCOL_TYPE,
                "protocols": [{"name": ASSIGNOR, "metadata": metadata}], "reason": None}
        join_timeout = self.rebalance_timeout_ms / 1000 + 5
        resp = await self.request(ApiKey.JOIN_GROUP, body, timeout=join_timeout)
        if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:  # KIP-394: ask again with the id
            self.member_id = resp.member_id
            body["member_id"] = resp.member_id
            resp = await self.request(ApiKey.JOIN_GROUP, body, timeout=join_timeout)
        if resp.error_code:
            raise KafkaError(resp.error_code, f"JoinGroup {self.group_id}")
        if resp.protocol_name not in (None, ASSIGNOR):
            raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                             f"the group chose assignor {resp.protocol_name!r}; this client "
                             f"only speaks {ASSIGNOR!r}")
        self.member_id = resp.member_id
        self.generation_id = resp.generation_id
        self.leader_id = resp.leader
        assignments = []
        if self.is_leader and not resp.skip_assignment:
            assignments = await self._assign(resp.members)
        sync = await self.request(ApiKey.SYNC_GROUP, {
            "group_id": self.group_id, "generation_id": self.generation_id,
            "member_id": self.member_id, "group_instance_id": self.group_instance_id,
            "protocol_type": PROTOCOL_TYPE, "protocol_name": ASSIGNOR,
            "assignments": assignments}, timeout=join_timeout)
        if sync.error_code:
            raise KafkaError(sync.error_code, f"SyncGroup {self.group_id}")
        try:
            assignment = decode_assignment(sync.assignment)
        except ValueError as exc:
            raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                             f"unreadable assignment from the group leader: {exc}") from None
        return sorted(assignment.partitions)

    async def _assign(self, members: list) -> list[dict]:
        subscriptions: dict[str, tuple[str, ...]] = {}
        for m in members:
            try:
                subscriptions[m.member_id] = decode_subscription(m.metadata).topics
            except ValueError:
                subscriptions[m.member_id] = ()
        topics = sorted({t for ts in subscriptions.values() for t in ts})
        meta = await self.client.refresh_metadata(topics)
        counts = {t: len(meta.topics[t].partitions) for t in topics
                  if t in meta.topics and meta.topics[t].error == ErrorCode.NONE}
        plan = range_assign(subscriptions, counts)
        return [{"member_id": m, "assignment": encode_assignment(parts)}
                for m, parts in plan.items()]

    # -- staying and leaving -------------------------------------------------------------------

    async def heartbeat_loop(self, task_status: object = trio.TASK_STATUS_IGNORED) -> None:
        """Heartbeat every interval while joined; never raises (sets `rejoin_needed`)."""
        with trio.CancelScope() as scope:
            task_status.started(scope)  # type: ignore[attr-defined]
            while True:
                await trio.sleep(self.heartbeat_interval)
                if self.rejoin_needed or self.generation_id < 0:
                    continue
                try:
                    resp = await self.request(ApiKey.HEARTBEAT, {
                        "group_id": self.group_id, "generation_id": self.generation_id,
                        "member_id": self.member_id,
                        "group_instance_id": self.group_instance_id},
                        timeout=self.session_timeout_ms / 1000)
                except (KafkaError, KafkaConnectionError, KafkaTimeoutError):
                    self._coordinator = None
                    continue
                code = resp.error_code  # type: ignore[attr-defined]
                if code in _COORDINATOR_CODES:
                    self._coordinator = None
                elif code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id, self.rejoin_needed = "", True
                elif code:
                    self.rejoin_needed = True

    async def leave(self) -> None:
        """Leave the group (best effort: the session timeout removes us anyway); a static
        member only forgets its generation (Kafka's AbstractCoordinator.maybeLeaveGroup)."""
        if not self.member_id:
            return
        if self.group_instance_id is not None:
            self.member_id, self.generation_id, self.rejoin_needed = "", -1, True
            await self._drop_connection()
            return
        body = {"group_id": self.group_id, "member_id": self.member_id,
                "members": [{"member_id": self.member_id,
                             "group_instance_id": self.group_instance_id, "reason": None}]}
        try:
            with trio.move_on_after(5):
                await self.request(ApiKey.LEAVE_GROUP, body, timeout=5)
        except (KafkaError, KafkaConnectionError, KafkaTimeoutError):
            pass
        self.member_id, self.generation_id, self.rejoin_needed = "", -1, True
        await self._drop_connection()
