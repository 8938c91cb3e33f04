"""`Cluster`: several real brokers in one process, coordinated without a ZooKeeper server
(or, with `zookeeper=True`, with a real one).

Each broker is the production broker with `zookeeper.connect` set: its own log dir and port,
its ZooKeeper store (`cluster/zk_store.py`), its controller candidate, replica fetchers and
ISR maintenance, all unchanged. What they share is an in-memory ZooKeeper
(`cluster/memory_zk.py`) in place of kazoo's client, so elections, fencing, ISR changes and
failover run the same code paths as in a real cluster, with no JVM and no server to install.

All brokers run as tasks of one trio loop in a background thread, each under its own cancel
scope: `stop_broker` cancels one (the broker closes cleanly and its ZooKeeper session ends, so
its registration goes at once and the controller elects new leaders), `start_broker` serves it
again on the same port and log dir. Test methods block the calling thread, so the class works
under plain pytest, asyncio and trio tests alike; every wait has a timeout and raises
`TimeoutError` with what it waited for.

`zookeeper=True` runs the same brokers on a real ZooKeeper instead: a server of Debian's
`zookeeper` package started as a subprocess in the cluster's temp dir
(`zookeeper.py`), and kazoo's client, as in production; `zookeeper="host:port"` uses
an ensemble that already runs. Either way the brokers live under a chroot of their own
(`/pybroker-<random>`, unless the connect string names one), so clusters can share an ensemble.
The in-memory ZooKeeper is the default because it needs no JVM and starts in milliseconds;
the real one is for a test that must see kazoo's and ZooKeeper's own behaviour (timeouts,
reconnects, a session expired by the server).

Broker ids are 0..brokers-1, and `i` in every method is a broker id.
"""
from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import trio

from pybroker.runtime.clock import Clock
from pybroker.cluster.memory_zk import MemoryZooKeeper
from pybroker.config import load_broker_config
from pybroker.server import ServerInfo, serve
from pybroker.testing.loop import LoopThread
from pybroker.testing.zookeeper import ZooKeeperProcess, zookeeper_home

__all__ = ["Cluster"]

# Test-friendly timings: a follower that stops fetching leaves the ISR within a second, and a
# fetcher whose leader went away retries quickly.
_DEFAULTS = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "zookeeper.connect": "memory",
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "1000",
    "replica.fetch.backoff.ms": "100",
    "replica.fetch.wait.max.ms": "200",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
}
_TIMEOUT_S = 30.0


def _on_port(listener: str, ports: Mapping[str, int]) -> str:
    """`NAME://host:0` with the port NAME was served on before."""
    name, sep, rest = listener.partition("://")
    port = ports.get(name.upper())
    if not sep or port is None:
        return listener
    return f"{name}://{rest.rpartition(':')[0]}:{port}"


class Cluster:
    """`with Cluster(3) as cluster: ...` — `cluster.bootstrap` lists every broker."""

    def __init__(self, brokers: int = 3, *, zookeeper: bool | str = False,
                 log_dir: str | Path | None = None, **config: Any) -> None:
        """`config`: broker config keys for every broker, `_` standing for `.`
        (several listeners are fine: each broker gets its own ports, kept across restarts)
        (`replica_lag_time_max_ms=500`) or given dotted through `**{"a.b": v}`.
        `zookeeper`: False, the in-memory ZooKeeper; True, a ZooKeeper server of this
        cluster's own (ZooKeeperNotInstalled, saying what to install, where the machine has
        none); "host:port[,...][/chroot]", an ensemble that runs already."""
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        if zookeeper is True:
            zookeeper_home()  # fail here, saying what to install, rather than at start
        self.size = brokers
        replication = str(min(3, brokers))
        self.config = {**_DEFAULTS,
                       "offsets.topic.replication.factor": replication,
                       "default.replication.factor": replication,
                       "transaction.state.log.replication.factor": replication,
                       "transaction.state.log.min.isr": str(min(2, brokers)),
                       **{k.replace("_", "."): str(v) for k, v in config.items()}}
        self._own_dir = log_dir is None
        self.root = Path(tempfile.mkdtemp(prefix="pybroker-cluster-")) if log_dir is None \
            else Path(log_dir)
        # The in-memory ZooKeeper, or the real one's connect string (host list and chroot).
        self.memory_zookeeper = MemoryZooKeeper() if zookeeper is False else None
        self.zookeeper_server: ZooKeeperProcess | None = None
        self._zk_hosts = zookeeper if isinstance(zookeeper, str) else ""
        if self.memory_zookeeper is None:
            hosts, _, chroot = self._zk_hosts.partition("/")
            self._zk_hosts = hosts
            self._zk_chroot = "/" + (chroot.strip("/") or f"pybroker-{uuid.uuid4().hex[:8]}")
        # One clock for every broker's timers, kept across their restarts: the brokers agree
        # on the time a test advanced, whichever of them coordinates a group or transaction.
        self.clock = Clock()
        self.ports: dict[int, int] = {}  # each broker's first listener's
        self.listener_ports: dict[int, dict[str, int]] = {}  # every listener's, by name
        self._servers: dict[int, ServerInfo] = {}
        self._scopes: dict[int, trio.CancelScope] = {}
        self._done: dict[int, trio.Event] = {}
        self._loop: LoopThread | None = None

    # -- the loop ----------------------------------------------------------------------------------
    def start(self) -> "Cluster":
        """Start the loop and every broker; returns once each broker sees all of them and a
        controller."""
        self._loop = LoopThread("pybroker-cluster")
        try:
            if self.memory_zookeeper is None and not self._zk_hosts:
                (self.root / "zookeeper").mkdir(parents=True, exist_ok=True)
                self.zookeeper_server = ZooKeeperProcess(self.root / "zookeeper")
                self.zookeeper_server.start()
                self._zk_hosts = self.zookeeper_server.connect
            if self.memory_zookeeper is None:
                self.config["zookeeper.connect"] = self._zk_hosts + self._zk_chroot
            self._loop.start(_TIMEOUT_S)
            for node in range(self.size):
                self._start(node)
            self.wait_until(lambda: self._all_see(set(self._servers)),
                            "every broker to see every broker and a controller")
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop every broker and the loop, then the ZooKeeper server this cluster started;
        remove the log dirs this cluster made."""
        if self._loop is None or self._loop.closed:
            return
        for node in list(self._servers):
            try:
                self.stop_broker(node)
            except Exception:  # stop the rest regardless
                pass
        self._loop.close(_TIMEOUT_S)
        if self.zookeeper_server is not None:
            self.zookeeper_server.close()
            self.zookeeper_server = None
        if self._own_dir:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run the async `fn` in the cluster's loop and return its result."""
        if self._loop is None:
            raise RuntimeError("the cluster has not been started")
        return self._loop.call(fn, *args)

    # -- brokers -----------------------------------------------------------------------------------
    def broker_config(self, node: int) -> Any:
        props = dict(self.config, **{"broker.id": str(node),
                                     "log.dirs": str(self.root / f"broker-{node}")})
        ports = self.listener_ports.get(node)
        if ports:  # the same ports again: clients' bootstrap stays valid
            props["listeners"] = ",".join(_on_port(entry.strip(), ports)
                                          for entry in props["listeners"].split(","))
        return load_broker_config(None, props)

    def _start(self, node: int) -> None:
        config = self.broker_config(node)

        async def serve_one(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            done = self._done[node] = trio.Event()
            try:
                with trio.CancelScope() as scope:
                    self._scopes[node] = scope
                    await serve(config, zk_client_class=None if self.memory_zookeeper is None
                                else self.memory_zookeeper.client,
                                clock=self.clock, task_status=task_status)
            finally:
                self._servers.pop(node, None)
                done.set()

        async def start() -> ServerInfo:
            assert self._loop is not None and self._loop.nursery is not None
            return await self._loop.nursery.start(serve_one)

        info = self._call(start)
        self._servers[node] = info
        self.ports[node] = info.port
        self.listener_ports[node] = dict(info.ports)

    def start_broker(self, i: int) -> None:
        """Serve broker `i` again (same port, same log dir); returns once it is registered
        and every running broker sees it."""
        if i in self._servers:
            raise ValueError(f"broker {i} is running")
        if not 0 <= i < self.size:
            raise ValueError(f"no broker {i} in a cluster of {self.size}")
        self._start(i)
        self.wait_until(lambda: self._all_see(set(self._servers)),
                        f"every broker to see broker {i}")

    def stop_broker(self, i: int, *, controlled: bool = False) -> None:
        """Stop broker `i`: its connections drop, its logs close cleanly and its ZooKeeper
        session ends, so the controller elects new leaders for what it led (a failure as the
        others see it); returns once every running broker sees it gone and leading nothing. `controlled=True` first asks the controller to move its leaderships
        away (Kafka's controlled shutdown), as a SIGTERM does."""
        info = self._servers.get(i)
        if info is None:
            raise ValueError(f"broker {i} is not running")

        async def stop() -> None:
            if controlled:
                await info.broker.controlled_shutdown()
            self._scopes[i].cancel()
            await self._done[i].wait()

        self._call(stop)
        survivors = set(self._servers)
        if survivors:
            self.wait_until(lambda: self._all_see(survivors) and not self._led_by(i),
                            f"the other brokers to see broker {i} gone and lead in its place")

    def _led_by(self, node: int) -> bool:
        """Whether any running broker's image still has `node` leading a partition (the
        controller gives each a new leader, or none when no other replica is in sync)."""
        return any(p.leader == node for info in self._servers.values()
                   for t in info.broker.metadata.image.topics.values() for p in t.partitions)

    def expire_session(self, i: int) -> None:
        """Expire broker `i`'s ZooKeeper session (as after a long pause): it leads nothing
        until it has registered again, which it does at once.

        On a real ZooKeeper the server expires it, as ZooKeeper's FAQ says to simulate an
        expiry: a second client joins the session with its id and password (the server
        drops the broker's connection) and closes it; the broker's client, reconnecting,
        hears SESSION_EXPIRED. Returns once the broker has a new session."""
        zk = self._servers[i].broker.zk_store.zk  # type: ignore[union-attr]  # every member has one
        if self.memory_zookeeper is not None:
            zk.expire()
            return
        from kazoo.client import KazooClient

        old_session = zk.client_id
        if old_session is None:
            raise RuntimeError(f"broker {i} has no ZooKeeper session to expire")
        twin = KazooClient(hosts=self._zk_hosts, client_id=old_session)
        twin.start(timeout=_TIMEOUT_S)
        twin.stop()  # closes the session: its ephemerals (the registration) go at once
        twin.close()
        self.wait_until(lambda: zk.connected and zk.client_id is not None
                        and zk.client_id[0] != old_session[0],
                        f"broker {i}'s ZooKeeper client to start a new session")

    @property
    def zookeeper_connect(self) -> str:
        """What the brokers' zookeeper.connect is: host:port/chroot of a real ZooKeeper (for
        kazoo, or a tool's `--zookeeper`), "memory" for the in-memory one."""
        return self.config["zookeeper.connect"]

    @property
    def running(self) -> list[int]:
        return sorted(self._servers)

    def server(self, i: int) -> ServerInfo:
        """The running broker `i` (its `broker` for white-box assertions)."""
        return self._servers[i]

    @property
    def bootstrap(self) -> str:
        """Every broker's address, running or not (a client skips the stopped ones)."""
        return ",".join(f"127.0.0.1:{self.ports[n]}" for n in sorted(self.ports))

    def bootstrap_on(self, listener: str) -> str:
        """Every broker's address on `listener` (a name in the `listeners` config)."""
        return ",".join(f"127.0.0.1:{self.listener_ports[n][listener.upper()]}"
                        for n in sorted(self.listener_ports))

    def advance_time(self, ms: int) -> None:
        """Move every broker's timers `ms` milliseconds forward and run at once what became
        due on each running broker (`pybroker.testing.Broker.advance_time` says what)."""
        async def advance() -> None:
            self.clock.advance(ms)
            for node in sorted(self._servers):
                await self._servers[node].broker.time_advanced()
        self._call(advance)

    # -- metadata ----------------------------------------------------------------------------------
    def _image(self) -> Any:
        """The image of the controller if one runs, else of any running broker."""
        images = [info.broker.metadata.image for info in self._servers.values()]
        if not images:
            raise RuntimeError("no broker is running")
        for image in images:
            if image.controller_id in self._servers:
                return self._servers[image.controller_id].broker.metadata.image
        return images[0]

    def _all_see(self, nodes: set[int]) -> bool:
        for node in nodes:
            info = self._servers.get(node)
            if info is None:
                return False
            image = info.broker.metadata.image
            if set(image.brokers) != nodes or image.controller_id not in nodes:
                return False
        return True

    @property
    def controller(self) -> int:
        return self._image().controller_id

    def leader_of(self, topic: str, partition: int = 0) -> int:
        """The partition's leader as the controller wrote it (-1: none or unknown)."""
        state = self._image().partition(topic, partition)
        return -1 if state is None else state.leader

    def isr_of(self, topic: str, partition: int = 0) -> tuple[int, ...]:
        state = self._image().partition(topic, partition)
        return () if state is None else tuple(state.isr)

    def replicas_of(self, topic: str, partition: int = 0) -> tuple[int, ...]:
        state = self._image().partition(topic, partition)
        return () if state is None else tuple(state.replicas)

    def wait_until(self, done: Callable[[], bool], what: str,
                   timeout: float = _TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() >= deadline:
                raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.02)

    def wait_for_isr(self, topic: str, partition: int, isr: set[int] | None = None,
                     timeout: float = _TIMEOUT_S) -> None:
        """Until the partition's ISR is `isr` (default: every replica) in every running
        broker's image, and its leader has taken it up (its replica layer applies an image a
        moment after the image changes; what it reports, /metrics included, lags till then)."""
        def done() -> bool:
            want = isr if isr is not None else set(self.replicas_of(topic, partition))
            if not all(set(getattr(info.broker.metadata.image.partition(topic, partition),
                                   "isr", ())) == want for info in self._servers.values()):
                return False
            leader = self._servers.get(self.leader_of(topic, partition))
            hosted = None if leader is None else \
                leader.broker.replicas.hosted_partition(topic, partition)
            return hosted is not None and hosted.is_leader and set(hosted.isr) == want
        self.wait_until(done, f"the ISR of {topic}-{partition} to be {isr or 'all replicas'}",
                        timeout)

    # -- changes -----------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1,
                     replication_factor: int | None = None,
                     config: Mapping[str, str] | None = None) -> None:
        """Create a topic (as CreateTopics would) and wait until every running broker has a
        leader for each partition and every replica is in sync."""
        rf = replication_factor or min(3, self.size)
        info = self._servers[self.controller]

        async def create() -> Any:
            return await info.broker.topics.create_topic(name, partitions, rf,
                                                         dict(config or {}))
        code, message = self._call(create)
        if code.value != 0:
            raise RuntimeError(f"creating {name}: {code.name} {message or ''}".strip())
        for index in range(partitions):
            self.wait_for_isr(name, index)

    def move_leader(self, topic: str, partition: int, to: int) -> None:
        """Make broker `to` the partition's leader the way an operator does: reorder the
        replicas so `to` is preferred (a reassignment to the same set) and run a preferred
        leader election, both through the controller. `to` must be an in-sync replica;
        returns once every running broker's image has the new leader."""
        replicas = self.replicas_of(topic, partition)
        if to not in replicas:
            raise ValueError(f"broker {to} is not a replica of {topic}-{partition} {replicas}")
        if to not in self.isr_of(topic, partition):
            raise ValueError(f"broker {to} is not in the ISR of {topic}-{partition}")
        target = [to] + [r for r in replicas if r != to]
        controller = self._servers[self.controller].broker.controller
        assert controller is not None  # every member of a cluster runs one

        async def move() -> Any:
            moved = await controller.alter_reassignments([(topic, partition, target)])
            code, message = moved[(topic, partition)]
            if code.value != 0:
                return code, message
            elected = await controller.elect_leaders(0, [(topic, partition)])
            return elected[(topic, partition)]
        code, message = self._call(move)
        if code.name not in ("NONE", "ELECTION_NOT_NEEDED"):
            raise RuntimeError(f"moving the leader of {topic}-{partition} to {to}: "
                               f"{code.name} {message or ''}".strip())
        self.wait_until(lambda: all(
            getattr(info.broker.metadata.image.partition(topic, partition), "leader", -1) == to
            for info in self._servers.values()), f"broker {to} to lead {topic}-{partition}")
