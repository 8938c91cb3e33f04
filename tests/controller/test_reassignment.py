"""The reassignment planner (`pybroker.controller.reassignment`), driven through Kafka's
`KafkaController.onPartitionReassignment` phases as the ISR grows."""
from __future__ import annotations

from dataclasses import replace

from protocol.errors import ErrorCode as E
from pybroker.controller.reassignment import reassignment_step, validate_target
from tests.controller.helpers import ps

LIVE = frozenset({1, 2, 3, 4, 5})


def test_move_one_replica_in_two_phases() -> None:
    old = ps(1, (1, 2, 3), (1, 2, 3))
    # phase 1: RS = TRS + ORS, AR = [4], RR = [1]; the epoch tells every replica
    step = reassignment_step(old, (2, 3, 4), (), (), LIVE)
    assert (step.state.replicas, step.adding, step.removing, step.done) == \
        ((2, 3, 4, 1), (4,), (1,), False)
    assert (step.state.leader, step.state.isr, step.state.leader_epoch) == (1, (1, 2, 3), 6)
    # nothing new: nothing to write
    again = reassignment_step(step.state, (2, 3, 4), step.adding, step.removing, LIVE)
    assert again == (step.state, (4,), (1,), False) and again.state is step.state
    # 4 caught up: phase 2 moves the leader into TRS, RS = TRS, ISR ∩ TRS, one epoch
    caught_up = replace(step.state, isr=(1, 2, 3, 4))
    done = reassignment_step(caught_up, (2, 3, 4), step.adding, step.removing, LIVE)
    assert done.done and (done.adding, done.removing) == ((), ())
    assert (done.state.replicas, done.state.leader, done.state.isr, done.state.leader_epoch) \
        == ((2, 3, 4), 2, (2, 3, 4), 7)
    # a finished reassignment asked again writes nothing
    assert reassignment_step(done.state, (2, 3, 4), (), (), LIVE).state is done.state


def test_a_leader_inside_the_target_stays_and_the_epoch_still_moves() -> None:
    # moveReassignedPartitionLeaderIfRequired -> updateLeaderEpoch when the leader is kept
    old = ps(1, (1, 2), (1, 2, 3), epoch=3)
    done = reassignment_step(replace(old, replicas=(1, 3, 2)), (1, 3), (3,), (2,), LIVE)
    assert (done.state.leader, done.state.replicas, done.state.isr, done.state.leader_epoch) \
        == (1, (1, 3), (1, 3), 4)


def test_adding_only_completes_with_the_same_replica_set_and_a_new_epoch() -> None:
    grown = ps(1, (1, 2), (1, 2), epoch=3)
    step = reassignment_step(grown, (1, 2, 3), (), (), LIVE)
    assert (step.state.replicas, step.adding, step.removing) == ((1, 2, 3), (3,), ())
    done = reassignment_step(replace(step.state, isr=(1, 2, 3)), (1, 2, 3), (3,), (), LIVE)
    assert done.done and done.state.leader_epoch == step.state.leader_epoch + 1


def test_a_reordering_is_complete_at_once() -> None:
    done = reassignment_step(ps(1, (1, 2, 3), (1, 2)), (3, 2, 1), (), (), LIVE)
    assert done.done and done.state.replicas == (3, 2, 1) and done.state.leader == 1


def test_a_new_target_supplants_the_one_in_progress() -> None:
    # updateCurrentReassignment: origin = RS - AR; replicas the old target was adding and
    # the new one does not want leave the ISR at once
    in_progress = ps(1, (4, 5, 1), (1, 4), epoch=6)   # ORS [1] -> TRS [4, 5], 4 in sync
    step = reassignment_step(in_progress, (5,), (4, 5), (1,), LIVE)
    assert (step.state.replicas, step.adding, step.removing, step.done) == \
        ((5, 1), (5,), (1,), False)
    assert (step.state.leader, step.state.isr, step.state.leader_epoch) == (1, (1,), 7)


def test_cancelling_returns_to_the_origin_replicas() -> None:
    in_progress = ps(4, (4, 1), (4, 1), epoch=6)      # ORS [1] -> TRS [4]; 4 already leads
    done = reassignment_step(in_progress, (1,), (4,), (1,), LIVE)
    assert done.done
    assert (done.state.replicas, done.state.leader, done.state.isr) == ((1,), 1, (1,))


def test_completion_waits_when_no_target_replica_can_lead() -> None:
    # Kafka would write RS = TRS with the leader outside it; here the step waits
    stuck = ps(1, (2, 1), (1, 2), epoch=6)
    step = reassignment_step(stuck, (2,), (2,), (1,), frozenset({1}))
    assert not step.done and step.state is stuck


def test_validation_messages() -> None:
    # KafkaController.validateReplicas
    state = ps(1, (1, 2), (1, 2))
    assert validate_target(state, (2, 3), (), LIVE) is None
    cases = {(): "Empty replica list specified in partition reassignment.",
             (2, 2): "Duplicate replica ids in partition reassignment replica list: List(2, 2)",
             (-1, 2): "Invalid broker id in replica list: List(-1, 2)",
             (2, 9): "Replica assignment has brokers that are not alive. Replica list: 9, "
                     "live broker list: 1, 2, 3, 4, 5"}
    for target, message in cases.items():
        error = validate_target(state, target, (), LIVE)
        assert error is not None
        assert (error.code, error.message) == (E.INVALID_REPLICA_ASSIGNMENT, message)
