"""The metadata of a ZooKeeper-coordinated cluster, as one broker sees it.

Theory of operation
-------------------
ZooKeeper holds the cluster's metadata in Kafka's layout (`zk_data`): who is alive
(`/brokers/ids/N`, ephemeral), each topic's assignment, each partition's leader, leader epoch
and ISR (`.../partitions/P/state`), topic configs, the controller. Every broker keeps a cache of
those znodes, re-reads a znode whenever its watch fires (kazoo's watches are one-shot: the
re-read re-arms it), and builds from the cache the same immutable `MetadataImage` the local
store builds. The delta between the previous image and the new one goes to the same listeners
(topic configs, replica manager, group coordinator): a broker acts on the latest snapshot,
never on the events, so a watch that fires once for several changes loses nothing
(REPLICATION.md §2, option B; there are no LeaderAndIsr RPCs).

Who writes what (the fencing that makes two leaders in one epoch impossible):
- The controller alone writes a partition's leader and leader epoch, every write conditional
  on the znode's version and on `/controller_epoch` (`controller.py`).
- The leader alone writes its ISR (`alter_isr`), conditional on the version it last read: a
  controller change in between makes the write fail and the leader re-read.
- Any broker may write what Kafka's admin client wrote in ZooKeeper mode: a new topic's
  assignment and config, a deletion marker, more partitions, configs. The controller turns
  them into partition states or removes the topic.

Threads: kazoo runs its own thread and calls the watches there; they only record which znode
is dirty and wake the trio task (`run`), which re-reads the dirty znodes in a worker thread and
publishes. When the ZooKeeper session is lost, this broker stops leading (`session_valid`)
until it has a new session, has registered again and has re-read everything (R4).
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import trio

from pybroker.cluster import zk_data as zd
from pybroker.cluster.client_quotas import QUOTA_KEYS, QuotaEntity, config_strings, \
    desanitize, parse_config_strings
from pybroker.cluster.metadata import BrokerInfo, DeltaListener, InconsistentClusterIdError, \
    META_PROPERTIES, MetadataImage, PartitionState, TopicInfo, diff_images, \
    new_cluster_id, read_meta_properties
from pybroker.cluster.topic_names import is_internal
from pybroker.cluster.zk_entity_config import change_entity_config
from pybroker.config.definitions import ConfigError
from pybroker.storage.files import write_atomically

log = logging.getLogger(__name__)

# A partition whose state znode the controller has not written yet.
NO_STATE_EPOCH = -1
# How long an admin change waits for its effect to reach this broker's image.
CHANGE_TIMEOUT_S = 30.0


class ZooKeeperUnavailable(ConfigError):
    """ZooKeeper did not answer within zookeeper.connection.timeout.ms at start."""


class BrokerIdInUse(ConfigError):
    """Another live broker is registered under this broker.id."""


def split_chroot(connect: str) -> tuple[str, str]:
    """'h1:2181,h2:2181/pybroker' -> ('h1:2181,h2:2181', '/pybroker'); chroot '' when none."""
    hosts, slash, chroot = connect.partition("/")
    return hosts, ("/" + chroot.rstrip("/")) if slash and chroot.strip("/") else ""


@dataclass
class _Cache:
    """The znodes this broker has read, as Kafka's ZkData decodes them, with the versions a
    conditional write needs."""

    brokers: dict[int, zd.BrokerRegistration] = field(default_factory=dict)
    assignments: dict[str, zd.TopicAssignment] = field(default_factory=dict)
    topic_versions: dict[str, int] = field(default_factory=dict)
    states: dict[tuple[str, int], tuple[zd.LeaderAndIsr, int]] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    controller: int = -1
    deleting: frozenset[str] = frozenset()
    quotas: dict[QuotaEntity, dict[str, float]] = field(default_factory=dict)
    scram: dict[str, dict[str, str]] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)


def build_image(cluster_id: str, cache: _Cache) -> MetadataImage:
    """The image a cache stands for (pure). A partition without a state znode yet has no
    leader and leader epoch NO_STATE_EPOCH; one whose state znode is not in ZooKeeper's
    assignment is ignored (a deletion in progress)."""
    brokers = {}
    for node, reg in sorted(cache.brokers.items()):
        if not reg.endpoints:
            continue
        host, port = next(iter(reg.endpoints.values()))
        brokers[node] = BrokerInfo(node, host, port, reg.rack, dict(reg.endpoints),
                                   epoch=reg.epoch, shutting_down=reg.shutting_down)
    topics = {}
    for name, assignment in sorted(cache.assignments.items()):
        parts = []
        adding, removing = assignment.adding or {}, assignment.removing or {}
        for index in range(len(assignment.partitions)):
            replicas = assignment.partitions.get(index)
            if replicas is None:  # partitions must be 0..n-1; a hole means a bad write
                break
            cached = cache.states.get((name, index))
            moving = (tuple(adding.get(index, ())), tuple(removing.get(index, ())))
            if cached is None:
                parts.append(PartitionState(index, -1, NO_STATE_EPOCH, replicas, (), *moving))
            else:
                state = cached[0]
                parts.append(PartitionState(index, state.leader, state.leader_epoch, replicas,
                                            state.isr, *moving))
        topic_id = assignment.topic_id or uuid.uuid5(uuid.NAMESPACE_URL, name)
        topics[name] = TopicInfo(name, topic_id, tuple(parts), dict(cache.configs.get(name, {})),
                                 is_internal(name))
    return MetadataImage(cluster_id, cache.controller, brokers, topics,
                         {e: dict(v) for e, v in cache.quotas.items() if v},
                         {u: dict(m) for u, m in cache.scram.items() if m},
                         {e: dict(c) for e, c in cache.broker_configs.items() if c})


class ZkMetadataStore:
    """The metadata store of a broker in a ZooKeeper-coordinated cluster: the same image,
    deltas and change operations as `LocalMetadataStore`, kept in ZooKeeper."""

    def __init__(self, connect: str, node_id: int, *, rack: str | None,
                 session_timeout_ms: int, connection_timeout_ms: int,
                 client_class: Any = None) -> None:
        """Connect (blocking; ZooKeeperUnavailable after `connection_timeout_ms`). Nothing of
        a log dir is touched until `attach`, so a broker that cannot reach ZooKeeper leaves
        its dirs as they were. `client_class` replaces kazoo's KazooClient (the in-memory
        ZooKeeper of pybroker.testing's Cluster, `memory_zk`)."""
        if client_class is None:
            from kazoo.client import KazooClient  # only a cluster member needs kazoo
            client_class = KazooClient

        self.node_id = node_id
        self.rack = rack
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        hosts, self.chroot = split_chroot(connect)
        self._ensure_chroot(client_class, hosts, connection_timeout_ms)
        self.zk = client_class(hosts=hosts + self.chroot, timeout=session_timeout_ms / 1000,
                              connection_retry={"max_tries": -1, "max_delay": 1.0})
        self._start(self.zk, connection_timeout_ms)
        self.listeners: list[DeltaListener] = []
        self.changes = 0
        # False from a lost session until this broker has registered again and re-read.
        self.session_valid = True
        self._cache = _Cache()
        self._dirty: set[tuple[Any, ...]] = set()
        self._dirty_lock = threading.Lock()
        self._token: trio.lowlevel.TrioToken | None = None
        self._wakeup = trio.Event()
        self._image_changed = trio.Event()
        self._endpoints: dict[str, tuple[str, int]] = {}
        self._registered = False
        self._session_lost = False
        self._suspended = False
        self._shutting_down = False

    def attach(self, log_dir: Path, cluster_id: str | None) -> None:
        """With this broker's first log dir locked: agree on the cluster id with ZooKeeper
        and meta.properties, then read the cluster's metadata (blocking)."""
        self.log_dir = log_dir
        for path in zd.PERSISTENT_PATHS:
            self.zk.ensure_path(path)
        self.cluster_id = self._cluster_id(cluster_id)
        self._read_all()
        self.image = build_image(self.cluster_id, self._cache)
        self.zk.add_listener(self._on_state)

    # -- connecting ----------------------------------------------------------------------------
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
                "config/zookeeper.properties), or run one broker with no other service: "
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

    # -- registration --------------------------------------------------------------------------
    def set_endpoints(self, endpoints: Mapping[str, tuple[str, int]]) -> None:
        """The advertised endpoint of each listener, registered by `register`."""
        self._endpoints = dict(endpoints)

    def _registration(self) -> bytes:
        return zd.encode_broker(self.node_id, self._endpoints,
                                {name: "PLAINTEXT" for name in self._endpoints}, self.rack,
                                shutting_down=self._shutting_down)

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

    # -- watches (kazoo's thread) --------------------------------------------------------------
    def _on_watch(self, event: Any) -> None:
        key = _key_of(event.path)
        if key is not None:
            self._mark(key)

    def _mark(self, key: tuple[Any, ...]) -> None:
        with self._dirty_lock:
            self._dirty.add(key)
        token = self._token
        if token is not None:
            try:
                token.run_sync_soon(self._wake)
            except trio.RunFinishedError:
                pass

    def _wake(self) -> None:
        self._wakeup.set()

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

    # -- reading (worker thread) ---------------------------------------------------------------
    def _get(self, path: str) -> tuple[bytes, Any] | None:
        from kazoo.exceptions import NoNodeError
        for _ in range(3):
            try:
                return self.zk.get(path, watch=self._on_watch)
            except NoNodeError:
                if self.zk.exists(path, watch=self._on_watch) is None:
                    return None
        return None

    def _children(self, path: str) -> list[str]:
        from kazoo.exceptions import NoNodeError
        try:
            return self.zk.get_children(path, watch=self._on_watch)
        except NoNodeError:
            self.zk.exists(path, watch=self._on_watch)
            return []

    def _read_all(self) -> None:
        self._cache = _Cache()
        for key in (("brokers",), ("topics",), ("controller",), ("deletes",), ("quotas",),
                    ("broker_configs",)):
            self._read(key)

    def _read(self, key: tuple[Any, ...]) -> None:
        cache = self._cache
        kind = key[0]
        if kind == "brokers":
            ids = {int(c) for c in self._children(zd.BROKER_IDS) if c.isdigit()}
            for gone in set(cache.brokers) - ids:
                del cache.brokers[gone]
            for node in ids:
                self._read(("broker", node))
        elif kind == "broker":
            got = self._get(zd.broker_path(key[1]))
            if got is None:
                cache.brokers.pop(key[1], None)
            else:
                cache.brokers[key[1]] = zd.decode_broker(key[1], got[0], got[1].czxid)
        elif kind == "topics":
            names = set(self._children(zd.TOPICS))
            for gone_topic in set(cache.assignments) - names:
                self._forget_topic(gone_topic)
            for name in names - set(cache.assignments):
                self._read(("topic", name))
                self._read(("config", name))
        elif kind == "topic":
            name = key[1]
            got = self._get(zd.topic_path(name))
            if got is None:
                self._forget_topic(name)
                return
            assignment = zd.decode_topic(got[0])
            old = cache.assignments.get(name)
            if old is not None and old.topic_id != assignment.topic_id:
                self._forget_topic(name)  # deleted and created again between two reads
            cache.assignments[name] = assignment
            cache.topic_versions[name] = got[1].version
            for index in assignment.partitions:
                if (name, index) not in cache.states:
                    self._read(("state", name, index))
        elif kind == "state":
            name, index = key[1], key[2]
            got = self._get(zd.state_path(name, index))
            if got is None:
                cache.states.pop((name, index), None)
            elif name in cache.assignments:
                cache.states[(name, index)] = (zd.decode_state(got[0]), got[1].version)
        elif kind == "config":
            got = self._get(zd.config_path(key[1]))
            if got is None:
                cache.configs.pop(key[1], None)
            else:
                cache.configs[key[1]] = zd.decode_config(got[0])
        elif kind == "controller":
            got = self._get(zd.CONTROLLER)
            cache.controller = zd.decode_controller(got[0]) if got else -1
        elif kind == "deletes":
            cache.deleting = frozenset(self._children(zd.DELETE_TOPICS))
        elif kind == "quotas":
            cache.quotas, cache.scram = self._read_entity_configs()
        elif kind == "broker_configs":
            # /config/brokers/<default> and /config/brokers/<id>: few and small, all read
            # again when any changes, each with a watch.
            cache.broker_configs = {}
            for entity in self._children(zd.CONFIG_BROKERS):
                got = self._get(f"{zd.CONFIG_BROKERS}/{entity}")
                if got is not None:
                    cache.broker_configs[entity] = zd.decode_config(got[0])

    def _read_entity_configs(self) -> tuple[dict[QuotaEntity, dict[str, float]],
                                            dict[str, dict[str, str]]]:
        """Every client quota znode, each read with a watch (few and small: all are read
        again when any changes), and the SCRAM credentials the user znodes among them hold."""
        paths = [f"clients/{c}" for c in self._children(zd.CONFIG_CLIENTS)]
        for user in self._children(zd.CONFIG_USERS):
            paths.append(f"users/{user}")
            paths += [f"users/{user}/clients/{c}"
                      for c in self._children(f"{zd.CONFIG_USERS}/{user}/clients")]
        quotas = {}
        scram: dict[str, dict[str, str]] = {}
        for path in paths:
            got = self._get(f"/config/{path}")
            if got is not None:
                config = zd.decode_config(got[0])
                values = parse_config_strings(config)
                if values:
                    quotas[QuotaEntity.from_zk_path(path)] = values
                parts = path.split("/")
                credentials = {k: v for k, v in config.items() if k.startswith("SCRAM-")}
                if len(parts) == 2 and parts[0] == "users" and credentials:
                    user = desanitize(parts[1])
                    if user:  # <default> holds quotas only
                        scram[user] = credentials
        return quotas, scram

    def _forget_topic(self, name: str) -> None:
        cache = self._cache
        assignment = cache.assignments.pop(name, None)
        cache.topic_versions.pop(name, None)
        cache.configs.pop(name, None)
        if assignment is not None:
            for index in assignment.partitions:
                cache.states.pop((name, index), None)

    def _refresh(self, keys: set[tuple[Any, ...]]) -> None:
        """Re-read the dirty znodes (worker thread). After a lost session: register again and
        re-read everything, since every watch went with the old session."""
        if ("session",) in keys:
            if self.zk.state != "CONNECTED":
                return
            if self._registered:
                self.register()
            self._read_all()
            self._session_lost = False
            return
        if ("rearm",) in keys:
            self._read_all()
            return
        # A partition's state and its topic's assignment are written together by the
        # controller (a reassignment step: one multi-op), but their watches fire apart:
        # reading the assignment with every state keeps the image from pairing a new ISR
        # with old replicas (a leader would then let a removed replica back into the ISR).
        keys = keys | {("topic", key[1]) for key in keys if key[0] == "state"}
        for key in sorted(keys, key=_read_order):
            self._read(key)

    # -- the trio side ---------------------------------------------------------------------------
    @property
    def deleting(self) -> frozenset[str]:
        """Topics marked for deletion in /admin/delete_topics (for the controller)."""
        return self._cache.deleting

    def state_version(self, topic: str, partition: int) -> int:
        cached = self._cache.states.get((topic, partition))
        return cached[1] if cached else -1

    def topic_version(self, topic: str) -> int:
        return self._cache.topic_versions.get(topic, -1)

    def assignment(self, topic: str) -> zd.TopicAssignment | None:
        return self._cache.assignments.get(topic)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Follow ZooKeeper: publish a new image whenever a watched znode changed."""
        self._token = trio.lowlevel.current_trio_token()
        await trio.to_thread.run_sync(self.register)
        # Watches that fired before the token was known.
        self._mark(("brokers",))
        task_status.started()
        while True:
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            with self._dirty_lock:
                keys, self._dirty = self._dirty, set()
            if not keys:
                continue
            try:
                await trio.to_thread.run_sync(self._refresh, keys)
            except Exception as exc:  # connection loss: re-read when it is back
                log.warning("re-reading ZooKeeper failed (%s); retrying", exc)
                with self._dirty_lock:
                    self._dirty |= keys
                await trio.sleep(0.5)
                self._wakeup.set()
                continue
            # Stopping (the read above could not be cancelled): publish nothing more.
            await trio.lowlevel.checkpoint_if_cancelled()
            if ("session",) in keys and not self._session_lost:
                self.session_valid = True
                log.info("broker %d has a new ZooKeeper session and leads again", self.node_id)
            await self._publish_cache()

    async def _publish_cache(self) -> None:
        image = build_image(self.cluster_id, self._cache)
        delta = diff_images(self.image, image)
        self.image = image
        self.changes += 1
        self._image_changed.set()
        self._image_changed = trio.Event()
        for listener in self.listeners:
            await listener(image, delta)

    async def refresh_now(self, *keys: tuple[Any, ...]) -> None:
        """Re-read `keys` and publish at once (after a write of this broker's, rather than
        waiting for its watch)."""
        await trio.to_thread.run_sync(self._refresh, set(keys))
        await self._publish_cache()

    async def wait_for(self, done: Any, timeout_s: float = CHANGE_TIMEOUT_S) -> bool:
        """Wait until `done(image)` holds; False on timeout."""
        with trio.move_on_after(timeout_s):
            while not done(self.image):
                await self._image_changed.wait()
            return True
        return False

    async def _zk(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await trio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    # -- changes any broker may write (Kafka's AdminZkClient) -----------------------------------
    async def create_topic(self, name: str, num_partitions: int, configs: Mapping[str, str],
                           internal: bool = False,
                           assignments: list[list[int]] | None = None) -> TopicInfo:
        """Write the topic's config and assignment; the controller elects its leaders. Returns
        once this broker's image has the topic with a leader for every partition (or after
        CHANGE_TIMEOUT_S, with what it has). KeyError if the topic exists."""
        from kazoo.exceptions import NodeExistsError

        replicas = assignments or [[self.node_id]] * num_partitions
        assignment = zd.TopicAssignment({i: tuple(r) for i, r in enumerate(replicas)},
                                        uuid.uuid4())
        txn = self.zk.transaction()
        if self.zk.exists(zd.config_path(name)) is None:
            txn.create(zd.config_path(name), zd.encode_config(configs))
        else:
            txn.set_data(zd.config_path(name), zd.encode_config(configs))
        txn.create(zd.topic_path(name), zd.encode_topic(assignment))
        results = await self._zk(txn.commit)
        if any(isinstance(r, NodeExistsError) for r in results):
            raise KeyError(name)
        _raise_first(results)
        await self.wait_for(lambda image: _all_led(image, name, len(replicas)))
        info = self.image.topics.get(name)
        if info is None:
            await self.refresh_now(("topics",))
            info = self.image.topics[name]
        return info

    async def delete_topic(self, name: str) -> TopicInfo:
        """Mark the topic for deletion (/admin/delete_topics/T) and wait until the controller
        has removed it. KeyError if there is no such topic."""
        from kazoo.exceptions import NodeExistsError

        info = self.image.topics[name]
        try:
            await self._zk(self.zk.create, zd.delete_path(name), b"", makepath=True)
        except NodeExistsError:
            pass
        await self.wait_for(lambda image: image.topics.get(name) is not info
                            and (name not in image.topics
                                 or image.topics[name].topic_id != info.topic_id))
        return info

    async def add_partitions(self, name: str, total: int,
                             assignments: list[list[int]] | None = None) -> None:
        info = self.image.topics[name]
        current = self._cache.assignments[name]
        version = self._cache.topic_versions[name]
        added = assignments or [[self.node_id]] * (total - len(info.partitions))
        partitions = dict(current.partitions)
        for offset, replicas in enumerate(added):
            partitions[len(current.partitions) + offset] = tuple(replicas)
        await self._zk(self.zk.set, zd.topic_path(name),
                       zd.encode_topic(replace(current, partitions=partitions)), version)
        await self.wait_for(lambda image: _all_led(image, name, total))

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """/config/topics/T, and a change notification as Kafka's admin writes one."""
        path = zd.config_path(name)
        data = zd.encode_config(configs)

        def write() -> None:
            if self.zk.exists(path) is None:
                self.zk.create(path, data, makepath=True)
            else:
                self.zk.set(path, data)
            self.zk.create(f"{zd.CONFIG_CHANGES}/config_change_",
                           zd.encode_config_change(f"topics/{name}"), sequence=True,
                           makepath=True)
        await trio.to_thread.run_sync(write)
        await self.refresh_now(("config", name))

    async def set_client_quotas(self, changes: Mapping[QuotaEntity, Mapping[str, float]]
                                ) -> None:
        """/config/clients/C, /config/users/U[/clients/C] and a change notification for
        each, as Kafka's AdminZkClient.changeConfigs writes them; every broker's watch
        re-reads them. A user's other keys (its SCRAM credentials) are kept."""
        def write() -> None:
            for entity, values in changes.items():
                strings = config_strings(values)
                change_entity_config(self.zk, entity.zk_path(), lambda current: {
                    **{k: v for k, v in current.items() if k not in QUOTA_KEYS}, **strings})
        await trio.to_thread.run_sync(write)
        await self.refresh_now(("quotas",))

    async def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        """/config/brokers/<entity> ("<default>" or a broker id) and a change notification,
        as Kafka's AdminZkClient.changeBrokerConfig writes them; every broker's watch re-reads
        them and applies what concerns it."""
        await trio.to_thread.run_sync(lambda: change_entity_config(
            self.zk, f"brokers/{entity}", lambda current: configs))
        await self.refresh_now(("broker_configs",))

    # -- the leader's write ----------------------------------------------------------------------
    async def alter_isr(self, topic: str, partition: int, leader_epoch: int,
                        isr: tuple[int, ...]) -> bool:
        """As the leader at `leader_epoch`: write the partition's new ISR, conditionally on the
        state version last read (R2). False when the state changed meanwhile (a controller
        decision): the caller reconsiders with the new image."""
        from kazoo.exceptions import BadVersionError, NoNodeError

        cached = self._cache.states.get((topic, partition))
        if cached is None or not self.session_valid:
            return False
        state, version = cached
        if state.leader != self.node_id or state.leader_epoch != leader_epoch:
            return False
        new = zd.LeaderAndIsr(self.node_id, leader_epoch, tuple(isr), state.controller_epoch)
        try:
            await self._zk(self.zk.set, zd.state_path(topic, partition), zd.encode_state(new),
                           version)
        except (BadVersionError, NoNodeError):
            await self.refresh_now(("state", topic, partition))
            return False
        except Exception as exc:  # connection loss: the write may have landed; re-read
            log.warning("ISR write for %s-%d failed: %s", topic, partition, exc)
            self._mark(("state", topic, partition))
            return False
        await self.refresh_now(("state", topic, partition))
        return True


def _all_led(image: MetadataImage, name: str, partitions: int) -> bool:
    info = image.topics.get(name)
    return (info is not None and len(info.partitions) >= partitions
            and all(p.leader_epoch != NO_STATE_EPOCH for p in info.partitions))


def _raise_first(results: list[Any]) -> None:
    for result in results:
        if isinstance(result, Exception):
            raise result


def _key_of(path: str | None) -> tuple[Any, ...] | None:
    """The cache entry a watched path stands for."""
    if not path:
        return None
    parts = path.strip("/").split("/")
    if parts == ["brokers", "ids"]:
        return ("brokers",)
    if parts[:2] == ["brokers", "ids"] and len(parts) == 3 and parts[2].isdigit():
        return ("broker", int(parts[2]))
    if parts == ["brokers", "topics"]:
        return ("topics",)
    if parts[:2] == ["brokers", "topics"] and len(parts) == 3:
        return ("topic", parts[2])
    if (parts[:2] == ["brokers", "topics"] and len(parts) == 6 and parts[5] == "state"
            and parts[4].isdigit()):
        return ("state", parts[2], int(parts[4]))
    if parts[:2] == ["config", "topics"] and len(parts) == 3:
        return ("config", parts[2])
    if parts[:2] in (["config", "clients"], ["config", "users"]):
        return ("quotas",)
    if parts[:2] == ["config", "brokers"]:
        return ("broker_configs",)
    if parts == ["controller"]:
        return ("controller",)
    if parts == ["admin", "delete_topics"]:
        return ("deletes",)
    return None


_ORDER = {"brokers": 0, "broker": 1, "topics": 2, "topic": 3, "config": 4, "state": 5,
          "controller": 6, "deletes": 7, "quotas": 8, "broker_configs": 8,
          "session": -1}


def _read_order(key: tuple[Any, ...]) -> tuple[int, str]:
    """Topics before their partitions' states: a state is kept only for a known topic."""
    return _ORDER.get(key[0], 9), repr(key[1:])
