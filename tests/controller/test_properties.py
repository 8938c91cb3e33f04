"""Properties of the controller's decisions over generated partitions and clusters.

Elections: an elected leader is live and, unless the election was unclean, was in the old
ISR; the ISR never becomes empty and stays within the replicas; every change bumps the epoch
by one, and a decision asked again of its own result changes nothing.
Assignment: every partition gets RF distinct known brokers; leaders are spread evenly; with
racks, each partition spans min(RF, racks) racks.
"""
from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.cluster.image import PartitionState
from pybroker.controller.assignment import assign_replicas
from pybroker.controller.decisions import (
    controlled_shutdown_moves, on_brokers_failed, on_brokers_started, rebalance_moves,
)
from pybroker.controller.election import (
    NO_LEADER, elect_offline, elect_preferred, elect_unclean_for, remove_from_isr,
)
from pybroker.controller.reassignment import reassignment_step
from tests.controller.helpers import image

BROKERS = list(range(1, 7))


@st.composite
def partitions(draw: st.DrawFn) -> PartitionState:
    """A consistent partition state: distinct replicas, a non-empty ISR within them, and a
    leader in the ISR or -1."""
    replicas = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=5, unique=True))
    isr = draw(st.lists(st.sampled_from(replicas), min_size=1, unique=True))
    leader = draw(st.sampled_from([*isr, NO_LEADER]))
    return PartitionState(0, leader, draw(st.integers(0, 100)), tuple(replicas), tuple(isr))


lives = st.frozensets(st.sampled_from(BROKERS))


def check_transition(old: PartitionState, new: PartitionState | None, live: frozenset[int],
                     clean: bool = True) -> None:
    if new is None:
        return
    assert new.leader_epoch == old.leader_epoch + 1
    assert new.isr and len(set(new.isr)) == len(new.isr)
    assert set(new.isr) <= set(new.replicas)
    assert new.replicas == old.replicas and new.partition == old.partition
    if new.leader != NO_LEADER and new.leader != old.leader:
        assert new.leader in live
        if clean:
            assert new.leader in old.isr
        assert new.leader in new.isr


@settings(max_examples=300, deadline=None)
@given(partitions(), lives, st.booleans())
def test_offline_election(old: PartitionState, live: frozenset[int], unclean: bool) -> None:
    new = elect_offline(old, live, unclean)
    check_transition(old, new, live, clean=not unclean)
    if new is not None:
        assert elect_offline(new, live, unclean) is None
        if new.leader != NO_LEADER and new.leader in old.isr:
            assert set(new.isr) == set(old.isr) & live
    # a clean election leaves no live in-sync replica unelected
    if new is not None and new.leader == NO_LEADER:
        assert not set(old.isr) & live


@settings(max_examples=300, deadline=None)
@given(partitions(), st.frozensets(st.sampled_from(BROKERS)))
def test_isr_removal(old: PartitionState, leaving: frozenset[int]) -> None:
    new = remove_from_isr(old, leaving)
    check_transition(old, new, frozenset(BROKERS))
    if new is not None:
        assert len(new.isr) == 1 or not set(new.isr) & leaving


@settings(max_examples=300, deadline=None)
@given(partitions(), lives)
def test_admin_elections(old: PartitionState, live: frozenset[int]) -> None:
    preferred = elect_preferred(old, live)
    check_transition(old, preferred.state, live)
    if preferred.state is not None:
        assert preferred.state.leader == old.replicas[0]
    unclean = elect_unclean_for(old, live)
    check_transition(old, unclean.state, live, clean=False)


@st.composite
def clusters(draw: st.DrawFn) -> list[PartitionState]:
    return draw(st.lists(partitions(), min_size=1, max_size=8))


@settings(max_examples=200, deadline=None)
@given(clusters(), lives, lives, st.sampled_from(BROKERS))
def test_cluster_events(states: list[PartitionState], live: frozenset[int],
                        later: frozenset[int], going: int) -> None:
    img = image({"t": states})
    before = {s.partition: s for s in img.topics["t"].partitions}
    failed = on_brokers_failed(img, live)
    for _, new in failed:
        check_transition(before[new.partition], new, live)
        # after a failure no partition is led by a dead broker or keeps a dead follower
        assert new.leader == NO_LEADER or new.leader in live
        assert len(new.isr) == 1 or set(new.isr) <= live
    settled = image({"t": [dict((s.partition, s) for _, s in failed).get(p, s)
                           for p, s in before.items()]})
    assert on_brokers_failed(settled, live) == []
    after = {s.partition: s for s in settled.topics["t"].partitions}
    for _, new in on_brokers_started(settled, later):
        check_transition(after[new.partition], new, later)
        assert new.leader in later
    for _, new in controlled_shutdown_moves(img, going, live):
        check_transition(before[new.partition], new, live)
        assert new.leader != going and going not in new.isr or new.isr == (going,)
    for _, new in rebalance_moves(img, live, 0):
        check_transition(before[new.partition], new, live)
        assert new.leader == new.replicas[0]


@settings(max_examples=300, deadline=None)
@given(partitions(), st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True),
       st.frozensets(st.sampled_from(BROKERS), min_size=1), st.data())
def test_reassignment_reaches_its_target(old: PartitionState, target: list[int],
                                         live: frozenset[int], data: st.DataObject) -> None:
    """Driven to the end with replicas joining the ISR one by one, a reassignment keeps the
    ISR non-empty, bumps the epoch on every write and finishes on the target, led by a
    live target replica, whenever one can lead."""
    live = live | set(target)
    state, adding, removing = old, (), ()
    for _ in range(len(target) + 2):
        step = reassignment_step(state, target, adding, removing, live)
        if step.state is not state:
            assert step.state.leader_epoch == state.leader_epoch + 1
        assert step.state.isr and set(step.state.isr) <= set(step.state.replicas)
        state, adding, removing = step.state, step.adding, step.removing
        if step.done:
            assert state.replicas == tuple(target)
            assert adding == removing == ()
            if state is not old:   # (a target equal to the replicas writes nothing)
                assert state.leader in target and state.leader in live
            return
        missing = [r for r in target if r not in state.isr]
        if state.leader == NO_LEADER or not missing:
            return   # no one to replicate from, or no target replica can lead: it waits
        state = PartitionState(state.partition, state.leader, state.leader_epoch,
                               state.replicas, state.isr + (data.draw(st.sampled_from(missing)),))
    raise AssertionError("the reassignment did not finish")


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 9), st.integers(1, 4), st.integers(1, 5), st.integers(0, 2**32))
def test_assignment_spreads_replicas_and_leaders(brokers: int, rf: int, rounds: int,
                                                 seed: int) -> None:
    rf = min(rf, brokers)
    ids = {b * 3 + 1: None for b in range(brokers)}
    result = assign_replicas(ids, brokers * rounds, rf, rng=random.Random(seed))
    assert len(result) == brokers * rounds
    for replicas in result:
        assert len(replicas) == rf == len(set(replicas)) and set(replicas) <= set(ids)
    leaders = [r[0] for r in result]
    counts = [leaders.count(b) for b in ids]
    assert max(counts) - min(counts) <= 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("abcd"), min_size=1, max_size=9), st.integers(1, 4),
       st.integers(1, 20), st.integers(0, 2**32))
def test_rack_aware_assignment_spans_racks(racks: list[str], rf: int, count: int,
                                           seed: int) -> None:
    rf = min(rf, len(racks))
    brokers = {i: rack for i, rack in enumerate(racks)}
    result = assign_replicas(brokers, count, rf, rng=random.Random(seed))
    for replicas in result:
        assert len(set(replicas)) == rf
        assert len({brokers[r] for r in replicas}) == min(rf, len(set(racks)))
    if count % len(racks) == 0:
        leaders = [r[0] for r in result]
        counts = [leaders.count(b) for b in brokers]
        assert max(counts) - min(counts) <= 1
