"""The cooperative-sticky assignor (KIP-429), as the group leader runs it: pure, no I/O.

Why sticky: a partition that stays with its member keeps that member's position and caches, and
with the cooperative protocol it is never paused at all; only the partitions that must move to
balance the group do. Kafka's CooperativeStickyAssignor does this in two steps, and so does this
module:

1. `sticky_assign`: a balanced assignment that keeps as many owned partitions as balance allows.
   When every member subscribes to the same topics (Kafka's "constrained" case, the usual one)
   each member ends with floor(N/M) or ceil(N/M) partitions: members keep their owned partitions
   up to that quota (ceil for as many members as the remainder allows), then the free partitions
   fill the members below quota. With different subscriptions, owned partitions are kept where
   still subscribed, free partitions go to the least loaded subscriber, then partitions move one
   at a time from a member to a subscriber holding at least two fewer until none can; Kafka's
   general algorithm balances further in corner cases with overlapping subscriptions.
2. `cooperative_adjust`: a partition going to a member other than its current owner is left out
   of this round; the owner sees it revoked, gives it up and rejoins, and the next round assigns
   it, now unowned. No partition is ever owned by two members at once.

Owned partitions come from each member's subscription; when two members claim one partition
(one of them missed a rebalance) the claim of the higher generation wins, as in Kafka.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from pybroker.client.cluster import TopicPartition

__all__ = ["ASSIGNOR", "sticky_assign", "cooperative_adjust", "valid_owned"]

ASSIGNOR = "cooperative-sticky"

Plan = dict[str, list[TopicPartition]]


def valid_owned(owned: Mapping[str, Iterable[TopicPartition]], generations: Mapping[str, int],
                existing: set[TopicPartition]) -> dict[str, set[TopicPartition]]:
    """Each member's claims on partitions that still exist, conflicts going to the member of
    the highest generation (ties to the smallest member id)."""
    owner: dict[TopicPartition, str] = {}
    for member in sorted(owned, key=lambda m: (-generations.get(m, -1), m)):
        for tp in owned[member]:
            if tp in existing and tp not in owner:
                owner[tp] = member
    out: dict[str, set[TopicPartition]] = {m: set() for m in owned}
    for tp, member in owner.items():
        out[member].add(tp)
    return out


def sticky_assign(subscriptions: Mapping[str, Iterable[str]],
                  partition_counts: Mapping[str, int],
                  owned: Mapping[str, Iterable[TopicPartition]] | None = None,
                  generations: Mapping[str, int] | None = None) -> Plan:
    """Member -> its partitions (sorted): balanced, keeping owned partitions where it can."""
    topics = {m: sorted(set(ts)) for m, ts in subscriptions.items()}
    eligible = {m: [TopicPartition(t, p) for t in ts for p in range(partition_counts.get(t, 0))]
                for m, ts in topics.items()}
    existing = {tp for tps in eligible.values() for tp in tps}
    claims = valid_owned({m: (owned or {}).get(m, ()) for m in topics}, generations or {},
                         existing)
    kept = {m: sorted(tp for tp in claims[m] if tp.topic in topics[m]) for m in topics}
    if len({tuple(ts) for ts in topics.values()}) <= 1:
        plan = _constrained(sorted(topics), sorted(existing), kept)
    else:
        plan = _general(topics, eligible, kept)
    return {m: sorted(tps) for m, tps in plan.items()}


def _constrained(members: list[str], partitions: list[TopicPartition], kept: Plan) -> Plan:
    if not members:
        return {}
    min_quota, extra = divmod(len(partitions), len(members))
    plan: Plan = {}
    taken: set[TopicPartition] = set()
    at_max = 0  # members holding min_quota + 1 (at most `extra` of them)
    for m in members:
        mine = kept[m]
        if len(mine) > min_quota and at_max < extra:
            keep, at_max = mine[:min_quota + 1], at_max + 1
        else:
            keep = mine[:min_quota]
        plan[m] = list(keep)
        taken.update(keep)
    free = [tp for tp in partitions if tp not in taken]
    for m in sorted(members, key=lambda x: (len(plan[x]), x)):
        while len(plan[m]) < min_quota:
            plan[m].append(free.pop(0))
    for m in members:
        if not free:
            break
        if len(plan[m]) == min_quota and at_max < extra:
            plan[m].append(free.pop(0))
            at_max += 1
    assert not free, "the quotas account for every partition"
    return plan


def _general(topics: Mapping[str, list[str]], eligible: Mapping[str, list[TopicPartition]],
             kept: Plan) -> Plan:
    plan: Plan = {m: list(kept[m]) for m in topics}
    owner = {tp: m for m, tps in plan.items() for tp in tps}
    subscribers: dict[str, list[str]] = {}
    for m, ts in sorted(topics.items()):
        for t in ts:
            subscribers.setdefault(t, []).append(m)
    every = sorted({tp for tps in eligible.values() for tp in tps})
    for tp in every:
        if tp not in owner:
            m = min(subscribers[tp.topic], key=lambda x: (len(plan[x]), x))
            plan[m].append(tp)
            owner[tp] = m
    moved = True
    while moved:  # each move lowers the sum of squared loads: this ends
        moved = False
        for tp in every:
            src = owner[tp]
            dst = min(subscribers[tp.topic], key=lambda x: (len(plan[x]), x))
            if len(plan[dst]) + 1 < len(plan[src]):
                plan[src].remove(tp)
                plan[dst].append(tp)
                owner[tp] = dst
                moved = True
    return plan


def cooperative_adjust(plan: Mapping[str, list[TopicPartition]],
                       owned: Mapping[str, set[TopicPartition]]) -> Plan:
    """Leave out of this round every partition that another member still owns."""
    owner = {tp: m for m, tps in owned.items() for tp in tps}
    return {m: [tp for tp in tps if owner.get(tp, m) == m] for m, tps in plan.items()}
