"""Committed offsets, group administration, retention and replay: the durable half of the
group state machine (mixed into `group_state.GroupStateMachine`).

Every change made here is expressed as records first. An operation validates against the state
in memory and returns the OffsetCommit / GroupMetadata records (tombstones for deletions);
`replay` applies them once they are in the log, and the very same `replay` rebuilds the state
when `__consumer_offsets` is loaded at start. So an acknowledged commit is in the log before
the client hears of it, and a restart reproduces exactly what clients were told.

Transactional commits (TxnOffsetCommit) are validated here too; their records are replayed with
the producer id of their transactional batch and wait in `pending` (`pending_txn_offsets`) until
`complete_txn` sees the transaction's marker. Replay also learns each record's log offset, the
order Kafka uses between a transactional and a plain commit of the same partition.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence, TypeVar, Union

from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from pybroker.coordinator.group_metadata import (
    CONSUMER_PROTOCOL_TYPE, Group, GroupState, Member,
)
from pybroker.coordinator.group_records import (
    NO_PRODUCER_ID, GroupMetadataRecord, GroupRecord, OffsetAndMetadata, OffsetCommitRecord,
    OffsetKey,
)
from pybroker.coordinator.pending_txn_offsets import PendingTxnOffsets

from pybroker.coordinator.group_types import GroupConfig, Outcome

if TYPE_CHECKING:
    from pybroker.coordinator.timers import Timers

T = TypeVar("T")
_S = GroupState
# What OffsetFetch gets for one partition: its committed offset, None without one, or
# UNSTABLE_OFFSET_COMMIT (asked for stable offsets while one is pending in a transaction).
FetchedOffset = Union[OffsetAndMetadata, ErrorCode, None]
CLASSIC_GROUP_TYPE = "classic"


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...] = ()


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = CLASSIC_GROUP_TYPE


# What a valid commit does in each state: store it, store it and count it as a heartbeat, or
# refuse it because the member has joined but not yet synced its new assignment.
_STORE, _STORE_AND_HEARTBEAT = "store", "store+heartbeat"
COMMIT_BY_STATE: dict[GroupState, str | ErrorCode] = {
    _S.EMPTY: _STORE,
    _S.PREPARING_REBALANCE: _STORE_AND_HEARTBEAT,
    _S.STABLE: _STORE_AND_HEARTBEAT,
    _S.COMPLETING_REBALANCE: ErrorCode.REBALANCE_IN_PROGRESS,
}


class OffsetOperations:
    groups: dict[str, Group]
    config: GroupConfig
    timers: "Timers"
    _records: list[GroupRecord]

    if TYPE_CHECKING:  # provided by GroupStateMachine
        def _finish(self, response: T | None) -> Outcome[T]: ...

        def _schedule_heartbeat(self, group: Group, member: Member, now: int) -> None: ...

        def _remove_member(self, group: Group, member: Member) -> None: ...

    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        # The log offset of each committed offset's record (a replay that names none counts
        # as written after everything replayed before it).
        self._committed_at: dict[str, dict[TopicPartition, int]] = {}
        self._last_log_offset = -1
        self.pending = PendingTxnOffsets()

    def has_offsets(self, group_id: str) -> bool:
        """Committed offsets, or a transaction that committed some and has not ended."""
        return group_id in self.offsets or self.pending.has_open(group_id)

    # -- OffsetCommit --------------------------------------------------------------------------
    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                       generation_id: int, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                       now_ms: int) -> Outcome[dict[TopicPartition, ErrorCode]]:
        """Validate a commit and return its records; the offsets change on replay.

        Generation -1 with no member id is a "simple" commit, allowed only while the group has
        no members (it creates the group if needed); anything else must come from a current
        member of the current generation.
        """
        error = self._validate_commit(group_id, member_id, group_instance_id, generation_id,
                                      now_ms)
        if error:
            return self._finish({tp: error for tp in offsets})
        return self._finish(self._offset_records(group_id, offsets))

    # -- TxnOffsetCommit -----------------------------------------------------------------------
    def commit_txn_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                           generation_id: int,
                           offsets: Mapping[TopicPartition, OffsetAndMetadata]
                           ) -> Outcome[dict[TopicPartition, ErrorCode]]:
        """Validate a transactional commit and return its records, which the owner writes in
        one transactional batch of the producer and replays as pending.

        Kafka's rules (GroupCoordinator.handleTxnCommitOffsets): an unknown group is taken as
        an Empty one (a producer that only stores offsets needs no membership); a member id,
        instance id or generation (v3+) is checked as OffsetCommit checks it; but without any
        of them the commit is accepted whatever the group's state, since v0-2 carry none. No
        state refuses it (not even CompletingRebalance) and it is no heartbeat.
        """
        if not group_id:
            return self._finish({tp: ErrorCode.INVALID_GROUP_ID for tp in offsets})
        error = self._validate_txn_commit(group_id, member_id, group_instance_id,
                                          generation_id)
        if error:
            return self._finish({tp: error for tp in offsets})
        return self._finish(self._offset_records(group_id, offsets))

    def _validate_txn_commit(self, group_id: str, member_id: str, instance_id: str | None,
                             generation_id: int) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            group = Group(group_id)  # as Kafka creates it: Empty, generation 0, no members
        elif group.state is _S.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.state is _S.EMPTY:
            return ErrorCode.NONE
        if generation_id >= 0 or member_id != "" or instance_id is not None:
            error = group.validate_member(member_id, instance_id)
            if error:
                return error
            if generation_id != group.generation:
                return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def _offset_records(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]
                        ) -> dict[TopicPartition, ErrorCode]:
        results: dict[TopicPartition, ErrorCode] = {}
        for (topic, partition), value in offsets.items():
            if len(value.metadata) > self.config.offset_metadata_max_bytes:
                results[(topic, partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            self._records.append(
                OffsetCommitRecord(OffsetKey(group_id, topic, partition), value))
            results[(topic, partition)] = ErrorCode.NONE
        return results

    def complete_txn(self, producer_id: int, commit: bool,
                     include: Callable[[str], bool] = lambda _: True) -> None:
        """A COMMIT or ABORT marker of `producer_id` was written to (or read from) a partition
        of __consumer_offsets; `include` says which groups live there. On commit each pending
        offset becomes the committed one unless a record later in the log already replaced it
        (a plain commit after the transactional one); on abort they are dropped."""
        done = self.pending.complete(producer_id, include)
        if not commit:
            return
        for group_id, offsets in done.items():
            for tp, pending in offsets.items():
                at = self._committed_at.get(group_id, {}).get(tp)
                if at is None or at < pending.log_offset:
                    self._store(group_id, tp, pending.value, pending.log_offset)

    def _validate_commit(self, group_id: str, member_id: str, instance_id: str | None,
                         generation_id: int, now: int) -> ErrorCode:
        group = self.groups.get(group_id)
        membership = generation_id >= 0 or member_id != "" or instance_id is not None
        if group is None:
            if not membership:
                return ErrorCode.NONE
            return ErrorCode.ILLEGAL_GENERATION if generation_id >= 0 \
                else ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is _S.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if membership:
            error = group.validate_member(member_id, instance_id)
            if error:
                return error
            if generation_id != group.generation:
                return ErrorCode.ILLEGAL_GENERATION
        elif group.state is not _S.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID  # only members commit to a group with members
        action = COMMIT_BY_STATE[group.state]
        if isinstance(action, ErrorCode):
            return action
        if action == _STORE_AND_HEARTBEAT and member_id in group.members:
            self._schedule_heartbeat(group, group.members[member_id], now)
        return ErrorCode.NONE

    # -- OffsetFetch ---------------------------------------------------------------------------
    def fetch_offsets(self, group_id: str, partitions: Sequence[TopicPartition] | None,
                      require_stable: bool = False
                      ) -> tuple[ErrorCode, list[tuple[str, int, FetchedOffset]]]:
        """Committed offsets; None for a partition without one. `partitions` None = all
        committed ones (a partition with only a pending offset is not listed, as in Kafka).

        With `require_stable`, a partition with an offset pending in a transaction gets
        UNSTABLE_OFFSET_COMMIT in place of its offset: per partition, never for the whole
        group (Kafka 3.9, every OffsetFetch version), so the consumer retries just that.
        """
        stored = self.offsets.get(group_id, {})
        wanted = sorted(stored) if partitions is None else partitions
        unstable = self.pending.partitions(group_id) if require_stable else set()
        return ErrorCode.NONE, [
            (t, p, ErrorCode.UNSTABLE_OFFSET_COMMIT if (t, p) in unstable else stored.get((t, p)))
            for t, p in wanted]

    # -- OffsetDelete and DeleteGroups ---------------------------------------------------------
    def delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]
                       ) -> Outcome[tuple[ErrorCode, dict[TopicPartition, ErrorCode]]]:
        if not group_id:
            return self._finish((ErrorCode.INVALID_GROUP_ID, {}))
        group = self.groups.get(group_id)
        if group is None or group.state is _S.DEAD:
            return self._finish((ErrorCode.GROUP_ID_NOT_FOUND, {}))
        results: dict[TopicPartition, ErrorCode] = {}
        if group.state is _S.EMPTY:
            eligible = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            eligible = []
            for tp in partitions:
                if group.is_subscribed_to(tp[0]):
                    results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return self._finish((ErrorCode.NON_EMPTY_GROUP, {}))
        for tp in eligible:
            results[tp] = ErrorCode.NONE
        self._remove_offsets(group, eligible)
        return self._finish((ErrorCode.NONE, results))

    def delete_groups(self, group_ids: Iterable[str]) -> Outcome[dict[str, ErrorCode]]:
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group_id is None:
                results[group_id] = ErrorCode.INVALID_GROUP_ID
            elif group is None or group.state is _S.DEAD:
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.state is not _S.EMPTY or group.pending_members:
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                # Offsets pending in a transaction are deleted too: tombstones for them, and
                # the group's tombstone drops them (Kafka's deleteAllOffsets).
                everything = set(self.offsets.get(group_id, {})) | self.pending.partitions(group_id)
                if not self._remove_offsets(group, everything):
                    self._records.append(GroupMetadataRecord(group_id, None))
                results[group_id] = ErrorCode.NONE
        return self._finish(results)

    def _remove_offsets(self, group: Group, partitions: Iterable[TopicPartition]) -> bool:
        """Tombstones for these offsets (committed or pending in a transaction), and for the
        group itself if that leaves an Empty group with nothing committed and no transaction
        open (Kafka's cleanupGroupMetadata). True if the group goes too."""
        stored = self.offsets.get(group.group_id, {})
        pending = self.pending.partitions(group.group_id)
        gone = {tp for tp in partitions if tp in stored or tp in pending}
        for topic, partition in sorted(gone):
            self._records.append(
                OffsetCommitRecord(OffsetKey(group.group_id, topic, partition), None))
        if (group.state is _S.EMPTY and stored.keys() <= gone
                and not group.pending_members and not self.pending.has_open(group.group_id)):
            self._records.append(GroupMetadataRecord(group.group_id, None))
            return True
        return False

    # -- retention and deleted topics ----------------------------------------------------------
    def cleanup(self, now_ms: int, topic_exists: Callable[[str], bool] = lambda _: True
                ) -> Outcome[None]:
        """Expire offsets (offsets.retention.minutes, Kafka's KIP-211 rules), drop offsets of
        topics that no longer exist, and delete Empty groups left with nothing committed.

        An offset with a transactional one pending for its partition does not expire, and a
        group with an open transaction is not deleted (Kafka's cleanupExpiredOffsets)."""
        for group in list(self.groups.values()):
            gid = group.group_id
            stored = self.offsets.get(gid, {})
            expired = [tp for tp, value in stored.items()
                       if not topic_exists(tp[0]) or (
                           self._is_expired(group, tp[0], value, now_ms)
                           and not self.pending.is_pending(gid, tp))]
            if expired or (group.state is _S.EMPTY and not stored):
                self._remove_offsets(group, expired)
        return self._finish(None)

    def _is_expired(self, group: Group, topic: str, value: OffsetAndMetadata,
                    now: int) -> bool:
        if group.protocol_type is not None and group.state is _S.EMPTY:
            # Nobody consumes: count from when the group became empty.
            base = group.state_timestamp if group.state_timestamp >= 0 \
                else value.commit_timestamp
        elif (group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.state is _S.STABLE
              and group.subscribed_topics is not None):
            if topic in group.subscribed_topics:
                return False
            base = value.commit_timestamp  # a topic the members no longer subscribe to
        elif group.protocol_type is None:
            base = value.commit_timestamp  # a standalone consumer that only stores offsets
        else:
            return False
        if value.expire_timestamp is not None:
            return now >= value.expire_timestamp
        return now - base >= self.config.offsets_retention_ms

    def topics_deleted(self, topics: Iterable[str]) -> Outcome[None]:
        """Offsets of deleted topics go with them."""
        gone = set(topics)
        for group in list(self.groups.values()):
            stored = self.offsets.get(group.group_id, {})
            mine = [tp for tp in set(stored) | self.pending.partitions(group.group_id)
                    if tp[0] in gone]
            if mine:
                self._remove_offsets(group, mine)
        return self._finish(None)

    # -- DescribeGroups and ListGroups ---------------------------------------------------------
    def describe_group(self, group_id: str) -> GroupDescription:
        group = self.groups.get(group_id)
        if group is None or group.state is _S.DEAD:
            return GroupDescription(group_id, ErrorCode.NONE, _S.DEAD.value, "", "")
        stable = group.state is _S.STABLE and group.protocol_name is not None
        members = tuple(
            MemberDescription(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                m.assignment if stable else b"")
            for m in group.members.values())
        return GroupDescription(group_id, ErrorCode.NONE, group.state.value,
                                group.protocol_type or "",
                                group.protocol_name if stable and group.protocol_name else "",
                                members)

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()
                    ) -> list[GroupListing]:
        """Groups, filtered by state names and group types (both case-insensitive; empty means
        any). Every group here is a classic group."""
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and CLASSIC_GROUP_TYPE not in wanted_types:
            return []
        return [GroupListing(g.group_id, g.protocol_type or "", g.state.value)
                for g in self.groups.values()
                if g.state is not _S.DEAD
                and (not wanted_states or g.state.value.lower() in wanted_states)]

    # -- replay --------------------------------------------------------------------------------
    def replay(self, record: GroupRecord, log_offset: int | None = None,
               producer_id: int = NO_PRODUCER_ID, *, loading: bool = True) -> None:
        """Apply one record of __consumer_offsets: at load (`loading`), and live once a record
        this machine produced is written (`loading=False`).

        `log_offset` is where its batch starts in the log; `producer_id` that of a
        transactional batch, whose offset commits stay pending until the marker
        (`complete_txn`). A tombstone removes pending offsets of its partition too.

        Offsets change only here, loading or live alike. A group's membership does not: it
        changes in memory as requests arrive, and its GroupMetadata record is a snapshot taken
        from memory. So a snapshot is adopted only when loading, when the log is all there is.
        Live, the group in memory is never older than a snapshot it produced, and often newer:
        on a cluster the write waits for every in-sync replica (acks=all), and a LeaveGroup,
        JoinGroup or session expiry that lands meanwhile must stand (issue #35: adopting the
        snapshot put a departed member back, without a session timer, for good). Likewise a
        group tombstone written live forgets the group only if it is still Empty; a member
        that joined while the tombstone was being written keeps the group (the next snapshot
        recreates it in the log). A generation or version comparison would not do: a leave
        does not move the generation, and a counter kept only in memory means nothing to
        records read back at load.
        """
        if log_offset is None:
            log_offset = self._last_log_offset + 1
        self._last_log_offset = max(self._last_log_offset, log_offset)
        if isinstance(record, OffsetCommitRecord):
            key = record.key
            tp = (key.topic, key.partition)
            if record.value is None:
                stored = self.offsets.get(key.group)
                if stored is not None:
                    stored.pop(tp, None)
                    self._committed_at.get(key.group, {}).pop(tp, None)
                    if not stored:
                        del self.offsets[key.group]
                        self._committed_at.pop(key.group, None)
                self.pending.remove_partition(key.group, tp)
                return
            if producer_id != NO_PRODUCER_ID:
                self.pending.add(producer_id, key.group, tp, record.value, log_offset)
            else:
                self._store(key.group, tp, record.value, log_offset)
            if key.group not in self.groups:
                # Offsets without group metadata: a standalone consumer's group.
                self.groups[key.group] = Group(key.group)
            return
        group = self.groups.get(record.group)
        if record.value is None:
            # The group's metadata goes; its committed offsets go by their own tombstones
            # (DeleteGroups and retention write them first), as in Kafka: a classic group
            # upgraded to a consumer group tombstones its metadata and keeps its offsets,
            # which a member-less group holds, as for any group with offsets only.
            self.pending.remove_group(record.group)
            if group is not None and (loading or self._still_deletable(group)):
                self._forget(group)
                if record.group in self.offsets:
                    self.groups[record.group] = Group(record.group)
            return
        if not loading:
            return  # memory made this snapshot and may have moved on since: it stands
        if group is None or group.snapshot() != record.value:
            if group is not None:
                self._forget(group)
            self.groups[record.group] = Group.from_snapshot(record.group, record.value)

    @staticmethod
    def _still_deletable(group: Group) -> bool:
        """A live tombstone's group as it was when its deletion was decided: Empty, nobody
        in it or waiting to join."""
        return group.state is _S.EMPTY and not group.members and not group.pending_members

    def _store(self, group_id: str, tp: TopicPartition, value: OffsetAndMetadata,
               log_offset: int) -> None:
        self.offsets.setdefault(group_id, {})[tp] = value
        self._committed_at.setdefault(group_id, {})[tp] = log_offset

    def _forget(self, group: Group) -> None:
        """Take a group out of the coordinator: it is Dead to anyone still holding it."""
        for member in list(group.members.values()):
            self._remove_member(group, member)
        group.transition(_S.DEAD, group.state_timestamp)
        del self.groups[group.group_id]
