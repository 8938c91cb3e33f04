"""On a node of two brokers (num.cores=2, issue #29) one UpdateFeatures is both brokers'
(KIP-584): sent to the worker that is not the first, share.version 1 is advertised by both
and a share group the other coordinates is served; a downgrade through the other is both
brokers' too. The node's metadata service keeps /feature as ZooKeeper does."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pybroker.testing.broker import BrokerProcess
from tests.integration.raw import create_topic
from tests.integration.cluster_features import (
    UPGRADE, advertised, broker_addresses, one_upgrade_is_every_brokers, update_share_version,
    wait_all_advertise,
)

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


def test_a_single_brokers_upgrade_is_the_nodes_after_its_first_start(tmp_path: Path) -> None:
    """A single broker's share.version 1 (its pybroker-features.json) is not lost when a node
    of two starts over its log dir: worker 0 hands it to the node's /feature at its start,
    whichever worker made /feature first, and both workers advertise it."""
    logs = tmp_path / "logs"
    single = BrokerProcess(logs, num_cores="1").start(timeout=60)
    create_topic(single.bootstrap, "kept")  # a single broker's metadata file, to import
    update_share_version(single.bootstrap, 1, UPGRADE)
    assert advertised(single.bootstrap) == (1, 1)
    assert single.stop() == 0
    node = BrokerProcess(logs, num_cores="2").start(timeout=120)
    try:
        addresses = broker_addresses(node.bootstrap)
        assert len(addresses) == 2
        wait_all_advertise(addresses, (1, advertised(node.bootstrap)[1]))
        assert advertised(node.bootstrap)[0] == 1
    finally:
        node.stop()
