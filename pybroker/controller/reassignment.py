"""Moving a partition's replicas (AlterPartitionReassignments, KIP-455) as a pure planner.

Theory of operation. A reassignment never lowers the partition's durability: the target
replicas (TRS) are added first and the old ones (ORS) removed only after every target
replica has caught up. Kafka's `onPartitionReassignment` does it in two phases, and the
controller re-runs it whenever the partition's ISR changes:

1. While some target replica is missing from the ISR: the replica set is RS = TRS + ORS
   (target first, in its order, then the old replicas not in it), with `adding` = TRS - ORS
   and `removing` = ORS - TRS written beside it in the topic znode; the leader epoch is bumped
   so every replica learns the new set. The new replicas then fetch from the leader, and the
   leader adds them to the ISR as they catch up.
2. Once TRS is contained in the ISR: if the leader is outside TRS (or dead) it moves to the
   first target replica that is live and in the ISR; RS = TRS, the ISR keeps only target
   replicas, `adding` and `removing` are cleared: one write, one epoch.

`reassignment_step` is one call of that loop: given the partition's state, the target and
the adding/removing lists currently stored, it returns what to write and whether the
reassignment is done. It is idempotent: asked again with nothing changed it returns the
same state (the very object passed in) and the same lists, so the façade writes nothing.

A new target given while one is in progress supplants it: the origin replicas are those of
the current set that were not being added (Kafka's `ReplicaAssignment.reassignTo`), and
replicas added by the abandoned target but not in the new one leave the ISR at once. A
cancellation is a target equal to the origin replicas, which completes at once.

Kafka, finding no live in-sync target replica at completion, logs the failed election and
writes RS = TRS anyway, leaving a leader outside its replica set; here the step waits
instead (nothing is written, `done` is False) until a target replica can lead.
"""
from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import replace
from typing import NamedTuple

from protocol.errors import ErrorCode, KafkaError
from pybroker.cluster.image import PartitionState
from pybroker.controller.election import (
    NO_LEADER, elect_for_reassignment, elect_offline, has_live_leader, new_leader_and_isr,
    remove_from_isr,
)


class ReassignmentStep(NamedTuple):
    """What to write: the partition's state (the one passed in if nothing changes), the
    adding and removing lists for the topic znode, and whether the reassignment is done."""

    state: PartitionState
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    done: bool


def origin_replicas(replicas: Sequence[int], adding: Sequence[int]) -> tuple[int, ...]:
    """The replicas the partition had before the reassignment in progress (Kafka's
    `originReplicas`)."""
    return tuple(r for r in replicas if r not in adding)


def target_replicas(replicas: Sequence[int], removing: Sequence[int]) -> tuple[int, ...]:
    """The replicas the reassignment in progress moves to (Kafka's `targetReplicas`)."""
    return tuple(r for r in replicas if r not in removing)


def validate_target(state: PartitionState, target: Sequence[int], adding: Sequence[int],
                    live: Set[int]) -> KafkaError | None:
    """Kafka's `validateReplicas` for one partition of AlterPartitionReassignments: a
    non-empty list of distinct, non-negative broker ids whose newly added brokers are live.
    The error (INVALID_REPLICA_ASSIGNMENT, with Kafka's message), or None."""
    if not target:
        return KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                          "Empty replica list specified in partition reassignment.")
    shown = ", ".join(map(str, target))
    if len(set(target)) != len(target):
        return KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                          f"Duplicate replica ids in partition reassignment replica list: "
                          f"List({shown})")
    if any(r < 0 for r in target):
        return KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                          f"Invalid broker id in replica list: List({shown})")
    origin = origin_replicas(state.replicas, adding)
    new = [r for r in target if r not in origin]
    if not set(new) <= live:
        return KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                          f"Replica assignment has brokers that are not alive. Replica list: "
                          f"{', '.join(map(str, new))}, live broker list: "
                          f"{', '.join(map(str, sorted(live)))}")
    return None


def reassignment_step(state: PartitionState, target: Sequence[int], adding: Sequence[int],
                      removing: Sequence[int], live: Set[int]) -> ReassignmentStep:
    """The next write of the reassignment of `state` to `target` (see the module's theory).

    `adding`/`removing` are the lists stored with the partition's replica set (empty when
    no reassignment is in progress). The caller validates `target` first
    (`validate_target`)."""
    target = tuple(target)
    if not adding and not removing and tuple(state.replicas) == target:
        return ReassignmentStep(state, (), (), True)
    origin = origin_replicas(state.replicas, adding)
    full = tuple(dict.fromkeys(target + origin))
    new_adding = tuple(r for r in full if r not in origin)
    new_removing = tuple(r for r in full if r not in target)
    # Kafka's isReassignmentComplete: nothing to add or remove, or every target in sync.
    if (not new_adding and not new_removing) or set(target) <= frozenset(state.isr):
        finished = _complete(state, target, live)
        if finished is not None:
            return ReassignmentStep(finished, (), (), True)
    unneeded = frozenset(state.replicas) - frozenset(full)
    if (full, new_adding, new_removing) == (state.replicas, tuple(adding), tuple(removing)) \
            and not unneeded:
        return ReassignmentStep(state, new_adding, new_removing, False)
    return ReassignmentStep(_widen(state, full, unneeded, live), new_adding, new_removing,
                            False)


def _widen(state: PartitionState, full: tuple[int, ...], unneeded: Set[int], live: Set[int]
           ) -> PartitionState:
    """Phase 1: the replica set becomes `full` (TRS + ORS), one epoch later even when only
    the set changes (Kafka's `updateLeaderEpoch`, so every replica learns it). Replicas an
    abandoned target was adding, now in neither set, leave the ISR at once (never the last
    member); if one of them led, the offline election picks a leader among the rest."""
    widened = replace(state, replicas=full)
    widened = remove_from_isr(widened, unneeded) or widened
    if widened.leader == NO_LEADER and state.leader in unneeded:
        widened = elect_offline(widened, live - unneeded, unclean=False) or widened
    return replace(widened, leader_epoch=state.leader_epoch + 1)


def _complete(state: PartitionState, target: tuple[int, ...], live: Set[int]
              ) -> PartitionState | None:
    """Phase 2: RS = TRS, the ISR restricted to TRS, the leader moved into TRS if it is
    outside it or dead. None if no target replica can lead (the step then waits)."""
    if state.leader in target and has_live_leader(state, live):
        leader: int | None = state.leader
    else:
        leader = elect_for_reassignment(state, target, live)
    if leader is None:
        return None
    isr = tuple(r for r in state.isr if r in target)
    if not isr:   # only in an inconsistent state (a leader outside its ISR); never empty it
        return None
    return new_leader_and_isr(state, leader, isr, target) or replace(
        state, leader_epoch=state.leader_epoch + 1)
