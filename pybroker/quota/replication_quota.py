"""Replication quotas (Kafka's ReplicationQuotaManager, KIP-73): a byte rate for the copying
that moves replicas, so that a reassignment does not starve the traffic of everyone else.

Theory of operation. A broker keeps two quotas, each one rate over all its throttled
partitions: as leader (`leader.replication.throttled.rate`, what it sends to followers) and
as follower (`follower.replication.throttled.rate`, what it fetches). Which partitions count
is per topic: `leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`
name `partition:broker` pairs, and a pair names this broker's replica (or "*", every replica
of the topic). `kafka-reassign-partitions --throttle` sets both rates on the brokers taking
part, the moving partitions' current replicas as leader throttles and their new ones as
follower throttles; `--verify` removes them all once the moves are done.

The bytes of every throttled partition are recorded, but only replicas out of the ISR are
held back, and only while the rate is over its bound (Kafka's shouldLeaderThrottle /
shouldFollowerThrottle): a leader answers such a partition with no records, a follower leaves
it out of its next fetch. An in-sync replica is never held back, so acks=all produces are not
slowed by a reassignment's throttle. The rate is Kafka's SimpleRate (client_quota.Rate with
`simple`): over `replication.quota.window.num` samples of
`replication.quota.window.size.seconds`, divided by at least one window.

Pure: time is passed in (milliseconds), no trio. The bounds are set when the dynamic broker
configs change (`ReplicationQuotas.reconfigure`, Kafka's BrokerConfigHandler); the lists are
read through a callable at each use, so a topic config change applies at once.
"""
from __future__ import annotations

from collections.abc import Callable

from pybroker.config import BrokerConfig, TopicConfig
from pybroker.quota.client_quota import Rate

# Kafka's QUOTA_BYTES_PER_SECOND_DEFAULT (Long.MAX_VALUE): no throttle.
UNLIMITED = 2**63 - 1
ALL_REPLICAS = "*"


class ReplicationQuota:
    """One direction's quota (leader or follower) on one broker."""

    def __init__(self, node_id: int, bound: int,
                 throttled_replicas: Callable[[str], tuple[str, ...]], *,
                 samples: int = 11, window_s: int = 1) -> None:
        self.node_id = node_id
        self.bound = bound
        self._throttled_replicas = throttled_replicas
        self._rate = Rate(samples, window_s * 1000, simple=True)
        # topic -> (the list it was parsed from, "*" or the partitions throttled here)
        self._parsed: dict[str, tuple[tuple[str, ...], frozenset[int] | None]] = {}

    def is_throttled(self, topic: str, partition: int) -> bool:
        """Whether this broker's replica of the partition is named in the topic's list."""
        entries = self._throttled_replicas(topic)
        if not entries:
            return False
        cached = self._parsed.get(topic)
        if cached is None or cached[0] is not entries:
            cached = self._parsed[topic] = (entries, self._parse(entries))
        partitions = cached[1]
        return partitions is None or partition in partitions

    def _parse(self, entries: tuple[str, ...]) -> frozenset[int] | None:
        """None for "*", else the partitions whose pair names this broker (Kafka's
        parseThrottledPartitions; the topic config's validator let only these forms in)."""
        if "".join(entries) == ALL_REPLICAS:
            return None
        mine = set()
        for entry in entries:
            partition, _, broker = entry.strip().partition(":")
            if broker and int(broker) == self.node_id:
                mine.add(int(partition))
        return frozenset(mine)

    def is_exceeded(self, now_ms: float) -> bool:
        """Whether the rate is over the bound (Kafka's isQuotaExceeded); never without one."""
        bound = self.bound
        return bound < UNLIMITED and self._rate.per_second(now_ms) > bound

    def record(self, size: int, now_ms: float) -> None:
        """Count bytes of throttled partitions sent or fetched (nothing is refused here)."""
        if size:
            self._rate.record(size, now_ms)

    def bytes_per_second(self, now_ms: float) -> float:
        """The measured rate (Kafka's LeaderReplication / FollowerReplication byte-rate)."""
        return self._rate.per_second(now_ms)


class ReplicationQuotas:
    """A broker's leader and follower quotas: windows from its static configuration, bounds
    from its current (dynamic) one, throttled replicas from each topic's config."""

    def __init__(self, node_id: int, config: BrokerConfig,
                 topic_config: Callable[[str], TopicConfig]) -> None:
        window = {"samples": config.replication_quota_window_num,
                  "window_s": config.replication_quota_window_size_seconds}
        self.leader = ReplicationQuota(
            node_id, config.leader_replication_throttled_rate,
            lambda topic: topic_config(topic).leader_replication_throttled_replicas, **window)
        self.follower = ReplicationQuota(
            node_id, config.follower_replication_throttled_rate,
            lambda topic: topic_config(topic).follower_replication_throttled_replicas,
            **window)

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> None:
        """New dynamic rates (this broker's own, else the cluster default, else none)."""
        self.leader.bound = new.leader_replication_throttled_rate
        self.follower.bound = new.follower_replication_throttled_rate
