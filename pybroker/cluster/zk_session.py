"""The ZooKeeper side of one broker's membership: connecting (and the chroot), the cluster id
agreed with meta.properties, this broker's ephemeral registration, and what a lost or
suspended session means (`_on_state`).

A mixin of `ZkMetadataStore` (`zk_store.py`, whose docstring gives the theory); kept apart by
job from the cache of watched znodes (`zk_cache.py`) and the writes.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import trio

from pybroker.cluster import zk_data as zd
from pybroker.cluster.metadata import InconsistentClusterIdError, META_PROPERTIES, \
    new_cluster_id, read_meta_properties
from pybroker.config.definitions import ConfigError
from pybroker.storage.files import write_atomically

__all__ = ["ZkSession", "ZooKeeperUnavailable", "BrokerIdInUse", "split_chroot"]

log = logging.getLogger(__name__)


class ZooKeeperUnavailable(ConfigError):
    """ZooKeeper did not answer within zookeeper.connection.timeout.ms at start."""


class BrokerIdInUse(ConfigError):
    """Another live broker is registered under this broker.id."""


def split_chroot(connect: str) -> tuple[str, str]:
    """'h1:2181,h2:2181/pybroker' -> ('h1:2181,h2:2181', '/pybroker'); chroot '' when none.
    A node's metadata service, 'unix:/path/to.sock', has no chroot: it is all hosts."""
    if connect.startswith("unix:"):
        return connect, ""
    hosts, slash, chroot = connect.partition("/")
    return hosts, ("/" + chroot.rstrip("/")) if slash and chroot.strip("/") else ""


class ZkSession:
    """Connection, cluster id and registration; see `ZkMetadataStore` for the state."""

    zk: Any
    node_id: int
    rack: str | None
    connect: str
    chroot: str
    session_timeout_ms: int
    log_dir: Path
    session_valid: bool
    _endpoints: dict[str, tuple[str, int]]
    _registered: bool
    _session_lost: bool
    _suspended: bool
    _shutting_down: bool
    _offline_replicas: frozenset[tuple[str, int]]
    _mark: Callable[[tuple[Any, ...]], None]  # ZkCache's

    def _ensure_chroot(self, client_class: Any, hosts: str, timeout_ms: int) -> None:
        if not self.chroot:
            return
        client = client_class(hosts=hosts)
        try:
            self._start(client, timeout_ms)
            client.ensure_path(self.chroot)
        finally:
            client.stop()
            client.close()

    def _start(self, client: Any, timeout_ms: int) -> None:
        try:
            client.start(timeout=timeout_ms / 1000)
        except Exception as exc:  # kazoo's timeout, or a bad host
            client.stop()
            raise ZooKeeperUnavailable("zookeeper.connect", self.connect, "", message=(
                f"ZooKeeper at {self.connect} did not answer within "
                f"zookeeper.connection.timeout.ms={timeout_ms}: "
                f"{str(exc) or type(exc).__name__}. "
                "Start ZooKeeper first (bin/zookeeper-server-start.sh "
                "config/zookeeper.properties), or run pybroker with no other service: "
                "bin/pybroker-server config/standalone/server.properties")
            ) from None

    def _cluster_id(self, configured: str | None) -> str:
        """ZooKeeper's /cluster/id, created by the first broker; meta.properties must agree
        (Kafka's InconsistentClusterIdException)."""
        from kazoo.exceptions import NodeExistsError

        props = read_meta_properties(self.log_dir)
        stored = props.get("cluster.id")
        stored_node = props.get("broker.id", props.get("node.id"))
        if stored_node is not None and int(stored_node) != self.node_id:
            raise ConfigError("broker.id", self.node_id, "", message=(
                f"{self.log_dir / META_PROPERTIES} belongs to broker {stored_node}, "
                f"but broker.id is {self.node_id}"))
        try:
            self.zk.create(zd.CLUSTER_ID, zd.encode_cluster_id(
                stored or configured or new_cluster_id()), makepath=True)
        except NodeExistsError:
            pass
        cluster_id = zd.decode_cluster_id(self.zk.get(zd.CLUSTER_ID)[0])
        for other, source in ((stored, "meta.properties"), (configured, "cluster.id")):
            if other and other != cluster_id:
                raise InconsistentClusterIdError("cluster.id", other, "", message=(
                    f"The Cluster ID {cluster_id} doesn't match stored clusterId {other} in "
                    f"{source}. The broker is trying to join the wrong cluster."))
        if not props:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            write_atomically(self.log_dir / META_PROPERTIES,
                             f"version=0\nbroker.id={self.node_id}\ncluster.id={cluster_id}\n")
        return cluster_id

    def close(self) -> None:
        """Leave the cluster: the ephemeral registration goes with the session."""
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:  # already gone
            log.debug("closing the ZooKeeper client failed", exc_info=True)

    def set_endpoints(self, endpoints: Mapping[str, tuple[str, int]]) -> None:
        """The advertised endpoint of each listener, registered by `register`."""
        self._endpoints = dict(endpoints)

    def _registration(self) -> bytes:
        return zd.encode_broker(self.node_id, self._endpoints,
                                {name: "PLAINTEXT" for name in self._endpoints}, self.rack,
                                shutting_down=self._shutting_down,
                                offline_replicas=self._offline_replicas)

    def register(self) -> None:
        """Create this broker's ephemeral /brokers/ids/N (blocking). An old registration of
        this id (a kill -9 moments ago) is waited out until its session expires; one still
        there after that belongs to a live broker, and this one refuses to start."""
        from kazoo.exceptions import NodeExistsError

        path = zd.broker_path(self.node_id)
        deadline = time.monotonic() + self.session_timeout_ms / 1000 + 2
        while True:
            try:
                self.zk.create(path, self._registration(), ephemeral=True, makepath=True)
                break
            except NodeExistsError:
                stat = self.zk.exists(path)
                if stat is not None and stat.ephemeralOwner == self.zk.client_id[0]:
                    self.zk.set(path, self._registration())
                    break
                if time.monotonic() >= deadline:
                    raise BrokerIdInUse("broker.id", self.node_id, "", message=(
                        f"broker.id {self.node_id} is already registered in ZooKeeper at "
                        f"{self.connect} by a live broker; every broker needs its own id"))
                time.sleep(0.2)
        self._registered = True
        log.info("registered broker %d in ZooKeeper at %s", self.node_id, self.connect)

    async def announce_shutdown(self) -> None:
        """Controlled shutdown: mark this broker's registration so the controller moves its
        leaderships away (R6)."""
        self._shutting_down = True
        await trio.to_thread.run_sync(self.zk.set, zd.broker_path(self.node_id),
                                      self._registration())

    def set_offline_replicas(self, replicas: Iterable[tuple[str, int]]) -> None:
        """Before registering: the replicas offline from the start (a log dir unusable at
        start), listed in the first registration, so no controller elects this broker for
        them; `announce_offline_replicas` then tells the controller as for a later failure."""
        self._offline_replicas = frozenset(replicas)

    async def announce_offline_replicas(self, replicas: Iterable[tuple[str, int]]) -> None:
        """A log dir failed (KIP-112): list the replicas now offline in this broker's
        registration, for the controller to move their leaderships and ISR memberships away,
        and write Kafka's `/log_dir_event_notification/log_dir_event_<seq>`, as Kafka's
        broker does."""
        self._offline_replicas = frozenset(replicas)

        def write() -> None:
            self.zk.set(zd.broker_path(self.node_id), self._registration())
            self.zk.create(zd.LOG_DIR_EVENT_PREFIX, zd.encode_log_dir_event(self.node_id),
                           sequence=True, makepath=True)

        await trio.to_thread.run_sync(write)

    def _on_state(self, state: str) -> None:
        """kazoo drops every watch when the connection drops, even when the session lives
        on (a ZooKeeper restart): on reconnecting, everything is read again, which sets them
        again; a lost session also means registering again."""
        if state == "LOST":
            self._session_lost = True
            self.session_valid = False
            self._mark(("session",))
        elif state == "SUSPENDED":
            self._suspended = True
        elif state == "CONNECTED":
            if self._session_lost:
                self._mark(("session",))
            elif self._suspended:
                self._suspended = False
                self._mark(("rearm",))
