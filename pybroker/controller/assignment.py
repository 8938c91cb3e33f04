"""Where a new topic's (or a grown topic's) replicas go: Kafka's `assignReplicasToBrokers`.

Theory of operation. Three goals, in Kafka's order (`AdminUtils.assignReplicasToBrokers`):
spread replicas, and above all leaders (the first replica), evenly over the brokers; spread
the followers of the partitions a broker leads over the other brokers, so a failed broker's
load falls on many; and when every broker names a rack, put a partition's replicas on
different racks while there are racks without one.

Without racks, brokers are taken in id order. Partition p's first replica is broker
`(p + start) mod n`, so leaders go round-robin from a random start; its other replicas follow
at a distance `1 + (shift + j) mod (n - 1)` from the first, and the shift grows by one each
time the partitions have gone once round the brokers, so consecutive rounds do not repeat
the same replica sets. With racks the same is done over a rack-alternated list (the brokers
of each rack in id order, dealt one per rack in rack-name order), and a follower candidate is
skipped while its rack, or the broker itself, already holds a replica and some rack (or
broker) holds none.

The randomness (the start index and the first shift) comes from the `rng` passed in, so a
test or a replay gives the same assignment for the same seed. Growing a topic (CreatePartitions)
starts from where partition 0 started and numbers on from the existing partitions, so the
new partitions continue the existing round-robin (Kafka's `createNewPartitionsAssignment`).
"""
from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from protocol.errors import ErrorCode, KafkaError

# An assignment: replica lists, one per partition, the first replica preferred as leader.
Assignment = list[list[int]]


def _check(brokers: Mapping[int, str | None], num_partitions: int,
           replication_factor: int) -> None:
    """Kafka's checks and messages, as CreateTopics reports them."""
    if num_partitions <= 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                         "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Replication factor: {replication_factor} larger than available "
                         f"brokers: {len(brokers)}.")
    racked = sum(1 for rack in brokers.values() if rack is not None)
    if 0 < racked < len(brokers):
        # Kafka's ZooKeeper-mode AdminZkClient raises AdminOperationException here (which
        # its CreateTopics reports as UNKNOWN_SERVER_ERROR); this reports the message with
        # the code the client can act on.
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         "Not all brokers have rack information for replica rack aware "
                         "assignment.")


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    """The index of a partition's (j+2)-th replica: never the first replica's own index,
    at a distance that depends on the round's shift (Kafka's `replicaIndex`)."""
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers dealt one per rack, racks in name order, each rack's brokers in id order:
    {0: r1, 1: r3, 2: r3, 3: r2, 4: r2, 5: r1} -> [0, 3, 1, 5, 4, 2] (Kafka's
    `getRackAlternatedBrokerList`)."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    deepest = max(len(c) for c in columns)
    return [c[i] for i in range(deepest) for c in columns if i < len(c)]


def assign_replicas(brokers: Mapping[int, str | None], num_partitions: int,
                    replication_factor: int, *, rng: random.Random,
                    fixed_start_index: int = -1, start_partition_id: int = -1
                    ) -> Assignment:
    """Replica lists for `num_partitions` partitions numbered from `max(0,
    start_partition_id)`, over `brokers` (id -> rack, or None). A `fixed_start_index` >= 0
    fixes both the start index and the first shift; otherwise each is drawn from `rng`.

    Raises KafkaError: INVALID_PARTITIONS for no partitions, INVALID_REPLICATION_FACTOR for
    a factor < 1 or above the number of brokers, or when only some brokers have a rack."""
    _check(brokers, num_partitions, replication_factor)
    racks = {b: r for b, r in brokers.items() if r is not None}
    order = rack_alternated(racks) if racks else sorted(brokers)
    n = len(order)
    start = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    first_id = max(0, start_partition_id)
    result: Assignment = []
    for partition in range(first_id, first_id + num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        if racks:
            result.append(_rack_aware_replicas(order, racks, first, shift,
                                               replication_factor))
        else:
            result.append([order[first]] + [order[_follower_index(first, shift, j, n)]
                                             for j in range(replication_factor - 1)])
    return result


def _rack_aware_replicas(order: Sequence[int], racks: Mapping[int, str], first: int,
                         shift: int, replication_factor: int) -> list[int]:
    """One partition's replicas over the rack-alternated `order`: candidates are walked at
    growing distances from the first replica (the shift scaled by the number of racks, so a
    round moves a whole rack cycle), and a candidate is taken only if its rack holds no
    replica yet, or every rack does, and likewise for the broker itself."""
    n, num_racks = len(order), len(set(racks.values()))
    replicas = [order[first]]
    used_racks = {racks[order[first]]}
    k = 0
    while len(replicas) < replication_factor:
        broker = order[_follower_index(first, shift * num_racks, k, n)]
        k += 1
        rack_ok = racks[broker] not in used_racks or len(used_racks) == num_racks
        broker_ok = broker not in replicas or len(replicas) == n
        if rack_ok and broker_ok:
            replicas.append(broker)
            used_racks.add(racks[broker])
    return replicas


def assign_added_partitions(existing: Sequence[Sequence[int]],
                            brokers: Mapping[int, str | None], new_total: int,
                            *, rng: random.Random) -> Assignment:
    """Replica lists for the partitions CreatePartitions adds, `len(existing)` to
    `new_total - 1`, with partition 0's replication factor. They continue the existing
    round-robin: the start index is that of the first broker (in id order) whose id is at
    least partition 0's first replica, and numbering goes on from the existing partitions
    (Kafka's `createNewPartitionsAssignment`).

    Raises KafkaError INVALID_PARTITIONS when `new_total` does not grow the topic, and
    whatever `assign_replicas` raises."""
    if not existing:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                         "Unexpected existing replica assignment: partition id 0 is missing.")
    count = len(existing)
    if new_total < count:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                         f"Topic currently has {count} partitions, which is higher than the "
                         f"requested {new_total}.")
    if new_total == count:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                         f"Topic already has {count} partitions.")
    ids = sorted(brokers)
    head = existing[0][0]
    start = next((i for i, b in enumerate(ids) if b >= head), 0)
    return assign_replicas(brokers, new_total - count, len(existing[0]), rng=rng,
                           fixed_start_index=start, start_partition_id=count)
