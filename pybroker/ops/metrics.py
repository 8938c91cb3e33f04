"""The broker's state as Prometheus metric families, computed when /metrics is scraped.

A custom collector (prometheus_client's `Collector`: `collect()` yields metric families) in a
registry of its own per broker, so several brokers in one process never share series. Nothing
here runs on the request path: the request counters are plain integers
(`request_stats.py`) and everything else is read from memory at scrape time — the metadata
image, the partitions this broker hosts (offsets, ISR; log sizes are kept by the segments, no
file is looked at) and the group coordinator's committed offsets. A scrape of a broker with
thousands of partitions costs milliseconds on the event loop, like one metadata request.

Names. Partitions and groups use kafka_exporter's names and labels
(`kafka_topic_partition_current_offset{topic,partition}`, `kafka_consumergroup_lag{...}`, ...)
so its Grafana dashboards work unchanged; `current_offset` is the high watermark, what
ListOffsets(latest) answers. In a cluster each broker reports the partitions it leads (as
Kafka's UnderReplicatedPartitions is the leader's) and the groups it coordinates, so a
partition is never reported twice; a group's lag is reported for the partitions this broker
holds a replica of. The broker's own figures are `pybroker_*`.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import trio
from prometheus_client.core import (
    CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from protocol.messages import APIS
from pybroker.ops.group_lag import group_lag
from pybroker.stats.request_stats import LATENCY_BUCKETS, RequestStats

if TYPE_CHECKING:
    from pybroker.cluster.metadata import MetadataStore
    from pybroker.coordinator.group_coordinator import GroupCoordinator
    from pybroker.coordinator.txn_coordinator import TransactionCoordinator
    from pybroker.replica.fetch_session import FetchSessionCache
    from pybroker.quota.memory_pool import MemoryPool
    from pybroker.replica.manager import ReplicaManager

__all__ = ["BrokerCollector", "broker_registry"]

_PARTITION = ["topic", "partition"]
_GROUP_PARTITION = ["consumergroup", "topic", "partition"]
_BUCKET_BOUNDS = [repr(b) for b in LATENCY_BUCKETS] + ["+Inf"]


def _api_name(api_key: int) -> str:
    api = APIS.get(api_key)
    return api.name if api is not None else str(api_key)


class BrokerCollector(Collector):
    """One broker's metric families, from the collaborators it reads."""

    def __init__(self, node_id: int, metadata: "MetadataStore", replicas: "ReplicaManager",
                 groups: "GroupCoordinator", memory: "MemoryPool", stats: RequestStats,
                 transactions: "TransactionCoordinator | None" = None,
                 fetch_sessions: "FetchSessionCache | None" = None) -> None:
        self.node_id = node_id
        self.metadata = metadata
        self.replicas = replicas
        self.groups = groups
        self.memory = memory
        self.stats = stats
        self.transactions = transactions
        self.fetch_sessions = fetch_sessions

    def collect(self) -> Iterator[Metric]:
        image = self.metadata.image
        self._forget_deleted_topics(image.topics)
        yield from self._cluster(image)
        yield from self._partitions(image)
        yield from self._consumer_groups()
        yield from self._requests()
        yield from self._traffic()
        yield from self._memory()
        yield from self._internals()

    def _forget_deleted_topics(self, topics: Any) -> None:
        stats = self.stats
        for table in (stats.bytes_in, stats.records_in, stats.bytes_out):
            for topic in [t for t in table if t not in topics]:
                del table[topic]

    # -- kafka_exporter's families -------------------------------------------------------------
    def _cluster(self, image: Any) -> Iterator[Metric]:
        yield GaugeMetricFamily("kafka_brokers", "Number of Brokers in the Kafka Cluster.",
                                value=len(image.brokers))
        partitions = GaugeMetricFamily("kafka_topic_partitions",
                                       "Number of partitions for this Topic", labels=["topic"])
        for topic in image.topics.values():
            partitions.add_metric([topic.name], len(topic.partitions))
        yield partitions
        controller = image.controller_id == self.node_id
        yield GaugeMetricFamily("pybroker_active_controller",
                                "1 if this broker is the cluster's controller (Kafka's "
                                "ActiveControllerCount).", value=int(controller))
        offline = 0
        if controller:  # as Kafka: the controller reports offline partitions
            offline = sum(1 for topic in image.topics.values() for p in topic.partitions
                          if p.leader < 0 or p.leader not in image.brokers)
        yield GaugeMetricFamily("pybroker_offline_partitions",
                                "Partitions without a live leader (reported by the controller; "
                                "0 elsewhere).", value=offline)

    def _partitions(self, image: Any) -> Iterator[Metric]:
        current = GaugeMetricFamily("kafka_topic_partition_current_offset",
                                    "Current Offset of a Broker at Topic/Partition",
                                    labels=_PARTITION)
        oldest = GaugeMetricFamily("kafka_topic_partition_oldest_offset",
                                   "Oldest Offset of a Broker at Topic/Partition",
                                   labels=_PARTITION)
        leader = GaugeMetricFamily("kafka_topic_partition_leader",
                                   "Leader Broker ID of this Topic/Partition", labels=_PARTITION)
        preferred = GaugeMetricFamily("kafka_topic_partition_leader_is_preferred",
                                      "1 if Topic/Partition is using the Preferred Broker",
                                      labels=_PARTITION)
        replicas = GaugeMetricFamily("kafka_topic_partition_replicas",
                                     "Number of Replicas for this Topic/Partition",
                                     labels=_PARTITION)
        in_sync = GaugeMetricFamily("kafka_topic_partition_in_sync_replica",
                                    "Number of In-Sync Replicas for this Topic/Partition",
                                    labels=_PARTITION)
        under = GaugeMetricFamily("kafka_topic_partition_under_replicated_partition",
                                  "1 if Topic/Partition is under Replicated", labels=_PARTITION)
        size = GaugeMetricFamily("pybroker_log_size_bytes",
                                 "Bytes of this broker's replica of the partition on disk.",
                                 labels=_PARTITION)
        hosted = led = under_count = under_min_isr = 0
        topic_config = self.replicas.topic_configs.topic_config
        for part in self.replicas.hosted():
            labels = [part.topic, str(part.partition)]
            hosted += 1
            size.add_metric(labels, part.log.size)
            if not part.is_leader:
                continue
            led += 1
            log = part.log
            current.add_metric(labels, log.high_watermark)
            oldest.add_metric(labels, log.log_start_offset)
            leader.add_metric(labels, self.node_id)
            preferred.add_metric(labels, int(bool(part.replicas)
                                             and part.replicas[0] == self.node_id))
            replicas.add_metric(labels, len(part.replicas))
            in_sync.add_metric(labels, len(part.isr))
            is_under = len(part.isr) < len(part.replicas)
            under_count += is_under
            under.add_metric(labels, int(is_under))
            under_min_isr += len(part.isr) < topic_config(part.topic).min_insync_replicas
        yield from (current, oldest, leader, preferred, replicas, in_sync, under, size)
        yield GaugeMetricFamily("pybroker_partitions",
                                "Partitions this broker holds a replica of (Kafka's "
                                "PartitionCount).", value=hosted)
        yield GaugeMetricFamily("pybroker_leader_partitions",
                                "Partitions this broker leads (Kafka's LeaderCount).", value=led)
        yield GaugeMetricFamily("pybroker_under_replicated_partitions",
                                "Partitions led here whose ISR is smaller than their replica "
                                "set (Kafka's UnderReplicatedPartitions).", value=under_count)
        yield GaugeMetricFamily("pybroker_under_min_isr_partitions",
                                "Partitions led here whose ISR is smaller than their "
                                "min.insync.replicas: acks=all produces to them fail (Kafka's "
                                "UnderMinIsrPartitionCount).", value=under_min_isr)

    def _consumer_groups(self) -> Iterator[Metric]:
        state = self.groups.state
        current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                    "Current Offset of a ConsumerGroup at Topic/Partition",
                                    labels=_GROUP_PARTITION)
        current_sum = GaugeMetricFamily(
            "kafka_consumergroup_current_offset_sum",
            "Current Offset of a ConsumerGroup at Topic for all partitions",
            labels=["consumergroup", "topic"])
        lag = GaugeMetricFamily("kafka_consumergroup_lag",
                                "Current Approximate Lag of a ConsumerGroup at Topic/Partition",
                                labels=_GROUP_PARTITION)
        lag_sum = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            "Current Approximate Lag of a ConsumerGroup at Topic for all partitions",
            labels=["consumergroup", "topic"])
        members = GaugeMetricFamily("kafka_consumergroup_members",
                                    "Amount of members in a consumer group",
                                    labels=["consumergroup"])
        for group_id, offsets in state.offsets.items():
            sums: dict[str, list[int]] = {}
            for entry in group_lag(offsets, self.replicas):
                labels = [group_id, entry.topic, str(entry.partition)]
                current.add_metric(labels, entry.committed)
                totals = sums.setdefault(entry.topic, [0, 0])
                totals[0] += entry.committed
                behind = entry.lag
                if behind is not None:
                    lag.add_metric(labels, behind)
                    totals[1] += behind
            for topic, (offset_sum, lag_total) in sums.items():
                current_sum.add_metric([group_id, topic], offset_sum)
                lag_sum.add_metric([group_id, topic], lag_total)
        for group_id, group in state.groups.items():
            members.add_metric([group_id], len(group.members))
        yield from (current, current_sum, lag, lag_sum, members)

    # -- the broker's own ------------------------------------------------------------------------
    def _requests(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("pybroker_requests", "Requests served, per API.",
                                       labels=["api"])
        errors = CounterMetricFamily("pybroker_request_errors",
                                     "Requests answered with a top-level error code or failed "
                                     "as a whole, per API.", labels=["api"])
        latency = HistogramMetricFamily("pybroker_request_duration_seconds",
                                        "Time from a decoded request to its encoded response "
                                        "(a long-poll fetch includes its wait), per API.",
                                        labels=["api"])
        for api_key, api in sorted(self.stats.apis.items()):
            labels = [_api_name(api_key)]
            requests.add_metric(labels, api.requests)
            errors.add_metric(labels, api.errors)
            latency.add_metric(labels, list(zip(_BUCKET_BOUNDS, api.cumulative())),
                               sum_value=api.seconds)
        yield from (requests, errors, latency)

    def _traffic(self) -> Iterator[Metric]:
        stats = self.stats
        for name, doc, table in (
                ("pybroker_bytes_in", "Record bytes appended by producers, per topic.",
                 stats.bytes_in),
                ("pybroker_messages_in", "Records appended by producers, per topic.",
                 stats.records_in),
                ("pybroker_bytes_out", "Record bytes returned to consumers (not to followers), "
                                       "per topic.", stats.bytes_out)):
            family = CounterMetricFamily(name, doc, labels=["topic"])
            for topic, value in sorted(table.items()):
                family.add_metric([topic], value)
            yield family
        connections = GaugeMetricFamily("pybroker_connections",
                                        "Open client connections, per listener.",
                                        labels=["listener"])
        for listener, count in sorted(stats.connections.items()):
            connections.add_metric([listener], count)
        yield connections

    def _memory(self) -> Iterator[Metric]:
        pool = self.memory
        yield GaugeMetricFamily("pybroker_memory_pool_used_bytes",
                                "Bytes of queued.max.request.bytes taken by requests and "
                                "in-memory responses.", value=pool.used)
        yield GaugeMetricFamily("pybroker_memory_pool_available_bytes",
                                "Bytes of queued.max.request.bytes still free (+Inf: unbounded).",
                                value=pool.available if pool.bounded else float("inf"))
        yield GaugeMetricFamily("pybroker_memory_pool_waiting",
                                "Connections waiting for memory from the pool.",
                                value=pool.waiting)

    def _internals(self) -> Iterator[Metric]:
        """The purgatory, log flushes, ISR changes, group rebalances, open transactions."""
        replicas = self.replicas
        purgatory = GaugeMetricFamily("pybroker_purgatory_size",
                                      "Requests waiting in the purgatory now: fetches for data "
                                      "(long poll), acks=all produces for replication (Kafka's "
                                      "PurgatorySize).", labels=["delayed_operation"])
        for operation, count in sorted(replicas.purgatory.waiting.items()):
            purgatory.add_metric([operation], count)
        yield purgatory
        flushes = replicas.logs.flush_stats
        flush = HistogramMetricFamily("pybroker_log_flush_duration_seconds",
                                      "Time of each log flush (the fsyncs of its segments; "
                                      "Kafka's LogFlushRateAndTimeMs).")
        flush.add_metric([], flushes.cumulative(), sum_value=flushes.sum)
        yield flush
        yield CounterMetricFamily("pybroker_isr_shrinks",
                                  "ISR changes by this broker as leader that removed replicas "
                                  "(Kafka's IsrShrinksPerSec).", value=replicas.isr_shrinks)
        yield CounterMetricFamily("pybroker_isr_expands",
                                  "ISR changes by this broker as leader that added replicas "
                                  "(Kafka's IsrExpandsPerSec).", value=replicas.isr_expands)
        yield from self._replication_throttles()
        yield CounterMetricFamily("pybroker_group_rebalances",
                                  "Rebalances completed by groups this broker coordinates (a "
                                  "generation moved on).", value=self.groups.rebalances)
        if self.transactions is not None:
            yield GaugeMetricFamily("pybroker_transactions_open",
                                    "Transactions this broker coordinates that are begun and "
                                    "not complete (Ongoing, PrepareCommit, PrepareAbort, "
                                    "PrepareEpochFence).",
                                    value=self.transactions.state.open_transactions())
        sessions = self.fetch_sessions
        if sessions is not None:
            yield GaugeMetricFamily("pybroker_fetch_sessions",
                                    "Incremental fetch sessions cached (Kafka's "
                                    "NumIncrementalFetchSessions).", value=len(sessions))
            yield GaugeMetricFamily("pybroker_fetch_session_partitions",
                                    "Partitions held by the cached fetch sessions (Kafka's "
                                    "NumIncrementalFetchPartitionsCached).",
                                    value=sessions.total_partitions)
            yield CounterMetricFamily("pybroker_fetch_session_evictions",
                                      "Fetch sessions evicted to make room for another "
                                      "(Kafka's IncrementalFetchSessionEvictionsPerSec).",
                                      value=sessions.evictions)
            yield CounterMetricFamily("pybroker_incremental_fetches",
                                      "Incremental fetch requests served from a session.",
                                      value=sessions.incremental_fetches)

    def _replication_throttles(self) -> Iterator[Metric]:
        """The replication quotas' measured rates (Kafka's LeaderReplication and
        FollowerReplication byte-rate), in a cluster only."""
        replicas = self.replicas
        fetchers = replicas.fetchers
        if fetchers is None:  # a single broker: nothing to replicate, nothing to throttle
            return
        quotas = [("leader", replicas.leader_quota), ("follower", fetchers.quota)]
        rate = GaugeMetricFamily("pybroker_replication_throttled_bytes_per_second",
                                 "Bytes per second of the partitions this broker throttles "
                                 "(leader.replication.throttled.replicas as leader, "
                                 "follower.replication.throttled.replicas as follower), "
                                 "as its replication quotas measure them.", labels=["role"])
        now_ms = trio.current_time() * 1000
        for role, quota in quotas:
            if quota is not None:
                rate.add_metric([role], quota.bytes_per_second(now_ms))
        yield rate


def broker_registry(collector: BrokerCollector) -> CollectorRegistry:
    """A registry of one broker's collector alone (no process or GC collectors: those are
    per process, and a test process may run several brokers)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry
