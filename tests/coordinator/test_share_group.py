"""Share-group membership and the simple assignor, driven with chosen times."""
from __future__ import annotations

from uuid import UUID

import pytest

from protocol.errors import ErrorCode
from pybroker.coordinator.share_group import (
    ShareGroupConfig, ShareGroups, simple_assignment,
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


@pytest.mark.parametrize("group,member,epoch,topics", [
    ("", "m", 0, ["t1"]),  # no group id
    ("g", "", 0, ["t1"]),  # no member id
    ("g", "m", -2, ["t1"]),  # epoch below -1
    ("g", "m", 0, None),  # a join without topics
    ("g", "m", 0, []),
])
def test_invalid_heartbeats(group: str, member: str, epoch: int,
                            topics: list[str] | None) -> None:
    assert groups().heartbeat(group, member, epoch, None, topics, lookup, 0).error \
        == ErrorCode.INVALID_REQUEST


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
