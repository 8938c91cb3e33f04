"""Bad input and misuse of a cluster: one clear line and no damage."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import InvalidReplicationFactorError

from pybroker.testing import BrokerProcess
from tests.cluster.brokers import create_topic, running_cluster
from pybroker.testing.zookeeper import free_port


def test_a_second_broker_with_a_live_id_exits_with_one_line(tmp_path: Path, zookeeper
                                                            ) -> None:  # type: ignore[no-untyped-def]
    """broker.id 1 is registered by a live broker: another broker with that id waits out
    the session timeout (an old registration of a killed broker would expire), then exits
    non-zero with one line; the live broker is untouched."""
    with running_cluster(tmp_path, zookeeper.connect, size=1) as cluster:
        twin = BrokerProcess(
            tmp_path / "twin", **{k.replace(".", "_"): v for k, v in
                                  {**cluster.overrides, "broker.id": "1"}.items()})
        with pytest.raises(RuntimeError) as failed:
            twin.start(timeout=60)
        assert twin.proc is not None and twin.proc.wait(10) != 0
        lines = str(failed.value).splitlines()[1:]  # after the kit's "broker exited early:"
        if twin.num_cores == 1:
            errors = [ln for ln in lines if "broker.id 1" in ln]
        else:
            # A node (PYBROKER_NUM_CORES) of brokers 1 and 1001, both taken, logs its stop
            # with the reason of the worker that failed first; its one line that is not a
            # log line is that reason, the last, as a single broker's (tests/test_node_plan).
            errors = [ln for ln in lines if not ln.startswith("[")]
            assert errors[-1:] == lines[-1:], failed.value
            assert re.match(r"pybroker-server: broker\.id (1|1001) ", errors[0]), failed.value
        assert len(errors) == 1 and "already registered" in errors[0], failed.value
        assert 1 in cluster.alive()


@pytest.mark.parametrize("cores", ["1", "2"])
def test_zookeeper_unreachable_at_start(tmp_path: Path, cores: str) -> None:
    """No ZooKeeper: the broker retries for zookeeper.connection.timeout.ms, then exits with
    one line naming the address, having opened no log; a node (the default, num.cores=-1, on
    a machine of several CPUs) ends with the same line, its first failing worker's."""
    port = free_port()
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pybroker", "--defaults",
         "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={tmp_path / 'logs'}",
         "--override", f"zookeeper.connect=127.0.0.1:{port}",
         "--override", "zookeeper.connection.timeout.ms=2000",
         "--override", f"num.cores={cores}"],
        capture_output=True, text=True, timeout=60)
    took = time.monotonic() - started
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if f"127.0.0.1:{port}" in ln
             and "zookeeper.connection.timeout.ms" in ln]
    # Said once, by a node too: its own log lines name the worker that failed, not the reason.
    assert len(lines) == 1, proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1] == lines[-1]
    assert lines[-1].startswith("pybroker-server: ZooKeeper at "), proc.stderr
    assert "Traceback" not in proc.stderr
    assert 1.5 < took < 30


def test_replication_factor_above_the_live_brokers(tmp_path: Path, zookeeper
                                                   ) -> None:  # type: ignore[no-untyped-def]
    """Two brokers, replication factor 3: INVALID_REPLICATION_FACTOR, nothing created (on
    nodes, PYBROKER_NUM_CORES, two nodes' brokers and one more)."""
    with running_cluster(tmp_path, zookeeper.connect, size=2) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap().split(","))
        try:
            with pytest.raises(InvalidReplicationFactorError):
                admin.create_topics([NewTopic("too-many", 1, 2 * cluster.cores + 1)])
            assert "too-many" not in admin.list_topics()
        finally:
            admin.close()
        assert not cluster.zk.exists("/brokers/topics/too-many")


def test_stale_leader_epoch_is_fenced(tmp_path: Path, zookeeper
                                      ) -> None:  # type: ignore[no-untyped-def]
    """After a leader change, a fetch naming the old leader epoch is FENCED_LEADER_EPOCH and
    one naming an epoch from the future UNKNOWN_LEADER_EPOCH, on the new leader."""
    import trio

    from protocol.api_keys import ApiKey
    from pybroker.client.connection import BrokerConnection

    async def fetch_error(port: int, epoch: int) -> int:
        async with trio.open_nursery() as nursery:
            conn = await BrokerConnection.open("127.0.0.1", port, nursery=nursery)
            response = await conn.request(ApiKey.FETCH, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": "fenced", "partitions": [{
                    "partition": 0, "current_leader_epoch": epoch, "fetch_offset": 0,
                    "last_fetched_epoch": -1, "log_start_offset": -1,
                    "partition_max_bytes": 1024}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            await conn.aclose()
            nursery.cancel_scope.cancel()
            return response.responses[0].partitions[0].error_code

    with running_cluster(tmp_path, zookeeper.connect) as cluster:
        create_topic(cluster, "fenced")
        old = cluster.state("fenced", 0)
        assert cluster.stop(old["leader"]) == 0  # controlled shutdown: a new epoch
        new = cluster.state("fenced", 0)
        assert new["leader_epoch"] > old["leader_epoch"]
        port = int(cluster.address(new["leader"]).rpartition(":")[2])  # a node's worker K
        cluster.wait_until(lambda: trio.run(fetch_error, port, new["leader_epoch"]) == 0, 10,
                           "the new leader to serve its epoch")
        assert trio.run(fetch_error, port, old["leader_epoch"]) == 74  # FENCED_LEADER_EPOCH
        assert trio.run(fetch_error, port, new["leader_epoch"] + 1) == 75  # UNKNOWN_LEADER_EPOCH
