"""A node's first start over the log dir of a single broker that stopped before it wrote any
metadata (meta.properties and empty checkpoints, nothing else): `bin/pybroker-server` with
num.cores=2 adopts the dir as worker 0's, with the cluster id of its meta.properties, as the
import does for a populated dir (pybroker/node/metadata_import.py). Before, the node's store
named a new cluster and worker 0 refused it ("Cluster ID ... doesn't match stored clusterId
... in meta.properties"), so the node could not start on that dir at all."""
from __future__ import annotations

from pathlib import Path

from pybroker.cluster.metadata import read_meta_properties
from pybroker.node.metadata_import import SOURCES
from pybroker.testing.broker import BrokerProcess, free_port_block

SERVER = Path(__file__).resolve().parents[2] / "bin" / "pybroker-server"


def server(log_dir: Path, cores: int, port: int) -> BrokerProcess:
    """`bin/pybroker-server` (for the kit's `python -m pybroker`) on `port`, `cores` brokers."""
    return BrokerProcess(log_dir, port=port, num_cores=str(cores),
                         wrap=lambda args: [str(SERVER), *args[3:]])


def test_a_node_adopts_the_bare_dir_of_a_broker_that_wrote_nothing(tmp_path: Path) -> None:
    from kafka import KafkaAdminClient
    logs = tmp_path / "logs"
    port = free_port_block("127.0.0.1", 2)
    single = server(logs, 1, port).start(timeout=300)  # bin/_bootstrap may set up .venv
    assert single.stop() == 0
    cluster_id = read_meta_properties(logs)["cluster.id"]
    assert cluster_id and not [name for name in SOURCES if (logs / name).exists()]

    node = server(logs, 2, port).start(timeout=180)
    try:
        admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
        try:
            described = admin.describe_cluster()
        finally:
            admin.close()
        assert described["cluster_id"] == cluster_id
        assert sorted(b["broker_id"] for b in described["brokers"]) == [0, 1000]
    finally:
        assert node.stop() == 0
    stderr = "".join(node.stderr_lines)
    assert "imported the single broker's metadata of" in stderr
    assert read_meta_properties(logs)["cluster.id"] == cluster_id
    assert "doesn't match" not in stderr
