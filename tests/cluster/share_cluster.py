"""A three-broker cluster with share groups (KIP-932) and both internal topics at replication
factor 3, for the share failover and share admin cluster tests: the settings, the topic `q`
with the internal topics made, and where a group's share state lives."""
from __future__ import annotations

import json
import uuid

from compat.differential.share_scenarios import _fetching_consumer
from protocol.topic_id import parse_topic_id
from pybroker.coordinator.internal_topic import partition_for
from pybroker.coordinator.share_records import ShareStateKey, state_key_text
from tests.cluster.brokers import Cluster, create_topic
from tests.integration.raw import enable_share_groups

STATE_PARTITIONS = 3
OFFSETS_PARTITIONS = 3
SETTINGS = {
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    # the records a dead consumer held come back by the failover, not by a lock running out
    "group.share.record.lock.duration.ms": "60000",
    "group.share.max.record.lock.duration.ms": "60000",
}


def _state_partition(group: str, topic_id: uuid.UUID) -> int:
    return partition_for(state_key_text(ShareStateKey(group, topic_id, 0)), STATE_PARTITIONS)


def _topic_id(cluster: Cluster, topic: str) -> uuid.UUID:
    raw, _ = cluster.zk.get(f"/brokers/topics/{topic}")
    return parse_topic_id(json.loads(raw)["topic_id"])


def share_topic(cluster: Cluster) -> tuple[int, uuid.UUID]:
    """Share groups enabled, topic q created, both internal topics there with a full ISR:
    the leader of q-0 and q's topic id."""
    enable_share_groups(cluster.brokers[cluster.ids[0]].bootstrap)
    create_topic(cluster, "q")
    # both internal topics come with a first group's use of the topic
    _fetching_consumer(cluster.bootstrap(), "warm", "q").close()
    for p in range(STATE_PARTITIONS):
        cluster.wait_until(lambda: len(cluster.state("__share_group_state", p)["isr"])
                           == 3, 30, f"__share_group_state-{p} to have a full ISR")
    return cluster.leader("q", 0), _topic_id(cluster, "q")
