"""The controller's rules for one partition: who leads it, and who stays in its ISR.

Theory of operation. These are Kafka's ZooKeeper-mode rules (`PartitionStateMachine`'s
`PartitionLeaderElectionAlgorithms`, `Election.scala`, `ReplicaStateMachine`'s
`doRemoveReplicasFromIsr`), written as pure functions of a `PartitionState` and the set of
live brokers. Each returns the partition's next state, or None when the controller has
nothing to write; the trio façade writes it to the partition's state znode conditionally on
the version it read, and on a lost race re-reads and asks again (Kafka's `updatesToRetry`).

Three invariants hold for every state returned here, and the tests check them:
- every change bumps `leader_epoch` by exactly one (Kafka's `newLeaderAndIsr`), so a broker
  can always tell the newer decision, and a follower of an old leader is fenced;
- a leader is live, and unless the election was unclean it was in the ISR it is elected
  from, so it holds every committed record;
- the ISR is never emptied. When the last in-sync replicas die, one of them stays in the ISR
  (the partition has no leader, `leader=-1`) so that, with unclean election off, the
  partition comes back only when a replica that holds every committed record does.

"Preferred" is the first replica in assignment order; every election scans the assignment
in that order, so leadership lands where topic creation spread it.

The one place Kafka's behaviour is not reproduced exactly: when several in-sync replicas die
in the same event and removing them all would empty the ISR, Kafka removes them one by one in
an order that depends on the set's iteration, and whichever it reaches last stays. Here the
member kept is chosen deterministically: the old leader if it was in the ISR (it took the
last writes), otherwise the first member in ISR order.
"""
from __future__ import annotations

from collections.abc import Collection, Iterable, Set
from dataclasses import replace
from typing import NamedTuple

from protocol.errors import ErrorCode
from pybroker.cluster.image import RECOVERING, PartitionState

NO_LEADER = -1


class ElectionOutcome(NamedTuple):
    """An ElectLeaders answer for one partition: the state to write (None: write nothing)
    and the error to report (NONE when `state` is set), as Kafka's `processReplicaLeaderElection`
    maps its results."""

    state: PartitionState | None
    error: ErrorCode


def new_leader_and_isr(old: PartitionState, leader: int, isr: Iterable[int],
                       replicas: Iterable[int] | None = None) -> PartitionState | None:
    """`old` with a new leader, ISR (and replicas), one epoch later (Kafka's
    `newLeaderAndIsr`); None if none of them changed, so a decision that changes nothing
    writes nothing."""
    isr = tuple(isr)
    replicas = old.replicas if replicas is None else tuple(replicas)
    if (leader, isr, replicas) == (old.leader, old.isr, old.replicas):
        return None
    return replace(old, leader=leader, leader_epoch=old.leader_epoch + 1, isr=isr,
                   replicas=replicas)


def shrink_isr(state: PartitionState, leaving: Set[int]) -> tuple[int, ...]:
    """The ISR without `leaving`, in its order, but never empty: if every member is leaving,
    one stays (the leader if it is a member, else the first). Kafka's
    `doRemoveReplicasFromIsr` keeps a one-member ISR as it is."""
    kept = tuple(r for r in state.isr if r not in leaving)
    if kept or not state.isr:
        return kept
    return (state.leader,) if state.leader in state.isr else state.isr[:1]


def has_live_leader(state: PartitionState, live: Set[int]) -> bool:
    return state.leader != NO_LEADER and state.leader in live


def _first(replicas: Iterable[int], eligible: Set[int]) -> int | None:
    return next((r for r in replicas if r in eligible), None)


def elect_offline(state: PartitionState, live: Set[int], unclean: bool
                  ) -> PartitionState | None:
    """The offline election, for a partition whose leader is not live (or is -1).

    The new leader is the first replica in assignment order that is live and in the ISR; the
    new ISR is the old one without the dead (Kafka's `offlinePartitionLeaderElection` and
    `Election.leaderForOffline`). Failing that, with `unclean` the first live replica leads,
    alone in the ISR: records the old ISR committed may be lost, which is what enabling
    unclean election accepts. Otherwise the partition stays offline: `leader=-1`, the dead
    leave the ISR except the last one (see `shrink_isr`), so the partition waits for a
    replica that holds every committed record. None when the leader is live, or nothing
    changes (an offline partition that still cannot be elected).
    """
    if has_live_leader(state, live):
        return None
    in_sync = frozenset(state.isr)
    leader = _first(state.replicas, live & in_sync)
    if leader is not None:
        return new_leader_and_isr(state, leader, (r for r in state.isr if r in live))
    if unclean:
        leader = _first(state.replicas, live)
        if leader is not None:  # RECOVERING until its ISR grows (Kafka's
            # newRecoveringLeaderAndIsr)
            new = new_leader_and_isr(state, leader, (leader,))
            return None if new is None else replace(new, leader_recovery_state=RECOVERING)
    return new_leader_and_isr(state, NO_LEADER, shrink_isr(state, in_sync - live))


def remove_from_isr(state: PartitionState, leaving: Set[int]) -> PartitionState | None:
    """`leaving` taken out of the ISR (a broker died, is shutting down, or lost its replica
    to a reassignment): Kafka's `doRemoveReplicasFromIsr`. A leaving leader leaves the
    partition without one (`leader=-1`; the offline election is separate); the last ISR
    member is never removed. None if no member of `leaving` is in the ISR, or if nothing
    would change (Kafka rewrites a kept one-member ISR with a new epoch; this writes nothing)."""
    if not leaving & frozenset(state.isr):
        return None
    leader = NO_LEADER if state.leader in leaving else state.leader
    return new_leader_and_isr(state, leader, shrink_isr(state, leaving))


def elect_preferred(state: PartitionState, live: Set[int]) -> ElectionOutcome:
    """ElectLeaders type PREFERRED (and the auto-rebalance): the first assigned replica
    leads if it is live and in the ISR; the ISR is kept (Kafka's
    `preferredReplicaPartitionLeaderElection`, `LeaderAndIsr.newLeader`).

    ELECTION_NOT_NEEDED when it already leads, PREFERRED_LEADER_NOT_AVAILABLE when it is
    dead or out of sync (Kafka's `processReplicaLeaderElection`)."""
    if not state.replicas or state.leader == state.replicas[0]:
        return ElectionOutcome(None, ErrorCode.ELECTION_NOT_NEEDED)
    preferred = state.replicas[0]
    if preferred not in live or preferred not in state.isr:
        return ElectionOutcome(None, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)
    return ElectionOutcome(new_leader_and_isr(state, preferred, state.isr), ErrorCode.NONE)


def elect_unclean_for(state: PartitionState, live: Set[int]) -> ElectionOutcome:
    """ElectLeaders type UNCLEAN, asked by an admin client: only for a partition with no
    live leader (else ELECTION_NOT_NEEDED); a live in-sync replica is preferred, else the
    first live replica leads alone. ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is live.
    Kafka runs its offline election with unclean allowed, whatever the topic's config."""
    if has_live_leader(state, live):
        return ElectionOutcome(None, ErrorCode.ELECTION_NOT_NEEDED)
    leader = _first(state.replicas, live)
    if leader is None:
        return ElectionOutcome(None, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
    return ElectionOutcome(elect_offline(state, live, unclean=True), ErrorCode.NONE)


def elect_for_shutdown(state: PartitionState, live: Set[int], shutting_down: Set[int]
                       ) -> PartitionState | None:
    """A partition led by a broker that is shutting down: the first replica in assignment
    order that is live, in the ISR and not shutting down leads; the shutting-down brokers
    leave the ISR (Kafka's `controlledShutdownPartitionLeaderElection` and
    `Election.leaderForControlledShutdown`). None when there is no such replica: the
    leader stays, and the broker asks again (Kafka's controlled-shutdown retries)."""
    leader = _first(state.replicas, (live & frozenset(state.isr)) - shutting_down)
    if leader is None:
        return None
    return new_leader_and_isr(state, leader, (r for r in state.isr if r not in shutting_down))


def elect_for_reassignment(state: PartitionState, target: Collection[int], live: Set[int]
                           ) -> int | None:
    """The leader a completing reassignment moves to: the first target replica that is live
    and in the ISR (Kafka's `reassignPartitionLeaderElection`); None if there is none."""
    return _first(target, live & frozenset(state.isr))


def initial_state(partition: int, replicas: Iterable[int], live: Set[int]
                  ) -> PartitionState | None:
    """A new partition's first state: the live replicas, in assignment order, form the ISR
    and the first leads, at leader epoch 0 (Kafka's `initializeLeaderAndIsrForPartitions`).
    None if no replica is live: Kafka leaves the partition new and tries again when a broker
    starts."""
    replicas = tuple(replicas)
    isr = tuple(r for r in replicas if r in live)
    if not isr:
        return None
    return PartitionState(partition, isr[0], 0, replicas, isr)
