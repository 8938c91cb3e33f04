"""Followers copy their leaders' logs with real Fetch requests (Kafka's ReplicaFetcherThread).

Theory of operation
-------------------
One task per source broker fetches every partition this broker follows there, with Fetch v12
and this broker's id as `replica_id`, from each log's end, naming the leader epoch it believes
current and the epoch of its last batch (`last_fetched_epoch`). The leader answers with batches
(appended unchanged, offsets and epochs kept), or with a diverging epoch when this log has
batches the leader's history does not (a former leader's unreplicated tail): the follower
truncates there and asks again (KIP-320's truncation through Fetch, which Kafka uses since
2.7). A fetch long-polls on the leader (`replica.fetch.wait.max.ms`), so a quiet partition
costs one request per wait, and an append wakes the follower at once. Each task keeps an
incremental fetch session with its leader (KIP-227, `client/fetch_session_handler.py`): after
a full first fetch it names only the partitions whose position or epoch moved, and the
leader answers only those with news; a session error, or a fetch abandoned for a new
partition set, starts over in full. A full fetch does not wait and is not abandoned, so the
session it opens is always learnt (never left on the leader unknown until evicted).

Under a `follower.replication.throttled.rate` (quota/replication_quota.py) a partition named
in its topic's follower.replication.throttled.replicas is left out of the next fetch while the
rate is over and the replica is not caught up with the leader's high watermark as of the last
answer (Kafka's shouldFollowerThrottle); its fetched bytes are counted.

What the fetched data means for the log (append, truncate, the follower's high watermark) is
the replica manager's business (`apply_fetched`); this module only moves requests. Which
partitions follow whom comes from the metadata image through `follow` / `unfollow`; a response
for a partition that meanwhile changed leader or epoch is dropped.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.fetch_metadata import INITIAL_EPOCH
from protocol.topic_partition import TopicPartition
from pybroker.client.connection import BrokerConnection
from pybroker.client.fetch_session_handler import FetchSessionHandler
from pybroker.client.security import ClientSecurity
from pybroker.client.errors import KafkaConnectionError, KafkaTimeoutError
from pybroker.replica.throttle import ReplicaThrottle

__all__ = ["ReplicaFetchers", "FollowerLogs", "FetchSettings"]

log = logging.getLogger(__name__)
FETCH_VERSION = 12
_SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                   ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)


class FollowerLogs(Protocol):
    """What the fetchers need of the replica manager."""

    def fetch_position(self, tp: TopicPartition) -> tuple[int, int, int] | None:
        """(fetch offset, last fetched epoch, log start offset) or None if not hosted."""

    def apply_fetched(self, tp: TopicPartition, leader_epoch: int, data: Any) -> ErrorCode:
        """Apply one partition of a fetch response; the error the fetcher reacts to."""


@dataclass(frozen=True)
class FetchSettings:
    node_id: int
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    partition_max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    socket_timeout_ms: int = 30000  # replica.socket.timeout.ms
    # the inter-broker listener's (pybroker.security.inter_broker)
    security: ClientSecurity | None = None


@dataclass(frozen=True)
class _Follow:
    leader: int
    epoch: int


class ReplicaFetchers:
    def __init__(self, logs: FollowerLogs, settings: FetchSettings,
                 endpoint_of: Callable[[int], tuple[str, int] | None],
                 quota: ReplicaThrottle | None = None) -> None:
        self.logs = logs
        self.settings = settings
        self.endpoint_of = endpoint_of
        self.quota = quota
        # The partitions whose last answer left them at the leader's high watermark (Kafka's
        # isReplicaInSync: lag 0): never throttled. Unknown until a first answer.
        self._caught_up: set[TopicPartition] = set()
        self._follows: dict[TopicPartition, _Follow] = {}
        self._running: set[int] = set()
        self._wakeups: dict[int, trio.Event] = {}
        self._inflight: dict[int, trio.CancelScope] = {}
        # Partitions to leave out of the next fetches until this time (an epoch the leader
        # does not know yet, a transient error).
        self._backoff: dict[TopicPartition, float] = {}
        self._sessions: dict[int, FetchSessionHandler] = {}
        self._nursery: trio.Nursery | None = None

    # -- which partitions follow whom (from the metadata image) ---------------------------------
    def follow(self, tp: TopicPartition, leader: int, leader_epoch: int) -> None:
        old = self._follows.get(tp)
        new = _Follow(leader, leader_epoch)
        if old == new:
            return
        self._follows[tp] = new
        self._backoff.pop(tp, None)
        self._caught_up.discard(tp)
        self._start(leader)
        self._wake(leader)
        if old is not None and old.leader != leader:
            self._wake(old.leader)

    def unfollow(self, tp: TopicPartition) -> None:
        old = self._follows.pop(tp, None)
        self._caught_up.discard(tp)
        if old is not None:
            self._wake(old.leader)

    def _wake(self, leader: int) -> None:
        """The partitions fetched from `leader` changed: a fetcher idling wakes, and one
        long-polling abandons its fetch (up to replica.fetch.wait.max.ms) to ask again for
        the new set at once — a new leader's high watermark waits for this follower."""
        event = self._wakeups.get(leader)
        if event is not None:
            event.set()
        scope = self._inflight.get(leader)
        if scope is not None:
            scope.cancel()

    def _start(self, leader: int) -> None:
        if self._nursery is not None and leader not in self._running:
            self._running.add(leader)
            self._nursery.start_soon(self._fetch_from, leader)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                for leader in {f.leader for f in self._follows.values()}:
                    self._start(leader)
                task_status.started()
                await trio.sleep_forever()
            finally:  # stopping: later follows start nothing
                self._nursery = None

    # -- one source broker ---------------------------------------------------------------------
    def _partitions_of(self, leader: int) -> dict[TopicPartition, _Follow]:
        now = trio.current_time()
        return {tp: f for tp, f in self._follows.items()
                if f.leader == leader and self._backoff.get(tp, 0) <= now}

    async def _fetch_from(self, leader: int) -> None:
        settings = self.settings
        try:
            while any(f.leader == leader for f in self._follows.values()):
                endpoint = self.endpoint_of(leader)
                if endpoint is None:  # not registered (yet): the image will say
                    await self._idle(leader, settings.backoff_ms / 1000)
                    continue
                failure: BaseException | None = None
                async with trio.open_nursery() as nursery:
                    # Caught inside the nursery: trio would wrap it in an ExceptionGroup.
                    try:
                        conn = await BrokerConnection.open(
                            endpoint[0], endpoint[1], nursery=nursery,
                            client_id=f"broker-{settings.node_id}-fetcher-{leader}",
                            connect_timeout=settings.socket_timeout_ms / 1000,
                            request_timeout=(settings.socket_timeout_ms
                                             + settings.max_wait_ms) / 1000,
                            security=settings.security)
                        try:
                            await self._fetch_loop(leader, conn, endpoint)
                        finally:
                            await conn.aclose()
                    except (KafkaConnectionError, KafkaTimeoutError, KafkaError, OSError) as exc:
                        failure = exc
                    except Exception as exc:  # a bug must not take the broker down
                        log.exception("fetcher for broker %d failed", leader)
                        failure = exc
                    nursery.cancel_scope.cancel()
                if failure is not None:
                    log.info("fetching from broker %d at %s:%d failed: %s", leader,
                             endpoint[0], endpoint[1], failure)
                    await self._idle(leader, settings.backoff_ms / 1000)
        finally:
            self._running.discard(leader)
            self._wakeups.pop(leader, None)
            self._sessions.pop(leader, None)
        # Not in `finally`: a cancelled fetcher (the broker stopping) must not start another.
        if any(f.leader == leader for f in self._follows.values()):
            self._start(leader)  # a follow arrived as this task was ending

    async def _idle(self, leader: int, seconds: float) -> None:
        event = self._wakeups[leader] = trio.Event()
        with trio.move_on_after(seconds):
            await event.wait()

    async def _fetch_loop(self, leader: int, conn: BrokerConnection,
                          endpoint: tuple[str, int]) -> None:
        settings = self.settings
        while True:
            if self.endpoint_of(leader) != endpoint:
                return  # the broker moved (restarted elsewhere): reconnect
            follows = self._partitions_of(leader)
            if not any(f.leader == leader for f in self._follows.values()):
                return
            session = self._sessions.setdefault(leader, FetchSessionHandler())
            request, asked = self._request(follows, session)
            if not asked:
                await self._idle(leader, min(settings.backoff_ms / 1000, 0.1))
                continue
            try:
                with trio.CancelScope() as scope:
                    if request["max_wait_ms"] or request["session_epoch"] != INITIAL_EPOCH:
                        # A fetch opening a session is never abandoned (and never waits, see
                        # _request): its answer names the session it made, which would
                        # otherwise be left on the leader, unknown, until evicted.
                        self._inflight[leader] = scope
                    response = await conn.request(ApiKey.FETCH, request,
                                                  version=FETCH_VERSION)
            finally:
                self._inflight.pop(leader, None)
            if scope.cancelled_caught:
                # The partition set changed meanwhile. The leader answers a connection's
                # requests in order, so the next fetch would wait behind the abandoned
                # long poll: a new connection asks at once.
                return
            if not session.answered(response.error_code, response.session_id):
                if response.error_code in _SESSION_ERRORS:
                    continue  # the next fetch is full: ask at once
                log.info("fetch from broker %d failed: %s", leader,
                         ErrorCode(response.error_code).name)
                await self._idle(leader, settings.backoff_ms / 1000)
                continue
            for topic in response.responses:
                for data in topic.partitions:
                    tp = (topic.topic, data.partition_index)
                    follow = self._follows.get(tp)
                    if follow is None or follow != asked.get(tp):
                        continue  # leadership moved while the fetch was out
                    code = self.logs.apply_fetched(tp, follow.epoch, data)
                    if self.quota is not None:
                        self._account(tp, data)
                    if code != ErrorCode.NONE:
                        self._backoff[tp] = trio.current_time() + settings.backoff_ms / 1000
                        if code not in (ErrorCode.UNKNOWN_LEADER_EPOCH,
                                        ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                        ErrorCode.FENCED_LEADER_EPOCH):
                            log.warning("replica %s-%d fetching from broker %d: %s",
                                        tp[0], tp[1], leader, code.name)

    def _account(self, tp: TopicPartition, data: Any) -> None:
        """Count a throttled partition's bytes and note whether it is now caught up (only
        throttled partitions are ever held back, so only theirs matters)."""
        quota = self.quota
        assert quota is not None
        if not quota.is_throttled(tp[0], tp[1]):
            return
        quota.record(len(data.records or b""), trio.current_time() * 1000)
        position = self.logs.fetch_position(tp)
        if position is not None and data.error_code == ErrorCode.NONE \
                and position[0] >= data.high_watermark:
            self._caught_up.add(tp)
        else:
            self._caught_up.discard(tp)

    def _held_back(self, tp: TopicPartition, over: bool) -> bool:
        return over and tp not in self._caught_up and self.quota is not None \
            and self.quota.is_throttled(tp[0], tp[1])

    def _request(self, follows: dict[TopicPartition, _Follow], session: FetchSessionHandler
                 ) -> tuple[dict[str, Any], dict[TopicPartition, _Follow]]:
        settings = self.settings
        wanted: dict[TopicPartition, dict[str, Any]] = {}
        asked = {}
        over = self.quota is not None and self.quota.is_exceeded(trio.current_time() * 1000)
        for tp, follow in follows.items():
            if self._held_back(tp, over):
                continue
            position = self.logs.fetch_position(tp)
            if position is None:
                continue
            offset, last_epoch, log_start = position
            asked[tp] = follow
            wanted[tp] = {
                "partition": tp[1], "current_leader_epoch": follow.epoch,
                "fetch_offset": offset, "last_fetched_epoch": last_epoch,
                "log_start_offset": log_start,
                "partition_max_bytes": settings.partition_max_bytes}
        session_id, epoch, send, forget = session.build(wanted) if asked else (0, -1, {}, {})
        request = {
            "replica_id": settings.node_id,
            "max_wait_ms": 0 if epoch == INITIAL_EPOCH and not session.made_none
            else settings.max_wait_ms,
            "min_bytes": settings.min_bytes, "max_bytes": settings.max_bytes,
            "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in send.items()],
            "forgotten_topics_data": [{"topic": t, "partitions": ps}
                                      for t, ps in forget.items()], "rack_id": ""}
        return request, asked
