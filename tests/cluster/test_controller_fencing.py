"""A controller that was replaced (it paused, lost its session, another broker took over)
writes nothing: every controller write is conditional on the /controller_epoch version it
wrote when elected (REPLICATION.md §2, acceptance test 7). Driven in-process against a real
ZooKeeper."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pybroker.cluster import zk_data as zd
from pybroker.cluster.zk_store import ZkMetadataStore
from pybroker.controller.controller import Controller, ControllerFenced


def _store(zookeeper, tmp_path: Path, node: int) -> ZkMetadataStore:  # type: ignore[no-untyped-def]
    store = ZkMetadataStore(zookeeper.connect + "/fencing", node, rack=None,
                            session_timeout_ms=6000, connection_timeout_ms=10000)
    store.attach(tmp_path / f"b{node}", None)
    return store


def test_a_replaced_controller_cannot_write(tmp_path: Path, zookeeper) -> None:  # type: ignore[no-untyped-def]
    store = _store(zookeeper, tmp_path, 1)
    try:
        zk = store.zk
        state_path = zd.state_path("t", 0)
        zk.create(state_path, zd.encode_state(zd.LeaderAndIsr(1, 0, (1,), 0)), makepath=True)
        controller = Controller(store)
        assert controller._elect()
        epoch = int(zk.get(zd.CONTROLLER_EPOCH)[0])
        assert epoch == controller.epoch == 1
        # Another broker is elected meanwhile: it bumps the epoch (and would own /controller).
        _, stat = zk.get(zd.CONTROLLER_EPOCH)
        zk.set(zd.CONTROLLER_EPOCH, str(epoch + 1).encode(), version=stat.version)
        stale = zd.encode_state(zd.LeaderAndIsr(2, 7, (2,), epoch))
        with pytest.raises(ControllerFenced):
            controller._commit([lambda txn: txn.set_data(state_path, stale)])
        assert json.loads(zk.get(state_path)[0])["leader_epoch"] == 0
    finally:
        store.close()


def test_election_bumps_the_epoch_once_per_controller(tmp_path: Path, zookeeper
                                                      ) -> None:  # type: ignore[no-untyped-def]
    """Two brokers race for /controller: one wins, /controller_epoch goes up by one; when
    the winner's session ends, the other is elected with the next epoch."""
    first, second = _store(zookeeper, tmp_path, 1), _store(zookeeper, tmp_path, 2)
    try:
        a, b = Controller(first), Controller(second)
        results = [a._elect(), b._elect()]
        assert sorted(results) == [False, True]
        winner, loser, loser_store = (a, b, second) if results[0] else (b, a, first)
        assert int(first.zk.get(zd.CONTROLLER_EPOCH)[0]) == winner.epoch == 1
        (first if winner is a else second).close()
        loser_store.zk.sync("/")

        for _ in range(100):  # the winner's ephemeral /controller goes with its session
            if loser._elect():
                break
            time.sleep(0.1)
        assert loser.epoch == 2
        assert zd.decode_controller(loser_store.zk.get(zd.CONTROLLER)[0]) == loser.node_id
    finally:
        first.close()
        second.close()
