"""Group configs (the GROUP config resource) in ZooKeeper: /config/groups/<group> with the id
sanitized as Kafka's entity names are, seen by every broker's image through its watch, and
removed when the last key goes (on the in-memory ZooKeeper)."""
from __future__ import annotations

import time
from pathlib import Path

import trio

from pybroker.cluster import zk_data as zd
from pybroker.cluster.memory_zk import MemoryZooKeeper
from pybroker.cluster.zk_store import ZkMetadataStore


def _store(server: MemoryZooKeeper, node: int, tmp_path: Path) -> ZkMetadataStore:
    store = ZkMetadataStore("memory", node, rack=None, session_timeout_ms=6000,
                            connection_timeout_ms=6000, client_class=server.client)
    store.attach(tmp_path / str(node), None)
    return store


def test_a_group_config_reaches_another_brokers_image(tmp_path: Path) -> None:
    server = MemoryZooKeeper()
    writer, reader = _store(server, 1, tmp_path), _store(server, 2, tmp_path)
    try:
        trio.run(writer.set_group_configs, "a/b c", {"share.auto.offset.reset": "earliest"})
        zk = server.client()
        zk.start()
        assert zk.get_children(zd.CONFIG_GROUPS) == ["a%2Fb%20c"]
        assert writer.image.group_configs == {"a/b c": {"share.auto.offset.reset": "earliest"}}

        # the reader's watch on /config/groups marks its group configs to be read again
        deadline = time.monotonic() + 5
        while ("group_configs",) not in reader._dirty:
            assert time.monotonic() < deadline, "the reader's watch did not fire"
            time.sleep(0.01)
        trio.run(reader.refresh_now, ("group_configs",))
        assert reader.image.group_configs == {"a/b c": {"share.auto.offset.reset": "earliest"}}
        trio.run(writer.set_group_configs, "a/b c", {})
        assert zk.get_children(zd.CONFIG_GROUPS) == []
        assert writer.image.group_configs == {}
    finally:
        writer.close()
        reader.close()
