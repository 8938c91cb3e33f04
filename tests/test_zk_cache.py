"""The ZooKeeper store's cache of watched znodes (`cluster/zk_cache.py`) read by more than
one thread, with the production store on the in-memory ZooKeeper (issue #31): reads are
stored in the order ZooKeeper answered them, and a full re-read never shows the event loop a
half-read cache."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pybroker.cluster import zk_data as zd
from pybroker.cluster.memory_zk import MemoryZkClient, MemoryZooKeeper
from pybroker.cluster.zk_cache import build_image
from pybroker.cluster.zk_store import ZkMetadataStore
from tests.controller.helpers import seed_partition

STATE = zd.state_path("t", 0)


@pytest.fixture
def zk_and_store(tmp_path: Path) -> Iterator[tuple[MemoryZkClient, ZkMetadataStore]]:
    server = MemoryZooKeeper()
    zk = server.client()
    zk.start()
    seed_partition(zk, "t", (0, 1), zd.LeaderAndIsr(0, 0, (0, 1), 0))
    store = ZkMetadataStore("memory", 0, rack=None, session_timeout_ms=6000,
                            connection_timeout_ms=6000, client_class=server.client)
    store.attach(tmp_path, None)
    yield zk, store
    store.close()
    zk.stop()


def _hook(store: ZkMetadataStore, method: str, path: str, after: Any) -> None:
    """Call `after(result)` in the reading thread right after the store's next read of
    `path` by `method` (get, get_children), before the store keeps what it read."""
    client = store.zk
    original = getattr(client, method)

    def read(read_path: str, watch: Any = None) -> Any:
        got = original(read_path, watch)
        if read_path == path:
            setattr(client, method, original)
            after(got)
        return got
    setattr(client, method, read)


def test_an_older_read_is_never_stored_over_a_newer_one(
        zk_and_store: tuple[MemoryZkClient, ZkMetadataStore]) -> None:
    """A refresh after a write (`refresh_now`) and the watch's (`run`) each read in a worker
    thread of their own. The first read version 1 of the state; version 2 landed and its
    watch's refresh read it and stored it before the first thread stored version 1: the
    cache went back to version 1, with no watch left to fire (the leader then believed an
    ISR ZooKeeper no longer held). Refreshes now run one at a time."""
    zk, store = zk_and_store
    zk.set(STATE, zd.encode_state(zd.LeaderAndIsr(0, 0, (0,), 0)), version=0)

    def newer_write_and_its_refresh(got: Any) -> None:
        assert got[1].version == 1
        zk.set(STATE, zd.encode_state(zd.LeaderAndIsr(0, 1, (0,), 1)), version=1)
        watch_refresh = threading.Thread(target=store._refresh, args=({("state", "t", 0)},))
        watch_refresh.start()
        # Held by the first refresh, it must wait for it; without that, it is done at once.
        watch_refresh.join(timeout=1.0)
        threads.append(watch_refresh)

    threads: list[threading.Thread] = []
    _hook(store, "get", STATE, newer_write_and_its_refresh)
    store._refresh({("state", "t", 0)})
    for thread in threads:
        thread.join(timeout=10)
        assert not thread.is_alive()
    state, version = store._cache.states[("t", 0)]
    assert (version, state.leader_epoch) == (2, 1), "an older read was stored over a newer one"


def test_a_full_re_read_keeps_the_old_cache_until_it_is_complete(
        zk_and_store: tuple[MemoryZkClient, ZkMetadataStore]) -> None:
    """After a lost session everything is read again, in a worker thread, while the event
    loop may publish an image from the cache (a `refresh_now` done just before). The cache
    was emptied first and filled as read: an image from it then lacked the topics, which
    the replica manager took for deleted (it removes a deleted topic's logs)."""
    zk, store = zk_and_store
    seen: list[set[str]] = []

    def image_meanwhile(got: Any) -> None:
        seen.append(set(build_image(store.cluster_id, store._cache).topics))

    _hook(store, "get_children", zd.BROKER_IDS, image_meanwhile)
    store._refresh({("rearm",)})
    assert seen == [{"t"}]
    assert set(build_image(store.cluster_id, store._cache).topics) == {"t"}


def test_a_re_read_of_the_broker_and_group_configs_keeps_the_old_ones_until_it_is_complete(
        zk_and_store: tuple[MemoryZkClient, ZkMetadataStore]) -> None:
    """The broker configs (and group configs) are read again, all, when any changes. The
    cache's dict was emptied first and filled as read, so an image the event loop built
    meanwhile had none: on a node, ten concurrent IncrementalAlterConfigs of the cluster
    default each edited what such an image said was stored (nothing) and kept 1-7 of the ten
    keys (tests/integration/test_dynamic_broker_configs.py, at PYBROKER_NUM_CORES=2)."""
    zk, store = zk_and_store
    zk.create(f"{zd.CONFIG_BROKERS}/<default>", zd.encode_config({"log.retention.ms": "1"}),
              makepath=True)
    zk.create(f"{zd.CONFIG_GROUPS}/g", zd.encode_config({"consumer.session.timeout.ms": "9000"}),
              makepath=True)
    store._refresh({("broker_configs",), ("group_configs",)})
    seen: list[tuple[dict, dict]] = []

    def image_meanwhile(got: Any) -> None:
        image = build_image(store.cluster_id, store._cache)
        seen.append((dict(image.broker_configs), dict(image.group_configs)))

    _hook(store, "get", f"{zd.CONFIG_BROKERS}/<default>", image_meanwhile)
    store._refresh({("broker_configs",)})
    _hook(store, "get", f"{zd.CONFIG_GROUPS}/g", image_meanwhile)
    store._refresh({("group_configs",)})
    old = ({"<default>": {"log.retention.ms": "1"}}, {"g": {"consumer.session.timeout.ms": "9000"}})
    assert seen == [old, old]
