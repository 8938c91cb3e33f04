"""Share-group membership and the simple assignor, driven with chosen times."""
from __future__ import annotations

from typing import Callable
from uuid import UUID

import pytest

from protocol.errors import ErrorCode
from pybroker.coordinator import share_group_records
from pybroker.coordinator.share_group import (
    ShareGroupConfig, ShareGroups, durable_view, records_between, simple_assignment,
)

T1, T2 = UUID(int=1), UUID(int=2)
TOPICS = {"t1": (T1, 1), "t2": (T2, 4)}


def lookup(name: str) -> tuple[UUID, int] | None:
    return TOPICS.get(name)


def groups(**config: int) -> ShareGroups:
    return ShareGroups(ShareGroupConfig(**config))


def test_simple_spreads_partitions_over_members() -> None:
    got = simple_assignment({"a": ("t2",), "b": ("t2",)}, lookup)
    assert got == {"a": {T2: (0, 2)}, "b": {T2: (1, 3)}}


def test_simple_gives_a_lone_partition_to_every_member() -> None:
    got = simple_assignment({"a": ("t1",), "b": ("t1",), "c": ("t1",)}, lookup)
    assert got == {m: {T1: (0,)} for m in "abc"}


def test_simple_spreads_members_over_partitions_when_there_are_more_members() -> None:
    got = simple_assignment({m: ("t2",) for m in "abcdef"}, lookup)
    readers = [sum(p in got[m][T2] for m in got) for p in range(4)]
    assert readers == [2, 2, 1, 1]


def test_simple_skips_unknown_topics() -> None:
    assert simple_assignment({"a": ("nope",)}, lookup) == {"a": {}}


def test_join_gets_the_group_epoch_and_its_assignment() -> None:
    g = groups()
    r = g.heartbeat("g", "m1", 0, None, ["t1"], lookup, 0)
    assert (r.error, r.member_id, r.member_epoch, r.assignment) == (
        ErrorCode.NONE, "m1", 1, {T1: (0,)})
    again = g.heartbeat("g", "m1", 1, None, None, lookup, 10)
    assert (again.error, again.member_epoch, again.assignment) == (ErrorCode.NONE, 1, None)


def test_a_second_member_bumps_the_epoch_and_the_first_catches_up() -> None:
    g = groups()
    g.heartbeat("g", "m1", 0, None, ["t2"], lookup, 0)
    r2 = g.heartbeat("g", "m2", 0, None, ["t2"], lookup, 0)
    assert r2.member_epoch == 2 and r2.assignment == {T2: (1, 3)}
    r1 = g.heartbeat("g", "m1", 1, None, None, lookup, 0)
    assert r1.member_epoch == 2 and r1.assignment == {T2: (0, 2)}


@pytest.mark.parametrize("group,member,epoch,rack,topics,message", [
    ("", "m", 0, None, ["t1"], "GroupId can't be empty."),
    ("", "", 0, None, ["t1"], "MemberId can't be empty."),  # Kafka checks the member first
    ("g", "", 0, None, ["t1"], "MemberId can't be empty."),
    ("g", "m", 0, "", ["t1"], "RackId can't be empty."),
    ("g", "m", -2, None, ["t1"], "MemberEpoch is invalid."),
    ("g", "m", 0, None, None, "SubscribedTopicNames must be set in first request."),
    ("g", "m", 0, None, [], "SubscribedTopicNames must be set in first request."),
])
def test_invalid_heartbeats(group: str, member: str, epoch: int, rack: str | None,
                            topics: list[str] | None, message: str) -> None:
    """Kafka 4.1.1's checks and messages (GroupCoordinatorService.throwIfShareGroup-
    HeartbeatRequestIsInvalid), in its order."""
    r = groups().heartbeat(group, member, epoch, rack, topics, lookup, 0)
    assert (r.error, r.error_message) == (ErrorCode.INVALID_REQUEST, message)


def test_unknown_member_and_fenced_epoch() -> None:
    g = groups()
    assert g.heartbeat("g", "m1", 3, None, None, lookup, 0).error == ErrorCode.UNKNOWN_MEMBER_ID
    g.heartbeat("g", "m1", 0, None, ["t1"], lookup, 0)
    assert g.heartbeat("g", "m1", 5, None, None, lookup, 0).error \
        == ErrorCode.FENCED_MEMBER_EPOCH


def test_leave_removes_the_member_and_names_it() -> None:
    g = groups()
    g.heartbeat("g", "m1", 0, None, ["t1"], lookup, 0)
    r = g.heartbeat("g", "m1", -1, None, None, lookup, 0)
    assert (r.error, r.member_epoch, r.left) == (ErrorCode.NONE, -1, "m1")
    assert g.groups["g"].state == "Empty"
    assert g.delete("g") == ErrorCode.NONE
    assert g.delete("g") == ErrorCode.GROUP_ID_NOT_FOUND


def test_a_group_with_members_is_not_deleted() -> None:
    g = groups()
    g.heartbeat("g", "m1", 0, None, ["t1"], lookup, 0)
    assert g.delete("g") == ErrorCode.NON_EMPTY_GROUP


def test_the_session_timeout_removes_a_silent_member() -> None:
    g = groups(session_timeout_ms=100)
    g.heartbeat("g", "m1", 0, None, ["t1"], lookup, 0)
    g.heartbeat("g", "m2", 0, None, ["t1"], lookup, 50)
    assert g.next_deadline() == 100
    assert g.expire(99, lookup) == []
    assert g.expire(100, lookup) == [("g", "m1")]
    assert set(g.groups["g"].members) == {"m2"}


def test_the_group_max_size() -> None:
    g = groups(max_size=1)
    g.heartbeat("g", "m1", 0, None, ["t1"], lookup, 0)
    assert g.heartbeat("g", "m2", 0, None, ["t1"], lookup, 0).error \
        == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_a_topic_created_later_is_assigned_at_the_next_heartbeat() -> None:
    g = groups()
    r = g.heartbeat("g", "m1", 0, None, ["late"], lookup, 0)
    assert r.assignment == {}
    TOPICS["late"] = (UUID(int=9), 2)
    try:
        r = g.heartbeat("g", "m1", r.member_epoch, None, None, lookup, 0)
        assert r.member_epoch == 2 and r.assignment == {UUID(int=9): (0, 1)}
    finally:
        del TOPICS["late"]


def _replayed(records: list[share_group_records.ShareGroupRecord],
              **config: int) -> ShareGroups:
    """A fresh machine that replays `records` through their bytes, as a load does."""
    again = groups(**config)
    for record in records:
        decoded = share_group_records.decode(*share_group_records.encode(record))
        assert decoded == record
        again.replay(decoded)
    return again


def test_membership_records_replay_to_the_same_group_and_tombstone_it() -> None:
    """The records derived from each operation, written and read back in order, rebuild the
    group (epochs, members, target and current assignments); leaving and deleting leave
    nothing."""
    g = groups()
    log: list[share_group_records.ShareGroupRecord] = []

    def step(op: Callable[[], object]) -> None:
        before = durable_view(g.groups.get("g"))
        op()
        log.extend(records_between("g", before, durable_view(g.groups.get("g"))))

    step(lambda: g.heartbeat("g", "a", 0, "r1", ["t2"], lookup, 0, client_id="ca",
                             client_host="/h"))
    step(lambda: g.heartbeat("g", "b", 0, None, ["t2", "t1"], lookup, 0))
    step(lambda: g.heartbeat("g", "a", 1, None, None, lookup, 0, client_id="ca",
                             client_host="/h"))  # a catches up to 2
    again = _replayed(log)
    assert durable_view(again.groups["g"]) == durable_view(g.groups["g"])
    a = again.groups["g"].members["a"]
    assert (a.member_epoch, a.previous_member_epoch, a.rack_id, a.client_id) == (2, 1, "r1",
                                                                                   "ca")
    assert again.groups["g"].group_epoch == 2
    # a steady heartbeat writes nothing
    before = durable_view(g.groups["g"])
    g.heartbeat("g", "b", 2, None, None, lookup, 5)
    assert records_between("g", before, durable_view(g.groups["g"])) == []
    step(lambda: g.heartbeat("g", "a", -1, None, None, lookup, 0))
    step(lambda: g.heartbeat("g", "b", -1, None, None, lookup, 0))
    again = _replayed(log)
    assert set(again.groups["g"].members) == set() and again.groups["g"].group_epoch == 4
    step(lambda: g.delete("g"))
    assert "g" not in _replayed(log).groups


def test_loaded_members_expire_a_session_timeout_after_the_load() -> None:
    g = groups(session_timeout_ms=1000)
    before = durable_view(None)
    g.heartbeat("g", "a", 0, None, ["t1"], lookup, 0)
    again = _replayed(records_between("g", before, durable_view(g.groups["g"])),
                      session_timeout_ms=1000)
    again.after_load(50_000)
    assert again.expire(50_999, lookup) == []
    assert again.expire(51_000, lookup) == [("g", "a")]
