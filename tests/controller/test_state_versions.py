"""The controller's partition-state writes are conditional on the version of the state each
decision was made from (Kafka's zkVersion), with the production store and controller on the
in-memory ZooKeeper (issue #31)."""
from __future__ import annotations

from pathlib import Path

import pytest
import trio

from protocol.errors import ErrorCode
from pybroker.cluster import zk_data as zd
from pybroker.cluster.memory_zk import MemoryZooKeeper
from pybroker.cluster.zk_store import ZkMetadataStore
from pybroker.controller.controller import Controller
from tests.controller.helpers import seed_partition


class Controlling:
    """Broker 2 as the controller of a cluster whose t-0 (replicas 0, 1, 2) ZooKeeper holds
    at version 0 with `state`; broker 0 is registered, broker 1 is not (dead)."""

    def __init__(self, tmp_path: Path, state: zd.LeaderAndIsr) -> None:
        server = MemoryZooKeeper()
        self.zk = server.client()
        self.zk.start()
        seed_partition(self.zk, "t", (0, 1, 2), state)
        self.zk.create(zd.broker_path(0), zd.encode_broker(
            0, {"PLAINTEXT": ("127.0.0.1", 9)}, {"PLAINTEXT": "PLAINTEXT"}), ephemeral=True)
        self.store = ZkMetadataStore("memory", 2, rack=None, session_timeout_ms=6000,
                                     connection_timeout_ms=6000, client_class=server.client)
        self.store.attach(tmp_path, None)
        self.store.set_endpoints({"PLAINTEXT": ("127.0.0.1", 10)})
        self.store.register()
        self.controller = Controller(self.store)

    async def elect(self) -> None:
        await self.store.refresh_now(("brokers",), ("topics",))
        assert sorted(self.store.image.brokers) == [0, 2]
        await self.controller._try_elect()
        assert self.controller.active

    async def cache_only(self, state: zd.LeaderAndIsr, version: int) -> None:
        """`state` written over `version` and read into the cache, its image not published
        yet (the watch's refresh runs in a worker thread and publishes after)."""
        image = self.store.image
        self.zk.set(zd.state_path("t", 0), zd.encode_state(state), version=version)
        await trio.to_thread.run_sync(self.store._refresh, {("state", "t", 0)})
        assert self.store.image is image

    def state(self) -> zd.LeaderAndIsr:
        return zd.decode_state(self.zk.get(zd.state_path("t", 0))[0])

    def close(self) -> None:
        self.store.close()
        self.zk.stop()


def test_a_decision_from_an_older_image_does_not_overwrite_a_newer_state(
        tmp_path: Path) -> None:
    """Broker 1 is dead; the controller's image still has t-0 at [0, 1] (version 0). Before
    that image is replaced, the leader's expansion to [0, 1, 2] (version 1) has reached the
    controller's cache (a worker thread re-reads the znodes, the image is published after).
    The decision from the image (drop 1: [0] at epoch 1) must not be written against version
    1, which overwrote the expansion and left broker 2 out of the ISR; refused, the
    controller decides again from the image that has the expansion: [0, 2]."""
    cluster = Controlling(tmp_path, zd.LeaderAndIsr(0, 0, (0, 1), 0))
    try:
        async def main() -> None:
            await cluster.elect()
            image = cluster.store.image
            assert image.partition("t", 0).isr == (0, 1)
            await cluster.cache_only(zd.LeaderAndIsr(0, 0, (0, 1, 2), 0), version=0)
            await cluster.controller._reconcile(image)
            state = cluster.state()
            assert (state.leader_epoch, state.isr) == (0, (0, 1, 2)), \
                "a decision from version 0 was written over version 1"
            await cluster.store.refresh_now(("state", "t", 0))
            await cluster.controller._reconcile(cluster.store.image)

        trio.run(main)
        state = cluster.state()
        assert (state.leader, state.leader_epoch, state.isr) == (0, 1, (0, 2))
    finally:
        cluster.close()


def test_an_election_that_lost_a_race_decides_again_from_a_fresh_read(
        tmp_path: Path) -> None:
    """A preferred election (ElectLeaders) from an image one ISR write behind ZooKeeper:
    its write is refused, and rather than answer NOT_CONTROLLER the controller reads the
    state again and elects from it (Kafka's controller retries its updatesToRetry), keeping
    the ISR the leader had written."""
    cluster = Controlling(tmp_path, zd.LeaderAndIsr(2, 0, (2, 0), 0))
    try:
        async def main() -> dict:  # type: ignore[type-arg]
            await cluster.elect()
            await cluster.cache_only(zd.LeaderAndIsr(2, 0, (2, 0, 1), 0), version=0)
            return await cluster.controller.elect_leaders(0, [("t", 0)])

        results = trio.run(main)
        assert results == {("t", 0): (ErrorCode.NONE, None)}
        state = cluster.state()
        assert (state.leader, state.leader_epoch, state.isr) == (0, 1, (2, 0, 1))
    finally:
        cluster.close()


def test_a_decision_without_a_read_version_is_never_written_unconditionally() -> None:
    """A state that was not read from ZooKeeper carries version -1, which ZooKeeper takes
    as "any version": the controller refuses to write it rather than write blindly."""
    from pybroker.cluster.image import PartitionState
    from pybroker.controller.controller import _set_state

    with pytest.raises(ValueError, match="no state version"):
        _set_state("t", PartitionState(0, 1, 1, (1, 2), (1,)), b"{}")
