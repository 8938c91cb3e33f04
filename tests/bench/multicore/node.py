"""The node setups the `multicore` workload compares (docs/DESIGN.md "One node, every core").

- `single`: today's node, one `python -m pybroker` process (one trio loop, one GIL).
- `node`: what was built of (b): `pybroker-server` with `num.cores` = N, a supervisor running
  N brokers (one process each) on the node's own metadata service; no ZooKeeper.
- `brokers` (prototype b): N brokers on one node, one per core, each its own broker id and
  port, on one metadata store. A single-node default has no ZooKeeper, and the in-memory
  one (pybroker.cluster.memory_zk) is shared only by brokers of ONE process, so the
  prototype runs a real ZooKeeper (pybroker.testing.zookeeper) beside them as the shared
  store; rack = the node for all of them. Clients see N brokers and route themselves.
- `shards` (prototype a): the same N brokers behind N router processes that share one port
  with SO_REUSEPORT and show the client ONE broker (router.py); every request crosses the
  process boundary once more, so the figures bound from above what the hop costs.
- `frontends` (the cost side of way c): N router processes sharing one port in front of ONE
  broker that owns every log. The routers only frame and forward here; moving decoding and
  CRC checks off the log owner (way c's gain) is not built, so this measures what the
  boundary costs, not what the offload would save.

Every setup is a set of processes; `pids` names them all (ZooKeeper included) so that the
bench reads the CPU of the whole tree, process by process. Nothing here is imported by the
broker: the default path does not change.
"""
from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from pybroker.testing.broker import BrokerProcess
from pybroker.testing.zookeeper import run_zookeeper
from tests.helpers import ROOT

SETUPS = ("single", "node", "brokers", "shards", "frontends", "tansu", "kafka")
# The peers (tests/bench/peer_bench.py's), one process each, side by side in the same run.
PEER_SETUPS = ("tansu", "kafka")
CHROOT = "/multicore"
# Each broker of the node: RF 1 (one node holds one copy; a real deployment puts replicas on
# other nodes by rack), the internal topics too, and no group rebalance delay.
NODE_BROKER_CONFIG = {
    "default.replication.factor": "1", "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
    "offsets.topic.num.partitions": "5", "transaction.state.log.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0", "broker.rack": "node-0",
}


class Node:
    """A started setup: where clients connect, where the admin client creates topics, and
    every process of it by role (for the CPU figures)."""

    def __init__(self, setup: str, bootstrap: str, admin_bootstrap: str,
                 processes: dict[str, int]) -> None:
        self.setup = setup
        self.bootstrap = bootstrap
        self.admin_bootstrap = admin_bootstrap
        self.processes = processes  # role -> pid

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(self.processes.values())

    def tree(self) -> dict[str, int]:
        """`processes` and every process below them (a node supervisor's workers), by role:
        a process's CPU clock counts its own threads only, not its children's."""
        out = dict(self.processes)
        for role, pid in self.processes.items():
            for k, child in enumerate(descendants(pid), 1):
                out[f"{role} child {k}"] = child
        return out


def descendants(pid: int) -> list[int]:
    """The live processes below `pid`, depth first (Linux's /proc/PID/task/TID/children)."""
    found: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            found.append(child)
            found.extend(descendants(child))
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def start_node(setup: str, cores: int, work_dir: Path) -> Iterator[Node]:
    """The setup `setup` with `cores` workers (ignored by `single`), stopped on the way out."""
    work_dir.mkdir(parents=True, exist_ok=True)
    if setup in PEER_SETUPS:
        from tests.bench.peer_bench import start_peer

        peer = start_peer(setup, work_dir)
        try:
            yield Node(setup, peer.bootstrap, peer.bootstrap, {setup: peer.pid})
        finally:
            peer.stop()
        return
    if setup == "node":
        # The built design (b): `pybroker-server` with num.cores = cores, its supervisor and
        # workers one process tree (Node.tree), its metadata service in the supervisor.
        node = BrokerProcess(work_dir / "node", num_cores=str(cores)).start(timeout=120)
        try:
            assert node.proc is not None
            wait_brokers(node.bootstrap, cores)
            yield Node(setup, node.bootstrap, node.bootstrap, {"node": node.proc.pid})
        finally:
            _stop(node)
        return
    if setup in ("single", "frontends"):
        broker = BrokerProcess(work_dir / "single").start(timeout=120)
        try:
            assert broker.proc is not None
            processes = {"broker": broker.proc.pid}
            if setup == "single":
                yield Node(setup, broker.bootstrap, broker.bootstrap, processes)
                return
            with contextlib.ExitStack() as stack:
                port = _start_routers(stack, cores, broker.bootstrap, processes)
                yield Node(setup, f"127.0.0.1:{port}", broker.bootstrap, processes)
        finally:
            _stop(broker)
        return
    with run_zookeeper(work_dir / "zk") as zk, contextlib.ExitStack() as stack:
        brokers = []
        for n in range(1, cores + 1):
            overrides: dict[str, Any] = {**NODE_BROKER_CONFIG, "node.id": str(n),
                                         "zookeeper.connect": zk.connect + CHROOT}
            b = BrokerProcess(work_dir / f"broker-{n}", **overrides)
            stack.callback(_stop, b)
            brokers.append(b.start(timeout=120))
        processes = {f"broker {n}": b.proc.pid for n, b in enumerate(brokers, 1)  # type: ignore[union-attr]
                     }
        processes["zookeeper"] = zk.proc.pid  # type: ignore[union-attr]
        backends = ",".join(b.bootstrap for b in brokers)
        for b in brokers:
            wait_brokers(b.bootstrap, cores)
        if setup == "brokers":
            yield Node(setup, backends, backends, processes)
            return
        port = _start_routers(stack, cores, backends, processes)
        yield Node(setup, f"127.0.0.1:{port}", backends, processes)


def _start_routers(stack: contextlib.ExitStack, count: int, backends: str,
                   processes: dict[str, int]) -> int:
    """`count` routers (router.py) on one free port in front of `backends`, stopped by
    `stack`; each named in `processes`. The port."""
    port = free_port()
    for n in range(1, count + 1):
        router = subprocess.Popen(
            [sys.executable, "-m", "tests.bench.multicore.router", "--port", str(port),
             "--backends", backends], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        stack.callback(_stop_popen, router)
        assert router.stdout is not None
        line = router.stdout.readline()
        if "listening" not in line:
            raise RuntimeError(f"router {n} did not start: {line!r}")
        processes[f"router {n}"] = router.pid
    return port


def _stop(broker: BrokerProcess) -> None:
    if broker.proc is not None and broker.proc.poll() is None:
        broker.stop()


def _stop_popen(proc: "subprocess.Popen[str]") -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def wait_brokers(bootstrap: str, count: int, timeout: float = 60) -> None:
    """Wait until `bootstrap`'s Metadata names `count` brokers: a broker logs 'listening'
    before the others see its registration, and a topic created before then puts all its
    partitions on the brokers already seen."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    deadline = time.monotonic() + timeout
    while len(admin.list_topics(timeout=30).brokers) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{bootstrap} does not see {count} brokers after {timeout} s")
        time.sleep(0.1)
