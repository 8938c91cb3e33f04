"""The metadata image handlers read, and the local store that keeps it on one broker.

Handlers never assume "I am the leader of everything": they ask the image. On one broker the
image is loaded from, and saved to, a JSON file in the first log dir (`pybroker-metadata.json`,
written atomically); a ZooKeeper-backed store can later provide the same image.
`meta.properties` holds the cluster id and node id, in Kafka's format.
"""
from __future__ import annotations

import base64
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pybroker.config.definitions import ConfigError

METADATA_FILE = "pybroker-metadata.json"
META_PROPERTIES = "meta.properties"


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class PartitionState:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionState]
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclass
class MetadataImage:
    cluster_id: str
    controller_id: int
    brokers: dict[int, BrokerInfo]
    topics: dict[str, TopicInfo]

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < len(info.partitions):
            return None
        return info.partitions[partition]


def new_cluster_id() -> str:
    """A random 16-byte id in Kafka's URL-safe base64 form (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


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


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


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


class LocalMetadataStore:
    """One broker's metadata, persisted in its first log dir."""

    def __init__(self, log_dir: Path, node_id: int, host: str, port: int,
                 rack: str | None = None, cluster_id: str | None = None) -> None:
        self.log_dir = log_dir
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
        self.image = MetadataImage(cluster_id, node_id,
                                   {node_id: BrokerInfo(node_id, host, port, rack)}, {})
        # Bumped by every change, so what is derived from the image (the Metadata handler's
        # encoded topic entries) knows when to be rebuilt.
        self.changes = 0
        self._load()

    def set_endpoint(self, host: str, port: int) -> None:
        """The advertised endpoint, once the listener knows its port."""
        node = self.image.controller_id
        self.image.brokers[node] = BrokerInfo(node, host, port, self.rack)
        self.changes += 1

    def _load(self) -> None:
        path = self.log_dir / METADATA_FILE
        if not path.exists():
            return
        data = json.loads(path.read_text())
        for t in data["topics"]:
            self.image.topics[t["name"]] = TopicInfo(
                t["name"], uuid.UUID(t["topic_id"]),
                [PartitionState(**p) for p in t["partitions"]], dict(t["configs"]),
                t.get("internal", False))

    def save(self) -> None:
        self.changes += 1
        data = {"version": 1, "topics": [
            {"name": t.name, "topic_id": str(t.topic_id), "internal": t.internal,
             "configs": t.configs,
             "partitions": [vars(p) for p in t.partitions]}
            for t in self.image.topics.values()]}
        write_atomically(self.log_dir / METADATA_FILE, json.dumps(data, indent=1))

    # -- changes (each saved before it is visible to clients) ---------------------------------
    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str],
                     internal: bool = False,
                     assignments: list[list[int]] | None = None) -> TopicInfo:
        """Record a new topic. `assignments` gives each partition's replicas (the first is
        the leader and all start in sync); without it every partition is on this broker."""
        node = self.image.controller_id
        replicas = assignments or [[node]] * num_partitions
        info = TopicInfo(name, uuid.uuid4(),
                         [PartitionState(i, r[0], 0, list(r), list(r))
                          for i, r in enumerate(replicas)],
                         dict(configs), internal)
        self.image.topics[name] = info
        self.save()
        return info

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.image.topics.pop(name)
        self.save()
        return info

    def add_partitions(self, name: str, total: int) -> None:
        info = self.image.topics[name]
        node = self.image.controller_id
        for i in range(len(info.partitions), total):
            info.partitions.append(PartitionState(i, node, 0, [node], [node]))
        self.save()

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.image.topics[name].configs = dict(configs)
        self.save()
