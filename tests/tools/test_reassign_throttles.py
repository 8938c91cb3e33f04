"""What kafka-reassign-partitions --throttle sets (tools/reassign_throttles.py), as Kafka's
ReassignPartitionsCommandTest computes it: sources are leader throttles, new replicas
follower throttles, and every broker of every move gets the rates."""
from __future__ import annotations

from pybroker.client.admin import PartitionReassignment
from pybroker.client.cluster import TopicPartition
from pybroker.tools.reassign_throttles import (
    Move, follower_throttles, leader_throttles, proposed_moves, reassigning_brokers,
)


def test_moves_from_the_current_replicas() -> None:
    moves = proposed_moves({}, {TopicPartition("foo", 0): [0, 1, 3],
                                TopicPartition("foo", 1): [1, 2, 3],
                                TopicPartition("bar", 0): [2, 3]},
                           {TopicPartition("foo", 0): [0, 1, 2],
                            TopicPartition("foo", 1): [1, 2, 3],
                            TopicPartition("bar", 0): [2, 1]})
    assert moves == {"foo": {0: Move(frozenset({0, 1, 2}), frozenset({3})),
                             1: Move(frozenset({1, 2, 3}), frozenset())},
                     "bar": {0: Move(frozenset({1, 2}), frozenset({3}))}}
    assert leader_throttles(moves) == {"foo": "0:0,0:1,0:2,1:1,1:2,1:3", "bar": "0:1,0:2"}
    assert follower_throttles(moves) == {"foo": "0:3", "bar": "0:3"}
    assert reassigning_brokers(moves) == [0, 1, 2, 3]


def test_a_move_in_progress_keeps_its_original_sources() -> None:
    """A partition already moving from [1, 2] to [3, 4] (replicas 1,2,3,4, adding 3,4),
    resubmitted to [4, 5]: its sources stay 1, 2; other moves in progress are kept."""
    ongoing = {TopicPartition("t", 0): PartitionReassignment((1, 2, 3, 4), (3, 4), (1, 2)),
               TopicPartition("u", 0): PartitionReassignment((1, 6), (6,), (1,))}
    moves = proposed_moves(ongoing, {TopicPartition("t", 0): [4, 5]},
                           {TopicPartition("t", 0): [1, 2, 3, 4]})
    assert moves["t"][0] == Move(frozenset({1, 2}), frozenset({4, 5}))
    assert moves["u"][0] == Move(frozenset({1}), frozenset({6}))
    assert leader_throttles(moves) == {"t": "0:1,0:2", "u": "0:1"}
    assert follower_throttles(moves) == {"t": "0:4,0:5", "u": "0:6"}
    assert reassigning_brokers(moves) == [1, 2, 4, 5, 6]
