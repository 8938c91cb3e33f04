"""The KIP-848 consumer group state machine, driven without an event loop: each test one rule
of Kafka's GroupMetadataManager / CurrentAssignmentBuilder."""
from __future__ import annotations

import uuid

import pytest

from protocol.errors import ErrorCode
from pybroker.coordinator.consumer_group_records import decode, encode
from pybroker.coordinator.consumer_group_state import (
    ConsumerGroupConfig, ConsumerGroupStateMachine, HeartbeatRequest, HeartbeatResponse,
    MemberState,
)

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
TOPICS = {"t1": (T1, 6), "t2": (T2, 2)}
G = "g"


def join(sm: ConsumerGroupStateMachine, member: str, topics: tuple[str, ...] = ("t1",),
         now: int = 0, **extra) -> HeartbeatResponse:  # type: ignore[no-untyped-def]
    request = HeartbeatRequest(G, member, 0, rebalance_timeout_ms=30_000,
                               subscribed_topic_names=topics, owned={}, **extra)
    return sm.heartbeat(request, 1, TOPICS, now)[0]


def beat(sm: ConsumerGroupStateMachine, member: str, epoch: int, owned=None,  # type: ignore[no-untyped-def]
         now: int = 0) -> HeartbeatResponse:
    return sm.heartbeat(HeartbeatRequest(G, member, epoch, owned=owned), 1, TOPICS, now)[0]


def count(assignment) -> int:  # type: ignore[no-untyped-def]
    return sum(len(p) for p in assignment.values())


def test_one_member_gets_every_partition_at_epoch_1() -> None:
    sm = ConsumerGroupStateMachine()
    resp = join(sm, "a")
    assert (resp.error, resp.member_epoch) == (ErrorCode.NONE, 1)
    assert resp.assignment == {T1: frozenset(range(6))}
    assert resp.heartbeat_interval_ms == 5000
    assert sm.groups[G].state == "Stable"


def test_unchanged_heartbeat_sends_no_assignment() -> None:
    sm = ConsumerGroupStateMachine()
    join(sm, "a")
    resp = beat(sm, "a", 1)
    assert resp.error == ErrorCode.NONE and resp.assignment is None


def test_second_member_waits_for_revocation_before_assignment() -> None:
    sm = ConsumerGroupStateMachine()
    join(sm, "a")
    b = join(sm, "b")
    # b takes the new epoch, but what it is given is still a's: nothing yet
    assert (b.member_epoch, count(b.assignment)) == (2, 0)
    assert sm.groups[G].members["b"].state is MemberState.UNRELEASED_PARTITIONS
    a = beat(sm, "a", 1)
    # a keeps its epoch and is told to keep only its half: UNREVOKED_PARTITIONS
    assert a.member_epoch == 1 and count(a.assignment) == 3
    assert sm.groups[G].members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # b still waits: a has not confirmed the revocation
    assert beat(sm, "b", 2).assignment is None
    kept = a.assignment
    a2 = beat(sm, "a", 1, owned=kept)
    assert a2.member_epoch == 2 and a2.assignment == kept
    b2 = beat(sm, "b", 2)
    assert count(b2.assignment) == 3
    assert set(b2.assignment[T1]).isdisjoint(kept[T1])
    assert sm.groups[G].state == "Stable"


def test_revoking_member_that_still_owns_keeps_waiting() -> None:
    sm = ConsumerGroupStateMachine()
    join(sm, "a")
    join(sm, "b")
    beat(sm, "a", 1)
    still = beat(sm, "a", 1, owned={T1: frozenset(range(6))})
    assert still.member_epoch == 1
    assert sm.groups[G].members["a"].state is MemberState.UNREVOKED_PARTITIONS


def test_three_members_share_six_partitions_once_each() -> None:
    sm = ConsumerGroupStateMachine()
    owned = {m: {} for m in "abc"}
    epochs = {}
    for m in "abc":
        epochs[m] = join(sm, m).member_epoch
    for _ in range(4):
        for m in "abc":
            r = beat(sm, m, epochs[m], owned=owned[m])
            assert r.error == ErrorCode.NONE, (m, r)
            epochs[m] = r.member_epoch
            if r.assignment is not None:
                owned[m] = r.assignment
    parts = [p for m in "abc" for p in owned[m].get(T1, ())]
    assert sorted(parts) == list(range(6)) and {len(owned[m][T1]) for m in "abc"} == {2}


def test_sticky_when_a_member_leaves() -> None:
    sm = ConsumerGroupStateMachine()
    join(sm, "a")
    join(sm, "b")
    a = beat(sm, "a", 1)
    beat(sm, "a", 1, owned=a.assignment)
    left = beat(sm, "b", -1)
    assert (left.error, left.member_epoch) == (ErrorCode.NONE, -1)
    after = beat(sm, "a", 2, owned=a.assignment)
    assert set(a.assignment[T1]) <= set(after.assignment[T1])
    assert after.assignment == {T1: frozenset(range(6))} and after.member_epoch == 3


def test_fenced_on_a_higher_epoch_and_on_an_old_one() -> None:
    sm = ConsumerGroupStateMachine()
    join(sm, "a")
    assert beat(sm, "a", 5).error == ErrorCode.FENCED_MEMBER_EPOCH
    join(sm, "b")
    a = beat(sm, "a", 1)
    beat(sm, "a", 1, owned=a.assignment)  # a moves to epoch 2; previous 1
    # the previous epoch with owned partitions still its: the lost response is forgiven
    assert beat(sm, "a", 1, owned=a.assignment).error == ErrorCode.NONE
    # the previous epoch owning what is no longer its: fenced
    assert beat(sm, "a", 1, owned={T1: frozenset(range(6))}).error == \
        ErrorCode.FENCED_MEMBER_EPOCH
    # the previous epoch without its owned partitions proves nothing: fenced
    assert beat(sm, "a", 1).error == ErrorCode.FENCED_MEMBER_EPOCH


def test_unknown_member() -> None:
    sm = ConsumerGroupStateMachine()
    assert beat(sm, "nobody", 3).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert beat(sm, "nobody", -1).error == ErrorCode.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("request_, why", [
    (HeartbeatRequest("", "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t1",),
                      owned={}), "GroupId"),
    (HeartbeatRequest(G, "", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t1",),
                      owned={}), "MemberId"),
    (HeartbeatRequest(G, "m", 0, subscribed_topic_names=("t1",), owned={}),
     "RebalanceTimeoutMs"),
    (HeartbeatRequest(G, "m", 0, rebalance_timeout_ms=1, owned={}), "SubscribedTopicNames"),
    (HeartbeatRequest(G, "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t1",)),
     "TopicPartitions"),
    (HeartbeatRequest(G, "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t1",),
                      owned={T1: frozenset({0})}), "TopicPartitions"),
    (HeartbeatRequest(G, "m", -3), "MemberEpoch"),
    (HeartbeatRequest(G, "m", 1, rack_id=""), "RackId"),
])
def test_invalid_requests(request_: HeartbeatRequest, why: str) -> None:
    resp, records = ConsumerGroupStateMachine().heartbeat(request_, 1, TOPICS, 0)
    assert resp.error == ErrorCode.INVALID_REQUEST and why in (resp.error_message or "")
    assert records == []


def test_unserved_features_are_refused_with_kafkas_codes() -> None:
    sm = ConsumerGroupStateMachine()
    assert join(sm, "a", server_assignor="sticky").error == ErrorCode.UNSUPPORTED_ASSIGNOR
    regex = HeartbeatRequest(G, "a", 0, rebalance_timeout_ms=1, subscribed_topic_regex="t(?=1)",
                             owned={})
    assert sm.heartbeat(regex, 1, TOPICS, 0)[0].error == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert G not in sm.groups


def test_group_max_size() -> None:
    sm = ConsumerGroupStateMachine(ConsumerGroupConfig(max_size=1))
    join(sm, "a")
    assert join(sm, "b").error == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_v0_joiner_gets_the_servers_member_id() -> None:
    sm = ConsumerGroupStateMachine()
    request = HeartbeatRequest(G, "", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t1",),
                               owned={})
    resp, _ = sm.heartbeat(request, 0, TOPICS, 0, new_member_id="server-made")
    assert resp.member_id == "server-made" and resp.member_epoch == 1


def test_session_timeout_fences_and_frees_partitions() -> None:
    sm = ConsumerGroupStateMachine(ConsumerGroupConfig(session_timeout_ms=1000))
    join(sm, "a", now=0)
    join(sm, "b", now=0)
    beat(sm, "b", 2, now=900)
    assert sm.next_deadline() == 1000
    records = sm.expire(1000)
    assert "a" not in sm.groups[G].members and records
    b = beat(sm, "b", 2, now=1001)
    assert b.assignment == {T1: frozenset(range(6))}


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    sm = ConsumerGroupStateMachine()
    join(sm, "a", now=0)
    join(sm, "b", now=0)
    beat(sm, "a", 1, now=0)  # told to revoke, with a rebalance timeout of 30 s
    beat(sm, "a", 1, owned={T1: frozenset(range(6))}, now=29_000)  # heartbeats, never revokes
    beat(sm, "b", 2, now=29_000)
    sm.expire(30_000)
    assert set(sm.groups[G].members) == {"b"}


def test_subscription_change_bumps_the_group_epoch() -> None:
    sm = ConsumerGroupStateMachine()
    join(sm, "a")
    r = sm.heartbeat(HeartbeatRequest(G, "a", 1, subscribed_topic_names=("t1", "t2")),
                     1, TOPICS, 0)[0]
    assert r.member_epoch == 2 and r.assignment == {T1: frozenset(range(6)),
                                                    T2: frozenset(range(2))}


def test_replaying_the_records_rebuilds_every_member_with_its_epoch() -> None:
    sm = ConsumerGroupStateMachine()
    log = []
    for m in "ab":
        request = HeartbeatRequest(G, m, 0, rebalance_timeout_ms=30_000,
                                   subscribed_topic_names=("t1",), owned={}, client_id="c")
        log += sm.heartbeat(request, 1, TOPICS, 0)[1]
    resp, records = sm.heartbeat(HeartbeatRequest(G, "a", 1), 1, TOPICS, 0)
    log += records
    reloaded = ConsumerGroupStateMachine()
    for record in log:
        key, value = encode(record)
        decoded = decode(key, value)
        assert decoded == record
        reloaded.replay(decoded)
    for m in "ab":
        old, new = sm.groups[G].members[m], reloaded.groups[G].members[m]
        assert (new.member_epoch, new.state, new.assigned, new.pending_revocation,
                new.subscription) == (old.member_epoch, old.state, old.assigned,
                                      old.pending_revocation, old.subscription)
    g, r = sm.groups[G], reloaded.groups[G]
    assert (r.group_epoch, r.assignment_epoch, r.target) == \
        (g.group_epoch, g.assignment_epoch, g.target)
    # and the reloaded machine serves the next heartbeat as the original would
    assert reloaded.heartbeat(HeartbeatRequest(G, "a", 1, owned=resp.assignment), 1, TOPICS,
                              0)[0].member_epoch == 2


def test_leave_writes_tombstones_then_a_new_group_epoch() -> None:
    sm = ConsumerGroupStateMachine()
    join(sm, "a")
    _, records = sm.heartbeat(HeartbeatRequest(G, "a", -1), 1, TOPICS, 0)
    kinds = [(type(r).__name__, encode(r)[1] is None) for r in records]
    assert kinds == [("CurrentAssignmentRecord", True), ("TargetMemberRecord", True),
                     ("MemberRecord", True), ("GroupEpochRecord", False)]
    assert sm.groups[G].state == "Empty"


def test_an_empty_regex_is_no_regex() -> None:
    """librdkafka sends SubscribedTopicRegex "" beside the names; Kafka reads it as none."""
    sm = ConsumerGroupStateMachine()
    request = HeartbeatRequest(G, "a", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t1",),
                               subscribed_topic_regex="", owned={})
    assert sm.heartbeat(request, 1, TOPICS, 0)[0].member_epoch == 1


def test_delete_only_an_empty_group_and_tombstone_it() -> None:
    sm = ConsumerGroupStateMachine()
    join(sm, "a")
    assert sm.delete(G) == (ErrorCode.NON_EMPTY_GROUP, [])
    beat(sm, "a", -1)
    code, records = sm.delete(G)
    assert code == ErrorCode.NONE and G not in sm.groups
    assert [encode(r)[1] for r in records] == [None, None]
    assert [decode(*encode(r)) for r in records] == records
    assert sm.delete(G)[0] == ErrorCode.GROUP_ID_NOT_FOUND


def test_range_gives_consecutive_ranges_per_topic_in_member_order() -> None:
    from pybroker.coordinator.consumer_group_assignor import assign_range
    topics = {"a": (T1, 5), "b": (T2, 5)}
    target = assign_range({"m2": ["a", "b"], "m1": ["a", "b"]}, topics, {})
    assert target == {"m1": {T1: frozenset({0, 1, 2}), T2: frozenset({0, 1, 2})},
                      "m2": {T1: frozenset({3, 4}), T2: frozenset({3, 4})}}
    # sticky: m1 keeps what it had, up to its quota, when m0 joins
    again = assign_range({"m0": ["a"], "m1": ["a"], "m2": ["a"]}, {"a": (T1, 5)}, target)
    assert again["m1"][T1] <= target["m1"][T1] and len(again["m1"][T1]) == 2
    assert sorted(p for m in again.values() for p in m[T1]) == [0, 1, 2, 3, 4]


def test_the_group_uses_the_assignor_most_members_ask_for() -> None:
    sm = ConsumerGroupStateMachine()
    join(sm, "a", topics=("t1", "t2"), server_assignor="range")
    join(sm, "b", topics=("t1", "t2"), server_assignor="range")
    group = sm.groups[G]
    assert group.assignor("uniform") == "range"
    # range: t1's 6 partitions 3 + 3, t2's 2 partitions 1 + 1, the same numbers to the same one
    assert group.target["a"] == {T1: frozenset({0, 1, 2}), T2: frozenset({0})}
    assert group.target["b"] == {T1: frozenset({3, 4, 5}), T2: frozenset({1})}


def test_a_subscribed_topic_that_appears_or_grows_moves_the_epoch_on() -> None:
    sm = ConsumerGroupStateMachine()
    request = HeartbeatRequest(G, "a", 0, rebalance_timeout_ms=1,
                               subscribed_topic_names=("t1", "later"), owned={})
    first, _ = sm.heartbeat(request, 1, TOPICS, 0)
    assert first.member_epoch == 1 and first.assignment == {T1: frozenset(range(6))}
    later = uuid.UUID(int=3)
    grown = {**TOPICS, "later": (later, 2)}
    resp, records = sm.heartbeat(HeartbeatRequest(G, "a", 1), 1, grown, 0)
    assert resp.member_epoch == 2 and resp.assignment == {T1: frozenset(range(6)),
                                                          later: frozenset({0, 1})}
    # the hash is kept in record 3
    hashes = [decode(*encode(r)).metadata_hash for r in records  # type: ignore[union-attr]
              if type(r).__name__ == "GroupEpochRecord"]
    assert hashes == [sm.groups[G].metadata_hash]
    # unchanged metadata: no new epoch
    assert sm.heartbeat(HeartbeatRequest(G, "a", 2), 1, grown, 0)[1] == []
    bigger = {**grown, "t1": (T1, 8)}
    assert sm.heartbeat(HeartbeatRequest(G, "a", 2), 1, bigger, 0)[0].assignment[T1] == \
        frozenset(range(8))


def test_a_regex_matches_whole_names_and_picks_up_a_new_topic() -> None:
    sm = ConsumerGroupStateMachine()
    request = HeartbeatRequest(G, "a", 0, rebalance_timeout_ms=1, subscribed_topic_regex="t.",
                               owned={})
    topics = {**TOPICS, "t10": (uuid.UUID(int=4), 1), "__consumer_offsets": (uuid.UUID(int=5), 1)}
    resp, _ = sm.heartbeat(request, 1, topics, 0)
    assert resp.assignment == {T1: frozenset(range(6)), T2: frozenset({0, 1})}  # not t10
    t3 = uuid.UUID(int=6)
    more = {**topics, "t3": (t3, 1)}
    resp, _ = sm.heartbeat(HeartbeatRequest(G, "a", resp.member_epoch), 1, more, 0)
    assert resp.assignment is not None and resp.assignment[t3] == frozenset({0})


@pytest.mark.parametrize("pattern", ["t(?=1)", "t(?!1)", "(?<=x)t", "(t)\\1", "(?>t)", "t*+",
                                     "(?P<n>t)(?P=n)", "(?(1)a|b)", "t["])
def test_patterns_re2_refuses_are_refused(pattern: str) -> None:
    request = HeartbeatRequest(G, "a", 0, rebalance_timeout_ms=1, subscribed_topic_regex=pattern,
                               owned={})
    resp, records = ConsumerGroupStateMachine().heartbeat(request, 1, TOPICS, 0)
    assert resp.error == ErrorCode.INVALID_REGULAR_EXPRESSION and records == []


def test_a_static_member_bounces_without_a_rebalance() -> None:
    sm = ConsumerGroupStateMachine(ConsumerGroupConfig(session_timeout_ms=1000))
    join(sm, "a", instance_id="ia")
    join(sm, "b", instance_id="ib")
    a = beat(sm, "a", 1)
    a = beat(sm, "a", 1, owned=a.assignment)
    b = beat(sm, "b", 2)
    epoch_before = sm.groups[G].group_epoch
    left = sm.heartbeat(HeartbeatRequest(G, "b", -2, instance_id="ib"), 1, TOPICS, 100)[0]
    assert (left.error, left.member_epoch) == (ErrorCode.NONE, -2)
    assert "b" in sm.groups[G].members  # it keeps its partitions meanwhile
    # the same instance back under a new member id: b's epoch and partitions, no new epoch
    back = join(sm, "b2", instance_id="ib", now=200)
    assert (back.error, back.member_epoch) == (ErrorCode.NONE, 2)
    assert back.assignment == b.assignment
    assert set(sm.groups[G].members) == {"a", "b2"}
    assert sm.groups[G].group_epoch == epoch_before
    # the old member id of the instance is fenced
    assert sm.heartbeat(HeartbeatRequest(G, "b", 2, instance_id="ib"), 1, TOPICS,
                        300)[0].error in (ErrorCode.FENCED_INSTANCE_ID,
                                          ErrorCode.UNKNOWN_MEMBER_ID)


def test_an_active_static_members_instance_is_not_released() -> None:
    sm = ConsumerGroupStateMachine()
    join(sm, "a", instance_id="i")
    assert join(sm, "a2", instance_id="i").error == ErrorCode.UNRELEASED_INSTANCE_ID
    assert set(sm.groups[G].members) == {"a"}


def test_a_static_member_gone_past_its_session_is_removed() -> None:
    sm = ConsumerGroupStateMachine(ConsumerGroupConfig(session_timeout_ms=1000))
    join(sm, "a", instance_id="ia", now=0)
    join(sm, "b", instance_id="ib", now=0)
    sm.heartbeat(HeartbeatRequest(G, "b", 2, instance_id="ib"), 1, TOPICS, 0)
    sm.heartbeat(HeartbeatRequest(G, "b", -2, instance_id="ib"), 1, TOPICS, 0)
    beat(sm, "a", 1, now=900)
    sm.expire(1000)
    assert set(sm.groups[G].members) == {"a"}
    assert beat(sm, "a", 1, owned={T1: frozenset(range(6))}, now=1001).member_epoch == \
        sm.groups[G].assignment_epoch
