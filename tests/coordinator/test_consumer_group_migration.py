"""Online migration between classic and consumer groups, driven on the two pure state machines
(consumer_group_migration.py, group_state.py) without an event loop: each test one rule of
Kafka's GroupMetadataManager (convertToConsumerGroup, classicGroup*ToConsumerGroup,
convertToClassicGroup) under `group.consumer.migration.policy`."""
from __future__ import annotations

import uuid

import pytest

from protocol.errors import ErrorCode
from pybroker.client.consumer_protocol import (
    decode_assignment, encode_assignment, encode_subscription,
)
from pybroker.coordinator.consumer_group_migration import MigratingConsumerGroupStateMachine
from pybroker.coordinator.consumer_group_records import decode, encode
from pybroker.coordinator.consumer_group_state import (
    ConsumerGroupConfig, ConsumerGroupStateMachine, HeartbeatRequest, MemberState,
)
from pybroker.coordinator.group_metadata import GroupState
from pybroker.coordinator.group_records import (
    GroupMetadataRecord, OffsetAndMetadata, OffsetCommitRecord, OffsetKey,
)
from pybroker.coordinator.group_state import GroupStateMachine
from pybroker.coordinator.group_types import (
    JoinRequest, LeavingMember, SyncRequest,
)

T = uuid.UUID(int=7)
TOPICS = {"t": (T, 4)}
G = "g"
SUB = encode_subscription(["t"])


def classic_group(members: int = 2) -> GroupStateMachine:
    """A Stable classic group of `members` range members of topic t, each given its share."""
    sm = GroupStateMachine()
    for i in range(members):
        sm.join(JoinRequest(G, "", "consumer", (("range", SUB),), 10_000, 20_000,
                            client_id=f"c{i}"), 0, i + 1)
    group = sm.groups[G]
    now = 0
    while group.state is GroupState.PREPARING_REBALANCE:  # the initial rebalance delay
        now = sm.next_deadline() or now
        sm.expire(now)
    assert group.state is GroupState.COMPLETING_REBALANCE
    leader = group.leader_id
    assert leader is not None
    shares = {m: encode_assignment({"t": [p for p in range(4) if p % members == i]})
              for i, m in enumerate(group.members)}
    sm.sync(SyncRequest(G, leader, group.generation, shares), now, 99)
    assert group.state is GroupState.STABLE
    return sm


def machine(policy: str = "bidirectional", **extra: int) -> MigratingConsumerGroupStateMachine:
    return MigratingConsumerGroupStateMachine(ConsumerGroupConfig(migration_policy=policy,
                                                                  **extra))


def consumer_join(sm: ConsumerGroupStateMachine, member: str, now: int = 0):  # type: ignore[no-untyped-def]
    return sm.heartbeat(HeartbeatRequest(G, member, 0, rebalance_timeout_ms=30_000,
                                         subscribed_topic_names=("t",), owned={}),
                        1, TOPICS, now)


def upgraded() -> tuple[GroupStateMachine, MigratingConsumerGroupStateMachine, list[str]]:
    classic = classic_group()
    members = list(classic.groups[G].members)
    sm = machine()
    sm.upgrade(classic.groups[G], TOPICS, 0)
    classic.hand_over(G)
    return classic, sm, members


def test_upgrade_keeps_generation_and_assignments() -> None:
    classic = classic_group()
    group = classic.groups[G]
    sm = machine()
    assert sm.upgrade_refusal(group) is None
    records = sm.upgrade(group, TOPICS, 0)
    assert [type(r).__name__ for r in records][:3] == ["MemberRecord", "MemberRecord",
                                                       "GroupEpochRecord"]
    cg = sm.groups[G]
    assert (cg.group_epoch, cg.assignment_epoch) == (group.generation, group.generation)
    assert sorted(cg.members[m].assigned[T] for m in cg.members) == \
        [frozenset({0, 2}), frozenset({1, 3})]
    assert all(m.uses_classic_protocol and m.member_epoch == group.generation
               for m in cg.members.values())
    # the records reload to the same group, the classic protocols with them
    fresh = MigratingConsumerGroupStateMachine()
    for r in records:
        fresh.replay(decode(*encode(r)))  # type: ignore[arg-type]
    assert fresh.groups[G].members.keys() == cg.members.keys()
    assert all(fresh.groups[G].members[m].subscription == cg.members[m].subscription
               for m in cg.members)


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_policies_without_upgrade_refuse_it(policy: str) -> None:
    assert machine(policy).upgrade_refusal(classic_group().groups[G]) is not None


def test_a_group_larger_than_the_consumer_max_size_is_not_upgraded() -> None:
    assert machine(max_size=1).upgrade_refusal(classic_group(2).groups[G]) is not None


def test_hand_over_keeps_offsets_and_writes_the_tombstone() -> None:
    classic = classic_group()
    classic.replay(OffsetCommitRecord(OffsetKey(G, "t", 0), OffsetAndMetadata(5)))
    out = classic.hand_over(G)
    assert out.records == [GroupMetadataRecord(G, None)]
    for record in out.records:
        classic.replay(record, loading=False)
    assert not classic.groups[G].members and classic.offsets[G][("t", 0)].offset == 5
    # and at load: the tombstone forgets the group's metadata, not its offsets
    fresh = GroupStateMachine()
    fresh.replay(OffsetCommitRecord(OffsetKey(G, "t", 0), OffsetAndMetadata(5)))
    fresh.replay(GroupMetadataRecord(G, None))
    assert fresh.offsets[G][("t", 0)].offset == 5 and not fresh.groups[G].members


def test_classic_members_rejoin_and_the_consumer_member_gets_partitions() -> None:
    classic, sm, (a, b) = upgraded()
    generation = sm.groups[G].group_epoch
    response, _ = consumer_join(sm, "c")
    assert response.error == ErrorCode.NONE
    group = sm.groups[G]
    assert group.group_epoch == generation + 1
    # the classic members learn of the new epoch through their heartbeat
    assert sm.classic_heartbeat(G, a, None, generation, 0) == ErrorCode.REBALANCE_IN_PROGRESS
    assert sm.classic_heartbeat(G, a, None, generation - 1, 0) == ErrorCode.ILLEGAL_GENERATION
    for member in (a, b):
        for _ in range(3):  # join (revoke), sync, heartbeat, until it is at the new epoch
            result, _ = sm.classic_join(JoinRequest(G, member, "consumer", (("range", SUB),),
                                                    10_000, 20_000), TOPICS, 0)
            assert result.error == ErrorCode.NONE and result.leader_id == ""
            synced = sm.classic_sync(SyncRequest(G, member, result.generation_id,
                                                 protocol_type="consumer",
                                                 protocol_name="range"), TOPICS, 0)
            assert synced.error == ErrorCode.NONE
            if sm.classic_heartbeat(G, member, None, result.generation_id, 0) == \
                    ErrorCode.NONE:
                break
        assert group.members[member].member_epoch == group.group_epoch
    # c now gets what the classic members released
    owned: dict = {}
    for _ in range(3):
        resp, _ = sm.heartbeat(HeartbeatRequest(G, "c", group.members["c"].member_epoch,
                                                owned=owned), 1, TOPICS, 0)
        if resp.assignment is not None:
            owned = resp.assignment
    assignments = [set(group.members[m].assigned.get(T, ())) for m in (a, b, "c")]
    assert all(assignments) and set().union(*assignments) == set(range(4))
    assert sum(len(x) for x in assignments) == 4
    # a SyncGroup answers the server's assignment, as a ConsumerProtocolAssignment
    synced = sm.classic_sync(SyncRequest(G, a, group.members[a].member_epoch), TOPICS, 0)
    assert set(decode_assignment(synced.assignment).by_topic()["t"]) == assignments[0]


def test_a_classic_join_into_a_consumer_group_asks_for_a_member_id_first() -> None:
    sm = machine("disabled")  # served under every policy
    consumer_join(sm, "c")
    result, records = sm.classic_join(JoinRequest(G, "", "consumer", (("range", SUB),), 10_000,
                                                  20_000, require_known_member_id=True),
                                      TOPICS, 0)
    assert result.error == ErrorCode.MEMBER_ID_REQUIRED and not records
    joined, records = sm.classic_join(JoinRequest(G, result.member_id, "consumer",
                                                  (("range", SUB),), 10_000, 20_000), TOPICS, 0)
    assert joined.error == ErrorCode.NONE and records
    assert joined.generation_id == sm.groups[G].members[result.member_id].member_epoch
    wrong, _ = sm.classic_join(JoinRequest(G, "", "other", (("range", SUB),), 10_000,
                                           20_000), TOPICS, 0)
    assert wrong.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_the_last_consumer_member_leaving_downgrades_the_group() -> None:
    classic, sm, (a, b) = upgraded()
    consumer_join(sm, "c")
    epoch = sm.groups[G].group_epoch
    response, records = sm.heartbeat(HeartbeatRequest(G, "c", -1), 1, TOPICS, 0)
    assert response.error == ErrorCode.NONE and G not in sm.groups
    (down,) = sm.take_downgrades(G, TOPICS)
    assert down.group.generation == epoch and set(down.group.members) == {a, b}
    assert down.group.protocol_name == "range"
    adopted = classic.adopt_downgraded(down.group, 0)
    assert adopted.records[0].value.generation == epoch  # type: ignore[union-attr]
    assert classic.groups[G].state is GroupState.PREPARING_REBALANCE
    # the tombstones delete the consumer group at load
    fresh = MigratingConsumerGroupStateMachine()
    fresh.upgrade(classic_group().groups[G], TOPICS, 0)
    for r in records:
        fresh.replay(r)
    assert G not in fresh.groups


@pytest.mark.parametrize("policy", ["disabled", "upgrade"])
def test_policies_without_downgrade_keep_the_consumer_group(policy: str) -> None:
    classic = classic_group()
    sm = machine(policy)
    sm.upgrade(classic.groups[G], TOPICS, 0)
    consumer_join(sm, "c")
    response, _ = sm.heartbeat(HeartbeatRequest(G, "c", -1), 1, TOPICS, 0)
    assert response.error == ErrorCode.NONE
    assert G in sm.groups and len(sm.groups[G].members) == 2
    assert sm.take_downgrades(G, TOPICS) == []


def test_a_classic_leave_does_not_downgrade() -> None:
    _, sm, (a, b) = upgraded()
    consumer_join(sm, "c")
    result, records = sm.classic_leave(G, [LeavingMember(a), LeavingMember("nobody")], 0)
    assert [code for _, code in result.members] == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    assert set(sm.groups[G].members) == {b, "c"} and records


def test_a_classic_member_that_does_not_rejoin_is_fenced_after_its_rebalance_timeout() -> None:
    _, sm, (a, b) = upgraded()
    consumer_join(sm, "c")
    epoch = sm.groups[G].members[a].member_epoch
    assert sm.classic_heartbeat(G, a, None, epoch, 0) == ErrorCode.REBALANCE_IN_PROGRESS
    assert sm.groups[G].members[a].classic_deadline == 20_000
    sm.expire(20_000)
    assert a not in sm.groups[G].members


def test_a_consumer_heartbeat_from_a_classic_member_is_unknown() -> None:
    _, sm, (a, _) = upgraded()
    epoch = sm.groups[G].members[a].member_epoch
    response, _ = sm.heartbeat(HeartbeatRequest(G, a, epoch), 1, TOPICS, 0)
    assert response.error == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_static_consumer_member_replaced_by_a_classic_one_downgrades_without_rebalance(
        ) -> None:
    _, sm, (a, b) = upgraded()
    sm.heartbeat(HeartbeatRequest(G, "c", 0, instance_id="i", rebalance_timeout_ms=30_000,
                                  subscribed_topic_names=("t",), owned={}), 1, TOPICS, 0)
    # the classic members leave; the static consumer member is the only one left with b
    sm.classic_leave(G, [LeavingMember(a)], 0)
    epoch = sm.groups[G].group_epoch
    result, records = sm.classic_join(JoinRequest(G, "", "consumer", (("range", SUB),),
                                                  10_000, 20_000, group_instance_id="i"),
                                      TOPICS, 0)
    assert result.error == ErrorCode.NONE and G not in sm.groups
    (down,) = sm.take_downgrades(G, TOPICS)
    assert not down.rebalance and set(down.group.members) == {b, result.member_id}
    assert down.group.generation == epoch
    assert down.group.static_members == {"i": result.member_id}


def test_a_known_static_member_id_must_match_its_instance() -> None:
    _, sm, _ = upgraded()
    sm.heartbeat(HeartbeatRequest(G, "c", 0, instance_id="i", rebalance_timeout_ms=30_000,
                                  subscribed_topic_names=("t",), owned={}), 1, TOPICS, 0)
    result, records = sm.classic_join(JoinRequest(G, "other", "consumer", (("range", SUB),),
                                                  10_000, 20_000, group_instance_id="i"),
                                      TOPICS, 0)
    assert result.error == ErrorCode.FENCED_INSTANCE_ID and not records
    result, records = sm.classic_join(JoinRequest(G, "x", "consumer", (("range", SUB),),
                                                  10_000, 20_000, group_instance_id="none"),
                                      TOPICS, 0)
    assert result.error == ErrorCode.UNKNOWN_MEMBER_ID and not records
