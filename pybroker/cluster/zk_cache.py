"""The watched znodes of a ZooKeeper-coordinated cluster, cached and turned into the
`MetadataImage` the listeners get (kazoo's one-shot watches re-armed by each re-read).

Watches fire on kazoo's thread and only mark a key dirty; `run`, on trio, re-reads the dirty
keys in a worker thread and publishes the new image and its delta. A mixin of
`ZkMetadataStore` (`zk_store.py`, whose docstring gives the theory).
"""
from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from pybroker.cluster import zk_data as zd
from pybroker.cluster.client_quotas import QuotaEntity, desanitize, parse_config_strings
from pybroker.cluster.metadata import CHANGE_TIMEOUT_S, BrokerInfo, DeltaListener, \
    MetadataImage, PartitionState, TopicInfo, diff_images
from pybroker.cluster.topic_names import is_internal

__all__ = ["ZkCache", "build_image", "NO_STATE_EPOCH", "CHANGE_TIMEOUT_S"]

log = logging.getLogger(__name__)

# A partition whose state znode the controller has not written yet.
NO_STATE_EPOCH = -1

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
    group_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    # /feature's data and version (None: no znode yet).
    feature: tuple[bytes, int] | None = None


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
                                   epoch=reg.epoch, shutting_down=reg.shutting_down,
                                   offline_replicas=reg.offline_replicas)
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
                state, version = cached
                parts.append(PartitionState(index, state.leader, state.leader_epoch, replicas,
                                            state.isr, *moving, state.leader_recovery_state,
                                            version))
        topic_id = assignment.topic_id or uuid.uuid5(uuid.NAMESPACE_URL, name)
        topics[name] = TopicInfo(name, topic_id, tuple(parts), dict(cache.configs.get(name, {})),
                                 is_internal(name))
    return MetadataImage(cluster_id, cache.controller, brokers, topics,
                         {e: dict(v) for e, v in cache.quotas.items() if v},
                         {u: dict(m) for u, m in cache.scram.items() if m},
                         {e: dict(c) for e, c in cache.broker_configs.items() if c},
                         {g: dict(c) for g, c in cache.group_configs.items() if c})


class ZkCache:
    """The cache, its watches and the image built from it; see `ZkMetadataStore` for the
    state."""

    zk: Any
    node_id: int
    cluster_id: str
    image: MetadataImage
    listeners: list[DeltaListener]
    changes: int
    session_valid: bool
    _cache: _Cache
    _dirty: set[tuple[Any, ...]]
    _dirty_lock: threading.Lock
    _refresh_lock: threading.Lock
    _token: trio.lowlevel.TrioToken | None
    _wakeup: trio.Event
    _image_changed: trio.Event
    _listeners_ran: trio.Event
    _registered: bool
    _session_lost: bool
    register: Callable[[], None]  # ZkSession's

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
        """Read every watched znode into a new cache, which replaces the old one only once
        complete: the event loop reads the cache meanwhile (an image published then, built
        from a half-read cache, lacked topics, which listeners took for deleted)."""
        cache = _Cache()
        for key in (("brokers",), ("topics",), ("controller",), ("deletes",), ("quotas",),
                    ("broker_configs",), ("group_configs",), ("feature",)):
            self._read(key, cache)
        self._cache = cache

    def _read(self, key: tuple[Any, ...], cache: _Cache | None = None,
              states_read: set[tuple[Any, ...]] | None = None) -> None:
        """Re-read `key` into `cache` (the current one by default). The state keys read
        go into `states_read`, if given: a refresh reads each znode once."""
        cache = self._cache if cache is None else cache
        kind = key[0]
        if kind == "brokers":
            ids = {int(c) for c in self._children(zd.BROKER_IDS) if c.isdigit()}
            for gone in set(cache.brokers) - ids:
                del cache.brokers[gone]
            for node in ids:
                self._read(("broker", node), cache)
        elif kind == "broker":
            got = self._get(zd.broker_path(key[1]))
            if got is None:
                cache.brokers.pop(key[1], None)
            else:
                cache.brokers[key[1]] = zd.decode_broker(key[1], got[0], got[1].czxid)
        elif kind == "topics":
            names = set(self._children(zd.TOPICS))
            for gone_topic in set(cache.assignments) - names:
                self._forget_topic(gone_topic, cache)
            for name in names - set(cache.assignments):
                self._read(("topic", name), cache)
                self._read(("config", name), cache)
        elif kind == "topic":
            name = key[1]
            got = self._get(zd.topic_path(name))
            if got is None:
                self._forget_topic(name, cache)
                return
            assignment = zd.decode_topic(got[0])
            old = cache.assignments.get(name)
            if old is not None and old.topic_id != assignment.topic_id:
                # Deleted and created again between two reads.
                self._forget_topic(name, cache)
            cache.assignments[name] = assignment
            cache.topic_versions[name] = got[1].version
            for index in assignment.partitions:
                if (name, index) not in cache.states:
                    self._read(("state", name, index), cache, states_read)
        elif kind == "state":
            name, index = key[1], key[2]
            if states_read is not None:
                states_read.add(key)
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
            # again when any changes, each with a watch. Read into a dict of its own and put
            # in place whole: the event loop builds images from the cache while a worker
            # thread reads, and a dict emptied first and filled as read gave it none (an
            # alter then edited nothing and wrote its one key over the others).
            broker_configs: dict[str, dict[str, str]] = {}
            for entity in self._children(zd.CONFIG_BROKERS):
                got = self._get(f"{zd.CONFIG_BROKERS}/{entity}")
                if got is not None:
                    broker_configs[entity] = zd.decode_config(got[0])
            cache.broker_configs = broker_configs
        elif kind == "group_configs":
            # /config/groups/<group>: read again, all, when any changes (a watch on each);
            # put in place whole, as the broker configs above.
            group_configs: dict[str, dict[str, str]] = {}
            for name in self._children(zd.CONFIG_GROUPS):
                got = self._get(f"{zd.CONFIG_GROUPS}/{name}")
                if got is not None:
                    group_configs[desanitize(name)] = zd.decode_config(got[0])
            cache.group_configs = group_configs
        elif kind == "feature":
            got = self._get(zd.FEATURE)
            cache.feature = None if got is None else (got[0], got[1].version)

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

    def _forget_topic(self, name: str, cache: _Cache) -> None:
        assignment = cache.assignments.pop(name, None)
        cache.topic_versions.pop(name, None)
        cache.configs.pop(name, None)
        if assignment is not None:
            for index in assignment.partitions:
                cache.states.pop((name, index), None)

    def _refresh(self, keys: set[tuple[Any, ...]]) -> None:
        """Re-read the dirty znodes (worker thread). After a lost session: register again and
        re-read everything, since every watch went with the old session.

        One refresh at a time (`run`'s and `refresh_now`'s run in worker threads of their
        own): ZooKeeper answers one session's reads in order, but two threads store what they
        read in whatever order they are scheduled, so an older read stored after a newer one
        set the cache back, with no watch left to fire until the znode changed again."""
        with self._refresh_lock:
            self._refresh_locked(keys)

    def _refresh_locked(self, keys: set[tuple[Any, ...]]) -> None:
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
        # A topic read reads the states it has none of yet (a new partition's): those are
        # not read a second time for their own key (a controller's read-back of a new
        # topic's states would read each twice).
        states_read: set[tuple[Any, ...]] = set()
        for key in sorted(keys, key=_read_order):
            if key not in states_read:
                self._read(key, None, states_read)

    @property
    def deleting(self) -> frozenset[str]:
        """Topics marked for deletion in /admin/delete_topics (for the controller)."""
        return self._cache.deleting

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
        self._listeners_ran.set()
        self._listeners_ran = trio.Event()

    async def refresh_now(self, *keys: tuple[Any, ...]) -> None:
        """Re-read `keys` and publish at once (after a write of this broker's, rather than
        waiting for its watch)."""
        await trio.to_thread.run_sync(self._refresh, set(keys))
        await self._publish_cache()

    async def wait_listeners(self) -> None:
        """Wait until the listeners of a change (the next whose listeners finish) have run.
        What a listener does with a change has no event of its own (a coordinator's load of a
        partition this broker now leads, pybroker.node.readiness waits for it): it is done,
        or will not be done by this change, when this returns."""
        await self._listeners_ran.wait()

    async def wait_for(self, done: Any, timeout_s: float = CHANGE_TIMEOUT_S) -> bool:
        """Wait until `done(image)` holds; False on timeout."""
        with trio.move_on_after(timeout_s):
            while not done(self.image):
                await self._image_changed.wait()
            return True
        return False


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
    if parts[:2] == ["config", "groups"]:
        return ("group_configs",)
    if parts == ["feature"]:
        return ("feature",)
    if parts == ["controller"]:
        return ("controller",)
    if parts == ["admin", "delete_topics"]:
        return ("deletes",)
    return None


_ORDER = {"brokers": 0, "broker": 1, "topics": 2, "topic": 3, "config": 4, "state": 5,
          "controller": 6, "deletes": 7, "quotas": 8, "broker_configs": 8,
          "group_configs": 8, "feature": 8,
          "session": -1}


def _read_order(key: tuple[Any, ...]) -> tuple[int, str]:
    """Topics before their partitions' states: a state is kept only for a known topic."""
    return _ORDER.get(key[0], 9), repr(key[1:])
