"""The controller's partition-state writes are conditional on the version of the state each
decision was made from (Kafka's zkVersion), with the production store and controller on the
in-memory ZooKeeper (issue #31)."""
from __future__ import annotations

from pathlib import Path

import pytest
import trio

from pybroker.cluster import zk_data as zd
from pybroker.cluster.memory_zk import MemoryZooKeeper
from pybroker.cluster.zk_store import ZkMetadataStore
from pybroker.controller.controller import Controller
from tests.controller.helpers import seed_partition


def test_a_decision_from_an_older_image_does_not_overwrite_a_newer_state(
        tmp_path: Path) -> None:
    """Broker 1 is dead; the controller's image still has t-0 at [0, 1] (version 0). Before
    that image is replaced, the leader's expansion to [0, 1, 2] (version 1) has reached the
    controller's cache (a worker thread re-reads the znodes, the image is published after).
    The decision from the image (drop 1: [0] at epoch 1) must not be written against version
    1, which overwrote the expansion and left broker 2 out of the ISR; refused, the
    controller decides again from the image that has the expansion: [0, 2]."""
    server = MemoryZooKeeper()
    zk = server.client()
    zk.start()
    seed_partition(zk, "t", (0, 1, 2), zd.LeaderAndIsr(0, 0, (0, 1), 0))
    zk.create(zd.broker_path(0), zd.encode_broker(0, {"PLAINTEXT": ("127.0.0.1", 9)},
                                                  {"PLAINTEXT": "PLAINTEXT"}), ephemeral=True)
    store = ZkMetadataStore("memory", 2, rack=None, session_timeout_ms=6000,
                            connection_timeout_ms=6000, client_class=server.client)
    try:
        store.attach(tmp_path, None)
        store.set_endpoints({"PLAINTEXT": ("127.0.0.1", 10)})
        store.register()
        store._read_all()
        controller = Controller(store)

        async def main() -> None:
            await store.refresh_now(("brokers",), ("topics",))
            assert sorted(store.image.brokers) == [0, 2]
            await controller._try_elect()
            assert controller.active
            image = store.image
            assert image.partition("t", 0).isr == (0, 1)
            zk.set(zd.state_path("t", 0), zd.encode_state(zd.LeaderAndIsr(0, 0, (0, 1, 2), 0)),
                   version=0)
            await trio.to_thread.run_sync(store._refresh, {("state", "t", 0)})
            assert store.image is image  # the cache has the expansion; the image does not yet
            await controller._reconcile(image)
            state = zd.decode_state(zk.get(zd.state_path("t", 0))[0])
            assert (state.leader_epoch, state.isr) == (0, (0, 1, 2)), \
                "a decision from version 0 was written over version 1"
            await store.refresh_now(("state", "t", 0))
            await controller._reconcile(store.image)

        trio.run(main)
        state = zd.decode_state(zk.get(zd.state_path("t", 0))[0])
        assert (state.leader, state.leader_epoch, state.isr) == (0, 1, (0, 2))
    finally:
        store.close()
        zk.stop()


def test_a_decision_without_a_read_version_is_never_written_unconditionally() -> None:
    """A state that was not read from ZooKeeper carries version -1, which ZooKeeper takes
    as "any version": the controller refuses to write it rather than write blindly."""
    from pybroker.cluster.image import PartitionState
    from pybroker.controller.controller import _set_state

    with pytest.raises(ValueError, match="no state version"):
        _set_state("t", PartitionState(0, 1, 1, (1, 2), (1,)), b"{}")
