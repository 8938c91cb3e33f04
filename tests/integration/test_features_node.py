"""On a node of two brokers (num.cores=2, issue #29) one UpdateFeatures is both brokers'
(KIP-584): sent to the worker that is not the first, share.version 1 is advertised by both
and a share group the other coordinates is served; a downgrade through the other is both
brokers' too. The node's metadata service keeps /feature as ZooKeeper does."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pybroker.testing.broker import BrokerProcess
from tests.integration.cluster_features import broker_addresses, one_upgrade_is_every_brokers

pytestmark = pytest.mark.integration


def test_one_update_is_both_workers(tmp_path: Path) -> None:
    settings: dict[str, Any] = {"offsets.topic.num.partitions": "4",
                                "share.coordinator.state.topic.num.partitions": "2"}
    node = BrokerProcess(tmp_path / "logs", num_cores="2", **settings).start(timeout=120)
    try:
        bootstrap = node.bootstrap
        second = f"{node.host}:{node.port + 1}"
        assert second in broker_addresses(bootstrap)
        one_upgrade_is_every_brokers(bootstrap, second, epoch=0)
    finally:
        node.stop()
