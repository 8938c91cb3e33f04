"""Which replica a consumer should fetch from: Kafka's ReplicaSelector (KIP-392).

Theory of operation
-------------------
A consumer that names its rack (`client.rack`, sent as `rack_id` in Fetch v11+) may read from
a follower in that rack rather than cross racks to the leader. The leader decides: at each
consumer fetch it builds a view of the replicas that could serve the offset asked for and asks
the configured selector (`replica.selector.class`) for one. When the choice is a follower, the
leader answers that partition at once with no records and `preferred_read_replica` set; the
consumer then fetches from that follower, which serves reads up to the high watermark it has
learnt from the leader.

Only a replica that is in the ISR, has reached the fetch offset and still holds it (its log
start is not past it) is a candidate, as in Kafka: a lagging follower would hold the consumer
back for as long as the client keeps the choice (five minutes in the Java client and
librdkafka), and one whose log starts later would answer OFFSET_OUT_OF_RANGE. A broker with
no endpoint on the listener the consumer came in on is no candidate either: the client could
not reach it.

With no selector configured (Kafka's default) consumers read from leaders only. Pure: no trio,
no clock, no store; the replica manager hands in the partition, the brokers' racks and the
time.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from pybroker.replica.partition import Partition

__all__ = ["ClientMetadata", "ReplicaView", "ReplicaSelector", "RackAwareReplicaSelector",
           "RACK_AWARE_SELECTOR", "SELECTOR_CLASSES", "replica_selector",
           "preferred_read_replica"]

RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

@dataclass(frozen=True, slots=True)
class ClientMetadata:
    """What a consumer's Fetch v11+ says about where it is (Kafka's ClientMetadata). A fetch
    without it (older versions, followers) reads from the leader only, as in Kafka."""

    rack_id: str
    listener: str | None = None


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One candidate replica as the selector sees it (Kafka's ReplicaView)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int

    def sort_key(self) -> tuple[int, int, int]:
        """Kafka's ReplicaView.comparator: the most caught-up first, then the one caught up
        most recently; the lower broker id breaks ties so the choice is stable."""
        return (self.log_end_offset, -self.time_since_last_caught_up_ms, -self.broker_id)


class ReplicaSelector(Protocol):
    def select(self, client: ClientMetadata, leader: ReplicaView,
               replicas: Iterable[ReplicaView]) -> ReplicaView:
        """The replica `client` should read from; `replicas` includes the leader."""


class RackAwareReplicaSelector:
    """Kafka's RackAwareReplicaSelector: the leader when it shares the client's rack or no
    replica does, else the most caught-up replica in the client's rack."""

    def select(self, client: ClientMetadata, leader: ReplicaView,
               replicas: Iterable[ReplicaView]) -> ReplicaView:
        if not client.rack_id:
            return leader
        same_rack = [r for r in replicas if r.rack == client.rack_id]
        if not same_rack or any(r.broker_id == leader.broker_id for r in same_rack):
            return leader
        return max(same_rack, key=ReplicaView.sort_key)


# The class names `replica.selector.class` accepts; any other is refused at start.
SELECTOR_CLASSES: dict[str, Callable[[], ReplicaSelector]] = {
    RACK_AWARE_SELECTOR: RackAwareReplicaSelector,
}


def replica_selector(class_name: str | None) -> ReplicaSelector | None:
    """The selector `replica.selector.class` names; None (leaders only) when unset. The
    config validator has already refused unknown names."""
    return None if not class_name else SELECTOR_CLASSES[class_name]()


def preferred_read_replica(selector: ReplicaSelector, partition: Partition,
                           client: ClientMetadata, fetch_offset: int, now_ms: int,
                           racks: Mapping[int, str | None]) -> int:
    """The follower the leader of `partition` should send `client` to, or -1 to read here
    (Kafka's findPreferredReadReplica). `racks`: the rack (None for none) of every live
    broker with an endpoint on the client's listener; the others cannot be chosen."""
    leader = ReplicaView(partition.local_id, racks.get(partition.local_id),
                         partition.log.log_end_offset, 0)
    views = [leader]
    for broker_id, state in partition.followers.items():
        if (broker_id not in partition.isr or broker_id not in racks
                or state.log_end_offset < fetch_offset
                or state.log_start_offset > fetch_offset):
            continue
        views.append(ReplicaView(broker_id, racks[broker_id], state.log_end_offset,
                                 now_ms - state.last_caught_up_ms))
    chosen = selector.select(client, leader, views)
    return -1 if chosen.broker_id == partition.local_id else chosen.broker_id
