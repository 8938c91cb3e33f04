"""The settings both brokers run with: each accepted by Apache Kafka 4.x and by pybroker.

Single node. Kafka's shipped defaults otherwise, except where a default would only make the
run slower without changing what is compared: the group's initial rebalance delay (3 s of
waiting per new group) and the internal topics' 50 partitions (created on the first
FindCoordinator; five answer the same questions). Two of Kafka's shipped server.properties
entries are given to both, since Kafka reports a topic's config from them as a static broker
setting (source 4) and a default otherwise: the retention and the segment size.
"""
from __future__ import annotations

SHARED: dict[str, str] = {
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
    "delete.topic.enable": "true",
    "log.retention.hours": "168",
    "log.segment.bytes": "1073741824",
}

# The share-group settings both brokers run the share scenarios with (share_scenarios.py,
# which calls them SETTINGS): short locks, since the scenarios wait for their expiry. Here,
# apart from the scenarios, so that a broker can be started with them without importing
# confluent-kafka (the compatibility matrix's, compat/run.py).
SHARE_GROUPS: dict[str, str] = {
    "group.share.record.lock.duration.ms": "2000",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.delivery.count.limit": "3",
}
