"""Kafka's ZooKeeper layout: the znode paths and the JSON in them (Kafka's ZkData).

Pure: bytes in, objects out. The paths and payloads are Kafka's own (3.9, the last
ZooKeeper-mode release), so old tools that write ZooKeeper directly (`kafka-topics
--zookeeper`) and people reading it with `zookeeper-shell` find what they expect. Brokers add
one key of their own to their registration, `"impl":"pybroker"`, so that nothing mistakes a
pybroker cluster for a Kafka one (they do not speak the controller RPCs).
"""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from protocol.topic_id import format_topic_id, parse_topic_id
from pybroker.cluster.image import RECOVERED

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
CONFIG_CLIENTS = "/config/clients"
CONFIG_USERS = "/config/users"
CONFIG_BROKERS = "/config/brokers"
# pybroker's own: groups' configs (the GROUP config resource), one znode per group named by
# its id sanitized as Kafka names user and client entities; Kafka keeps them in KRaft only.
CONFIG_GROUPS = "/config/groups"
# Kafka's FeatureZNode: the cluster's finalized feature levels (KIP-584).
FEATURE = "/feature"
DELETE_TOPICS = "/admin/delete_topics"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
ISR_CHANGES = "/isr_change_notification"
LOG_DIR_EVENTS = "/log_dir_event_notification"
# Kafka's LogDirEventNotificationSequenceZNode: the prefix of each sequential znode, and its
# one event, LogDirFailure.
LOG_DIR_EVENT_PREFIX = f"{LOG_DIR_EVENTS}/log_dir_event_"
LOG_DIR_FAILURE = 1
# Created at start when missing, as Kafka's KafkaZkClient.createTopLevelPaths does.
PERSISTENT_PATHS = (BROKER_IDS, TOPICS, CONFIG_TOPICS, CONFIG_CHANGES, DELETE_TOPICS,
                    ISR_CHANGES, LOG_DIR_EVENTS, CONFIG_BROKERS, CONFIG_USERS, CONFIG_CLIENTS)


def broker_path(node_id: int) -> str:
    return f"{BROKER_IDS}/{node_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def delete_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def _json(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


def _load(raw: bytes) -> Any:
    return json.loads(raw.decode()) if raw else None


# -- /brokers/ids/N ----------------------------------------------------------------------------
@dataclass(frozen=True)
class BrokerRegistration:
    node_id: int
    endpoints: Mapping[str, tuple[str, int]]  # listener name -> (host, port)
    rack: str | None = None
    shutting_down: bool = False
    # The znode's czxid: a new number every time the broker registers (Kafka's broker epoch).
    epoch: int = -1
    # Its replicas in failed log dirs (KIP-112), which Kafka's controller learns from the
    # broker's LeaderAndIsr answers and pybroker, without those RPCs, reads here.
    offline_replicas: frozenset[tuple[str, int]] = frozenset()


def encode_broker(node_id: int, endpoints: Mapping[str, tuple[str, int]],
                  protocols: Mapping[str, str], rack: str | None = None,
                  shutting_down: bool = False,
                  offline_replicas: Iterable[tuple[str, int]] = ()) -> bytes:
    """Version 5 of Kafka's broker registration, plus the implementation marker and two keys
    of pybroker's own when they apply: `shutting_down` (R6) and `offline_replicas`, the
    replicas in failed log dirs as `[{"topic": T, "partition": P}]`."""
    host, port = next(iter(endpoints.values()))
    data: dict[str, Any] = {
        "version": 5, "host": host, "port": port, "jmx_port": -1,
        "timestamp": str(int(time.time() * 1000)),
        "endpoints": [f"{name}://{h}:{p}" for name, (h, p) in endpoints.items()],
        "listener_security_protocol_map": {name: protocols.get(name, name)
                                           for name in endpoints},
        "features": {}, "impl": "pybroker"}
    if rack is not None:
        data["rack"] = rack
    if shutting_down:
        data["shutting_down"] = True
    offline = sorted(offline_replicas)
    if offline:
        data["offline_replicas"] = [{"topic": t, "partition": p} for t, p in offline]
    return _json(data)


def decode_broker(node_id: int, raw: bytes, czxid: int = -1) -> BrokerRegistration:
    data = _load(raw) or {}
    endpoints: dict[str, tuple[str, int]] = {}
    for url in data.get("endpoints", []):
        name, _, address = url.partition("://")
        host, _, port = address.rpartition(":")
        endpoints[name] = (host.strip("[]"), int(port))
    if not endpoints and "host" in data:
        endpoints["PLAINTEXT"] = (data["host"], int(data["port"]))
    offline = frozenset((str(r["topic"]), int(r["partition"]))
                        for r in data.get("offline_replicas", []))
    return BrokerRegistration(node_id, endpoints, data.get("rack"),
                              bool(data.get("shutting_down", False)), czxid, offline)


def encode_log_dir_event(broker: int) -> bytes:
    """A `/log_dir_event_notification/log_dir_event_<seq>` znode, as Kafka's broker writes it
    when a log dir fails."""
    return _json({"version": 1, "broker": broker, "event": LOG_DIR_FAILURE})


def decode_log_dir_event(raw: bytes) -> int | None:
    """The broker a log dir event names; None for an unreadable one."""
    try:
        return int(_load(raw)["broker"])
    except (ValueError, TypeError, KeyError):
        return None


# -- /brokers/topics/T -------------------------------------------------------------------------
@dataclass(frozen=True)
class TopicAssignment:
    partitions: Mapping[int, tuple[int, ...]]
    topic_id: uuid.UUID | None = None
    adding: Mapping[int, tuple[int, ...]] | None = None
    removing: Mapping[int, tuple[int, ...]] | None = None


def encode_topic(assignment: TopicAssignment) -> bytes:
    data: dict[str, Any] = {
        "version": 3,
        "partitions": {str(p): list(r) for p, r in sorted(assignment.partitions.items())},
        "adding_replicas": {str(p): list(r) for p, r in (assignment.adding or {}).items()},
        "removing_replicas": {str(p): list(r) for p, r in (assignment.removing or {}).items()},
    }
    if assignment.topic_id is not None:
        data["topic_id"] = format_topic_id(assignment.topic_id)
    return _json(data)


def decode_topic(raw: bytes) -> TopicAssignment:
    data = _load(raw) or {}
    topic_id = data.get("topic_id")
    return TopicAssignment(
        {int(p): tuple(r) for p, r in data.get("partitions", {}).items()},
        parse_topic_id(topic_id) if topic_id else None,
        {int(p): tuple(r) for p, r in data.get("adding_replicas", {}).items()},
        {int(p): tuple(r) for p, r in data.get("removing_replicas", {}).items()})


# -- /brokers/topics/T/partitions/P/state -----------------------------------------------------

@dataclass(frozen=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = RECOVERED


def encode_state(state: LeaderAndIsr) -> bytes:
    """As Kafka's TopicPartitionStateZNode: `leader_recovery_state` only when it is not
    RECOVERED, so every other state reads as before 3.2."""
    data = {"version": 1, "leader": state.leader, "leader_epoch": state.leader_epoch,
            "isr": list(state.isr), "controller_epoch": state.controller_epoch}
    if state.leader_recovery_state != RECOVERED:
        data["leader_recovery_state"] = state.leader_recovery_state
    return _json(data)


def decode_state(raw: bytes) -> LeaderAndIsr:
    data = _load(raw)
    return LeaderAndIsr(int(data["leader"]), int(data["leader_epoch"]),
                        tuple(int(r) for r in data["isr"]), int(data["controller_epoch"]),
                        int(data.get("leader_recovery_state", RECOVERED)))


# -- /controller, /config/topics/T, /latest_producer_id_block, /cluster/id ---------------------
def encode_controller(node_id: int) -> bytes:
    return _json({"version": 1, "brokerid": node_id, "timestamp": str(int(time.time() * 1000))})


def decode_controller(raw: bytes | None) -> int:
    data = _load(raw) if raw else None
    return int(data["brokerid"]) if data else -1


def encode_config(configs: Mapping[str, str]) -> bytes:
    return _json({"version": 1, "config": dict(configs)})


def decode_config(raw: bytes | None) -> dict[str, str]:
    data = _load(raw) if raw else None
    return {k: str(v) for k, v in (data or {}).get("config", {}).items()}


def encode_config_change(entity_path: str) -> bytes:
    return _json({"version": 2, "entity_path": entity_path})


def encode_cluster_id(cluster_id: str) -> bytes:
    return _json({"version": "1", "id": cluster_id})


def decode_cluster_id(raw: bytes) -> str:
    return str(_load(raw)["id"])


def encode_producer_id_block(node_id: int, start: int, end: int) -> bytes:
    return _json({"version": 1, "broker": node_id, "block_start": str(start),
                  "block_end": str(end)})


def decode_producer_id_block(raw: bytes | None) -> tuple[int, int] | None:
    """(start, end) of the last block handed out, or None before the first."""
    data = _load(raw) if raw else None
    if not data:
        return None
    return int(data["block_start"]), int(data["block_end"])
