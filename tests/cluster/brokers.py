"""Several real brokers (subprocesses) in one ZooKeeper-coordinated cluster, for fault tests.

Each broker is `python -m pybroker` with its own log dir and port, registered under a chroot
of the test's ZooKeeper; a test kills, stops, pauses and restarts them by id. Timings are
shortened (6 s ZooKeeper sessions as REPLICATION.md's harness suggests, a short lag time) so a
failover fits in a test; nothing else differs from a production start.

With PYBROKER_NUM_CORES=2 (issue #29) each of them is a node of two brokers (ids N and
N + 1000, pybroker.node.worker): the cluster's members are nodes, and a fault (kill, stop,
pause, a network cut) strikes a whole node, as it does a machine of a node owner. The verbs
take a node, or a broker id, which names the node running that broker (`node_of`); `leader`
and `controller` say which node holds the role, `state` the broker ids as ZooKeeper has them.
"""
from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from kafka.admin import KafkaAdminClient, NewTopic
from kazoo.client import KazooClient

from pybroker.node.worker import WORKER_ID_STRIDE, worker_log_dir
from pybroker.testing import BrokerProcess
from pybroker.testing.broker import num_cores_default
from pybroker.testing.network import Network

SESSION_TIMEOUT_MS = 6000
LAG_TIME_MS = 4000


class Cluster:
    def __init__(self, work_dir: Path, zk_connect: str, size: int = 3,
                 chroot: str = "/pybroker", network: Network | None = None,
                 log_dirs: Mapping[int, list[Path]] | None = None,
                 **overrides: str) -> None:
        """`network`: run each broker in its own namespace of it (members are broker ids
        and "zookeeper"), so that the partition verbs below can cut links. `log_dirs`: a
        broker's `log.dirs` at every start (default: work_dir/broker-N alone), such as the
        disks of `pybroker.testing.disk_faults` that the disk verbs break."""
        self.work_dir = work_dir
        self.network = network
        self.log_dirs = {n: list(dirs) for n, dirs in (log_dirs or {}).items()}
        self.zk_hosts = zk_connect
        self.connect = zk_connect + chroot
        self.chroot = chroot
        self.overrides = {
            "zookeeper.connect": self.connect,
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "replica.lag.time.max.ms": str(LAG_TIME_MS),
            "replica.fetch.backoff.ms": "200",
            "offsets.topic.replication.factor": str(min(3, size)),
            "default.replication.factor": str(min(3, size)),
            # Tests move leaders themselves; the 300 s auto-rebalance of a long-lived module
            # cluster once gave a partition back to its preferred replica between a test's
            # check and its preferred election (a CI run). test_cluster_settings turns it on.
            "auto.leader.rebalance.enable": "false",
            **overrides}
        self.brokers: dict[int, BrokerProcess] = {}
        self.ids = list(range(1, size + 1))
        # Brokers per node: the num.cores a test gives, else the kit's (PYBROKER_NUM_CORES),
        # -1 read as the CPUs, as BrokerProcess.num_cores reads it.
        given = self.overrides.get("num.cores", self.overrides.get("num_cores"))
        cores = int(given) if given is not None else num_cores_default()
        self.cores = len(os.sched_getaffinity(0)) if cores == -1 else cores
        self._zk: KazooClient | None = None
        self._paused: set[int] = set()  # nodes stopped by `pause`: they answer nothing

    @staticmethod
    def node_of(broker: int) -> int:
        """The node that runs `broker` (worker K of node N is broker N + 1000 K); a node's
        own id is its worker 0's. -1 (no leader) stays -1."""
        return broker % WORKER_ID_STRIDE if broker >= 0 else broker

    def broker_ids(self, node: int) -> list[int]:
        """The ids of the brokers that node `node` runs."""
        return [node + WORKER_ID_STRIDE * k for k in range(self.cores)]

    # -- brokers ---------------------------------------------------------------------------------
    def broker(self, node: int, file_size_limit: int | None = None, port: int = 0,
               **overrides: str) -> BrokerProcess:
        node = self.node_of(node)
        old = self.brokers.get(node)
        port = old.port if old is not None else port
        placed: dict[str, Any] = {} if self.network is None else {
            "host": self.network.address(node), "wrap": partial(self.network.command, node)}
        if node in self.log_dirs:
            overrides = {"log.dirs": ",".join(map(str, self.log_dirs[node])), **overrides}
        if self.cores > 1 and not {"broker.rack", "broker_rack"} & {*self.overrides,
                                                                    *overrides}:
            # A node's brokers take the host's name as rack, so that no partition has two
            # replicas on one node; the kit's nodes share one host, where machines would not.
            overrides = {"broker.rack": f"node-{node}", **overrides}
        config = {k.replace(".", "_"): v
                  for k, v in {**self.overrides, "broker.id": str(node), **overrides}.items()}
        # Kafka's keys, `_` for `.`: none spells one of BrokerProcess's own keywords (a dict's
        # keys are beyond mypy, which holds its str values against those keywords' types).
        proc = BrokerProcess(self.dirs_of(node)[0], port=port, file_size_limit=file_size_limit,
                             **placed, **config)  # type: ignore[arg-type]
        self.brokers[node] = proc
        return proc

    def start(self, node: int | None = None, timeout: float = 60) -> None:
        for n in ([self.node_of(node)] if node is not None else self.ids):
            self.broker(n).start(timeout)
        self.wait_until(self._all_see_all, timeout, "every broker to see every live broker")

    def _listed(self, node: int) -> list[Any]:
        """The brokers that node `node`'s Metadata lists (node_id, host, port)."""
        import trio

        from protocol.api_keys import ApiKey
        from pybroker.client.connection import BrokerConnection

        async def metadata(host: str, port: int) -> list[Any]:
            async with trio.open_nursery() as nursery:
                conn = await BrokerConnection.open(host, port, nursery=nursery)
                response = await conn.request(ApiKey.METADATA, {
                    "topics": [], "allow_auto_topic_creation": False})
                await conn.aclose()
                nursery.cancel_scope.cancel()
            return list(response.brokers)
        return trio.run(metadata, self.brokers[node].host, self.brokers[node].port)

    def _all_see_all(self) -> bool:
        """Every live node's Metadata lists every live node's brokers: a registration reaches
        the others' images a moment after it is written."""
        alive = sorted(b for n in self.alive() for b in self.broker_ids(n))
        return all(sorted(b.node_id for b in self._listed(n)) == alive for n in self.alive())

    def kill(self, node: int) -> None:
        self.brokers[self.node_of(node)].kill()

    def stop(self, node: int) -> int:
        import subprocess
        node = self.node_of(node)
        try:
            return self.brokers[node].stop()
        except subprocess.TimeoutExpired:
            raise AssertionError(f"broker {node} did not stop on SIGTERM:\n"
                                 + "".join(self.brokers[node].stderr_lines[-40:])) from None

    def _processes(self, node: int) -> list[int]:
        """The pids of the node: the broker's, or a node's supervisor and its workers."""
        proc = self.brokers[self.node_of(node)].proc
        assert proc is not None
        return [proc.pid, *self.brokers[self.node_of(node)].worker_pids()]

    def pause(self, node: int) -> None:
        """SIGSTOP to every process of the node (a machine that stalls)."""
        for pid in self._processes(node):
            os.kill(pid, signal.SIGSTOP)
        self._paused.add(self.node_of(node))

    def resume(self, node: int) -> None:
        self._paused.discard(self.node_of(node))
        for pid in reversed(self._processes(node)):
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:  # a worker that died while paused
                pass

    # -- network faults (needs `network`) ------------------------------------------------------------
    def _net(self) -> Network:
        if self.network is None:
            raise RuntimeError("this cluster was started without a network to partition")
        return self.network

    def isolate(self, node: int) -> None:
        """Cut broker `node` from the other brokers and ZooKeeper; clients still reach it."""
        self._net().isolate(self.node_of(node))

    def partition(self, *groups: set[int]) -> None:
        """Cut each group of brokers from the others (ZooKeeper stays reachable to all)."""
        self._net().partition(*({self.node_of(n) for n in group} for group in groups))

    def partition_from_zookeeper(self, node: int) -> None:
        self._net().partition_from_zookeeper(self.node_of(node))

    def heal(self) -> None:
        self._net().heal()

    def alive(self) -> list[int]:
        return [n for n, b in self.brokers.items() if b.proc is not None and b.proc.poll() is None]

    def bootstrap(self, exclude: tuple[int, ...] = ()) -> str:
        """The live nodes' first ports but those of `exclude` (nodes, or brokers of them)."""
        left_out = {self.node_of(n) for n in exclude}
        return ",".join(self.brokers[n].bootstrap for n in self.alive() if n not in left_out)

    def close(self) -> None:
        for n, b in self.brokers.items():
            if b.proc is not None and b.proc.poll() is None:
                self.resume(n)
                try:
                    b.kill()
                except (OSError, RuntimeError):
                    pass
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()

    # -- what ZooKeeper says ------------------------------------------------------------------------
    @property
    def zk(self) -> KazooClient:
        """A client of the brokers' store: kazoo's, or a node metadata service's
        (`zk_connect` of ``unix:<socket>``, with chroot "")."""
        if self._zk is None:
            from pybroker.node.metadata_client import NodeZooKeeperClient, is_node_connect
            self._zk = (NodeZooKeeperClient if is_node_connect(self.connect)
                        else KazooClient)(hosts=self.connect)
            self._zk.start(timeout=10)
        return self._zk

    def state(self, topic: str, partition: int) -> dict[str, Any]:
        raw, _ = self.zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return json.loads(raw)

    def leader(self, topic: str, partition: int) -> int:
        """The node whose broker leads the partition."""
        return self.node_of(int(self.state(topic, partition)["leader"]))

    def controller(self) -> int:
        """The node whose broker is the controller."""
        raw, _ = self.zk.get("/controller")
        return self.node_of(int(json.loads(raw)["brokerid"]))

    def address(self, broker: int) -> str:
        """host:port of broker `broker` as the cluster advertises it (a node's worker K is
        not at the node's first port), from the Metadata of a live node not paused."""
        for n in self.alive():
            if n in self._paused:
                continue
            found = next((f"{b.host}:{b.port}" for b in self._listed(n) if b.node_id == broker),
                         None)
            if found is not None:
                return found
        raise LookupError(f"no live node lists broker {broker}")

    def leader_address(self, topic: str, partition: int) -> str:
        """host:port of the broker that leads the partition (on a node, one of its workers)."""
        return self.address(int(self.state(topic, partition)["leader"]))

    def wait_until(self, check: Callable[[], Any], timeout: float = 30, what: str = "") -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = check()
            except Exception as exc:  # a znode not there yet
                last = exc
            else:
                if last:
                    return last
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what or check}: last {last!r}")

    def wait_isr(self, topic: str, partition: int, isr: set[int], timeout: float = 30) -> None:
        """Until the partition's ISR is `isr`: its brokers, or the nodes that run them, one
        broker each (a node holds one replica of a partition at most: its rack)."""
        nodes = {self.node_of(n) for n in isr}

        def reached() -> bool:
            now = self.state(topic, partition)["isr"]
            return len(now) == len(isr) and {self.node_of(n) for n in now} == nodes
        try:
            self.wait_until(reached, timeout, f"ISR of {topic}-{partition} to be {sorted(isr)}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; state {self.state(topic, partition)}\n"
                                 + self.log_tail(f"{topic}-{partition}")) from None

    def log_tail(self, about: str, lines: int = 15) -> str:
        """The last lines each broker logged about `about` (a partition), for failures."""
        out = []
        for node, broker in sorted(self.brokers.items()):
            mine = [ln for ln in broker.stderr_lines if about in ln][-lines:]
            out.append(f"--- broker {node}:\n" + "".join(mine))
        return "\n".join(out)

    def dirs_of(self, node: int) -> list[Path]:
        """The node's log dirs: its configured ones, and a node's worker K's `<dir>-K`."""
        node = self.node_of(node)
        configured = self.log_dirs.get(node) or [self.work_dir / f"broker-{node}"]
        return configured + [Path(worker_log_dir(str(d), k))
                             for k in range(1, self.cores) for d in configured]

    def dir_holding(self, node: int, topic: str, partition: int) -> Path | None:
        """Which of the broker's log dirs holds its replica of the partition (None: none)."""
        name = f"{topic}-{partition}"
        return next((d for d in self.dirs_of(node) if (d / name).is_dir()), None)

    def segment_bytes(self, node: int, topic: str, partition: int) -> bytes:
        log_dir = self.dir_holding(node, topic, partition)
        if log_dir is None:
            return b""
        directory = log_dir / f"{topic}-{partition}"
        return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


@contextmanager
def running_cluster(work_dir: Path, zk_connect: str, size: int = 3,
                    network: Network | None = None,
                    log_dirs: Mapping[int, list[Path]] | None = None,
                    **overrides: str) -> Iterator[Cluster]:
    cluster = Cluster(work_dir, zk_connect, size, network=network, log_dirs=log_dirs,
                      **overrides)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


def create_topic(cluster: Cluster, name: str, partitions: int = 1, rf: int = 3,
                 min_isr: int = 2) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap().split(","))
    try:
        admin.create_topics([NewTopic(name, partitions, rf, topic_configs={
            "min.insync.replicas": str(min_isr)})])
    finally:
        admin.close()
    for p in range(partitions):
        cluster.wait_until(lambda: len(cluster.state(name, p)["isr"]) == rf, 30,
                           f"{name}-{p} to have a full ISR")
