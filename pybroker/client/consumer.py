"""`Consumer`: fetch records from assigned partitions, alone or as a member of a group.

Theory of operation. A consumer has an assignment (given by `assign()`, or by the group after
`subscribe()`) and a position per assigned partition: the next offset to return. A position
starts unknown and is set by `seek()`, by the group's committed offset, or by the reset policy
(`auto_offset_reset`: earliest, latest or none) through ListOffsets. `poll()` sends one Fetch
per leader for the partitions with a position, concurrently, waits up to the poll timeout, and
returns decoded records in offset order per partition, advancing positions past them (and past
control batches and, under read_committed, aborted transactions). A group member commits its
positions every `auto_commit_interval_ms` and on `close()`, and rejoins when the heartbeat
reports a rebalance.

Batches arrive as the broker stores them; only here, on the client, are records decoded
(`protocol.records.decode_batch`), never on the broker.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import trio

from protocol.errors import ErrorCode, KafkaError
from protocol.messages.fetch import READ_COMMITTED, READ_UNCOMMITTED
from protocol.records.batch import MAGIC, MAGIC_V2, iter_batches
from protocol.records.legacy import decode_message_set
from protocol.records.record import ControlType, decode_batch, decode_control_record
from pybroker.client import log_io
from pybroker.client.admin import Admin, OffsetSpec
from pybroker.client.client import REFRESH_CODES, KafkaClient
from pybroker.client.cluster import TopicPartition
from pybroker.client.errors import KafkaConnectionError, KafkaTimeoutError
from pybroker.client.group import GroupMembership

__all__ = ["Consumer", "ConsumerRecord", "READ_UNCOMMITTED", "READ_COMMITTED",
           "parse_isolation_level"]

TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def parse_isolation_level(value: str) -> int:
    text = value.strip().lower()
    if text == "read_committed":
        return READ_COMMITTED
    if text == "read_uncommitted":
        return READ_UNCOMMITTED
    raise ValueError(f"Invalid value {value} for isolation.level: expected "
                     "read_committed or read_uncommitted")


@dataclass(frozen=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @property
    def timestamp_type_name(self) -> str:
        return TIMESTAMP_TYPES.get(self.timestamp_type, "NoTimestampType")


class Consumer:
    """Use `async with Consumer(client, ...) as consumer:`; options follow Kafka's consumer
    configs (`group_id`, `auto_offset_reset`, `enable_auto_commit`, `isolation_level`, ...)."""

    def __init__(self, client: KafkaClient, *, group_id: str | None = None,
                 auto_offset_reset: str = "latest", enable_auto_commit: bool = True,
                 auto_commit_interval_ms: int = 5000, isolation_level: int = READ_UNCOMMITTED,
                 fetch_max_wait_ms: int = 500, fetch_min_bytes: int = 1,
                 fetch_max_bytes: int = 52428800, max_partition_fetch_bytes: int = 1048576,
                 session_timeout_ms: int = 45000, heartbeat_interval_ms: int = 3000,
                 max_poll_interval_ms: int = 300000, group_instance_id: str | None = None,
                 partition_assignment_strategy: Sequence[str] = ("range",)) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(f"Invalid value {auto_offset_reset} for auto.offset.reset: "
                             "expected earliest, latest or none")
        self.client = client
        self.admin = Admin(client)
        self.group_id = group_id
        self.auto_offset_reset = auto_offset_reset
        self.enable_auto_commit = enable_auto_commit and group_id is not None
        self.auto_commit_interval = auto_commit_interval_ms / 1000
        self.isolation_level = isolation_level
        self.fetch_max_wait = fetch_max_wait_ms / 1000
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self._group_options = dict(session_timeout_ms=session_timeout_ms,
                                   heartbeat_interval_ms=heartbeat_interval_ms,
                                   rebalance_timeout_ms=max_poll_interval_ms,
                                   group_instance_id=group_instance_id,
                                   assignors=tuple(partition_assignment_strategy))
        self.membership: GroupMembership | None = None
        self._positions: dict[TopicPartition, int | None] = {}
        self._stale_metadata = False
        self._next_commit = trio.current_time() + self.auto_commit_interval
        self._heartbeat: trio.CancelScope | None = None
        self._closed = False

    async def __aenter__(self) -> "Consumer":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        await self.close(commit=exc_type is None or exc_type is trio.Cancelled)

    # -- assignment and positions --------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions, without a group."""
        if self.membership is not None:
            raise RuntimeError("assign() on a consumer that subscribed to a group")
        self._positions = {TopicPartition(*tp): self._positions.get(TopicPartition(*tp))
                           for tp in partitions}

    async def subscribe(self, topics: Sequence[str]) -> None:
        """Join the group (needs `group_id`) subscribed to `topics`, and wait for partitions."""
        if self.group_id is None:
            raise ValueError("subscribe() needs a group_id")
        for topic in topics:
            await self.client.topic(topic, refresh=True)
        # The options are GroupMembership's own keywords, typed at __init__, which a dict of
        # them cannot say.
        self.membership = GroupMembership(self.client, self.group_id, topics,
                                          **self._group_options)  # type: ignore[arg-type]
        self.admin = Admin(self.client, coordinator=self.membership.coordinator)
        await self._rejoin()
        self._heartbeat = await self.client.nursery.start(self.membership.heartbeat_loop)

    def assignment(self) -> set[TopicPartition]:
        return set(self._positions)

    def position(self, tp: TopicPartition) -> int | None:
        return self._positions.get(tp)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if tp not in self._positions:
            raise KeyError(f"{tp} is not assigned to this consumer")
        self._positions[tp] = offset

    async def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        await self._reset(list(partitions or self._positions), OffsetSpec.EARLIEST)

    async def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        await self._reset(list(partitions or self._positions), OffsetSpec.LATEST)

    async def _reset(self, partitions: list[TopicPartition], spec: int) -> None:
        if not partitions:
            return
        results = await self.admin.list_offsets({tp: spec for tp in partitions},
                                                isolation_level=self.isolation_level)
        for tp in partitions:
            outcome = results.get(tp)
            if isinstance(outcome, BaseException):
                raise outcome
            if outcome is not None and tp in self._positions:
                self._positions[tp] = outcome.offset

    async def _ensure_positions(self) -> None:
        missing = [tp for tp, pos in self._positions.items() if pos is None]
        if not missing:
            return
        if self.auto_offset_reset == "none":
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             "Undefined offset with no reset policy for partitions: "
                             + ", ".join(str(tp) for tp in missing))
        await self._reset(missing, OffsetSpec.EARLIEST if self.auto_offset_reset == "earliest"
                          else OffsetSpec.LATEST)

    async def _rejoin(self) -> None:
        """Join again; under the cooperative protocol the partitions kept keep their
        positions, only the new ones start from the committed offsets."""
        assert self.membership is not None and self.group_id is not None
        partitions = await self.membership.join()
        kept = {tp: self._positions.get(tp) for tp in partitions
                if self.membership.cooperative and self._positions.get(tp) is not None}
        new = [tp for tp in partitions if tp not in kept]
        committed = await self.admin.list_group_offsets(self.group_id, new) if new else {}
        self._positions = {tp: kept[tp] if tp in kept else
                           (committed[tp].offset if tp in committed else None)
                           for tp in partitions}

    # -- committing ----------------------------------------------------------------------------

    async def commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        """Commit `offsets` (default: the current positions) for the group."""
        if self.group_id is None:
            raise ValueError("commit() needs a group_id")
        if offsets is None:
            offsets = {tp: pos for tp, pos in self._positions.items() if pos is not None}
        if not offsets:
            return
        m = self.membership
        results = await self.admin.alter_group_offsets(
            self.group_id, offsets,
            generation_id=m.generation_id if m is not None else -1,
            member_id=m.member_id if m is not None else "",
            group_instance_id=m.group_instance_id if m is not None else None)
        for tp, error in results.items():
            if error is not None:
                if m is not None and error.code in (ErrorCode.REBALANCE_IN_PROGRESS,
                                                    ErrorCode.ILLEGAL_GENERATION,
                                                    ErrorCode.UNKNOWN_MEMBER_ID):
                    m.rejoin_needed = True
                raise error

    async def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        if self.group_id is None:
            raise ValueError("committed() needs a group_id")
        got = await self.admin.list_group_offsets(self.group_id, list(partitions))
        return {tp: o.offset for tp, o in got.items()}

    async def _auto_commit(self, force: bool = False) -> None:
        if not self.enable_auto_commit:
            return
        if not force and trio.current_time() < self._next_commit:
            return
        self._next_commit = trio.current_time() + self.auto_commit_interval
        try:
            await self.commit()
        except (KafkaError, KafkaConnectionError, KafkaTimeoutError):
            pass  # as Kafka's auto-commit: logged there, retried at the next interval here

    async def close(self, *, commit: bool = True) -> None:
        """Commit (group, auto-commit on), leave the group, stop heartbeating."""
        if self._closed:
            return
        self._closed = True
        with trio.CancelScope(shield=True):
            with trio.move_on_after(10):
                if commit and self.membership is not None and not self.membership.rejoin_needed:
                    await self._auto_commit(force=True)
                if self._heartbeat is not None:
                    self._heartbeat.cancel()
                if self.membership is not None:
                    await self.membership.leave()

    # -- fetching ------------------------------------------------------------------------------

    async def poll(self, timeout: float) -> list[ConsumerRecord]:
        """Records from the assigned partitions, waiting up to `timeout` seconds for some."""
        deadline = trio.current_time() + max(0.0, timeout)
        while True:
            if self.membership is not None and self.membership.rejoin_needed:
                await self._auto_commit(force=True)
                await self._rejoin()
            await self._ensure_positions()
            await self._auto_commit()
            left = deadline - trio.current_time()
            if not self._positions:
                await trio.sleep(min(max(left, 0), 0.1))
                if trio.current_time() >= deadline:
                    return []
                continue
            records = await self._fetch(min(self.fetch_max_wait, max(left, 0)))
            if records or trio.current_time() >= deadline:
                return records

    async def _fetch(self, max_wait: float) -> list[ConsumerRecord]:
        by_leader: dict[int, list[TopicPartition]] = {}
        refresh, self._stale_metadata = self._stale_metadata, False
        for tp, pos in self._positions.items():
            if pos is None:
                continue
            try:
                leader = await self.client.leader(tp.topic, tp.partition, refresh=refresh)
            except (KafkaError, KafkaConnectionError, KafkaTimeoutError):
                self._stale_metadata = True
                continue
            by_leader.setdefault(leader, []).append(tp)
        if not by_leader:
            await trio.sleep(max_wait)
            return []
        out: list[ConsumerRecord] = []
        errors: list[BaseException] = []

        async def one(node_id: int, partitions: list[TopicPartition]) -> None:
            try:
                out.extend(await self._fetch_from(node_id, partitions, max_wait))
            except (KafkaConnectionError, KafkaTimeoutError):
                self._stale_metadata = True
            except KafkaError as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            for node_id, partitions in by_leader.items():
                nursery.start_soon(one, node_id, partitions)
        if errors and not out:
            raise errors[0]
        return out

    async def _fetch_from(self, node_id: int, partitions: list[TopicPartition],
                          max_wait: float) -> list[ConsumerRecord]:
        positions = {tp: self._positions[tp] for tp in partitions}
        # _fetch passes only partitions whose position is set (not None).
        fetched = await log_io.fetch(
            self.client, node_id, positions,  # type: ignore[arg-type]
            max_wait_ms=int(max_wait * 1000), min_bytes=self.fetch_min_bytes,
            max_bytes=self.fetch_max_bytes, partition_max_bytes=self.max_partition_fetch_bytes,
            isolation_level=self.isolation_level)
        out: list[ConsumerRecord] = []
        for tp, p in fetched.items():
            if tp not in self._positions or self._positions[tp] is None:
                continue  # reassigned or reset while the fetch was in flight
            if p.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                if self.auto_offset_reset == "none":
                    raise KafkaError(p.error, f"Fetch position {self._positions[tp]} is out "
                                     f"of range for partition {tp}")
                self._positions[tp] = None
            elif p.error in REFRESH_CODES:
                self._stale_metadata = True
            elif p.error:
                raise KafkaError(p.error, f"Fetch of {tp} failed")
            elif p.records:
                out.extend(self._decode(tp, p.records, p.aborted_transactions))
        return out

    def _decode(self, tp: TopicPartition, data: bytes, aborted: Sequence[tuple[int, int]]
                ) -> list[ConsumerRecord]:
        position = self._positions[tp]
        assert position is not None
        view = memoryview(data)
        out: list[ConsumerRecord] = []
        if len(view) > MAGIC and view[MAGIC] != MAGIC_V2:  # an old message set (magic 0/1)
            for r in decode_message_set(data, verify_crc=False):
                if r.offset >= position:
                    out.append(ConsumerRecord(tp.topic, tp.partition, r.offset, r.timestamp, 0,
                                              r.key, r.value, tuple(r.headers)))
                    position = r.offset + 1
            self._positions[tp] = position
            return out
        read_committed = self.isolation_level == READ_COMMITTED
        pending_aborts = sorted(((first, pid) for pid, first in aborted), reverse=True)
        aborting: set[int] = set()
        for pos, header in iter_batches(view):
            if header.next_offset <= position:
                continue
            if read_committed:
                while pending_aborts and pending_aborts[-1][0] <= header.last_offset:
                    aborting.add(pending_aborts.pop()[1])
            if header.is_control:
                if read_committed and header.producer_id in aborting:
                    for rec in decode_batch(view[pos:pos + header.size]):
                        marker = decode_control_record(rec.key, rec.value)
                        if marker.type == ControlType.ABORT:
                            aborting.discard(header.producer_id)
                position = header.next_offset
                continue
            if read_committed and header.is_transactional and header.producer_id in aborting:
                position = header.next_offset
                continue
            for r in decode_batch(view[pos:pos + header.size]):
                if r.offset >= position:
                    out.append(ConsumerRecord(tp.topic, tp.partition, r.offset, r.timestamp,
                                              header.timestamp_type, r.key, r.value,
                                              tuple(r.headers)))
            position = header.next_offset
        self._positions[tp] = position
        return out
