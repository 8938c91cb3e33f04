"""KIP-112 in ZooKeeper: a broker whose log dir failed writes Kafka's
`/log_dir_event_notification/log_dir_event_<seq>` and lists its offline replicas in its
registration, which the image hands to the controller (on the in-memory ZooKeeper)."""
from __future__ import annotations

import json
from pathlib import Path

import trio

from pybroker.cluster import zk_data as zd
from pybroker.cluster.memory_zk import MemoryZooKeeper
from pybroker.cluster.zk_store import ZkMetadataStore


def test_a_failed_log_dir_is_announced_as_kafka_does(tmp_path: Path) -> None:
    server = MemoryZooKeeper()
    store = ZkMetadataStore("memory", 3, rack=None, session_timeout_ms=6000,
                            connection_timeout_ms=6000, client_class=server.client)
    try:
        store.attach(tmp_path, None)
        store.set_endpoints({"PLAINTEXT": ("127.0.0.1", 9092)})
        store.register()
        trio.run(store.announce_offline_replicas, frozenset({("t", 1), ("t", 0)}))
        zk = server.client()
        zk.start()
        (event,) = zk.get_children(zd.LOG_DIR_EVENTS)
        assert event == "log_dir_event_0000000000"
        raw, _ = zk.get(f"{zd.LOG_DIR_EVENTS}/{event}")
        assert json.loads(raw) == {"version": 1, "broker": 3, "event": 1}
        assert zd.decode_log_dir_event(raw) == 3
        registration = json.loads(zk.get(zd.broker_path(3))[0])
        assert registration["offline_replicas"] == [{"topic": "t", "partition": 0},
                                                    {"topic": "t", "partition": 1}]
        decoded = zd.decode_broker(3, zk.get(zd.broker_path(3))[0])
        assert decoded.offline_replicas == {("t", 0), ("t", 1)}
        # A registration without offline replicas carries no such key (Kafka's own JSON).
        assert "offline_replicas" not in json.loads(zd.encode_broker(
            3, {"PLAINTEXT": ("h", 1)}, {"PLAINTEXT": "PLAINTEXT"}))
        assert zd.decode_log_dir_event(b"{}") is None
    finally:
        store.close()
