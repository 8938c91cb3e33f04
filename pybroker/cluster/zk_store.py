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

By job: `zk_session` connects, agrees on the cluster id and registers; `zk_cache` turns the
watched znodes into images; this module holds the writes (multi-ops, conditional on versions).
"""
from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import trio

from pybroker.cluster import features
from pybroker.cluster import zk_data as zd
from pybroker.cluster.client_quotas import QUOTA_KEYS, QuotaEntity, config_strings, sanitize
from pybroker.cluster.metadata import DeltaListener, PartitionState, TopicInfo
from pybroker.cluster.zk_cache import CHANGE_TIMEOUT_S, NO_STATE_EPOCH, ZkCache, _Cache, \
    build_image
from pybroker.cluster.zk_entity_config import change_entity_config
from pybroker.cluster.zk_session import ZkSession, split_chroot

log = logging.getLogger(__name__)


class ZkMetadataStore(ZkSession, ZkCache):
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
        self._refresh_lock = threading.Lock()
        self._token: trio.lowlevel.TrioToken | None = None
        self._wakeup = trio.Event()
        self._image_changed = trio.Event()
        self._listeners_ran = trio.Event()
        self._endpoints: dict[str, tuple[str, int]] = {}
        self._registered = False
        self._session_lost = False
        self._suspended = False
        self._shutting_down = False
        self._offline_replicas: frozenset[tuple[str, int]] = frozenset()
        self._features_decoded: tuple[tuple[bytes, int], features.Finalized] | None = None

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

    async def _zk(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await trio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    # -- changes any broker may write (Kafka's AdminZkClient) -----------------------------------
    async def create_topic(self, name: str, num_partitions: int, configs: Mapping[str, str],
                           internal: bool = False,
                           assignments: list[list[int]] | None = None, *,
                           wait_s: float = CHANGE_TIMEOUT_S) -> TopicInfo:
        """Write the topic's config and assignment; the controller elects its leaders. Returns
        once this broker's image has the topic with a leader for every partition, or after
        `wait_s` with what it has (0: at once, with the topic as written, its partitions not
        led yet; `wait_for` then waits as the caller wishes). KeyError if the topic exists."""
        from kazoo.exceptions import NodeExistsError

        replicas = assignments or [[self.node_id]] * num_partitions
        topic_id = uuid.uuid4()
        assignment = zd.TopicAssignment({i: tuple(r) for i, r in enumerate(replicas)},
                                        topic_id)
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
        if wait_s <= 0:
            return TopicInfo(name, topic_id, tuple(
                PartitionState(i, -1, NO_STATE_EPOCH, tuple(r), ())
                for i, r in enumerate(replicas)), dict(configs), internal)
        await self.wait_for(lambda image: image.has_states(name, len(replicas)), wait_s)
        info = self.image.topics.get(name)
        if info is None:
            await self.refresh_now(("topics",))
            info = self.image.topics[name]
        return info

    async def delete_topic(self, name: str, *, wait_s: float = CHANGE_TIMEOUT_S
                           ) -> TopicInfo:
        """Mark the topic for deletion (/admin/delete_topics/T; a marker already there is
        this deletion too, as Kafka's AdminZkClient takes it) and wait until this broker's
        image no longer has it, at most `wait_s` (0: not at all; the controller deletes it
        when it gets to it). KeyError if there is no such topic."""
        from kazoo.exceptions import NodeExistsError

        info = self.image.topics[name]
        try:
            await self._zk(self.zk.create, zd.delete_path(name), b"", makepath=True)
        except NodeExistsError:
            pass
        if wait_s > 0:
            await self.wait_for(lambda image: name not in image.topics
                                or image.topics[name].topic_id != info.topic_id, wait_s)
        return info

    async def add_partitions(self, name: str, total: int,
                             assignments: list[list[int]] | None = None, *,
                             wait_s: float = CHANGE_TIMEOUT_S) -> None:
        """Write the topic's grown assignment; returns once this broker's image has a
        leader for each partition, or after `wait_s` (0: at once)."""
        info = self.image.topics[name]
        current = self._cache.assignments[name]
        version = self._cache.topic_versions[name]
        added = assignments or [[self.node_id]] * (total - len(info.partitions))
        partitions = dict(current.partitions)
        for offset, replicas in enumerate(added):
            partitions[len(current.partitions) + offset] = tuple(replicas)
        await self._zk(self.zk.set, zd.topic_path(name),
                       zd.encode_topic(replace(current, partitions=partitions)), version)
        if wait_s > 0:
            await self.wait_for(lambda image: image.has_states(name, total), wait_s)

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

    async def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        """/config/groups/<group> (its id sanitized as Kafka's entity names are), or its
        removal when none is left; every broker's watch re-reads them. No change notification:
        no Kafka broker reads one for groups."""
        path = f"{zd.CONFIG_GROUPS}/{sanitize(group_id)}"

        def write() -> None:
            from kazoo.exceptions import NodeExistsError, NoNodeError
            if not configs:
                try:
                    self.zk.delete(path)
                except NoNodeError:
                    pass
                return
            try:
                self.zk.create(path, zd.encode_config(configs), makepath=True)
            except NodeExistsError:
                self.zk.set(path, zd.encode_config(configs))
        await trio.to_thread.run_sync(write)
        await self.refresh_now(("group_configs",))

    # -- the cluster's finalized features (Kafka's /feature, KIP-584) ----------------------------
    def finalized_features(self) -> features.Finalized | None:
        """/feature as last read; decoded once per read, since every request to a
        feature-gated API asks."""
        got = self._cache.feature
        if got is None:
            return None
        decoded = self._features_decoded
        if decoded is None or decoded[0] is not got:
            decoded = self._features_decoded = (got, features.decode_znode(*got))
        return decoded[1]

    def adopt_features(self, local: features.Finalized) -> None:
        """At start (blocking): make /feature if there is none, with this broker's own levels
        (its pybroker-features.json of before, else the defaults), as Kafka's controller
        makes it at its start. A /feature never changed since it was made with the defaults
        takes this broker's levels if they differ: an upgrade a broker took while each kept
        its own is not lost to a broker that started first. Later, /feature wins."""
        from kazoo.exceptions import BadVersionError, NodeExistsError

        try:
            self.zk.create(zd.FEATURE, features.encode_znode(local), makepath=True)
        except NodeExistsError:
            data, stat = self.zk.get(zd.FEATURE)
            cluster = features.decode_znode(data, stat.version)
            if (stat.version == 0 and cluster.levels == features.defaults().levels
                    and local.levels != cluster.levels):
                try:
                    self.zk.set(zd.FEATURE, features.encode_znode(local), 0)
                except BadVersionError:
                    pass  # another broker wrote first: its levels are the cluster's
        with self._refresh_lock:
            self._read(("feature",))

    async def write_features(self, finalized: features.Finalized, expected_epoch: int
                             ) -> bool:
        """Write `finalized` to /feature if it is still at `expected_epoch` (its version);
        False, with this broker's cache read again, when another broker wrote first."""
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        data = features.encode_znode(finalized)
        try:
            if self._cache.feature is None:
                await self._zk(self.zk.create, zd.FEATURE, data, makepath=True)
            else:
                await self._zk(self.zk.set, zd.FEATURE, data, expected_epoch)
        except (BadVersionError, NodeExistsError, NoNodeError):
            await self.refresh_now(("feature",))
            return False
        await self.refresh_now(("feature",))
        return True

    # -- the leader's write ----------------------------------------------------------------------
    async def alter_isr(self, topic: str, partition: int, leader_epoch: int,
                        isr: tuple[int, ...], version: int) -> int | None:
        """As the leader at `leader_epoch`: write the partition's new ISR, conditionally on
        `version`, the state znode's version the leader decided from (its partition's, R2;
        Kafka's zkVersion). Returns the version the write made; None when the state is not
        that one any more (a controller decision): the caller decides again from the image
        that carries the newer state."""
        from kazoo.exceptions import BadVersionError, NoNodeError

        cached = self._cache.states.get((topic, partition))
        if cached is None or not self.session_valid:
            return None
        state, cached_version = cached
        if cached_version != version:
            # The controller epoch and recovery state below must be those of the state decided
            # from. A newer read's image is on its way; an older one is read again.
            if cached_version < version:
                self._mark(("state", topic, partition))
            return None
        if state.leader != self.node_id or state.leader_epoch != leader_epoch:
            return None
        # An ISR that grows ends the recovery of an unclean election (Kafka's
        # PendingExpandIsr sends RECOVERED); a shrink keeps what was.
        grows = bool(set(isr) - set(state.isr))
        new = zd.LeaderAndIsr(self.node_id, leader_epoch, tuple(isr), state.controller_epoch,
                              zd.RECOVERED if grows else state.leader_recovery_state)
        try:
            stat = await self._zk(self.zk.set, zd.state_path(topic, partition),
                                  zd.encode_state(new), version)
        except (BadVersionError, NoNodeError):
            await self.refresh_now(("state", topic, partition))
            return None
        except Exception as exc:  # connection loss: the write may have landed; re-read
            log.warning("ISR write for %s-%d failed: %s", topic, partition, exc)
            self._mark(("state", topic, partition))
            return None
        await self.refresh_now(("state", topic, partition))
        return int(stat.version)


def _raise_first(results: list[Any]) -> None:
    for result in results:
        if isinstance(result, Exception):
            raise result



