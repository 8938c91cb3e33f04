"""The cooperative-sticky assignor: balance, stickiness, and the cooperative hand-over."""
from __future__ import annotations

import itertools
import random

from pybroker.client.cluster import TopicPartition
from pybroker.client.consumer_protocol import decode_subscription, encode_subscription
from pybroker.client.sticky import cooperative_adjust, sticky_assign, valid_owned


def tps(topic: str, *parts: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in parts]


def test_a_new_member_takes_one_partition_from_each_and_nothing_else_moves() -> None:
    subs = {"a": ["t"], "b": ["t"], "c": ["t"]}
    owned = {"a": tps("t", 0, 1, 2), "b": tps("t", 3, 4, 5), "c": []}
    plan = sticky_assign(subs, {"t": 6}, owned)
    assert sorted(len(p) for p in plan.values()) == [2, 2, 2]
    assert set(plan["a"]) < set(owned["a"]) and set(plan["b"]) < set(owned["b"])
    # Cooperative: c gets nothing yet, as a and b still own what it will get.
    first = cooperative_adjust(plan, {m: set(o) for m, o in owned.items()})
    assert first["a"] == plan["a"] and first["b"] == plan["b"] and first["c"] == []
    # a and b gave up their revoked partitions and rejoined: c gets them now.
    second = cooperative_adjust(sticky_assign(subs, {"t": 6}, first),
                                {m: set(o) for m, o in first.items()})
    assert second == plan


def test_balanced_and_sticky_for_random_groups() -> None:
    rng = random.Random(7)
    for _ in range(200):
        members = [f"m{i}" for i in range(rng.randint(1, 6))]
        counts = {"t": rng.randint(0, 13), "u": rng.randint(0, 5)}
        everything = [TopicPartition(t, p) for t, n in counts.items() for p in range(n)]
        rng.shuffle(everything)
        owned = {m: everything[i::len(members) + 1] for i, m in enumerate(members)}
        plan = sticky_assign({m: ["t", "u"] for m in members}, counts, owned)
        flat = sorted(itertools.chain.from_iterable(plan.values()))
        assert flat == sorted(everything), "every partition exactly once"
        sizes = [len(p) for p in plan.values()]
        assert max(sizes) - min(sizes) <= 1, plan
        # No owned partition moves while its owner is not over the quota it needs to keep.
        quota = len(everything) // len(members)
        for m in members:
            kept = set(owned[m]) & set(plan[m])
            assert len(kept) >= min(len(owned[m]), quota), (m, owned[m], plan[m])


def test_different_subscriptions_are_balanced_where_they_can_be() -> None:
    subs = {"a": ["t", "u"], "b": ["t"], "c": ["u"]}
    owned = {"a": tps("t", 0, 1, 2, 3) + tps("u", 0, 1, 2, 3), "b": [], "c": []}
    plan = sticky_assign(subs, {"t": 4, "u": 4}, owned)
    assert sorted(itertools.chain.from_iterable(plan.values())) == \
        sorted(tps("t", 0, 1, 2, 3) + tps("u", 0, 1, 2, 3))
    assert all(tp.topic == "t" for tp in plan["b"]) and all(tp.topic == "u" for tp in plan["c"])
    assert sorted(len(p) for p in plan.values()) == [2, 3, 3], plan
    assert set(plan["a"]) <= set(owned["a"])  # a only gave partitions away


def test_a_conflicting_claim_goes_to_the_newer_generation() -> None:
    existing = set(tps("t", 0, 1))
    claims = valid_owned({"old": tps("t", 0, 1), "new": tps("t", 0)}, {"old": 3, "new": 4},
                         existing)
    assert claims == {"old": {TopicPartition("t", 1)}, "new": {TopicPartition("t", 0)}}
    assert valid_owned({"a": tps("gone", 0)}, {}, existing) == {"a": set()}


def test_a_cooperative_subscription_carries_owned_partitions_and_generation() -> None:
    sub = decode_subscription(encode_subscription(["t"], owned_partitions=tps("t", 2, 0),
                                                  generation_id=5))
    assert (sub.version, sub.topics, sub.owned_partitions, sub.generation_id) == (
        2, ("t",), tuple(tps("t", 0, 2)), 5)
    assert decode_subscription(encode_subscription(["t"])).version == 0
