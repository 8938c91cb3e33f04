"""The metadata store publishes immutable images and deltas; this broker's logs follow them
through the replica manager only (issue #10): a topic created or deleted in the store,
whoever asked, gets or loses its logs, leaderships and configs, with no admin code involved."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import AsyncIterator

import pytest

from protocol.errors import ErrorCode as E
from pybroker.broker import Broker
from pybroker.cluster.metadata import MetadataDelta, MetadataImage
from pybroker.controller.topic_admin import TopicAdmin
from tests.helpers import broker_config


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    b = Broker(broker_config(tmp_path / "logs"))
    yield b
    b.close()


async def test_a_topic_made_in_the_store_gets_its_logs_and_leaders(broker: Broker) -> None:
    before = broker.metadata.image
    seen: list[MetadataDelta] = []

    async def record(image: MetadataImage, delta: MetadataDelta) -> None:
        seen.append(delta)
    broker.metadata.listeners.append(record)

    await broker.metadata.create_topic("d", 2, {"retention.ms": "1000"})
    assert "d" not in before.topics  # the image a request holds never changes
    assert seen[-1].created_topics == {"d"} and seen[-1].changed_partitions == {"d": {0, 1}}
    for p in (0, 1):
        assert broker.logs.get("d", p) is not None
        code, part = broker.replicas.leader_partition("d", p)
        assert code == E.NONE and part is not None and part.is_leader
    with pytest.raises(dataclasses.FrozenInstanceError):
        broker.metadata.image.topics["d"].partitions[0].leader_epoch = 9  # type: ignore[misc]

    await broker.metadata.add_partitions("d", 3)
    assert seen[-1].changed_partitions == {"d": {2}} and broker.logs.get("d", 2) is not None

    await broker.metadata.set_topic_configs("d", {"retention.ms": "5000"})
    assert broker.logs.get("d", 0).config.retention_ms == 5000

    await broker.metadata.alter_partition("d", 0, leader_epoch=4)
    assert broker.replicas.leader_partition("d", 0)[1].leader_epoch == 4
    assert broker.logs.get("d", 0).latest_epoch == 4

    directory = broker.logs.log_dir_of("d", 0)
    await broker.metadata.delete_topic("d")
    assert seen[-1].deleted_topics.keys() == {"d"}
    assert broker.logs.get("d", 0) is None
    assert directory is not None and not list(directory.glob("d-*"))
    assert broker.replicas.leader_partition("d", 0)[0] == E.UNKNOWN_TOPIC_OR_PARTITION


async def test_the_topic_admin_knows_no_logs() -> None:
    """Admin handlers ask the store; only the replica manager applies deltas to logs."""
    fields = TopicAdmin.__init__.__code__.co_varnames[:TopicAdmin.__init__.__code__.co_argcount]
    assert fields == ("self", "config", "metadata")


async def test_images_survive_a_restart(tmp_path: Path) -> None:
    b = Broker(broker_config(tmp_path / "logs"))
    await b.topics.create_topic("kept", 2, 1, {"cleanup.policy": "compact"})
    b.close()
    again = Broker(broker_config(tmp_path / "logs"))
    try:
        info = again.metadata.image.topics["kept"]
        assert len(info.partitions) == 2 and info.configs == {"cleanup.policy": "compact"}
        assert again.replicas.leader_partition("kept", 1)[0] == E.NONE
    finally:
        again.close()
