"""Transactional offset commits in the pure group state machine: pending per producer until the
transaction's marker, Kafka's later-record-wins rule against plain commits, require_stable,
retention and deletion around open transactions, and TxnOffsetCommit's validation."""
from __future__ import annotations

from typing import Any

import pytest

from protocol.errors import ErrorCode as E
from pybroker.coordinator.group_records import (
    GroupMetadataRecord, GroupRecord, OffsetAndMetadata, OffsetCommitRecord,
)
from pybroker.coordinator.group_state import GroupConfig, GroupStateMachine
from tests.coordinator.driver import Driver

P1, P2 = 1000, 2000


class Log:
    """What the façade does: records replayed in order with log offsets, transactional ones
    with their producer id; kept so that a fresh machine can load the same stream."""

    def __init__(self, d: Driver) -> None:
        self.d = d
        self.entries: list[tuple[Any, int, int]] = []  # (record or ("marker", commit), offset, pid)

    @property
    def next_offset(self) -> int:
        return len(self.entries) + 100

    def txn_commit(self, pid: int, offsets: dict[tuple[str, int], int], *, group: str = "g",
                   member: str = "", generation: int = -1, instance: str | None = None,
                   metadata: str = "") -> dict[tuple[str, int], E]:
        values = {tp: OffsetAndMetadata(o, metadata, self.d.now) for tp, o in offsets.items()}
        out = self.d.m.commit_txn_offsets(group, member, instance, generation, values)
        self._write(out.records, pid)
        assert out.response is not None
        return out.response

    def commit(self, offsets: dict[tuple[str, int], int], *, group: str = "g") -> None:
        values = {tp: OffsetAndMetadata(o, "", self.d.now) for tp, o in offsets.items()}
        out = self.d.m.commit_offsets(group, "", None, -1, values, self.d.now)
        assert out.response is not None and not any(out.response.values())
        self._write(out.records, -1)

    def run(self, outcome: Any) -> Any:
        self._write(outcome.records, -1)
        return outcome.response

    def _write(self, records: list[GroupRecord], pid: int) -> None:
        base = self.next_offset  # one batch: every record at its base offset
        for record in records:
            self.d.m.replay(record, base, pid)
            self.entries.append((record, base, pid))

    def marker(self, pid: int, commit: bool) -> None:
        self.entries.append((("marker", commit), self.next_offset, pid))
        self.d.m.complete_txn(pid, commit)

    def load(self) -> GroupStateMachine:
        fresh = GroupStateMachine(GroupConfig())
        for record, offset, pid in self.entries:
            if isinstance(record, tuple):
                fresh.complete_txn(pid, record[1])
            else:
                fresh.replay(record, offset, pid)
        return fresh


@pytest.fixture
def log() -> Log:
    return Log(Driver())


def offsets(m: GroupStateMachine, group: str = "g", stable: bool = False,
            partitions: list[tuple[str, int]] | None = None) -> dict[tuple[str, int], Any]:
    code, found = m.fetch_offsets(group, partitions, stable)
    assert code == E.NONE
    return {(t, p): v.offset if isinstance(v, OffsetAndMetadata) else v for t, p, v in found}


def test_pending_until_commit_marker(log: Log) -> None:
    m = log.d.m
    log.commit({("t", 0): 1})
    assert log.txn_commit(P1, {("t", 0): 5, ("t", 1): 6}) == {("t", 0): E.NONE, ("t", 1): E.NONE}
    # Not visible; only the committed partition is listed; require_stable flags each pending one.
    assert offsets(m) == {("t", 0): 1}
    assert offsets(m, partitions=[("t", 0), ("t", 1), ("t", 2)]) == \
        {("t", 0): 1, ("t", 1): None, ("t", 2): None}
    assert offsets(m, stable=True, partitions=[("t", 0), ("t", 1), ("t", 2)]) == \
        {("t", 0): E.UNSTABLE_OFFSET_COMMIT, ("t", 1): E.UNSTABLE_OFFSET_COMMIT, ("t", 2): None}
    assert offsets(m, stable=True) == {("t", 0): E.UNSTABLE_OFFSET_COMMIT}
    log.marker(P1, commit=True)
    assert offsets(m, stable=True) == {("t", 0): 5, ("t", 1): 6}
    assert not m.pending.has_open("g")


def test_abort_drops_pending(log: Log) -> None:
    m = log.d.m
    log.commit({("t", 0): 1})
    log.txn_commit(P1, {("t", 0): 5, ("t", 1): 6})
    log.marker(P1, commit=False)
    assert offsets(m, stable=True, partitions=[("t", 0), ("t", 1)]) == \
        {("t", 0): 1, ("t", 1): None}
    log.marker(P1, commit=True)  # a second marker finds nothing left
    assert offsets(m) == {("t", 0): 1}


def test_a_retried_commit_in_the_transaction_replaces_the_earlier(log: Log) -> None:
    log.txn_commit(P1, {("t", 0): 5})
    log.txn_commit(P1, {("t", 0): 7})
    log.marker(P1, commit=True)
    assert offsets(log.d.m) == {("t", 0): 7}


def test_later_record_wins_between_plain_and_transactional_commits(log: Log) -> None:
    m = log.d.m
    # A plain commit written after the transactional one wins at the commit marker...
    log.txn_commit(P1, {("t", 0): 5, ("t", 1): 50})
    log.commit({("t", 0): 9})
    log.marker(P1, commit=True)
    assert offsets(m) == {("t", 0): 9, ("t", 1): 50}
    # ...one written before it loses.
    log.commit({("t", 0): 10})
    log.txn_commit(P2, {("t", 0): 20})
    log.marker(P2, commit=True)
    assert offsets(m) == {("t", 0): 20, ("t", 1): 50}
    # Loading the same log gives the same answer, and nothing pending.
    fresh = log.load()
    assert offsets(fresh) == {("t", 0): 20, ("t", 1): 50}
    assert not fresh.pending.has_open("g")


def test_producers_and_partitions_complete_independently(log: Log) -> None:
    m = log.d.m
    log.txn_commit(P1, {("t", 0): 1})
    log.txn_commit(P2, {("t", 1): 2})
    log.txn_commit(P1, {("t", 0): 3}, group="other")
    # A marker in the partition of "other" only completes "other".
    m.complete_txn(P1, True, lambda group: group == "other")
    assert offsets(m, "other") == {("t", 0): 3}
    assert offsets(m) == {} and m.pending.producers("g") == {P1, P2}
    m.complete_txn(P2, False)
    m.complete_txn(P1, True)
    assert offsets(m) == {("t", 0): 1}


def test_load_with_and_without_the_marker(log: Log) -> None:
    log.commit({("t", 0): 1})
    log.txn_commit(P1, {("t", 0): 5})
    log.txn_commit(P2, {("t", 1): 7})
    log.marker(P1, commit=True)
    fresh = log.load()
    # P1 ended in the log; P2 did not: still pending, until its marker comes live.
    assert offsets(fresh, stable=True, partitions=[("t", 0), ("t", 1)]) == \
        {("t", 0): 5, ("t", 1): E.UNSTABLE_OFFSET_COMMIT}
    assert fresh.pending.pending(P2, "g") == {("t", 1): OffsetAndMetadata(7, "", 0)}
    fresh.complete_txn(P2, True)
    assert offsets(fresh) == {("t", 0): 5, ("t", 1): 7}


def test_a_group_known_only_by_pending_offsets_is_loaded_empty(log: Log) -> None:
    log.txn_commit(P1, {("t", 0): 5}, group="only-txn")
    fresh = log.load()
    assert fresh.groups["only-txn"].state.value == "Empty"
    assert fresh.pending.has_open("only-txn")


def test_retention_keeps_open_transactions(log: Log) -> None:
    d = log.d
    log.commit({("t", 0): 1, ("t", 1): 2})
    log.txn_commit(P1, {("t", 0): 5})
    log.txn_commit(P1, {("u", 0): 1}, group="only-txn")
    d.now += d.m.config.offsets_retention_ms + 1
    log.run(d.m.cleanup(d.now))
    # ("t", 0) has a pending offset: kept; ("t", 1) expired; the group has a transaction open.
    assert offsets(d.m) == {("t", 0): 1}
    assert "g" in d.m.groups and "only-txn" in d.m.groups
    log.marker(P1, commit=False)
    log.run(d.m.cleanup(d.now))
    assert "g" not in d.m.groups and "only-txn" not in d.m.groups
    assert not d.m.offsets


def test_delete_groups_deletes_pending_offsets_too(log: Log) -> None:
    d = log.d
    log.commit({("t", 0): 1})
    log.txn_commit(P1, {("t", 0): 5, ("t", 1): 6})
    out = d.m.delete_groups(["g"])
    records = out.records
    assert out.response == {"g": E.NONE}
    tombstones = {(r.key.topic, r.key.partition) for r in records
                  if isinstance(r, OffsetCommitRecord) and r.value is None}
    assert tombstones == {("t", 0), ("t", 1)}
    assert [r for r in records if isinstance(r, GroupMetadataRecord)] == \
        [GroupMetadataRecord("g", None)]
    log.run(out)
    assert "g" not in d.m.groups and not d.m.pending.has_open("g")
    log.marker(P1, commit=True)  # the transaction's end brings nothing back
    assert "g" not in d.m.groups and offsets(d.m) == {}
    fresh = log.load()
    assert "g" not in fresh.groups and offsets(fresh) == {}


def test_offset_delete_and_topic_deletion_tombstone_pending_offsets(log: Log) -> None:
    d = log.d
    log.txn_commit(P1, {("t", 0): 5, ("u", 0): 6})
    log.commit({("v", 0): 1})
    code, per_partition = log.run(d.m.delete_offsets("g", [("t", 0)]))
    assert (code, per_partition) == (E.NONE, {("t", 0): E.NONE})
    log.run(d.m.topics_deleted(["u"]))
    assert not d.m.pending.is_pending("g", ("t", 0))
    assert not d.m.pending.is_pending("g", ("u", 0))
    log.marker(P1, commit=True)
    assert offsets(d.m) == {("v", 0): 1}


# -- validation --------------------------------------------------------------------------------

def test_unknown_group_is_taken_as_empty(log: Log) -> None:
    assert log.txn_commit(P1, {("t", 0): 5}, group="new") == {("t", 0): E.NONE}
    assert log.d.m.groups["new"].state.value == "Empty"
    # With a generation or member id, an unknown group has no such member (Kafka's order).
    assert log.txn_commit(P1, {("t", 0): 5}, group="x", generation=3) == \
        {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert log.txn_commit(P1, {("t", 0): 5}, group="x", member="m", generation=-1) == \
        {("t", 0): E.NONE}  # generation -1 on an Empty group: accepted, as OffsetCommit
    assert log.txn_commit(P1, {("t", 0): 5}, group="") == {("t", 0): E.INVALID_GROUP_ID}


def test_members_are_checked_like_offset_commit(log: Log) -> None:
    d = log.d
    (a, b), generation = d.stable_group(2)
    assert log.txn_commit(P1, {("t", 0): 1}, member=a, generation=generation) == \
        {("t", 0): E.NONE}
    assert log.txn_commit(P1, {("t", 0): 1}, member=a, generation=generation + 1) == \
        {("t", 0): E.ILLEGAL_GENERATION}
    assert log.txn_commit(P1, {("t", 0): 1}, member="stranger", generation=generation) == \
        {("t", 0): E.UNKNOWN_MEMBER_ID}
    # v0-2 send neither member nor generation: accepted even though the group has members.
    assert log.txn_commit(P1, {("t", 0): 2}) == {("t", 0): E.NONE}
    too_long = "x" * (d.m.config.offset_metadata_max_bytes + 1)
    assert log.txn_commit(P1, {("t", 0): 3}, member=b, generation=generation,
                          metadata=too_long) == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}
    assert d.m.pending.pending(P1, "g")[("t", 0)].offset == 2


def test_static_member_fenced(log: Log) -> None:
    d = log.d
    joined = d.joined(d.join(instance="i-1"))
    a, generation = joined.member_id, joined.generation_id
    assert d.synced(d.sync(a, generation, {a: b"x"})).error == E.NONE
    assert log.txn_commit(P1, {("t", 0): 1}, member=a, instance="i-1",
                          generation=generation) == {("t", 0): E.NONE}
    assert log.txn_commit(P1, {("t", 0): 1}, member="old", instance="i-1",
                          generation=generation) == {("t", 0): E.FENCED_INSTANCE_ID}
    assert log.txn_commit(P1, {("t", 0): 1}, member=a, instance="i-2",
                          generation=generation) == {("t", 0): E.UNKNOWN_MEMBER_ID}


def test_accepted_while_completing_rebalance(log: Log) -> None:
    """Unlike OffsetCommit (REBALANCE_IN_PROGRESS), no group state refuses it (Kafka)."""
    d = log.d
    first = d.new_member()
    joined = d.joined(d.last)
    assert d.m.groups["g"].state.value == "CompletingRebalance"
    assert log.txn_commit(P1, {("t", 0): 1}, member=first,
                          generation=joined.generation_id) == {("t", 0): E.NONE}
    assert d.commit({("t", 0): 1}, member_id=first, generation=joined.generation_id) == \
        {("t", 0): E.REBALANCE_IN_PROGRESS}
