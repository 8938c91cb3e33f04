"""The finalized feature levels of a cluster are kept once, in Kafka's /feature znode (KIP-584;
issues #34, #29): written by the broker that took the UpdateFeatures with a compare-and-set on
the znode's version, followed by every broker's watch. The production store on the in-memory
ZooKeeper, two brokers of one cluster."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from pybroker.cluster import zk_data as zd
from pybroker.cluster.features import (
    GROUP_VERSION, SHARE_VERSION, FeatureStore, Finalized, UpgradeType, decode_znode,
    defaults, plan_updates,
)
from pybroker.cluster.memory_zk import MemoryZooKeeper
from pybroker.cluster.zk_store import ZkMetadataStore

UP = UpgradeType.UPGRADE
DOWN = UpgradeType.SAFE_DOWNGRADE


def _store(server: MemoryZooKeeper, node: int, log_dir: Path) -> ZkMetadataStore:
    log_dir.mkdir(parents=True, exist_ok=True)
    store = ZkMetadataStore("memory", node, rack=None, session_timeout_ms=6000,
                            connection_timeout_ms=6000, client_class=server.client)
    store.attach(log_dir, None)
    store.set_endpoints({"PLAINTEXT": ("127.0.0.1", 9092 + node)})
    return store


@pytest.fixture
def server() -> Iterator[MemoryZooKeeper]:
    yield MemoryZooKeeper()


def _znode(server: MemoryZooKeeper) -> tuple[dict[str, Any], int]:
    zk = server.client()
    zk.start()
    try:
        data, stat = zk.get(zd.FEATURE)
        return json.loads(data), stat.version
    finally:
        zk.stop()


def _own_file(log_dir: Path, share: int) -> None:
    """What a broker of before kept by itself after an upgrade (FeatureStore.save)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    own = FeatureStore(log_dir)
    plan = plan_updates(own.current, [(SHARE_VERSION, share, UP)])
    assert isinstance(plan, Finalized)
    own.save(plan)


async def _until(check: Any, timeout_s: float = 10) -> None:
    with trio.fail_after(timeout_s):
        while not check():
            await trio.sleep(0.01)


def test_the_znode_is_kafkas_and_its_version_is_the_epoch(server: MemoryZooKeeper,
                                                          tmp_path: Path) -> None:
    store = _store(server, 0, tmp_path / "b0")
    features = FeatureStore(tmp_path / "b0", cluster=store)
    doc, version = _znode(server)
    assert version == 0 and features.current.epoch == 0
    assert doc == {"version": 2, "status": 1, "features": {
        GROUP_VERSION: {"max_version_level": 1}}}
    assert features.current.levels == defaults().levels
    store.close()


def test_an_upgrade_on_one_broker_is_every_brokers(server: MemoryZooKeeper,
                                                   tmp_path: Path) -> None:
    a, b = _store(server, 0, tmp_path / "b0"), _store(server, 1, tmp_path / "b1")
    fa = FeatureStore(tmp_path / "b0", cluster=a)
    fb = FeatureStore(tmp_path / "b1", cluster=b)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(a.run)
            await nursery.start(b.run)
            up = await fa.update(lambda c: plan_updates(c, [(SHARE_VERSION, 1, UP)]))
            assert isinstance(up, Finalized) and up.epoch == 1
            await _until(lambda: fb.level(SHARE_VERSION) == 1)
            assert fb.current.epoch == 1 and fb.enables(SHARE_VERSION, 1)
            # a downgrade through the other broker, followed by the first
            down = await fb.update(lambda c: plan_updates(c, [(SHARE_VERSION, 0, DOWN)]))
            assert isinstance(down, Finalized) and down.epoch == 2
            await _until(lambda: fa.level(SHARE_VERSION) == 0)
            assert fa.current.epoch == 2 and not fa.enables(SHARE_VERSION, 1)
            nursery.cancel_scope.cancel()
    trio.run(main)
    assert _znode(server)[1] == 2
    # nothing of it in the brokers' own files: the cluster's levels are not theirs
    assert not (tmp_path / "b0" / "pybroker-features.json").exists()
    a.close()
    b.close()


def test_a_write_that_lost_the_race_is_planned_again(server: MemoryZooKeeper,
                                                     tmp_path: Path) -> None:
    """Between this broker's reading the levels and its write, another broker wrote: the
    compare-and-set fails and the update is planned again on the other's levels, so neither
    is lost (Kafka's controller applies them one after the other)."""
    a = _store(server, 0, tmp_path / "b0")
    fa = FeatureStore(tmp_path / "b0", cluster=a)
    other = server.client()
    other.start()
    seen: list[int] = []

    def plan(current: Finalized) -> Any:
        seen.append(current.epoch)
        if len(seen) == 1:  # the other broker's upgrade lands meanwhile
            data, stat = other.get(zd.FEATURE)
            doc = json.loads(data)
            doc["features"][SHARE_VERSION] = {"max_version_level": 1}
            other.set(zd.FEATURE, json.dumps(doc).encode(), stat.version)
        return plan_updates(current, [(GROUP_VERSION, 0, DOWN)])

    result = trio.run(fa.update, plan)
    assert seen == [0, 1]
    assert isinstance(result, Finalized) and result.epoch == 2
    data, stat = other.get(zd.FEATURE)
    kept = decode_znode(data, stat.version)
    assert (kept.level(SHARE_VERSION), kept.level(GROUP_VERSION), kept.epoch) == (1, 0, 2)
    other.stop()
    a.close()


def test_a_brokers_own_upgrade_from_before_is_the_clusters(server: MemoryZooKeeper,
                                                           tmp_path: Path) -> None:
    """A broker that kept share.version 1 in its own file joins a cluster whose /feature was
    made with the defaults and never changed: its upgrade becomes the cluster's."""
    first = _store(server, 0, tmp_path / "b0")
    f0 = FeatureStore(tmp_path / "b0", cluster=first)
    assert f0.level(SHARE_VERSION) == 0
    _own_file(tmp_path / "b1", 1)
    second = _store(server, 1, tmp_path / "b1")
    f1 = FeatureStore(tmp_path / "b1", cluster=second)
    assert f1.level(SHARE_VERSION) == 1
    doc, version = _znode(server)
    assert version == 1 and doc["features"][SHARE_VERSION]["max_version_level"] == 1
    # once the cluster's levels changed, a broker's own file no longer counts
    down = trio.run(f1.update, lambda c: plan_updates(c, [(SHARE_VERSION, 0, DOWN)]))
    assert isinstance(down, Finalized)
    _own_file(tmp_path / "b2", 1)
    third = _store(server, 2, tmp_path / "b2")
    assert FeatureStore(tmp_path / "b2", cluster=third).level(SHARE_VERSION) == 0
    for store in (first, second, third):
        store.close()


def test_the_first_broker_with_its_own_upgrade_makes_the_znode(server: MemoryZooKeeper,
                                                               tmp_path: Path) -> None:
    _own_file(tmp_path / "b0", 1)
    store = _store(server, 0, tmp_path / "b0")
    assert FeatureStore(tmp_path / "b0", cluster=store).level(SHARE_VERSION) == 1
    doc, version = _znode(server)
    assert version == 0 and doc["features"][SHARE_VERSION]["max_version_level"] == 1
    store.close()
