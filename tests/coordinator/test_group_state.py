"""The classic group protocol, driven through the pure state machine: no sockets, no trio.

Time is passed in; timers fire when `Driver.expire(t)` says the clock has reached them.
"""
from __future__ import annotations

import pytest

from protocol.errors import ErrorCode as E
from pybroker.coordinator.group_metadata import Group, GroupState, IllegalTransition
from pybroker.coordinator.group_records import GroupMetadataRecord, OffsetAndMetadata
from pybroker.coordinator.group_state import (
    NEW_MEMBER_JOIN_TIMEOUT_MS, GroupConfig, LeavingMember, SyncRequest, TimerKind, Timers,
)
from tests.coordinator.driver import RANGE, Driver, subscription


def state(d: Driver, group: str = "g") -> GroupState:
    return d.m.groups[group].state


# -- joining -----------------------------------------------------------------------------------

def test_member_id_required_round_trip_then_join_completes() -> None:
    d = Driver()
    first = d.joined(d.join(v4=True, client="app"))
    assert first.error == E.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("app-")
    assert state(d) is GroupState.EMPTY  # a pending member does not start a rebalance
    result = d.joined(d.join(first.member_id, v4=True))
    assert result.error == E.NONE
    assert (result.generation_id, result.leader_id, result.member_id) == \
        (1, first.member_id, first.member_id)
    assert result.protocol_name == "range" and result.protocol_type == "consumer"
    assert [(m.member_id, m.metadata) for m in result.members] == [(first.member_id, b"r-meta")]
    assert state(d) is GroupState.COMPLETING_REBALANCE


def test_join_before_v4_gets_an_id_directly() -> None:
    d = Driver()
    result = d.joined(d.join(v4=False))
    assert result.error == E.NONE and result.member_id and result.generation_id == 1


def test_join_and_sync_three_members() -> None:
    d = Driver()
    ids, generation = d.stable_group(3)
    assert generation == 3  # one generation per member that joined
    group = d.m.groups["g"]
    assert group.state is GroupState.STABLE
    assert {m.member_id: m.assignment for m in group.members.values()} == \
        {m: f"a-{m}".encode() for m in ids}
    for m in ids:
        assert d.heartbeat(m, generation) == E.NONE
    # The leader's sync wrote the group's snapshot.
    snapshots = [r for r in d.log if isinstance(r, GroupMetadataRecord)]
    assert snapshots[-1].value is not None and snapshots[-1].value.generation == generation


def test_follower_sync_waits_for_the_leader() -> None:
    d = Driver()
    a = d.new_member()
    b = d.new_member()
    rejoin = d.join(a)
    gen = d.joined(rejoin).generation_id
    assert d.joined(rejoin).leader_id == a
    follower = d.sync(b, gen)
    assert d.waiting(follower)
    leader = d.sync(a, gen, {a: b"A", b: b"B"})
    assert d.synced(leader).assignment == b"A"
    assert d.synced(follower).assignment == b"B"
    assert d.synced(follower).protocol_name == "range"


def test_sync_from_a_non_leader_with_assignments_is_ignored() -> None:
    d = Driver()
    a = d.new_member()
    b = d.new_member()
    gen = d.joined(d.join(a)).generation_id
    follower = d.sync(b, gen, {a: b"evil", b: b"mine"})
    assert d.waiting(follower)  # still waits: only the leader's assignment counts
    d.sync(a, gen, {a: b"A", b: b"B"})
    assert d.synced(follower).assignment == b"B"
    assert d.m.groups["g"].members[a].assignment == b"A"


def test_leader_gets_every_members_metadata() -> None:
    d = Driver()
    a = d.new_member(protocols=(("range", b"meta-a"),))
    b = d.new_member(protocols=(("range", b"meta-b"),))
    ta = d.join(a, protocols=(("range", b"meta-a"),))
    leader, follower = d.joined(ta), d.joined(d.last)
    assert {(m.member_id, m.metadata) for m in leader.members} == \
        {(a, b"meta-a"), (b, b"meta-b")}
    assert follower.members == ()


# -- protocol selection ------------------------------------------------------------------------

def test_protocol_chosen_by_vote_among_common_protocols() -> None:
    d = Driver()
    both_rr = (("roundrobin", b""), ("range", b""))
    a = d.new_member(protocols=both_rr)
    b = d.new_member(protocols=(("range", b""), ("roundrobin", b"")))
    c = d.new_member(protocols=both_rr + (("sticky", b""),))
    tokens = [d.join(a, protocols=both_rr),
              d.join(b, protocols=(("range", b""), ("roundrobin", b"")))]
    results = [d.joined(t) for t in tokens + [d.last]]
    assert {r.protocol_name for r in results} == {"roundrobin"}  # two votes to one
    assert c in {r.member_id for r in results}


def test_inconsistent_group_protocol() -> None:
    d = Driver()
    d.stable_group(1)
    assert d.joined(d.join(protocols=(("roundrobin", b""),))).error == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert d.joined(d.join(protocol_type="connect")).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert d.joined(d.join(group="new", protocols=())).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert "new" not in d.m.groups  # a failed join leaves no group behind


def test_sync_with_other_protocol_is_inconsistent() -> None:
    d = Driver()
    ids, gen = d.stable_group(1)
    token = next(d.tokens)
    from pybroker.coordinator.group_state import SyncRequest
    result = d.run(d.m.sync(SyncRequest("g", ids[0], gen, {}, None, "consumer", "roundrobin"),
                            d.now, token))
    assert result.error == E.INCONSISTENT_GROUP_PROTOCOL


# -- errors ------------------------------------------------------------------------------------

def test_invalid_group_id() -> None:
    d = Driver()
    assert d.joined(d.join(group="")).error == E.INVALID_GROUP_ID
    assert d.synced(d.sync("m", 1, group="")).error == E.INVALID_GROUP_ID
    assert d.heartbeat("m", 1, group="") == E.INVALID_GROUP_ID
    assert d.leave("m", group="").error == E.INVALID_GROUP_ID


@pytest.mark.parametrize("session", [999, 1_800_001])
def test_session_timeout_out_of_bounds(session: int) -> None:
    d = Driver()
    assert d.joined(d.join(session=session)).error == E.INVALID_SESSION_TIMEOUT
    assert "g" not in d.m.groups


def test_unknown_member_id() -> None:
    d = Driver()
    assert d.heartbeat("nobody", 0) == E.UNKNOWN_MEMBER_ID  # no such group
    assert d.joined(d.join("nobody")).error == E.UNKNOWN_MEMBER_ID
    ids, gen = d.stable_group(1)
    assert d.heartbeat("nobody", gen) == E.UNKNOWN_MEMBER_ID
    assert d.synced(d.sync("nobody", gen)).error == E.UNKNOWN_MEMBER_ID
    assert d.joined(d.join("nobody")).error == E.UNKNOWN_MEMBER_ID
    assert d.leave("nobody").members[0][1] == E.UNKNOWN_MEMBER_ID
    assert d.leave("nobody", group="other").members[0][1] == E.UNKNOWN_MEMBER_ID


def test_illegal_generation() -> None:
    d = Driver()
    ids, gen = d.stable_group(2)
    assert d.heartbeat(ids[0], gen - 1) == E.ILLEGAL_GENERATION
    assert d.synced(d.sync(ids[0], gen + 1)).error == E.ILLEGAL_GENERATION
    assert d.commit({("t", 0): 5}, member_id=ids[0], generation=gen - 1) == \
        {("t", 0): E.ILLEGAL_GENERATION}


def test_rebalance_in_progress() -> None:
    d = Driver()
    ids, gen = d.stable_group(2)
    d.new_member()  # a third member joins: PreparingRebalance
    assert state(d) is GroupState.PREPARING_REBALANCE
    assert d.heartbeat(ids[0], gen) == E.REBALANCE_IN_PROGRESS
    assert d.synced(d.sync(ids[0], gen)).error == E.REBALANCE_IN_PROGRESS
    # Commits still work while preparing (the member still owns its partitions) ...
    assert d.commit({("t", 0): 1}, member_id=ids[0], generation=gen) == {("t", 0): E.NONE}
    for m in ids:
        d.join(m)
    assert state(d) is GroupState.COMPLETING_REBALANCE
    new_gen = gen + 1
    # ... but not between join and sync, and the heartbeat is fine there.
    assert d.commit({("t", 0): 2}, member_id=ids[0], generation=new_gen) == \
        {("t", 0): E.REBALANCE_IN_PROGRESS}
    assert d.heartbeat(ids[0], new_gen) == E.NONE


def test_group_max_size() -> None:
    d = Driver(GroupConfig(min_session_timeout_ms=1000, initial_rebalance_delay_ms=0,
                           max_size=1))
    d.stable_group(1)
    assert d.joined(d.join()).error == E.GROUP_MAX_SIZE_REACHED


# -- leaving and dying -------------------------------------------------------------------------

def test_leave_triggers_rebalance_for_the_rest() -> None:
    d = Driver()
    ids, gen = d.stable_group(3)
    assert d.leave(ids[1]).members[0][1] == E.NONE
    assert state(d) is GroupState.PREPARING_REBALANCE
    tokens = [d.join(ids[0]), d.join(ids[2])]
    results = [d.joined(t) for t in tokens]
    assert {r.generation_id for r in results} == {gen + 1}
    assert ids[1] not in d.m.groups["g"].members


def test_last_member_leaving_empties_the_group_and_persists_it() -> None:
    d = Driver()
    ids, gen = d.stable_group(1)
    d.leave(ids[0])
    group = d.m.groups["g"]
    assert group.state is GroupState.EMPTY and group.generation == gen + 1
    last = d.log[-1]
    assert isinstance(last, GroupMetadataRecord) and last.value is not None
    assert last.value.members == () and last.value.generation == gen + 1


def test_leave_v3_batch_and_by_instance_id() -> None:
    d = Driver()
    a = d.joined(d.join(instance="i-a")).member_id
    b = d.join(instance="i-b")
    d.join(a, instance="i-a")
    gen = d.joined(b).generation_id
    result = d.leave(LeavingMember("", "i-a"), LeavingMember("wrong", "i-b"),
                     LeavingMember("", "i-zzz"))
    assert [code for _, code in result.members] == \
        [E.NONE, E.FENCED_INSTANCE_ID, E.UNKNOWN_MEMBER_ID]
    assert a not in d.m.groups["g"].members and gen


def test_session_timeout_removes_a_silent_member() -> None:
    d = Driver()
    ids, gen = d.stable_group(2)
    for t in range(0, 30_000, 3000):  # only the first member keeps heartbeating
        d.expire(d.now + 3000)
        d.heartbeat(ids[0], gen)
    assert ids[1] not in d.m.groups["g"].members
    assert state(d) is GroupState.PREPARING_REBALANCE
    result = d.joined(d.join(ids[0]))
    assert result.generation_id == gen + 1 and [m.member_id for m in result.members] == ids[:1]


def test_rebalance_timeout_evicts_members_that_do_not_rejoin() -> None:
    d = Driver()
    ids, gen = d.stable_group(2, rebalance=5000)
    c = d.new_member(rebalance=5000)
    ta = d.join(ids[0], rebalance=5000)  # ids[1] never rejoins (but keeps heartbeating)
    d.expire(d.now + 4000)
    assert d.heartbeat(ids[1], gen) == E.REBALANCE_IN_PROGRESS
    assert d.waiting(ta)
    d.expire(d.now + 1000)
    result = d.joined(ta)
    assert result.generation_id == gen + 1
    assert set(d.m.groups["g"].members) == {ids[0], c}


def test_members_waiting_in_join_or_sync_do_not_expire() -> None:
    d = Driver()
    (a, b), gen = d.stable_group(2, session=2000)
    c = d.new_member(session=2000)
    tc = d.last
    ta = d.join(a, session=2000)  # a waits in JoinGroup while b takes 10 s to rejoin
    for _ in range(10):
        d.expire(d.now + 1000)
        assert d.heartbeat(b, gen) == E.REBALANCE_IN_PROGRESS
    assert a in d.m.groups["g"].members and d.waiting(ta)
    tb = d.join(b, session=2000)
    results = {m: d.joined(t) for m, t in ((a, ta), (b, tb), (c, tc))}
    gen = results[a].generation_id
    leader = results[a].leader_id
    followers = [m for m in (a, b, c) if m != leader]
    waiting = [d.sync(m, gen) for m in followers]  # followers wait 5 s for the leader
    for _ in range(5):
        d.expire(d.now + 1000)
        assert d.heartbeat(leader, gen) == E.NONE
    d.sync(leader, gen, {m: m.encode() for m in (a, b, c)})
    assert [d.synced(t).assignment for t in waiting] == [m.encode() for m in followers]
    assert set(d.m.groups["g"].members) == {a, b, c}


def test_members_whose_sync_answer_waits_for_the_write_start_their_session_after_it() -> None:
    """On a cluster the leader's SyncGroup answers everyone only once the snapshot is written
    (a slow follower can hold it for seconds). Until then no member can heartbeat: each is
    kept alive, and gets its full session from the write's end, as Kafka schedules the next
    heartbeat when it propagates the assignment after the write."""
    d = Driver()
    (a, b), _ = d.stable_group(2, session=2000)
    leader = d.m.groups["g"].leader_id
    follower = b if leader == a else a
    rejoins = [d.join(leader, session=2000), d.join(follower, session=2000)]  # a new round
    gen = d.joined(rejoins[0]).generation_id
    d.writes_held = True
    waiting = [d.sync(follower, gen), d.sync(leader, gen, {a: b"A", b: b"B"})]
    d.expire(d.now + 5000)  # the write takes 5 s, past the 2 s session
    assert set(d.m.groups["g"].members) == {a, b} and all(d.waiting(t) for t in waiting)
    d.release_writes()
    assert [d.synced(t).error for t in waiting] == [E.NONE, E.NONE]
    d.expire(d.now + 1999)
    assert set(d.m.groups["g"].members) == {a, b}
    assert d.heartbeat(a, gen) == E.NONE
    d.expire(d.now + 1)  # b's session, from the write's end, is over; a heartbeated
    assert set(d.m.groups["g"].members) == {a}
    assert state(d) is GroupState.PREPARING_REBALANCE


def test_pending_sync_members_are_removed_after_the_rebalance_timeout() -> None:
    d = Driver()
    a = d.new_member(rebalance=5000)
    b = d.new_member(rebalance=5000)
    gen = d.joined(d.join(a, rebalance=5000)).generation_id
    d.sync(a, gen, {a: b"A", b: b"B"})  # the leader syncs, b never does
    assert state(d) is GroupState.STABLE
    d.expire(d.now + 5000)
    assert b not in d.m.groups["g"].members
    assert state(d) is GroupState.PREPARING_REBALANCE


def test_pending_member_that_never_returns_expires() -> None:
    d = Driver()
    a = d.joined(d.join(v4=False)).member_id  # generation 1, alone
    gen = 1
    d.sync(a, gen, {a: b"A"})
    pending = d.joined(d.join(v4=True, session=2000)).member_id
    assert pending in d.m.groups["g"].pending_members
    d.expire(d.now + 2000)
    assert pending not in d.m.groups["g"].pending_members


def test_new_member_stuck_in_join_is_dropped_after_five_minutes() -> None:
    d = Driver()
    ids, gen = d.stable_group(1, rebalance=600_000)
    d.new_member(rebalance=600_000)  # waits for ids[0], which keeps heartbeating, never rejoins
    stuck = d.last
    for _ in range(NEW_MEMBER_JOIN_TIMEOUT_MS // 5000):
        d.expire(d.now + 5000)
        d.heartbeat(ids[0], gen)
    assert d.joined(stuck).error == E.UNKNOWN_MEMBER_ID


def test_initial_rebalance_delay_waits_for_more_members() -> None:
    d = Driver(GroupConfig(min_session_timeout_ms=1000, initial_rebalance_delay_ms=3000))
    ta = d.join(rebalance=10_000)
    assert d.waiting(ta) and d.m.next_deadline() == 3000
    d.now = 1000
    tb = d.join(rebalance=10_000)
    d.expire(3000)  # a new member arrived during the delay: wait another delay
    assert d.waiting(ta) and d.m.next_deadline() == 6000
    d.expire(6000)
    results = [d.joined(ta), d.joined(tb)]
    assert {r.generation_id for r in results} == {1} and len(results[0].members) == 2


# -- static membership -------------------------------------------------------------------------

def static_pair(d: Driver, session: int = 10_000) -> tuple[str, str, int]:
    a = d.joined(d.join(instance="i-a", session=session)).member_id  # generation 1
    tb = d.join(instance="i-b", session=session)
    ta = d.join(a, instance="i-a", session=session)
    gen = d.joined(ta).generation_id
    b = d.joined(tb).member_id
    d.sync(b, gen, instance="i-b")
    d.sync(a, gen, {a: b"A", b: b"B"}, instance="i-a")
    assert state(d) is GroupState.STABLE
    return a, b, gen


def test_static_member_restart_does_not_rebalance() -> None:
    d = Driver()
    a, b, gen = static_pair(d)
    records_before = len(d.log)
    restarted = d.joined(d.join(instance="i-b"))  # b restarts: no member id
    assert restarted.error == E.NONE and restarted.member_id != b
    assert restarted.generation_id == gen and restarted.members == ()
    assert state(d) is GroupState.STABLE  # no rebalance
    assert d.heartbeat(a, gen, instance="i-a") == E.NONE
    synced = d.synced(d.sync(restarted.member_id, gen, instance="i-b"))
    assert synced.assignment == b"B"  # same assignment as before
    # The new member id is persisted, and the old one is fenced.
    assert len(d.log) == records_before + 1
    assert d.heartbeat(b, gen, instance="i-b") == E.FENCED_INSTANCE_ID
    assert d.commit({("t", 0): 1}, member_id=b, generation=gen, instance="i-b") == \
        {("t", 0): E.FENCED_INSTANCE_ID}


def test_static_leader_restart_gets_members_and_skips_assignment() -> None:
    d = Driver()
    a, b, gen = static_pair(d)
    restarted = d.joined(d.join(instance="i-a"))
    assert restarted.leader_id == restarted.member_id and restarted.skip_assignment
    assert {m.group_instance_id for m in restarted.members} == {"i-a", "i-b"}
    assert state(d) is GroupState.STABLE


def test_duplicate_static_member_fences_the_waiting_one() -> None:
    d = Driver()
    a = d.joined(d.join(instance="i-a")).member_id
    tb = d.join(instance="i-b")  # rebalance starts, a must rejoin
    ta = d.join(a, instance="i-a")
    assert d.joined(ta).generation_id == 2 and d.joined(tb).generation_id == 2
    b = d.joined(tb).member_id
    waiting = d.sync(b, 2, instance="i-b")  # b waits for the leader
    dup = d.join(instance="i-b")  # a second process with the same instance id
    assert d.synced(waiting).error == E.FENCED_INSTANCE_ID
    assert d.waiting(dup)  # the group rebalances so the new id gets the assignment


def test_static_member_with_changed_protocols_rebalances() -> None:
    d = Driver()
    a, b, gen = static_pair(d)
    # range is still the common choice: no rebalance, answered at once.
    same = d.joined(d.join(instance="i-b", protocols=(("roundrobin", b""), ("range", b"x"))))
    assert same.error == E.NONE and state(d) is GroupState.STABLE
    # Now both prefer roundrobin: the vote changes, so the group rebalances.
    d.heartbeat(a, gen, instance="i-a")
    t = d.join(instance="i-a", protocols=(("roundrobin", b""), ("range", b"x")))
    assert d.waiting(t) and state(d) is GroupState.PREPARING_REBALANCE


def test_static_member_not_rejoining_is_kept_until_session_expiry() -> None:
    d = Driver()
    a, b, gen = static_pair(d, session=60_000)
    c = d.new_member()
    ta = d.join(a, instance="i-a", session=60_000)
    d.expire(d.now + 30_000)  # rebalance timeout: b (static) has not rejoined
    assert d.joined(ta).generation_id == gen + 1
    assert b in d.m.groups["g"].members  # static members stay through the rebalance
    assert c in d.m.groups["g"].members


# -- consecutive rebalances (cooperative-sticky) -----------------------------------------------

def test_back_to_back_rebalances_keep_members() -> None:
    """cooperative-sticky: after each sync, members that gave up partitions rejoin at once
    with new metadata (their owned partitions), and the group rebalances again."""
    d = Driver()
    coop = (("cooperative-sticky", b"owned-none"),)
    ids, gen = d.stable_group(2, protocols=coop)
    for round_ in range(3):
        protocols = (("cooperative-sticky", f"owned-{round_}".encode()),)
        first = d.join(ids[0], protocols=protocols)
        assert state(d) is GroupState.PREPARING_REBALANCE
        second = d.join(ids[1], protocols=protocols)
        results = [d.joined(first), d.joined(second)]
        assert all(r.error == E.NONE for r in results)
        assert {r.generation_id for r in results} == {gen + 1}
        gen += 1
        leader = results[0].leader_id
        assert {m.metadata for m in next(r for r in results if r.members).members} == \
            {f"owned-{round_}".encode()}
        syncs = [d.sync(m, gen, {x: b"p" for x in ids} if m == leader else None)
                 for m in sorted(ids, key=lambda x: x == leader)]
        assert all(d.synced(s).error == E.NONE for s in syncs)
        assert all(d.heartbeat(m, gen) == E.NONE for m in ids)


def test_cooperative_protocol_change_needs_a_common_protocol() -> None:
    d = Driver()
    ids, gen = d.stable_group(2)
    # One member switching to cooperative-sticky alone is inconsistent with the group.
    result = d.joined(d.join(ids[0], protocols=(("cooperative-sticky", b""),)))
    assert result.error == E.INCONSISTENT_GROUP_PROTOCOL


def test_known_member_retrying_join_in_completing_rebalance_gets_same_answer() -> None:
    d = Driver()
    a = d.new_member()
    first = d.joined(d.last)
    again = d.joined(d.join(a))
    assert again == first


# -- offsets -----------------------------------------------------------------------------------

def test_simple_commit_without_group_creates_it() -> None:
    d = Driver()
    assert d.commit({("t", 0): 10}, group="solo") == {("t", 0): E.NONE}
    assert d.m.groups["solo"].state is GroupState.EMPTY
    code, found = d.m.fetch_offsets("solo", None)
    assert code == E.NONE and [(t, p, v.offset) for t, p, v in found if v] == [("t", 0, 10)]


def test_commit_rules() -> None:
    d = Driver()
    ids, gen = d.stable_group(1)
    assert d.commit({("t", 0): 1}) == {("t", 0): E.UNKNOWN_MEMBER_ID}  # group has members
    assert d.commit({("t", 0): 1}, member_id=ids[0], generation=gen) == {("t", 0): E.NONE}
    assert d.commit({("t", 0): 1}, member_id="ghost", generation=gen) == \
        {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert d.commit({("t", 0): 1}, group="nope", member_id="m", generation=3) == \
        {("t", 0): E.ILLEGAL_GENERATION}
    assert d.commit({("t", 0): 1}, group="nope", member_id="m") == \
        {("t", 0): E.UNKNOWN_MEMBER_ID}
    big = "x" * (d.config.offset_metadata_max_bytes + 1)
    assert d.commit({("t", 1): 1}, member_id=ids[0], generation=gen, metadata=big) == \
        {("t", 1): E.OFFSET_METADATA_TOO_LARGE}


def test_commit_counts_as_heartbeat() -> None:
    d = Driver()
    ids, gen = d.stable_group(1, session=2000)
    for _ in range(10):
        d.expire(d.now + 1500)
        d.commit({("t", 0): 1}, member_id=ids[0], generation=gen)
    assert ids[0] in d.m.groups["g"].members


def test_fetch_offsets_as_stored() -> None:
    d = Driver()
    d.commit({("t", 0): 5, ("t", 1): 6}, metadata="meta data")
    code, found = d.m.fetch_offsets("g", [("t", 1), ("t", 7), ("u", 0)])
    assert [(t, p, v.offset if v else None, v.metadata if v else None) for t, p, v in found] \
        == [("t", 1, 6, "meta data"), ("t", 7, None, None), ("u", 0, None, None)]
    assert d.m.fetch_offsets("unknown", None) == (E.NONE, [])


def test_delete_groups() -> None:
    d = Driver()
    ids, gen = d.stable_group(1)
    d.commit({("t", 0): 3}, group="idle")
    result = d.run(d.m.delete_groups(["g", "idle", "missing"]))
    assert result == {"g": E.NON_EMPTY_GROUP, "idle": E.NONE, "missing": E.GROUP_ID_NOT_FOUND}
    assert "idle" not in d.m.groups and "idle" not in d.m.offsets


def test_offset_delete() -> None:
    d = Driver()
    sub = (("range", subscription("t")),)
    a = d.new_member(protocols=sub)
    gen = d.joined(d.last).generation_id
    d.sync(a, gen, {a: b"A"})
    d.commit({("t", 0): 1, ("u", 0): 2}, member_id=a, generation=gen)
    top, results = d.run(d.m.delete_offsets("g", [("t", 0), ("u", 0)]))
    assert top == E.NONE
    assert results == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): E.NONE}
    assert set(d.m.offsets["g"]) == {("t", 0)}
    assert d.run(d.m.delete_offsets("missing", [("t", 0)]))[0] == E.GROUP_ID_NOT_FOUND
    assert d.run(d.m.delete_offsets("", [("t", 0)]))[0] == E.INVALID_GROUP_ID
    d.leave(a)
    top, results = d.run(d.m.delete_offsets("g", [("t", 0)]))
    assert (top, results) == (E.NONE, {("t", 0): E.NONE})
    assert "g" not in d.m.groups  # an Empty group with nothing committed goes too


def test_offset_delete_in_non_consumer_group_with_members() -> None:
    d = Driver()
    a = d.joined(d.join(protocol_type="connect")).member_id
    assert a
    assert d.run(d.m.delete_offsets("g", [("t", 0)]))[0] == E.NON_EMPTY_GROUP


def test_describe_and_list_groups() -> None:
    d = Driver()
    ids, gen = d.stable_group(2)
    d.commit({("t", 0): 1}, group="solo")
    desc = d.m.describe_group("g")
    assert (desc.state, desc.protocol_type, desc.protocol) == ("Stable", "consumer", "range")
    assert {m.member_id: m.assignment for m in desc.members} == \
        {m: f"a-{m}".encode() for m in ids}
    assert d.m.describe_group("missing").state == "Dead"
    assert {g.group_id for g in d.m.list_groups()} == {"g", "solo"}
    assert [g.group_id for g in d.m.list_groups(["stable"])] == ["g"]
    assert [g.group_id for g in d.m.list_groups(["Empty"], ["Classic"])] == ["solo"]
    assert d.m.list_groups(types=["consumer"]) == []
    d.new_member()
    preparing = d.m.describe_group("g")
    assert preparing.protocol == "" and all(m.metadata == b"" for m in preparing.members)


# -- retention and deleted topics --------------------------------------------------------------

def test_retention_of_empty_group_counts_from_when_it_emptied() -> None:
    retention = 60_000
    d = Driver(GroupConfig(min_session_timeout_ms=1000, initial_rebalance_delay_ms=0,
                           offsets_retention_ms=retention))
    ids, gen = d.stable_group(1)
    d.commit({("t", 0): 1}, member_id=ids[0], generation=gen)
    d.now += 10 * retention  # a member is present: nothing expires
    d.run(d.m.cleanup(d.now))
    assert ("t", 0) in d.m.offsets["g"]
    d.leave(ids[0])
    emptied = d.now
    d.run(d.m.cleanup(emptied + retention - 1))
    assert ("t", 0) in d.m.offsets["g"]
    d.run(d.m.cleanup(emptied + retention))
    assert "g" not in d.m.offsets and "g" not in d.m.groups


def test_retention_of_standalone_offsets_and_explicit_expiry() -> None:
    d = Driver(GroupConfig(offsets_retention_ms=1000))
    d.commit({("t", 0): 1}, group="solo")
    d.now = 500
    d.commit({("t", 1): 1}, group="solo")
    explicit = OffsetAndMetadata(7, "", 500, expire_timestamp=5000)
    d.run(d.m.commit_offsets("solo", "", None, -1, {("t", 2): explicit}, 500))
    d.run(d.m.cleanup(1000))
    assert set(d.m.offsets["solo"]) == {("t", 1), ("t", 2)}
    d.run(d.m.cleanup(1500))
    assert set(d.m.offsets["solo"]) == {("t", 2)}
    d.run(d.m.cleanup(5000))
    assert "solo" not in d.m.groups


def test_offsets_of_deleted_topics_go_away() -> None:
    d = Driver()
    d.commit({("t", 0): 1, ("u", 0): 2}, group="a")
    d.commit({("t", 0): 1}, group="b")
    d.run(d.m.topics_deleted(["t"]))
    assert set(d.m.offsets["a"]) == {("u", 0)}
    assert "b" not in d.m.offsets and "b" not in d.m.groups
    d.commit({("u", 0): 2}, group="c")
    d.run(d.m.cleanup(d.now, topic_exists=lambda t: t != "u"))
    assert not d.m.offsets


# -- the machinery -----------------------------------------------------------------------------

def test_transition_table_refuses_illegal_moves() -> None:
    group = Group("g")
    with pytest.raises(IllegalTransition):
        group.transition(GroupState.STABLE, 0)
    group.transition(GroupState.PREPARING_REBALANCE, 0)
    with pytest.raises(IllegalTransition):
        group.transition(GroupState.STABLE, 0)
    group.transition(GroupState.DEAD, 0)


def test_timers_reschedule_and_cancel() -> None:
    timers = Timers()
    a = (TimerKind.HEARTBEAT, "g", "a")
    b = (TimerKind.HEARTBEAT, "g", "b")
    timers.schedule(a, 100)
    timers.schedule(b, 50)
    timers.schedule(b, 200)  # rescheduled: the old deadline is stale
    assert timers.next_deadline() == 100
    timers.cancel(a)
    assert timers.next_deadline() == 200
    assert timers.pop_due(199) is None and timers.pop_due(200) == b
    assert timers.next_deadline() is None


def test_outcome_records_come_with_completions() -> None:
    """The leader's sync returns the snapshot record together with every member's answer, so
    the owner can write the record before releasing any of them."""
    d = Driver()
    a = d.new_member()
    gen = d.joined(d.last).generation_id
    token = next(d.tokens)
    from pybroker.coordinator.group_state import SyncRequest
    outcome = d.m.sync(SyncRequest("g", a, gen, {a: b"A"}), d.now, token)
    assert outcome.response is None
    assert [type(r) for r in outcome.records] == [GroupMetadataRecord]
    assert outcome.completions[0][0] == token


def test_protocol_metadata_kept_per_member() -> None:
    d = Driver()
    ids, _ = d.stable_group(2, protocols=RANGE)
    assert all(m.protocols == RANGE for m in d.m.groups["g"].members.values())


# -- records written while the group moves on (issue #35) --------------------------------------

def test_a_leave_during_the_snapshot_write_stands() -> None:
    """The leader's SyncGroup produces the group's snapshot; on a cluster its write waits for
    every replica, and a LeaveGroup lands meanwhile. When the write completes, the written
    snapshot must not put the departed member back: the rest rebalance without it."""
    d = Driver()
    ids, gen = d.stable_group(2)
    d.join(ids[0])  # the leader rejoins (new metadata, say): a rebalance
    d.join(ids[1])
    leader = d.m.groups["g"].leader_id
    assert leader is not None
    follower = next(m for m in ids if m != leader)
    d.sync(follower, gen + 1)
    in_flight = d.m.sync(_sync_request(d, leader, gen + 1, ids), d.now, next(d.tokens))
    snapshots = [r for r in in_flight.records if isinstance(r, GroupMetadataRecord)]
    assert snapshots and follower in {m.member_id for m in snapshots[0].value.members}
    d.run(d.m.leave("g", [LeavingMember(follower)], d.now))  # lands during the write
    for record in in_flight.records:  # the write completes
        d.m.replay(record, loading=False)
    group = d.m.groups["g"]
    assert follower not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE
    assert d.heartbeat(leader, gen + 1) == E.REBALANCE_IN_PROGRESS
    rejoined = d.joined(d.join(leader))
    assert rejoined.error == E.NONE and rejoined.generation_id == gen + 2
    assert [m.member_id for m in rejoined.members] == [leader]


def test_a_join_during_a_tombstone_write_keeps_the_group() -> None:
    """DeleteGroups decided on an Empty group; a member joins while the tombstone is being
    written. The tombstone takes the offsets, but the member and its group stay."""
    d = Driver()
    d.commit({("t", 0): 3}, group="idle")
    in_flight = d.m.delete_groups(["idle"])
    assert in_flight.response == {"idle": E.NONE}
    joined = d.joined(d.join(group="idle"))  # pre-v4: admitted at once (no initial delay)
    for record in in_flight.records:
        d.m.replay(record, loading=False)
    assert "idle" not in d.m.offsets
    group = d.m.groups["idle"]
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert list(group.members) == [joined.member_id]
    assert d.heartbeat(joined.member_id, joined.generation_id, group="idle") == E.NONE


def test_loading_adopts_the_snapshot_as_written() -> None:
    """At load the log is the only truth: the snapshot replaces what memory holds."""
    d = Driver()
    ids, gen = d.stable_group(2)
    snapshot = d.m.groups["g"].snapshot()
    d.leave(ids[1])
    d.m.replay(GroupMetadataRecord("g", snapshot))
    assert set(d.m.groups["g"].members) == set(ids)
    assert d.m.groups["g"].state is GroupState.STABLE


def _sync_request(d: Driver, leader: str, generation: int, ids: list[str]) -> SyncRequest:
    return SyncRequest("g", leader, generation, {m: f"a-{m}".encode() for m in ids})


def test_a_rebalance_completed_during_the_snapshot_write_judges_commits() -> None:
    """Issue #35 §3's mechanism: generation N's snapshot is being written when the leader
    rejoins and N+1 completes. Once written, commits are judged by N+1 (as Kafka does: N is
    ILLEGAL_GENERATION, N+1 before its SyncGroup REBALANCE_IN_PROGRESS), never accepted at N
    as they were when the written snapshot took the group back to Stable at N."""
    d = Driver()
    ids, gen = d.stable_group(2)
    d.join(ids[0])
    d.join(ids[1])
    gen += 1
    leader = d.m.groups["g"].leader_id
    assert leader is not None
    follower = next(m for m in ids if m != leader)
    in_flight = d.m.sync(_sync_request(d, leader, gen, ids), d.now, next(d.tokens))
    tokens = [d.join(leader), d.join(follower)]  # the leader rejoins: N+1 completes
    assert {d.joined(t).generation_id for t in tokens} == {gen + 1}
    for record in in_flight.records:
        d.m.replay(record, loading=False)
    assert d.m.groups["g"].state is GroupState.COMPLETING_REBALANCE
    assert d.commit({("t", 0): 1}, member_id=follower, generation=gen) == \
        {("t", 0): E.ILLEGAL_GENERATION}
    assert d.commit({("t", 0): 2}, member_id=follower, generation=gen + 1) == \
        {("t", 0): E.REBALANCE_IN_PROGRESS}


def test_commits_in_each_phase_of_a_rebalance_as_kafka_answers_them() -> None:
    """The classic group's commit rules, as Apache Kafka 4.1.1 answered the differential
    sequence "commits in each phase of a rebalance": preparing, the current generation is
    accepted (the member still owns its partitions) and a stale one is not; between join and
    sync, REBALANCE_IN_PROGRESS for the new generation and ILLEGAL_GENERATION for any other;
    a member that left is unknown; the one left commits while the group prepares again."""
    d = Driver()
    ids, gen = d.stable_group(1)
    (one,) = ids
    two = d.new_member()  # PreparingRebalance; the newcomer's join waits
    assert d.commit({("t", 0): 1}, member_id=one, generation=gen) == {("t", 0): E.NONE}
    assert d.commit({("t", 0): 2}, member_id=one, generation=gen - 1) == \
        {("t", 0): E.ILLEGAL_GENERATION}
    assert d.commit({("t", 0): 3}, member_id=two, generation=gen) == {("t", 0): E.NONE}
    d.join(one)
    assert state(d) is GroupState.COMPLETING_REBALANCE
    new = gen + 1
    for generation, code in ((new, E.REBALANCE_IN_PROGRESS), (gen, E.ILLEGAL_GENERATION),
                             (new + 1, E.ILLEGAL_GENERATION)):
        assert d.commit({("t", 0): 4}, member_id=one, generation=generation) == \
            {("t", 0): code}
    d.leave(two)
    assert d.commit({("t", 0): 7}, member_id=two, generation=new) == \
        {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert state(d) is GroupState.PREPARING_REBALANCE
    assert d.commit({("t", 0): 8}, member_id=one, generation=new) == {("t", 0): E.NONE}
