"""The server-side assignors of KIP-848 consumer groups: `uniform` and `range`, both sticky.

Kafka's UniformAssignor (homogeneous and heterogeneous subscriptions alike) gives every member
a share of the partitions of the topics it subscribes to, as even as the subscriptions allow,
and moves as few partitions as it can from the previous target assignment. This one keeps the
same promises with a simpler algorithm, in three passes:

1. keep: each member keeps the partitions of its previous target that still exist and that it
   still subscribes to, up to its fair share (what is over the share is released);
2. fill: each partition nobody holds goes to the eligible member holding fewest (ties: the
   smaller member id, so the result is deterministic);
3. balance: while some member holds two more than an eligible member, one partition moves.

The exact partitions may differ from Kafka's for the same input (the algorithm is not
Kafka's); the properties (every subscribed partition assigned once, counts within one where
subscriptions are equal, stickiness) are those the protocol relies on.

`range` (Kafka's RangeAssignor) works topic by topic: the members subscribed to a topic, in
member id order, get consecutive ranges of its partitions, the first `count % members` one
more; so members of topics with equal partition counts get the same partition numbers
(co-partitioning). Sticky as Kafka's: a member first keeps what it had of the topic, up to its
quota, and the rest fills the members below quota in order.
"""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Iterable

# A member's partitions: topic id -> partition numbers.
Assignment = Mapping[uuid.UUID, frozenset[int]]
# The topics a group may subscribe to: name -> (topic id, number of partitions).
TopicsView = Mapping[str, tuple[uuid.UUID, int]]

UNIFORM = "uniform"
RANGE = "range"
ASSIGNORS = (UNIFORM, RANGE)


def _flatten(assignment: Assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, parts in assignment.items() for p in parts}


def _group(partitions: Iterable[tuple[uuid.UUID, int]]) -> dict[uuid.UUID, frozenset[int]]:
    out: dict[uuid.UUID, set[int]] = {}
    for t, p in partitions:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


def assign_uniform(subscriptions: Mapping[str, Iterable[str]], topics: TopicsView,
                   previous: Mapping[str, Assignment]) -> dict[str, dict[uuid.UUID,
                                                                       frozenset[int]]]:
    """The target assignment of every member of `subscriptions` (member id -> topic names),
    sticky to `previous` (member id -> its previous target)."""
    members = sorted(subscriptions)
    eligible: dict[tuple[uuid.UUID, int], list[str]] = {}
    subscribed: dict[str, set[uuid.UUID]] = {}
    for member in members:
        ids = subscribed.setdefault(member, set())
        for name in subscriptions[member]:
            if name in topics:
                topic_id, count = topics[name]
                ids.add(topic_id)
                for p in range(count):
                    eligible.setdefault((topic_id, p), []).append(member)
    if not members:
        return {}
    total = len(eligible)
    share = -(-total // len(members))  # the most a member keeps in pass 1
    held: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in members}
    taken: set[tuple[uuid.UUID, int]] = set()
    for member in members:  # 1. keep
        kept = sorted(tp for tp in _flatten(previous.get(member, {}))
                      if tp in eligible and member in eligible[tp] and tp not in taken)
        for tp in kept[:share]:
            held[member].add(tp)
            taken.add(tp)
    for tp in sorted(set(eligible) - taken, key=lambda tp: (str(tp[0]), tp[1])):  # 2. fill
        owner = min(eligible[tp], key=lambda m: (len(held[m]), m))
        held[owner].add(tp)
    moved = True
    while moved:  # 3. balance
        moved = False
        for donor in sorted(members, key=lambda m: (-len(held[m]), m)):
            for tp in sorted(held[donor], key=lambda tp: (str(tp[0]), tp[1]), reverse=True):
                taker = min(eligible[tp], key=lambda m: (len(held[m]), m))
                if len(held[taker]) + 1 < len(held[donor]):
                    held[donor].discard(tp)
                    held[taker].add(tp)
                    moved = True
                    break
            if moved:
                break
    return {m: _group(held[m]) for m in members}


def assign_range(subscriptions: Mapping[str, Iterable[str]], topics: TopicsView,
                 previous: Mapping[str, Assignment]) -> dict[str, dict[uuid.UUID,
                                                                     frozenset[int]]]:
    """The `range` target assignment: per topic, consecutive ranges in member id order,
    sticky to `previous`."""
    held: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in subscriptions}
    for name, (topic_id, count) in sorted(topics.items()):
        members = sorted(m for m, names in subscriptions.items() if name in set(names))
        if not members:
            continue
        quota = {m: count // len(members) + (1 if i < count % len(members) else 0)
                 for i, m in enumerate(members)}
        taken: set[int] = set()
        for m in members:  # keep
            kept = sorted(p for p in previous.get(m, {}).get(topic_id, ())
                          if p < count and p not in taken)[:quota[m]]
            held[m][topic_id] = set(kept)
            taken.update(kept)
        free = iter(p for p in range(count) if p not in taken)
        for m in members:  # fill
            while len(held[m][topic_id]) < quota[m]:
                held[m][topic_id].add(next(free))
    return {m: {t: frozenset(ps) for t, ps in parts.items() if ps}
            for m, parts in held.items()}


ASSIGN = {UNIFORM: assign_uniform, RANGE: assign_range}
