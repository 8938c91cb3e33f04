"""Classic consumer-group membership: join, sync, heartbeat, leave; the range assignor and
the cooperative-sticky one (`sticky`).

Theory of operation. `join()` runs the classic protocol to completion: JoinGroup (repeated
once with the member id the coordinator hands out, KIP-394) offering the member's assignors in
order of preference, then, if this member was elected leader, the assignment of every member's
subscription by the assignor the coordinator chose, then SyncGroup, which returns this
member's partitions.

The rebalance protocol is eager unless every assignor of the member is cooperative (Kafka's
rule). Eager: a rejoining member gives up all its partitions first. Cooperative (KIP-429): its
subscription lists the partitions it owns and it keeps them through the rebalance; the leader
leaves out of the round any partition that changes owner, the owner sees it revoked
(`revoked`) and rejoins at once, and the next round hands it over. A member that lost its
membership (unknown member id, stale generation) has lost its partitions too. A background heartbeat (started by the consumer in the client's nursery)
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
from pybroker.client.sticky import ASSIGNOR as COOPERATIVE_STICKY
from pybroker.client.sticky import cooperative_adjust, sticky_assign, valid_owned

__all__ = ["GroupMembership", "range_assign", "ASSIGNOR", "ASSIGNORS", "COOPERATIVE_STICKY"]

ASSIGNOR = "range"
ASSIGNORS = (ASSIGNOR, COOPERATIVE_STICKY)  # the assignors this client can run as leader
COOPERATIVE = frozenset({COOPERATIVE_STICKY})
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
                 heartbeat_interval_ms: int = 3000, group_instance_id: str | None = None,
                 assignors: Iterable[str] = (ASSIGNOR,)) -> None:
        self.assignors = list(dict.fromkeys(assignors))
        unknown = [a for a in self.assignors if a not in ASSIGNORS]
        if unknown or not self.assignors:
            raise ValueError(f"unsupported assignor(s) {unknown or self.assignors}: this "
                             f"client runs {', '.join(ASSIGNORS)}")
        self.cooperative = all(a in COOPERATIVE for a in self.assignors)
        self.revoked: list[TopicPartition] = []  # given up at the last join (cooperative)
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
                owned = set(self.assignment)
                new = await self._join_once()
                self.revoked = sorted(owned - set(new)) if self.cooperative else []
                self.assignment = new
                # Cooperative: what was revoked goes to its new owner in a second round.
                self.rejoin_needed = bool(self.revoked)
                return self.assignment
            except KafkaError as exc:
                if exc.code in _COORDINATOR_CODES:
                    self._coordinator = None
                elif exc.code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                    if exc.code == ErrorCode.UNKNOWN_MEMBER_ID:
                        self.member_id = ""
                    self.assignment = []  # partitions lost with the membership
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
        if self.cooperative:
            metadata = encode_subscription(self.topics, owned_partitions=self.assignment,
                                           generation_id=self.generation_id)
        else:
            metadata = encode_subscription(self.topics)
        body = {"group_id": self.group_id, "session_timeout_ms": self.session_timeout_ms,
                "rebalance_timeout_ms": self.rebalance_timeout_ms, "member_id": self.member_id,
                "group_instance_id": self.group_instance_id, "protocol_type": PROTOCOL_TYPE,
                "protocols": [{"name": a, "metadata": metadata} for a in self.assignors],
                "reason": None}
        join_timeout = self.rebalance_timeout_ms / 1000 + 5
        resp = await self.request(ApiKey.JOIN_GROUP, body, timeout=join_timeout)
        if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:  # KIP-394: ask again with the id
            self.member_id = resp.member_id
            body["member_id"] = resp.member_id
            resp = await self.request(ApiKey.JOIN_GROUP, body, timeout=join_timeout)
        if resp.error_code:
            raise KafkaError(resp.error_code, f"JoinGroup {self.group_id}")
        protocol = resp.protocol_name or self.assignors[0]
        if protocol not in self.assignors:
            raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                             f"the group chose assignor {protocol!r}; this member offered "
                             f"{', '.join(self.assignors)}")
        self.member_id = resp.member_id
        self.generation_id = resp.generation_id
        self.leader_id = resp.leader
        assignments = []
        if self.is_leader and not resp.skip_assignment:
            assignments = await self._assign(resp.members, protocol)
        sync = await self.request(ApiKey.SYNC_GROUP, {
            "group_id": self.group_id, "generation_id": self.generation_id,
            "member_id": self.member_id, "group_instance_id": self.group_instance_id,
            "protocol_type": PROTOCOL_TYPE, "protocol_name": protocol,
            "assignments": assignments}, timeout=join_timeout)
        if sync.error_code:
            raise KafkaError(sync.error_code, f"SyncGroup {self.group_id}")
        try:
            assignment = decode_assignment(sync.assignment)
        except ValueError as exc:
            raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                             f"unreadable assignment from the group leader: {exc}") from None
        return sorted(assignment.partitions)

    async def _assign(self, members: list, protocol: str) -> list[dict]:
        subscriptions: dict[str, tuple[str, ...]] = {}
        owned: dict[str, tuple[TopicPartition, ...]] = {}
        generations: dict[str, int] = {}
        for m in members:
            try:
                sub = decode_subscription(m.metadata)
            except ValueError:
                subscriptions[m.member_id] = ()
                continue
            subscriptions[m.member_id] = sub.topics
            owned[m.member_id], generations[m.member_id] = sub.owned_partitions, \
                sub.generation_id
        topics = sorted({t for ts in subscriptions.values() for t in ts})
        meta = await self.client.refresh_metadata(topics)
        counts = {t: len(meta.topics[t].partitions) for t in topics
                  if t in meta.topics and meta.topics[t].error == ErrorCode.NONE}
        if protocol == COOPERATIVE_STICKY:
            sticky = sticky_assign(subscriptions, counts, owned, generations)
            existing = {TopicPartition(t, p) for t, n in counts.items() for p in range(n)}
            moving = cooperative_adjust(sticky, valid_owned(owned, generations, existing))
            plan: dict[str, dict[str, list[int]]] = {}
            for member, tps in moving.items():
                by_topic: dict[str, list[int]] = {}
                for tp in tps:
                    by_topic.setdefault(tp.topic, []).append(tp.partition)
                plan[member] = by_topic
        else:
            plan = range_assign(subscriptions, counts)
        return [{"member_id": m, "assignment": encode_assignment(parts)}
                for m, parts in plan.items()]

    # -- staying and leaving -------------------------------------------------------------------

    async def heartbeat_loop(self, task_status: trio.TaskStatus[trio.CancelScope]
                             = trio.TASK_STATUS_IGNORED) -> None:
        """Heartbeat every interval while joined; never raises (sets `rejoin_needed`)."""
        with trio.CancelScope() as scope:
            task_status.started(scope)
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
                code = resp.error_code
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
        self.assignment = []
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
