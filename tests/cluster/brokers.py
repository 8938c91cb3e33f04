"""Several real brokers (subprocesses) in one ZooKeeper-coordinated cluster, for fault tests.

Each broker is `python -m pybroker` with its own log dir and port, registered under a chroot
of the test's ZooKeeper; a test kills, stops, pauses and restarts them by id. Timings are
shortened (6 s ZooKeeper sessions as REPLICATION.md's harness suggests, a short lag time) so a
failover fits in a test; nothing else differs from a production start.
"""
from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from pybroker.testing import BrokerProcess
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
        self._zk: KazooClient | None = None

    # -- brokers ---------------------------------------------------------------------------------
    def broker(self, node: int, file_size_limit: int | None = None, port: int = 0,
               **overrides: str) -> BrokerProcess:
        old = self.brokers.get(node)
        port = old.port if old is not None else port
        placed: dict[str, Any] = {} if self.network is None else {
            "host": self.network.address(node), "wrap": partial(self.network.command, node)}
        if node in self.log_dirs:
            overrides = {"log.dirs": ",".join(map(str, self.log_dirs[node])), **overrides}
        proc = BrokerProcess(self.dirs_of(node)[0], port=port,
                             file_size_limit=file_size_limit, **placed,
                             **{k.replace(".", "_"): v for k, v in
                                {**self.overrides, "broker.id": str(node),
                                 **overrides}.items()})
        self.brokers[node] = proc
        return proc

    def start(self, node: int | None = None, timeout: float = 60) -> None:
        for n in ([node] if node is not None else self.ids):
            self.broker(n).start(timeout)
        self.wait_until(self._all_see_all, timeout, "every broker to see every live broker")

    def _all_see_all(self) -> bool:
        """Every live broker's Metadata lists every live broker: a registration reaches the
        others' images a moment after it is written."""
        import trio

        from protocol.api_keys import ApiKey
        from pybroker.client.connection import BrokerConnection

        alive = sorted(self.alive())

        async def seen(host: str, port: int) -> list[int]:
            async with trio.open_nursery() as nursery:
                conn = await BrokerConnection.open(host, port, nursery=nursery)
                response = await conn.request(ApiKey.METADATA, {
                    "topics": [], "allow_auto_topic_creation": False})
                await conn.aclose()
                nursery.cancel_scope.cancel()
            return sorted(b.node_id for b in response.brokers)
        return all(trio.run(seen, self.brokers[n].host, self.brokers[n].port) == alive
                   for n in alive)

    def kill(self, node: int) -> None:
        self.brokers[node].kill()

    def stop(self, node: int) -> int:
        import subprocess
        try:
            return self.brokers[node].stop()
        except subprocess.TimeoutExpired:
            raise AssertionError(f"broker {node} did not stop on SIGTERM:\n"
                                 + "".join(self.brokers[node].stderr_lines[-40:])) from None

    def pause(self, node: int) -> None:
        proc = self.brokers[node].proc
        assert proc is not None
        proc.send_signal(signal.SIGSTOP)

    def resume(self, node: int) -> None:
        proc = self.brokers[node].proc
        assert proc is not None
        proc.send_signal(signal.SIGCONT)

    # -- network faults (needs `network`) ------------------------------------------------------------
    def _net(self) -> Network:
        if self.network is None:
            raise RuntimeError("this cluster was started without a network to partition")
        return self.network

    def isolate(self, node: int) -> None:
        """Cut broker `node` from the other brokers and ZooKeeper; clients still reach it."""
        self._net().isolate(node)

    def partition(self, *groups: set[int]) -> None:
        """Cut each group of brokers from the others (ZooKeeper stays reachable to all)."""
        self._net().partition(*groups)

    def partition_from_zookeeper(self, node: int) -> None:
        self._net().partition_from_zookeeper(node)

    def heal(self) -> None:
        self._net().heal()

    def alive(self) -> list[int]:
        return [n for n, b in self.brokers.items() if b.proc is not None and b.proc.poll() is None]

    def bootstrap(self, exclude: tuple[int, ...] = ()) -> str:
        return ",".join(self.brokers[n].bootstrap for n in self.alive() if n not in exclude)

    def close(self) -> None:
        for b in self.brokers.values():
            if b.proc is not None and b.proc.poll() is None:
                try:
                    b.proc.send_signal(signal.SIGCONT)
                    b.proc.kill()
                    b.proc.wait(10)
                except OSError:
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
        return int(self.state(topic, partition)["leader"])

    def controller(self) -> int:
        raw, _ = self.zk.get("/controller")
        return int(json.loads(raw)["brokerid"])

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
        try:
            self.wait_until(lambda: set(self.state(topic, partition)["isr"]) == isr, timeout,
                            f"ISR of {topic}-{partition} to be {sorted(isr)}")
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
        """The broker's log dirs."""
        return self.log_dirs.get(node) or [self.work_dir / f"broker-{node}"]

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
