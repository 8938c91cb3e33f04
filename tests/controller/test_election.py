"""The per-partition rules of `pybroker.controller.election`, as tables of Kafka's
ZooKeeper-mode behaviour. Each table names the Scala function whose behaviour it encodes."""
from __future__ import annotations

import pytest

from protocol.errors import ErrorCode as E
from pybroker.controller.election import (
    NO_LEADER, elect_for_shutdown, elect_offline, elect_preferred, elect_unclean_for,
    initial_state, remove_from_isr,
)
from tests.controller.helpers import ps

L = frozenset

# PartitionLeaderElectionAlgorithms.offlinePartitionLeaderElection + Election.leaderForOffline
# (new ISR = ISR ∩ live, or [leader] when unclean), then ReplicaStateMachine
# .doRemoveReplicasFromIsr for the failed elections (leader -1, last ISR member kept).
# (replicas, isr, leader, live, unclean) -> (leader, isr) or None
OFFLINE = [
    # clean: first in assignment order that is live and in sync, not first in ISR order
    ((1, 2, 3), (3, 2, 1), 1, {2, 3}, False, (2, (3, 2))),
    ((1, 2, 3), (1, 2, 3), 1, {2, 3}, False, (2, (2, 3))),
    ((1, 2, 3), (1, 3), 1, {2, 3}, False, (3, (3,))),
    # the dead leader is already -1: the same election
    ((1, 2, 3), (2,), NO_LEADER, {1, 2, 3}, False, (2, (2,))),
    # a live replica out of sync is not eligible while clean
    ((1, 2, 3), (1,), 1, {2, 3}, False, (NO_LEADER, (1,))),
    # unclean: the first live replica in assignment order, alone in the ISR
    ((1, 2, 3), (1,), 1, {2, 3}, True, (2, (2,))),
    ((1, 2, 3), (1,), 1, {3}, True, (3, (3,))),
    # unclean is not used while a clean choice exists
    ((1, 2, 3), (1, 3), 1, {2, 3}, True, (3, (3,))),
    # nobody live at all: offline, and the ISR keeps one member (the old leader)
    ((1, 2, 3), (1, 2), 1, set(), True, (NO_LEADER, (1,))),
    # the old leader was not in the ISR: the first ISR member stays
    ((1, 2, 3), (3, 2), 1, set(), False, (NO_LEADER, (3,))),
    # dead members leave while others, also not electable... stay only if live
    ((1, 2, 3), (1, 2, 3), 1, set(), False, (NO_LEADER, (1,))),
    # already offline with its last member kept: nothing to write
    ((1, 2, 3), (1,), NO_LEADER, {2, 3}, False, None),
    # the leader lives: not an offline partition
    ((1, 2, 3), (1, 2, 3), 1, {1}, False, None),
]


@pytest.mark.parametrize("replicas,isr,leader,live,unclean,expected", OFFLINE)
def test_offline_election(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int,
                          live: set[int], unclean: bool,
                          expected: tuple[int, tuple[int, ...]] | None) -> None:
    old = ps(leader, replicas, isr)
    new = elect_offline(old, L(live), unclean)
    if expected is None:
        assert new is None
        return
    assert new is not None
    assert (new.leader, new.isr) == expected
    assert new.leader_epoch == old.leader_epoch + 1
    assert new.replicas == old.replicas and new.partition == old.partition


# ReplicaStateMachine.doRemoveReplicasFromIsr: leaving leader -> leader -1; a one-member ISR
# is kept as it is; every removal bumps the epoch (LeaderAndIsr.newLeaderAndIsr).
# (leader, isr, leaving) -> (leader, isr) or None
REMOVE = [
    (1, (1, 2, 3), {3}, (1, (1, 2))),
    (1, (1, 2, 3), {2, 3}, (1, (1,))),
    (1, (1, 2), {1}, (NO_LEADER, (2,))),
    (1, (1,), {1}, (NO_LEADER, (1,))),
    # Kafka writes this (same leader and ISR) with a new epoch; here nothing changes, so
    # nothing is written
    (NO_LEADER, (2,), {2}, None),
    (1, (1, 2), {3}, None),
    (1, (1, 2), set(), None),
]


@pytest.mark.parametrize("leader,isr,leaving,expected", REMOVE)
def test_remove_from_isr(leader: int, isr: tuple[int, ...], leaving: set[int],
                         expected: tuple[int, tuple[int, ...]] | None) -> None:
    old = ps(leader, (1, 2, 3), isr)
    new = remove_from_isr(old, L(leaving))
    if expected is None:
        assert new is None
    else:
        assert new is not None and (new.leader, new.isr) == expected
        assert new.leader_epoch == old.leader_epoch + 1


# KafkaController.processReplicaLeaderElection (PREFERRED) with
# PartitionLeaderElectionAlgorithms.preferredReplicaPartitionLeaderElection; the ISR is kept
# (LeaderAndIsr.newLeader).
PREFERRED = [
    (2, (1, 2, 3), {1, 2, 3}, 1, E.NONE),
    (1, (1, 2, 3), {1, 2, 3}, None, E.ELECTION_NOT_NEEDED),
    (2, (2, 3), {1, 2, 3}, None, E.PREFERRED_LEADER_NOT_AVAILABLE),  # out of sync
    (2, (1, 2, 3), {2, 3}, None, E.PREFERRED_LEADER_NOT_AVAILABLE),  # dead
    (NO_LEADER, (1,), {1, 2, 3}, 1, E.NONE),
]


@pytest.mark.parametrize("leader,isr,live,new_leader,error", PREFERRED)
def test_preferred_election(leader: int, isr: tuple[int, ...], live: set[int],
                            new_leader: int | None, error: E) -> None:
    old = ps(leader, (1, 2, 3), isr)
    outcome = elect_preferred(old, L(live))
    assert outcome.error == error
    if new_leader is None:
        assert outcome.state is None
    else:
        assert outcome.state is not None
        assert (outcome.state.leader, outcome.state.isr) == (new_leader, old.isr)
        assert outcome.state.leader_epoch == old.leader_epoch + 1


# KafkaController.processReplicaLeaderElection (UNCLEAN, admin-triggered): only partitions
# without a live leader; OfflinePartitionLeaderElectionStrategy(allowUnclean = true).
UNCLEAN = [
    (1, (1, 2, 3), {1, 2, 3}, None, E.ELECTION_NOT_NEEDED),
    (1, (1, 3), {2, 3}, (3, (3,)), E.NONE),        # a live ISR member first
    (1, (1,), {2, 3}, (2, (2,)), E.NONE),          # else the first live replica
    (NO_LEADER, (1,), {3}, (3, (3,)), E.NONE),
    (1, (1,), set(), None, E.ELIGIBLE_LEADERS_NOT_AVAILABLE),
]


@pytest.mark.parametrize("leader,isr,live,expected,error", UNCLEAN)
def test_unclean_election(leader: int, isr: tuple[int, ...], live: set[int],
                          expected: tuple[int, tuple[int, ...]] | None, error: E) -> None:
    outcome = elect_unclean_for(ps(leader, (1, 2, 3), isr), L(live))
    assert outcome.error == error
    got = None if outcome.state is None else (outcome.state.leader, outcome.state.isr)
    assert got == expected


# PartitionLeaderElectionAlgorithms.controlledShutdownPartitionLeaderElection and
# Election.leaderForControlledShutdown (ISR minus every shutting-down broker).
SHUTDOWN = [
    ((1, 2, 3), {1, 2, 3}, {1}, (2, (2, 3))),
    ((1, 3), {1, 2, 3}, {1}, (3, (3,))),
    ((1, 2, 3), {1, 2, 3}, {1, 2}, (3, (3,))),
    ((1, 2, 3), {1, 3}, {1}, (3, (2, 3))),  # 2 is dead: skipped, but its ISR removal is
                                           # the failure handler's, not this one's
    ((1,), {1, 2, 3}, {1}, None),          # nobody else in sync: the leader stays
]


@pytest.mark.parametrize("isr,live,going,expected", SHUTDOWN)
def test_controlled_shutdown_election(isr: tuple[int, ...], live: set[int], going: set[int],
                                      expected: tuple[int, tuple[int, ...]] | None) -> None:
    old = ps(1, (1, 2, 3), isr)
    new = elect_for_shutdown(old, L(live), L(going))
    got = None if new is None else (new.leader, new.isr)
    assert got == expected
    if new is not None:
        assert new.leader_epoch == old.leader_epoch + 1


def test_initial_state_is_the_live_replicas_led_by_the_first() -> None:
    # PartitionStateMachine.initializeLeaderAndIsrForPartitions: epoch 0, ISR = live replicas
    assert initial_state(4, (3, 1, 2), L({1, 2})) == ps(1, (3, 1, 2), (1, 2), 0, 4)
    assert initial_state(0, (3, 1), L({2})) is None
