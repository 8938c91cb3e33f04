"""The metadata image handlers read, and the local store that keeps it on one broker.

Theory of operation. A `MetadataImage` is immutable: brokers, topics with their configs, and
each partition's replicas, leader, leader epoch and ISR. A request reads the one image it
started with (its context holds it) from start to end. Every change goes through the store,
which builds the next image, persists it, publishes it, and then hands the `MetadataDelta`
(what changed) to its listeners in order: the replica manager creates and deletes this
broker's logs and takes up or gives up leaderships from it (Kafka's applyDelta), the group
coordinator forgets a deleted topic's offsets. Admin handlers never touch logs themselves:
one broker is a cluster of one on the same path a ZooKeeper-backed store will take.

On one broker the image is saved to a JSON file in the first log dir
(`pybroker-metadata.json`, written atomically in a worker thread before it is published).
`meta.properties` holds the cluster id and node id, in Kafka's format.

The value types (`MetadataImage`, `TopicInfo`, `PartitionState`, `BrokerInfo`,
`MetadataDelta`) live in `cluster/image.py`, free of trio, so the controller's pure decisions
can use them; they are re-exported here.
"""
from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import trio

from protocol.topic_id import format_topic_id
from pybroker.cluster.client_quotas import QuotaEntity
from pybroker.cluster.image import (  # re-exported: the store's users import them from here
    BrokerInfo, MetadataDelta, MetadataImage, PartitionState, TopicInfo, diff_images,
)
from pybroker.config.definitions import ConfigError
from pybroker.storage.files import write_atomically

METADATA_FILE = "pybroker-metadata.json"
# How long an admin change waits, by default, for its effect to reach this broker's image.
CHANGE_TIMEOUT_S = 30.0
META_PROPERTIES = "meta.properties"

__all__ = [
    "BrokerInfo", "CHANGE_TIMEOUT_S", "DeltaListener", "InconsistentClusterIdError",
    "LocalMetadataStore",
    "MetadataStore", "diff_images",
    "MetadataDelta", "MetadataImage", "PartitionState", "TopicInfo", "TopicsChange",
    "StoredMetadata", "new_cluster_id", "read_meta_properties", "read_metadata_file",
    "resolve_cluster_id",
]


DeltaListener = Callable[[MetadataImage, MetadataDelta], Awaitable[None]]


class MetadataStore(Protocol):
    """What the broker's parts ask of a metadata store: the local one (one broker) or the
    ZooKeeper one (a cluster)."""

    node_id: int
    image: MetadataImage
    changes: int
    listeners: list[DeltaListener]
    # False while this broker must not lead (its ZooKeeper session is lost).
    session_valid: bool

    def set_endpoints(self, endpoints: Mapping[str, tuple[str, int]]) -> None: ...

    # `wait_s`: how long the change waits for this broker's image to have a leader for every
    # partition it makes (0: not at all; `wait_for` waits then).
    async def create_topic(self, name: str, num_partitions: int, configs: Mapping[str, str],
                           internal: bool = False,
                           assignments: list[list[int]] | None = None, *,
                           wait_s: float = CHANGE_TIMEOUT_S) -> TopicInfo: ...

    # `wait_s`: how long the deletion waits for this broker's image to be without the topic
    # (0: not at all; `wait_for` waits then).
    async def delete_topic(self, name: str, *, wait_s: float = CHANGE_TIMEOUT_S
                           ) -> TopicInfo: ...

    async def add_partitions(self, name: str, total: int,
                             assignments: list[list[int]] | None = None, *,
                             wait_s: float = CHANGE_TIMEOUT_S) -> None: ...

    async def wait_for(self, done: Callable[[MetadataImage], bool], timeout_s: float) -> bool:
        """Wait until `done(image)` holds for this broker's image; False on timeout."""
        ...

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None: ...

    async def set_client_quotas(self, changes: Mapping[QuotaEntity, Mapping[str, float]]
                                ) -> None: ...

    async def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None: ...

    async def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None: ...


# What a change of the store makes of the current topics: the next topics and the delta.
TopicsChange = tuple[dict[str, TopicInfo], MetadataDelta]


def new_cluster_id() -> str:
    """A random 16-byte id in Kafka's URL-safe base64 form (22 characters)."""
    return format_topic_id(uuid.uuid4())


def read_meta_properties(log_dir: Path) -> dict[str, str]:
    path = log_dir / META_PROPERTIES
    props: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, _, value = line.partition("=")
                props[key.strip()] = value.strip()
    return props


class InconsistentClusterIdError(ConfigError):
    """The configured cluster.id is not the one the data belongs to (Kafka's
    InconsistentClusterIdException): starting would mix two clusters' data."""


def resolve_cluster_id(stored: str | None, configured: str | None) -> str:
    """The cluster id: meta.properties' if it has one, else `cluster.id`, else a new one.

    A configured id that differs from the stored one is refused, as Kafka refuses a broker
    whose ZooKeeper cluster id does not match its meta.properties.
    """
    if stored and configured and stored != configured:
        raise InconsistentClusterIdError("cluster.id", configured, "", message=(
            f"The Cluster ID {configured} doesn't match stored clusterId {stored} in "
            "meta.properties. The broker is trying to join the wrong cluster. Configured "
            "cluster.id may be wrong."))
    return stored or configured or new_cluster_id()


@dataclass(frozen=True)
class StoredMetadata:
    """What a single broker's `pybroker-metadata.json` holds."""

    topics: dict[str, TopicInfo] = field(default_factory=dict)
    client_quotas: dict[QuotaEntity, dict[str, float]] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    group_configs: dict[str, dict[str, str]] = field(default_factory=dict)


def read_metadata_file(path: Path) -> StoredMetadata:
    """The file `LocalMetadataStore` keeps (nothing when it does not exist). Shared with the
    node's import of it (pybroker/node/metadata_import.py), so both read it alike. A file
    that is not what `_save` writes raises ValueError, KeyError or TypeError."""
    if not path.exists():
        return StoredMetadata()
    data = json.loads(path.read_text())
    topics = {t["name"]: TopicInfo(
        t["name"], uuid.UUID(t["topic_id"]),
        tuple(PartitionState(p["partition"], p["leader"], p["leader_epoch"],
                             tuple(p["replicas"]), tuple(p["isr"]))
              for p in t["partitions"]),
        dict(t["configs"]), t.get("internal", False)) for t in data["topics"]}
    quotas = {QuotaEntity.from_zk_path(q["entity"]): dict(q["values"])
              for q in data.get("client_quotas", [])}
    broker_configs, group_configs = (
        {entity: dict(configs) for entity, configs in data.get(kind, {}).items()}
        for kind in ("broker_configs", "group_configs"))
    return StoredMetadata(topics, quotas, broker_configs, group_configs)


class LocalMetadataStore:
    """One broker's metadata, persisted in its first log dir."""

    def __init__(self, log_dir: Path, node_id: int, host: str, port: int,
                 rack: str | None = None, cluster_id: str | None = None) -> None:
        self.log_dir = log_dir
        self.node_id = node_id
        self.rack = rack
        log_dir.mkdir(parents=True, exist_ok=True)
        props = read_meta_properties(log_dir)
        cluster_id = resolve_cluster_id(props.get("cluster.id"), cluster_id)
        stored_node = props.get("node.id")
        if stored_node is not None and int(stored_node) != node_id:
            raise ConfigError("node.id", node_id, "", message=(
                f"{log_dir / META_PROPERTIES} belongs to node {stored_node}, "
                f"but node.id is {node_id}"))
        if not props:
            write_atomically(log_dir / META_PROPERTIES,
                             f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n")
        # One broker is its own controller.
        stored = read_metadata_file(log_dir / METADATA_FILE)
        self.image = MetadataImage(cluster_id, node_id,
                                   {node_id: BrokerInfo(node_id, host, port, rack)},
                                   stored.topics, stored.client_quotas,
                                   broker_configs=stored.broker_configs,
                                   group_configs=stored.group_configs)
        # Bumped by every change, so what is derived from the image (the Metadata handler's
        # encoded topic entries) knows when to be rebuilt.
        self.changes = 0
        self.listeners: list[DeltaListener] = []
        self.session_valid = True  # one broker never loses the right to lead
        self._writing = trio.Lock()
        self._image_changed = trio.Event()

    def _save(self, image: MetadataImage) -> None:
        data = {"version": 1, "broker_configs": {
            entity: dict(configs) for entity, configs in sorted(image.broker_configs.items())},
            "group_configs": {group: dict(configs) for group, configs
                              in sorted(image.group_configs.items())},
            "client_quotas": [
            {"entity": entity.zk_path(), "values": dict(values)}
            for entity, values in sorted(image.client_quotas.items(),
                                         key=lambda item: item[0].zk_path())], "topics": [
            {"name": t.name, "topic_id": str(t.topic_id), "internal": t.internal,
             "configs": dict(t.configs),
             "partitions": [{"partition": p.partition, "leader": p.leader,
                             "leader_epoch": p.leader_epoch, "replicas": list(p.replicas),
                             "isr": list(p.isr)} for p in t.partitions]}
            for t in image.topics.values()]}
        write_atomically(self.log_dir / METADATA_FILE, json.dumps(data, indent=1))

    def set_endpoints(self, endpoints: Mapping[str, tuple[str, int]]) -> None:
        """The advertised endpoint of each listener, once they are bound (not persisted);
        the first is the broker's default."""
        node = self.node_id
        host, port = next(iter(endpoints.values()))
        brokers = {**self.image.brokers,
                   node: BrokerInfo(node, host, port, self.rack, dict(endpoints))}
        self.image = replace(self.image, brokers=brokers)
        self.changes += 1

    async def _publish(self, change: Callable[[Mapping[str, TopicInfo]], TopicsChange]
                       ) -> MetadataDelta:
        """Apply `change` to the current topics, persist the next image (fsync in a worker
        thread), make it current, then let the listeners apply the delta. Changes are
        serialised here, so none is lost; listeners run after the lock is released, so one
        may write to the store in turn (the group coordinator creating its topic)."""
        async with self._writing:
            topics, delta = change(self.image.topics)
            image = replace(self.image, topics=topics)
            await trio.to_thread.run_sync(self._save, image)
            self.image = image
            self.changes += 1
            self._image_changed.set()
            self._image_changed = trio.Event()
        for listener in self.listeners:
            await listener(image, delta)
        return delta

    # -- changes (each saved before it is visible to clients) ---------------------------------
    async def wait_for(self, done: Callable[[MetadataImage], bool], timeout_s: float) -> bool:
        """Wait until `done(image)` holds; False on timeout. A change here is complete when
        it returns, so this waits only for another caller's change."""
        with trio.move_on_after(timeout_s):
            while not done(self.image):
                await self._image_changed.wait()
            return True
        return False

    async def create_topic(self, name: str, num_partitions: int, configs: Mapping[str, str],
                           internal: bool = False,
                           assignments: list[list[int]] | None = None, *,
                           wait_s: float = CHANGE_TIMEOUT_S) -> TopicInfo:
        """Record a new topic (led when this returns, whatever `wait_s`). `assignments`
        gives each partition's replicas (the first is the leader and all start in sync);
        without it every partition is on this broker. KeyError if it exists (the caller
        checks first)."""
        node = self.node_id
        replicas = assignments or [[node]] * num_partitions
        info = TopicInfo(name, uuid.uuid4(),
                         tuple(PartitionState(i, r[0], 0, tuple(r), tuple(r))
                               for i, r in enumerate(replicas)),
                         dict(configs), internal)

        def change(topics: Mapping[str, TopicInfo]) -> TopicsChange:
            if name in topics:
                raise KeyError(name)
            return {**topics, name: info}, MetadataDelta(
                created_topics=frozenset({name}),
                changed_partitions={name: frozenset(range(len(info.partitions)))})
        await self._publish(change)
        return info

    async def delete_topic(self, name: str, *, wait_s: float = CHANGE_TIMEOUT_S
                           ) -> TopicInfo:
        """Remove a topic (gone when this returns, whatever `wait_s`). KeyError if there is
        no such topic."""
        def change(topics: Mapping[str, TopicInfo]) -> TopicsChange:
            rest = dict(topics)
            info = rest.pop(name)
            return rest, MetadataDelta(deleted_topics={name: info})
        delta = await self._publish(change)
        return delta.deleted_topics[name]

    async def add_partitions(self, name: str, total: int,
                             assignments: list[list[int]] | None = None, *,
                             wait_s: float = CHANGE_TIMEOUT_S) -> None:
        """Grow a topic (led when this returns, whatever `wait_s`)."""
        node = self.node_id

        def change(topics: Mapping[str, TopicInfo]) -> TopicsChange:
            info = topics[name]
            first = len(info.partitions)
            replicas = assignments or [[node]] * (total - first)
            added = tuple(PartitionState(first + i, r[0], 0, tuple(r), tuple(r))
                          for i, r in enumerate(replicas))
            return ({**topics, name: replace(info, partitions=info.partitions + added)},
                    MetadataDelta(changed_partitions={
                        name: frozenset(p.partition for p in added)}))
        await self._publish(change)

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        def change(topics: Mapping[str, TopicInfo]) -> TopicsChange:
            return ({**topics, name: replace(topics[name], configs=dict(configs))},
                    MetadataDelta(changed_configs=frozenset({name})))
        await self._publish(change)

    async def set_client_quotas(self, changes: Mapping[QuotaEntity, Mapping[str, float]]
                                ) -> None:
        """Replace each entity's quota values (none left: the entity goes), persisted with
        the image before anyone sees them. Nothing follows quotas through deltas: the quota
        managers read the current image."""
        async with self._writing:
            quotas = dict(self.image.client_quotas)
            for entity, values in changes.items():
                if values:
                    quotas[entity] = dict(values)
                else:
                    quotas.pop(entity, None)
            image = replace(self.image, client_quotas=quotas)
            await trio.to_thread.run_sync(self._save, image)
            self.image = image
            self.changes += 1

    async def _set_entity(self, kind: str, name: str, configs: Mapping[str, str]
                          ) -> MetadataImage:
        """Replace the configs of one entity of `kind` (broker_configs, group_configs; none
        left: the entity goes), persisted with the image before anyone sees them."""
        async with self._writing:
            entities = {n: dict(values) for n, values in getattr(self.image, kind).items()}
            if configs:
                entities[name] = dict(configs)
            else:
                entities.pop(name, None)
            image = (replace(self.image, broker_configs=entities) if kind == "broker_configs"
                     else replace(self.image, group_configs=entities))
            await trio.to_thread.run_sync(self._save, image)
            self.image = image
            self.changes += 1
        return image

    async def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        """One entity's dynamic broker configs ("<default>" or a broker id); then the
        listeners run, so the broker applies them (pybroker/cluster/dynamic_broker_config.py)."""
        image = await self._set_entity("broker_configs", entity, configs)
        for listener in self.listeners:
            await listener(image, MetadataDelta())

    async def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        """One group's configs; the coordinators read them from the image when they use
        them, so no listener runs."""
        await self._set_entity("group_configs", group_id, configs)

    async def alter_partition(self, topic: str, partition: int, *,
                              leader: int | None = None, leader_epoch: int | None = None,
                              isr: tuple[int, ...] | None = None) -> None:
        """A partition's new leader, leader epoch or ISR (an election, an ISR change)."""
        def change(topics: Mapping[str, TopicInfo]) -> TopicsChange:
            info = topics[topic]
            old = info.partitions[partition]
            new = replace(old, leader=old.leader if leader is None else leader,
                          leader_epoch=old.leader_epoch if leader_epoch is None
                          else leader_epoch,
                          isr=old.isr if isr is None else tuple(isr))
            parts = info.partitions[:partition] + (new,) + info.partitions[partition + 1:]
            return ({**topics, topic: replace(info, partitions=parts)},
                    MetadataDelta(changed_partitions={topic: frozenset({partition})}))
        await self._publish(change)
