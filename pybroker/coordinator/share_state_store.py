"""The share coordinator (KIP-932): keeper of the share-partitions' durable state in
`__share_group_state`, serving it to the leaders of the data partitions.

Theory of operation
-------------------
A share-partition (group, topic, partition) is served by its data partition's leader, which
may be any broker and changes at a failover; its state must outlive that leader. As in Kafka,
the state of the key "group:topicId:partition" lives in partition
`abs(javaHash(key)) % share.coordinator.state.topic.num.partitions` of `__share_group_state`,
and the leader of that partition is the key's share coordinator: it appends each snapshot
there as leader (acks=all, committed before it answers) and keeps the latest per key in
memory, from which it answers reads. The data partition's leader reads a share-partition's
state when it first serves it (ReadShareGroupState) and writes every change before it
answers the acknowledgement that made it (WriteShareGroupState); through
`ShareCoordinator`'s persister, which calls this object directly when the key's coordinator
is this broker and Kafka's APIs 83-87 on another broker's otherwise.

Leadership of `__share_group_state` partitions is followed as the group coordinator follows
`__consumer_offsets`: a partition is loaded (its latest snapshot per key) when this broker
becomes its leader, at start or later (Kafka's onElection), and forgotten when another broker
does (onResignation). Until it is loaded, requests for its keys get
COORDINATOR_LOAD_IN_PROGRESS; a key whose partition another broker leads gets
NOT_COORDINATOR, and the persister looks again.

Fencing. Each snapshot carries the leader epoch of the data partition's leader that wrote
it; a read or write with an older epoch is refused (FENCED_LEADER_EPOCH), so a deposed
leader that has not heard yet cannot overwrite its successor's state. A newer epoch on a
read is taken (a new leader took over); the epoch is persisted with the next write. A
deleted key's state epoch fences a write at it or older (FENCED_STATE_EPOCH: a leader still
holding the deleted state); its tombstone carries that epoch in a header, so the fence
outlives a restart of the coordinator or its move to another broker.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from uuid import UUID

import trio

from protocol.errors import ErrorCode
from protocol.topic_id import parse_topic_id
from protocol.records.record import Record, build_batch
from pybroker.cluster.image import MetadataDelta, MetadataImage
from pybroker.cluster.metadata import MetadataStore
from pybroker.coordinator.internal_topic import APPEND_ERRORS, InternalTopic
from pybroker.coordinator.share_records import (
    ShareSnapshot, ShareStateKey, decode_key, decode_value, encode_key, encode_value,
    state_key_text,
)
from pybroker.storage.log_manager import LogManager

__all__ = ["ShareStateStore", "SHARE_STATE_TOPIC", "UNINITIALIZED", "StateKey"]

SHARE_STATE_TOPIC = "__share_group_state"

log = logging.getLogger(__name__)

StateKey = tuple[str, UUID, int]  # group id, topic id, partition
UNINITIALIZED = ShareSnapshot(0, -1, ())  # Kafka's answer for a key with no state
# The header of a tombstone that carries the deleted state's epoch (Kafka's own tombstones,
# a null value, carry none; Kafka's share coordinator reads no headers, so the log stays its)
DELETED_EPOCH_HEADER = "pybroker.deleted.state.epoch"


@dataclass(frozen=True)
class Tombstone:
    """A key's last record in the log is a tombstone; `state_epoch`: the deleted state's
    epoch it carries (None: a tombstone without the header, as Kafka writes them)."""

    state_epoch: int | None


class ShareStateStore:
    def __init__(self, node_id: int, metadata: MetadataStore, logs: LogManager,
                 topic: InternalTopic) -> None:
        self.node_id = node_id
        self.metadata = metadata
        self.logs = logs
        self.topic = topic
        self.states: dict[StateKey, ShareSnapshot] = {}
        # the state epoch of each deleted key: a key's state made again starts at a newer
        # one, and a write at that epoch or older (a leader that still holds the deleted
        # state) is fenced. Its tombstone carries it (DELETED_EPOCH_HEADER), so a restart or
        # a new coordinator reads it back for as long as the log keeps the tombstone
        # (delete.retention.ms once compacted, as Kafka keeps its own)
        self._deleted: dict[StateKey, int] = {}
        # the newest leader epoch seen per key on a read, not yet in a written snapshot
        self._epochs: dict[StateKey, int] = {}
        self.owned: set[int] = set()

    def partition_of(self, key: StateKey) -> int:
        return self.topic.partition_for(state_key_text(ShareStateKey(*key)))

    def coordinator_of(self, key: StateKey) -> int:
        """The node id of the key's share coordinator, -1 when none is known (the topic does
        not exist yet, or its partition has no leader)."""
        state = self.metadata.image.partition(SHARE_STATE_TOPIC, self.partition_of(key))
        return -1 if state is None else state.leader

    async def coordinator_for(self, key: str, listener: str | None = None
                              ) -> tuple[ErrorCode, int, str, int]:
        """FindCoordinator's share key type: (error, node id, host, port) of the leader of
        the partition of `key`, "group:topicId:partition" (INVALID_REQUEST when it is not
        one, as Kafka's SharePartitionKey check), the topic created on first use."""
        group, _, rest = key.rpartition(":")
        group, _, topic_id = group.rpartition(":")
        try:
            parse_topic_id(topic_id)
            valid = bool(group) and int(rest) >= 0
        except ValueError:
            valid = False
        if not valid:
            return ErrorCode.INVALID_REQUEST, -1, "", -1
        return await self.topic.coordinator_for(key, listener)

    def _availability(self, key: StateKey) -> ErrorCode:
        partition = self.partition_of(key)
        if partition in self.owned:
            return ErrorCode.NONE
        state = self.metadata.image.partition(SHARE_STATE_TOPIC, partition)
        if state is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if state.leader == self.node_id:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def _latest(self, key: StateKey) -> ShareSnapshot:
        """The key's latest snapshot; none (UNINITIALIZED) after a delete is at the state
        epoch past the deleted one."""
        snapshot = self.states.get(key)
        if snapshot is not None:
            return snapshot
        deleted = self._deleted.get(key)
        return UNINITIALIZED if deleted is None else replace(UNINITIALIZED,
                                                             state_epoch=deleted + 1)

    def _epoch(self, key: StateKey) -> int:
        snapshot = self.states.get(key)
        return max(self._epochs.get(key, -1), -1 if snapshot is None else snapshot.leader_epoch)

    # -- the APIs --------------------------------------------------------------------------------

    def read(self, key: StateKey, leader_epoch: int) -> tuple[ErrorCode, ShareSnapshot]:
        """ReadShareGroupState: the key's latest snapshot (UNINITIALIZED: none), taking a
        newer leader epoch (-1, a reader that is no leader: none checked)."""
        code = self._availability(key)
        if code:
            return code, UNINITIALIZED
        if leader_epoch < 0:
            return ErrorCode.NONE, self._latest(key)
        if leader_epoch < self._epoch(key):
            return ErrorCode.FENCED_LEADER_EPOCH, UNINITIALIZED
        if leader_epoch > self._epoch(key):
            self._epochs[key] = leader_epoch
        return ErrorCode.NONE, self._latest(key)

    def summary(self, key: StateKey) -> tuple[ErrorCode, ShareSnapshot]:
        """ReadShareGroupStateSummary: the key's latest snapshot (UNINITIALIZED: none) for the
        group coordinator, which is no data partition's leader: no leader epoch is checked or
        taken."""
        code = self._availability(key)
        return code, UNINITIALIZED if code else self._latest(key)

    async def write(self, snapshots: Mapping[StateKey, ShareSnapshot], *,
                    initialize: bool = False) -> dict[StateKey, ErrorCode]:
        """WriteShareGroupState, or with `initialize` InitializeShareGroupState (a new start,
        from no leader: the leader epoch seen is kept): each key's snapshot appended to its
        partition, one batch per partition, committed before this returns; each key's code.
        A state epoch older than the stored one is FENCED_STATE_EPOCH (an alter started the
        share-partition afresh since its leader read it: the leader reads it again)."""
        codes: dict[StateKey, ErrorCode] = {}
        by_partition: dict[int, list[StateKey]] = {}
        snapshots = dict(snapshots)
        for key, snapshot in snapshots.items():
            code = self._availability(key)
            stored = self.states.get(key)
            if not code and stored is not None and snapshot.state_epoch < stored.state_epoch:
                code = ErrorCode.FENCED_STATE_EPOCH
            if not code and stored is None and snapshot.state_epoch <= self._deleted.get(
                    key, -1):
                code = ErrorCode.FENCED_STATE_EPOCH  # a leader's view of deleted state
            if not code and initialize:
                snapshots[key] = replace(snapshot, leader_epoch=self._epoch(key))
            elif not code and snapshot.leader_epoch < self._epoch(key):
                code = ErrorCode.FENCED_LEADER_EPOCH
            if code:
                codes[key] = code
            else:
                by_partition.setdefault(self.partition_of(key), []).append(key)
        for partition, keys in sorted(by_partition.items()):
            batch = build_batch([Record(encode_key(ShareStateKey(*k)),
                                        encode_value(snapshots[k])) for k in keys])
            error, _ = await self.topic.append(partition, batch)
            for key in keys:
                codes[key] = APPEND_ERRORS.get(error, error)
                if not error and partition in self.owned:
                    self.states[key] = snapshots[key]
                    self._epochs.pop(key, None)
                    self._deleted.pop(key, None)
        return codes

    async def delete(self, keys: Iterable[StateKey]) -> dict[StateKey, ErrorCode]:
        """DeleteShareGroupState: a tombstone per key, committed before this returns."""
        codes: dict[StateKey, ErrorCode] = {}
        by_partition: dict[int, list[StateKey]] = {}
        for key in keys:
            code = self._availability(key)
            if code:
                codes[key] = code
            else:
                by_partition.setdefault(self.partition_of(key), []).append(key)
        for partition, part_keys in sorted(by_partition.items()):
            batch = build_batch([Record(encode_key(ShareStateKey(*k)), None,
                                        _deleted_epoch_header(self._deleted_epoch(k)))
                                 for k in part_keys])
            error, _ = await self.topic.append(partition, batch)
            for key in part_keys:
                codes[key] = APPEND_ERRORS.get(error, error)
                if not error:
                    deleted = self._deleted_epoch(key)
                    self.states.pop(key, None)
                    if deleted is not None:
                        self._deleted[key] = deleted
                    self._epochs.pop(key, None)
        return codes

    def _deleted_epoch(self, key: StateKey) -> int | None:
        """The epoch a delete of `key` now records: its state's, or, with none, that of the
        delete before (a second delete keeps the fence), None if neither."""
        stored = self.states.get(key)
        return stored.state_epoch if stored is not None else self._deleted.get(key)

    def keys_of(self, group_id: str) -> list[StateKey]:
        """The keys of the group's share-partitions this coordinator holds state for."""
        return [k for k in self.states if k[0] == group_id]

    # -- leadership ------------------------------------------------------------------------------

    def load(self) -> int:
        """At start, before the broker listens: every partition this broker leads."""
        info = self.metadata.image.topics.get(SHARE_STATE_TOPIC)
        if info is None:
            return 0
        return sum(self.load_partition(p.partition) for p in info.partitions
                   if p.leader == self.node_id)

    def load_partition(self, index: int) -> int:
        """Adopt the partition's state and own it (onElection); the number of keys with
        state."""
        return self._adopt(index, self._read_partition(index))

    def _read_partition(self, index: int) -> dict[StateKey, ShareSnapshot | Tombstone]:
        """The latest snapshot or tombstone of each key in the partition. An undecodable
        record is logged and skipped."""
        latest: dict[StateKey, ShareSnapshot | Tombstone] = {}
        plog = self.logs.get(SHARE_STATE_TOPIC, index)
        for _, rec in () if plog is None else InternalTopic.read(plog):
            try:
                key = decode_key(rec.key or b"")
                if key is None:
                    continue
                latest[(key.group_id, key.topic_id, key.partition)] = (
                    _tombstone(rec.headers) if rec.value is None else decode_value(rec.value))
            except Exception as exc:  # struct, UTF-8 or value errors
                log.warning("skipping undecodable %s record at %d-%d: %s",
                            SHARE_STATE_TOPIC, index, rec.offset, exc)
        return latest

    def _adopt(self, index: int, latest: Mapping[StateKey, ShareSnapshot | Tombstone]) -> int:
        for key, snapshot in latest.items():
            if isinstance(snapshot, Tombstone):
                self.states.pop(key, None)
                if snapshot.state_epoch is None:
                    self._deleted.pop(key, None)
                else:
                    self._deleted[key] = snapshot.state_epoch
            else:
                self.states[key] = snapshot
                self._deleted.pop(key, None)
        self.owned.add(index)
        loaded = sum(1 for s in latest.values() if isinstance(s, ShareSnapshot))
        log.info("share coordinator of %s-%d: %d share-partition(s) loaded", SHARE_STATE_TOPIC,
                 index, loaded)
        return loaded

    def unload_partition(self, index: int) -> None:
        """onResignation: another broker leads the partition now."""
        self.owned.discard(index)
        for key in [k for k in self.states if self.partition_of(k) == index]:
            del self.states[key]
        for key in [k for k in self._epochs if self.partition_of(k) == index]:
            del self._epochs[key]
        for key in [k for k in self._deleted if self.partition_of(k) == index]:
            del self._deleted[key]
        log.info("resigned as share coordinator of %s-%d", SHARE_STATE_TOPIC, index)

    async def apply_delta(self, image: MetadataImage, delta: MetadataDelta) -> None:
        """A metadata store listener: load a partition of __share_group_state this broker
        comes to lead (its log read off the loop), forget one it no longer leads; the
        topic's deletion forgets everything."""
        if SHARE_STATE_TOPIC in delta.deleted_topics:
            self.owned.clear()
            self.states.clear()
            self._epochs.clear()
            self._deleted.clear()
            return
        info = image.topics.get(SHARE_STATE_TOPIC)
        if info is None:
            return
        for index in sorted(delta.changed_partitions.get(SHARE_STATE_TOPIC, ())):
            state = info.partitions[index]
            if state.leader == self.node_id and index not in self.owned:
                latest = await trio.to_thread.run_sync(self._read_partition, index)
                self._adopt(index, latest)
            elif state.leader != self.node_id and index in self.owned:
                self.unload_partition(index)


def _deleted_epoch_header(epoch: int | None) -> tuple[tuple[str, bytes], ...]:
    return () if epoch is None else ((DELETED_EPOCH_HEADER, str(epoch).encode()),)


def _tombstone(headers: Sequence[tuple[str, bytes | None]]) -> Tombstone:
    """A tombstone read back, with the deleted state's epoch its header carries; a header
    that does not parse is taken as none (a Kafka tombstone)."""
    for name, value in headers:
        if name == DELETED_EPOCH_HEADER and value is not None:
            try:
                return Tombstone(int(value.decode()))
            except (UnicodeDecodeError, ValueError):
                break
    return Tombstone(None)

