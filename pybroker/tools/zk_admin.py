"""What the tools' old `--zookeeper` flags do: read and write Kafka's znodes directly, as
Kafka 2.8's `AdminZkClient` and `KafkaZkClient` did for `kafka-topics --zookeeper`.

Why a tool may write ZooKeeper at all: the controller follows `/brokers/topics` and
`/admin/delete_topics` by its watches, so a topic written here is created (leaders elected,
logs made) and a topic marked here is deleted exactly as if CreateTopics or DeleteTopics had
asked. The paths and the JSON are `pybroker.cluster.zk_data`'s (Kafka's own), so this module
adds only the blocking kazoo calls around them; it never imports the broker's ZooKeeper store,
which keeps watches and sessions a short-lived tool has no use for.

Every function here blocks: the tools are short command-line programs and call them in a
worker thread (or before starting trio). A connect string may carry a chroot
(`localhost:2181/pybroker`), which kazoo applies to every path, as Kafka's client does.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from pybroker.cluster import zk_data as zd
from pybroker.tools.common import ToolError

CONNECT_TIMEOUT_S = 30.0  # Kafka's tools: zookeeper.connection.timeout.ms 30000


class TopicExists(ToolError):
    """Kafka's TopicExistsException: "Topic 'T' already exists."."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"Topic '{topic}' already exists.")


@contextmanager
def open_zk(connect: str, timeout: float = CONNECT_TIMEOUT_S) -> Iterator[Any]:
    """A started KazooClient on `connect` (host:port[,host:port...][/chroot]), stopped on
    exit. Fails as Kafka's ZooKeeperClient does when no server answers in time."""
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    zk = KazooClient(hosts=connect, timeout=min(timeout, 10.0))
    try:
        zk.start(timeout=timeout)
    except KazooTimeoutError:
        zk.close()
        raise ToolError("Timed out waiting for connection while in state: CONNECTING") from None
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


def _children(zk: Any, path: str) -> list[str]:
    from kazoo.exceptions import NoNodeError

    try:
        return list(zk.get_children(path))
    except NoNodeError:
        return []


def _get(zk: Any, path: str) -> tuple[bytes, Any] | None:
    from kazoo.exceptions import NoNodeError

    try:
        return zk.get(path)
    except NoNodeError:
        return None


def brokers(zk: Any) -> dict[int, zd.BrokerRegistration]:
    """The registered (live) brokers by id, from /brokers/ids (Kafka's getAllBrokersInCluster)."""
    found: dict[int, zd.BrokerRegistration] = {}
    for child in _children(zk, zd.BROKER_IDS):
        got = _get(zk, zd.broker_path(int(child)))
        if got is not None:
            found[int(child)] = zd.decode_broker(int(child), got[0], got[1].czxid)
    return dict(sorted(found.items()))


def bootstrap_servers(zk: Any, listener: str = "PLAINTEXT") -> str:
    """host:port of every registered broker's `listener` (its first one when it has no such
    listener), comma-separated: what a client needs in place of a ZooKeeper address."""
    addresses = []
    for info in brokers(zk).values():
        endpoint = info.endpoints.get(listener) or next(iter(info.endpoints.values()), None)
        if endpoint is not None:
            host, port = endpoint
            addresses.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    return ",".join(addresses)


def chroots_with_brokers(zk: Any, connect: str) -> list[str]:
    """The chroots one level under the root whose /brokers/ids has registrations, when
    `connect` names none and the root has none itself: where the brokers are that a
    `--zookeeper host:port` found missing (a cluster configured with
    zookeeper.connect=host:port/chroot). Empty otherwise."""
    if "/" in connect or _children(zk, zd.BROKER_IDS):
        return []
    return [f"/{child}" for child in sorted(_children(zk, "/"))
            if child != "zookeeper" and _children(zk, f"/{child}{zd.BROKER_IDS}")]


def chroot_hint(zk: Any, connect: str) -> str:
    """The sentence to add to an answer that found no brokers at `connect`, naming the
    connect string to give instead; "" when there is nothing better to suggest."""
    found = chroots_with_brokers(zk, connect)
    if not found:
        return ""
    return (f" (no brokers are registered at the root of {connect}; brokers are registered "
            f"under the chroot {' and '.join(found)}: use --zookeeper "
            f"{' or '.join(connect + c for c in found)})")


def topics(zk: Any) -> list[str]:
    """Every topic in /brokers/topics, sorted (Kafka's getAllTopicsInCluster)."""
    return sorted(_children(zk, zd.TOPICS))


def marked_for_deletion(zk: Any) -> set[str]:
    return set(_children(zk, zd.DELETE_TOPICS))


def assignment(zk: Any, topic: str) -> zd.TopicAssignment | None:
    got = _get(zk, zd.topic_path(topic))
    return None if got is None else zd.decode_topic(got[0])


def state(zk: Any, topic: str, partition: int) -> zd.LeaderAndIsr | None:
    """The partition's leader and ISR; None before the controller wrote them."""
    got = _get(zk, zd.state_path(topic, partition))
    return None if got is None or not got[0] else zd.decode_state(got[0])


def topic_config(zk: Any, topic: str) -> dict[str, str]:
    """The topic's overrides from /config/topics/T (empty when there are none)."""
    got = _get(zk, zd.config_path(topic))
    return zd.decode_config(got[0] if got else None)


def create_topic(zk: Any, topic: str, replicas: Mapping[int, Sequence[int]],
                 configs: Mapping[str, str]) -> uuid.UUID:
    """Write /config/topics/T, then /brokers/topics/T (v3, with a new topic id), as
    AdminZkClient.createTopicWithAssignment does; here both in one multi-op, so a failed
    create leaves no orphaned config. TopicExists if the topic is there already."""
    from kazoo.exceptions import NodeExistsError

    topic_id = uuid.uuid4()
    data = zd.encode_topic(zd.TopicAssignment(
        {p: tuple(r) for p, r in replicas.items()}, topic_id))
    zk.ensure_path(zd.CONFIG_TOPICS)
    zk.ensure_path(zd.TOPICS)
    txn = zk.transaction()
    if zk.exists(zd.config_path(topic)) is None:
        txn.create(zd.config_path(topic), zd.encode_config(configs))
    else:
        txn.set_data(zd.config_path(topic), zd.encode_config(configs))
    txn.create(zd.topic_path(topic), data)
    results = txn.commit()
    if any(isinstance(r, NodeExistsError) for r in results):
        raise TopicExists(topic)
    failure = next((r for r in results if isinstance(r, Exception)), None)
    if failure is not None:
        raise ToolError(f"Error while creating topic {topic}: {failure!r}")
    return topic_id


def mark_for_deletion(zk: Any, topic: str) -> bool:
    """Create /admin/delete_topics/T for the controller to act on; False if it was marked
    already (Kafka's createDeleteTopicPath)."""
    from kazoo.exceptions import NodeExistsError

    try:
        zk.create(zd.delete_path(topic), b"", makepath=True)
    except NodeExistsError:
        return False
    return True


def add_partitions(zk: Any, topic: str, added: Mapping[int, Sequence[int]]) -> None:
    """Write the topic's assignment with `added` partitions appended (Kafka's
    AdminZkClient.addPartitions): the controller, watching /brokers/topics/T, elects their
    leaders and every replica creates its log. Conditional on the version read, so two
    tools adding at once cannot both win."""
    got = _get(zk, zd.topic_path(topic))
    if got is None:
        raise ToolError(f"The topic {topic} does not exist")
    current = zd.decode_topic(got[0])
    partitions = dict(current.partitions)
    partitions.update({p: tuple(r) for p, r in added.items()})
    from kazoo.exceptions import BadVersionError

    try:
        zk.set(zd.topic_path(topic), zd.encode_topic(replace(current, partitions=partitions)),
               got[1].version)
    except BadVersionError:
        raise ToolError(f"The assignment of topic {topic} changed while adding partitions; "
                        "nothing was added: run the command again") from None


def set_topic_config(zk: Any, topic: str, configs: Mapping[str, str]) -> None:
    """Replace the topic's overrides in /config/topics/T and announce the change under
    /config/changes, as Kafka's AdminZkClient.changeTopicConfig does; every broker applies
    it."""
    zk.ensure_path(zd.CONFIG_TOPICS)
    if zk.exists(zd.config_path(topic)) is None:
        zk.create(zd.config_path(topic), zd.encode_config(configs))
    else:
        zk.set(zd.config_path(topic), zd.encode_config(configs))
    zk.create(f"{zd.CONFIG_CHANGES}/config_change_",
              zd.encode_config_change(f"topics/{topic}"), sequence=True, makepath=True)
