"""Replica assignment (`pybroker.controller.assignment`) against the assignments Kafka's own
tests expect of `AdminUtils.assignReplicasToBrokers` (core/src/test/.../AdminRackAwareTest),
and its errors."""
from __future__ import annotations

import random

import pytest

from protocol.errors import ErrorCode as E
from protocol.errors import KafkaError
from pybroker.controller.assignment import (
    assign_added_partitions, assign_replicas, rack_alternated,
)

RNG = random.Random(0)
RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_unaware_with_a_fixed_start() -> None:
    # AdminRackAwareTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, start 0;
    # the shift grows at partition 5, so the second round's followers differ
    assert assign_replicas(dict.fromkeys(range(5)), 10, 3, rng=RNG, fixed_start_index=0) == [
        [0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 0], [4, 0, 1],
        [0, 2, 3], [1, 3, 4], [2, 4, 0], [3, 0, 1], [4, 1, 2]]


def test_rack_alternated_broker_list() -> None:
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
    assert rack_alternated(RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({b: r for b, r in RACKS.items() if b != 5}) == [0, 3, 1, 4, 2]


def test_rack_aware_with_a_fixed_start() -> None:
    # the same test: partition 6 starts the second round with a shifted follower
    assert assign_replicas(RACKS, 7, 3, rng=RNG, fixed_start_index=0,
                           start_partition_id=0) == [
        [0, 3, 1], [3, 1, 5], [1, 5, 4], [5, 4, 2], [4, 2, 0], [2, 0, 3], [0, 4, 2]]


def test_brokers_are_taken_in_id_order_whatever_the_mapping_order() -> None:
    assert assign_replicas({2: None, 0: None, 1: None}, 3, 2, rng=RNG,
                           fixed_start_index=0) == [[0, 1], [1, 2], [2, 0]]


def test_random_start_comes_from_the_rng() -> None:
    brokers = dict.fromkeys(range(6))
    runs = {str(assign_replicas(brokers, 6, 3, rng=random.Random(seed))) for seed in range(20)}
    assert len(runs) > 1
    assert assign_replicas(brokers, 6, 3, rng=random.Random(7)) == \
        assign_replicas(brokers, 6, 3, rng=random.Random(7))


# AdminUtils.assignReplicasToBrokers' checks, and AdminZkClient's for mixed rack information
@pytest.mark.parametrize("brokers,partitions,rf,code,message", [
    ({0: None, 1: None}, 3, 3, E.INVALID_REPLICATION_FACTOR,
     "Replication factor: 3 larger than available brokers: 2."),
    ({0: None}, 3, 0, E.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."),
    ({0: None}, 0, 1, E.INVALID_PARTITIONS, "Number of partitions must be larger than 0."),
    ({0: "a", 1: None}, 1, 1, E.INVALID_REPLICATION_FACTOR,
     "Not all brokers have rack information for replica rack aware assignment."),
])
def test_invalid_requests(brokers: dict[int, str | None], partitions: int, rf: int, code: E,
                          message: str) -> None:
    with pytest.raises(KafkaError) as raised:
        assign_replicas(brokers, partitions, rf, rng=RNG)
    assert (raised.value.code, raised.value.message) == (code, message)


def test_added_partitions_continue_the_round_robin() -> None:
    # AdminZkClient.createNewPartitionsAssignment: start at partition 0's first replica,
    # number on from the existing partitions; the result is what a topic created with all
    # the partitions at once (from that start) would have had
    brokers = dict.fromkeys(range(5))
    whole = assign_replicas(brokers, 8, 3, rng=RNG, fixed_start_index=2)
    assert assign_added_partitions(whole[:3], brokers, 8, rng=RNG) == whole[3:]
    # partition 0's first broker is gone: the next id up starts
    assert assign_added_partitions([[7, 1]], {1: None, 8: None, 9: None}, 2, rng=RNG) == \
        [[9, 8]]


@pytest.mark.parametrize("total,message", [
    (2, "Topic already has 2 partitions."),
    (1, "Topic currently has 2 partitions, which is higher than the requested 1."),
])
def test_added_partitions_must_grow_the_topic(total: int, message: str) -> None:
    # ZkAdminManager.createPartitions' messages
    with pytest.raises(KafkaError) as raised:
        assign_added_partitions([[0], [1]], {0: None, 1: None}, total, rng=RNG)
    assert (raised.value.code, raised.value.message) == (E.INVALID_PARTITIONS, message)
