"""The image-wide decisions of `pybroker.controller.decisions`: which partitions each
cluster event concerns, and what is written for them (Kafka's `KafkaController`)."""
from __future__ import annotations

import pytest

from pybroker.controller.decisions import (
    controlled_shutdown_moves, imbalance, on_brokers_failed, on_brokers_started,
    partitions_led_by, rebalance_moves, unclean_from_configs,
)
from pybroker.controller.election import NO_LEADER
from tests.controller.helpers import image, ps

L = frozenset


def summary(changes: list) -> list[tuple[str, int, int, tuple[int, ...], int]]:
    return [(t, s.partition, s.leader, s.isr, s.leader_epoch) for t, s in changes]


# -- broker failure: KafkaController.onBrokerFailure -> onReplicasBecomeOffline --------------

def test_failure_elects_for_led_partitions_and_shrinks_followed_ones() -> None:
    img = image({"t": [ps(1, (1, 2, 3), (1, 2, 3)),     # led by the dead broker
                       ps(2, (2, 1, 3), (2, 1, 3)),     # followed in sync
                       ps(2, (2, 3, 1), (2, 3)),        # followed out of sync: untouched
                       ps(3, (3, 2), (3, 2))]})         # not hosted
    assert summary(on_brokers_failed(img, L({2, 3}))) == [
        ("t", 0, 2, (2, 3), 6),
        ("t", 1, 2, (2, 3), 6),
    ]


def test_failure_of_the_last_in_sync_replica_leaves_it_in_the_isr() -> None:
    # ReplicaStateMachine.doRemoveReplicasFromIsr never empties the ISR
    img = image({"t": [ps(1, (1, 2), (1,))]})
    assert summary(on_brokers_failed(img, L({2}))) == [("t", 0, NO_LEADER, (1,), 6)]
    # and it comes back only with that replica (unclean election off)
    offline = image({"t": [ps(NO_LEADER, (1, 2), (1,), epoch=6)]})
    assert on_brokers_failed(offline, L({2})) == []
    assert on_brokers_started(offline, L({2})) == []
    assert summary(on_brokers_started(offline, L({1, 2}))) == [("t", 0, 1, (1,), 7)]


def test_failure_uses_each_topics_unclean_setting() -> None:
    img = image({"dirty": [ps(1, (1, 2), (1,))], "clean": [ps(1, (1, 2), (1,))]},
                configs={"dirty": {"unclean.leader.election.enable": "true"}})
    policy = unclean_from_configs(img, default=False)
    assert summary(on_brokers_failed(img, L({2}), policy)) == [
        ("clean", 0, NO_LEADER, (1,), 6),
        ("dirty", 0, 2, (2,), 6),
    ]
    # the broker default applies where the topic says nothing
    assert summary(on_brokers_failed(img, L({2}), unclean_from_configs(img, True)))[0] == \
        ("clean", 0, 2, (2,), 6)


def test_failure_skips_topics_being_deleted() -> None:
    img = image({"gone": [ps(1, (1, 2), (1, 2))], "t": [ps(1, (1, 2), (1, 2))]})
    assert [t for t, _ in on_brokers_failed(img, L({2}), deleting=L({"gone"}))] == ["t"]


def test_failure_is_idempotent_on_its_own_result() -> None:
    img = image({"t": [ps(1, (1, 2, 3), (1, 2, 3)), ps(3, (3, 1), (3, 1))]})
    first = on_brokers_failed(img, L({2, 3}))
    after = image({"t": [s for _, s in first]})
    assert on_brokers_failed(after, L({2, 3})) == []


# -- broker start: KafkaController.onBrokerStartup -> triggerOnlinePartitionStateChange -----

def test_start_elects_only_partitions_that_can_now_have_a_leader() -> None:
    img = image({"t": [ps(NO_LEADER, (1, 2), (2,)),    # 2 is back: elected
                       ps(NO_LEADER, (1, 3), (3,)),    # 3 still dead
                       ps(1, (1, 2), (1,))]})          # has a live leader
    assert summary(on_brokers_started(img, L({1, 2}))) == [("t", 0, 2, (2,), 6)]


# -- controlled shutdown: KafkaController.doControlledShutdown -------------------------------

def test_controlled_shutdown_moves_leaders_and_leaves_isrs() -> None:
    img = image({"t": [ps(1, (1, 2, 3), (1, 2, 3)),   # led: moves to 2
                       ps(2, (2, 1), (2, 1)),         # followed in sync: 1 leaves the ISR
                       ps(2, (2, 1), (2,)),           # followed out of sync: untouched
                       ps(1, (1,), (1,)),             # one replica: left alone
                       ps(1, (1, 2), (1,))]})         # nobody else in sync: stays (retry)
    moves = controlled_shutdown_moves(img, 1, L({1, 2, 3}))
    assert summary(moves) == [("t", 0, 2, (2, 3), 6), ("t", 1, 2, (2,), 6)]
    after = image({"t": [dict((s.partition, s) for _, s in moves).get(p.partition, p)
                         for p in img.topics["t"].partitions]})
    assert partitions_led_by(after, 1) == [("t", 3), ("t", 4)]


def test_controlled_shutdown_never_elects_another_broker_shutting_down() -> None:
    img = image({"t": [ps(1, (1, 2, 3), (1, 2, 3))]})
    assert summary(controlled_shutdown_moves(img, L({1, 2}), L({1, 2, 3}))) == \
        [("t", 0, 3, (3,), 6)]


# -- auto rebalance: KafkaController.checkAndTriggerAutoLeaderRebalance -----------------------

def test_imbalance_is_per_preferred_broker() -> None:
    img = image({"t": [ps(1, (1, 2), (1, 2)), ps(2, (1, 2), (1, 2)),
                       ps(2, (2, 1), (2, 1)), ps(NO_LEADER, (3, 1), (3,))]})
    assert imbalance(img) == {1: 0.5, 2: 0.0, 3: 1.0}


@pytest.mark.parametrize("threshold,expected", [(10, [1, 3, 3]), (50, [3, 3]), (100, [])])
def test_rebalance_elects_preferred_replicas_over_the_threshold(
        threshold: float, expected: list[int]) -> None:
    img = image({"t": [ps(1, (1, 2), (1, 2)), ps(2, (1, 2), (1, 2)),
                       ps(2, (3, 2), (2, 3)), ps(2, (3, 2), (2, 3)),
                       ps(2, (4, 2), (2,))]})   # 4 is over the threshold but out of sync
    moves = rebalance_moves(img, L({1, 2, 3, 4}), threshold)
    assert [s.leader for _, s in moves] == expected
    assert all(s.leader_epoch == 6 and s.isr in ((1, 2), (2, 3)) for _, s in moves)


def test_rebalance_skips_dead_preferred_replicas() -> None:
    img = image({"t": [ps(2, (1, 2), (1, 2))]})
    assert rebalance_moves(img, L({2})) == []


# -- a failed log dir: KafkaController.onBrokerLogDirFailure -> onReplicasBecomeOffline -------

def test_replicas_in_a_failed_log_dir_count_as_dead_for_their_partitions_alone() -> None:
    img = image({"t": [ps(1, (1, 2, 3), (1, 2, 3)),     # led from the failed dir: moves
                       ps(1, (1, 2, 3), (1, 2, 3)),     # led from a healthy dir: stays
                       ps(2, (2, 1, 3), (2, 1, 3)),     # followed from the failed dir
                       ps(1, (1, 2), (1,))]})            # the last ISR member, failed dir
    offline = {1: L({("t", 0), ("t", 2), ("t", 3)})}
    live = L({1, 2, 3})
    assert summary(on_brokers_failed(img, live, offline=offline)) == [
        ("t", 0, 2, (2, 3), 6),
        ("t", 2, 2, (2, 3), 6),
        ("t", 3, NO_LEADER, (1,), 6),  # kept in the ISR: nothing else holds every record
    ]
    # Nothing moves without the offline replicas: broker 1 is live.
    assert on_brokers_failed(img, live) == []
    # Never elected while its replica is offline; elected again once it is not (restarted
    # with the disk repaired, its registration lists nothing offline).
    waiting = image({"t": [ps(NO_LEADER, (1, 2), (1,), epoch=6)]})
    assert on_brokers_started(waiting, live, offline={1: L({("t", 0)})}) == []
    assert summary(on_brokers_started(waiting, live)) == [("t", 0, 1, (1,), 7)]
