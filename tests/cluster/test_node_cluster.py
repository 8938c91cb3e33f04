"""A node of num.cores=2 brokers with zookeeper.connect set: its workers are members of the
ZooKeeper cluster (ids node.id and node.id + 1000, rack = the host), a client on the node's first
port sees both and uses both, a worker killed -9 is restarted and the producer's records keep
landing (acks=all), and SIGTERM stops all of it. The
standalone node (the supervisor's own metadata store): tests/integration/
test_node_supervisor.py; the helpers both use: tests/integration/node_process.py."""
from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

from pybroker.testing.broker import process_running as running
from tests.cluster.conftest import ZooKeeperChroot
from tests.integration.node_process import (
    brokers_seen, create_topic, logged, node, produce, read_all, wait_until, worker_pids,
)


def test_a_node_on_zookeeper_is_two_members_of_the_cluster(
        zookeeper: ZooKeeperChroot, tmp_path: Path) -> None:
    broker = node(tmp_path / "logs", zookeeper_connect=zookeeper.connect, node_id="5",
                  offsets_topic_replication_factor="1")
    try:
        assert brokers_seen(broker.bootstrap) == ([5, 1005], {socket.gethostname()})
        assert not (tmp_path / "logs" / "__node-metadata").exists()  # ZooKeeper's metadata
        assert set(create_topic(broker.bootstrap, "zk-spread", 4).values()) == {5, 1005}
        values = [b"z%d" % i for i in range(100)]
        assert produce(broker.bootstrap, "zk-spread", values, "all", 4) == values
        pids = worker_pids(broker)
        os.kill(pids[1], signal.SIGKILL)  # broker 1005: its session ends, it comes back
        wait_until(lambda: logged(broker, "worker 1 (broker 1005) is serving again"), 90,
                   "worker 1 to come back")
        more = [b"y%d" % i for i in range(100)]
        assert produce(broker.bootstrap, "zk-spread", more, "all", 4) == more
        assert sorted(read_all(broker.bootstrap, "zk-spread", 200)) == sorted(values + more)
        pids = worker_pids(broker)
        assert broker.stop() == 0
        assert not [p for p in pids.values() if running(p)]
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.kill()
