"""One `kafka-features.sh upgrade --feature share.version=1` is the whole cluster's (KIP-584;
issue #34): sent once, to a broker that is not the controller, it makes every broker of a
3-broker ZooKeeper cluster advertise share.version 1 in ApiVersions and serve a share group
another broker coordinates; a downgrade sent to yet another broker is every broker's too.
Kafka keeps the levels in /feature, and so does pybroker (cluster/features.py).

Three subprocess brokers on a real ZooKeeper, raw requests."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.brokers import running_cluster
from tests.integration.cluster_features import one_upgrade_is_every_brokers

pytestmark = pytest.mark.cluster

SETTINGS: dict[str, Any] = {"offsets.topic.num.partitions": "3", "offsets.topic.replication.factor": "3",
            "share.coordinator.state.topic.num.partitions": "3",
            "share.coordinator.state.topic.replication.factor": "3"}


def test_one_update_to_a_non_controller_is_every_brokers(tmp_path: Path,
                                                         zookeeper: Any) -> None:
    with running_cluster(tmp_path, zookeeper.connect, **SETTINGS) as cluster:
        controller = cluster.controller()
        taker = next(n for n in sorted(cluster.brokers) if n != controller)
        one_upgrade_is_every_brokers(cluster.brokers[controller].bootstrap,
                                     cluster.brokers[taker].bootstrap,
                                     epoch=0)
        raw, stat = cluster.zk.get("/feature")
        assert stat.version == 2
        assert json.loads(raw) == {"version": 2, "status": 1, "features": {
            "group.version": {"max_version_level": 1}}}
