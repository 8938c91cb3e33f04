"""Raw Kafka requests over a plain socket, for what the stock clients cannot send.

`send_request(bootstrap, api_key, version, body)` encodes one request with `protocol.codec`,
sends it, and decodes the response body. `RawConnection` keeps one socket for several
requests (e.g. to check that the broker kept a connection open after an error).
"""
from __future__ import annotations

import socket
import time
from typing import Any, Literal, overload

from construct import Container

from compat.wire import create_topic as create_topic_request
from compat.wire import find_coordinator, partition_leader, read_frame
from protocol.api_keys import ApiKey
from protocol.codec import decode_response, encode_request
from protocol.errors import ErrorCode

__all__ = ["RawConnection", "coordinator_address", "coordinator_id", "create_topic",
           "named_coordinator", "leader_address", "leader_id", "send_request"]


def _split(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.rpartition(":")
    return host, int(port)


class RawConnection:
    def __init__(self, bootstrap: str, timeout: float = 10.0,
                 client_id: str = "raw-test") -> None:
        self.sock = socket.create_connection(_split(bootstrap), timeout=timeout)
        self.correlation_id = 0
        self.client_id = client_id

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "RawConnection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def send_frame(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def read_frame(self) -> bytes:
        return read_frame(self.sock)

    @overload
    def request(self, api_key: int, version: int, body: Any, *,
                expect_response: Literal[True] = ...) -> Container: ...

    @overload
    def request(self, api_key: int, version: int, body: Any, *,
                expect_response: bool) -> Container | None: ...

    def request(self, api_key: int, version: int, body: Any, *,
                expect_response: bool = True) -> Container | None:
        self.correlation_id += 1
        cid = self.correlation_id
        self.send_frame(encode_request(api_key, version, cid, self.client_id, body))
        if not expect_response:
            return None
        got_cid, decoded = decode_response(api_key, version, self.read_frame())
        assert got_cid == cid, f"correlation id {got_cid} != {cid}"
        return decoded


def send_request(bootstrap: str, api_key: int, version: int, body: Any,
                 timeout: float = 10.0) -> Container:
    """One request on a fresh connection; the decoded response body."""
    with RawConnection(bootstrap, timeout) as conn:
        return conn.request(api_key, version, body)


def create_topic(bootstrap: str, name: str, partitions: int = 1,
                 configs: dict[str, str] | None = None, timeout: float = 30) -> None:
    """The raw CreateTopics v7 the compatibility suite sets its topics up with, then until
    each partition's leader serves it (ListOffsets answers): the broker that answered may
    not lead them, and the one that does learns of the topic a moment later (a node's other
    brokers, as a cluster's), which a client's retries cover and a raw request does not."""
    create_topic_request(bootstrap, name, partitions, configs)
    deadline = time.monotonic() + timeout
    while (pending := _unserved(bootstrap, name, partitions)):
        assert time.monotonic() < deadline, f"{name}: {pending} not served by their leaders"
        time.sleep(0.02)


def _unserved(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """The partitions of `topic` that no leader serves yet, by Metadata and ListOffsets."""
    answer = send_request(bootstrap, ApiKey.METADATA, 12, {
        "topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    states = {p.partition_index: p.leader_id for t in answer.topics if t.name == topic
              and t.error_code == 0 for p in t.partitions}
    addresses = {b.node_id: f"{b.host}:{b.port}" for b in answer.brokers}
    pending = [p for p in range(partitions) if states.get(p, -1) not in addresses]
    by_leader: dict[str, list[int]] = {}
    for p in range(partitions):
        if p not in pending:
            by_leader.setdefault(addresses[states[p]], []).append(p)
    for address, indexes in by_leader.items():
        listed = send_request(address, ApiKey.LIST_OFFSETS, 2, {
            "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "timestamp": -1} for p in indexes]}]})
        pending += [p.partition_index for t in listed.topics for p in t.partitions
                    if p.error_code != 0]
    return sorted(pending)


def known_topics(bootstrap: str) -> dict[str, int]:
    """The topics `bootstrap` knows, each with its count of partitions (Metadata for every
    topic, internal ones included): what a broker's metadata image holds, as a client reads
    it."""
    answer = send_request(bootstrap, ApiKey.METADATA, 12, {
        "topics": None, "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    return {t.name: len(t.partitions) for t in answer.topics}


def enable_share_groups(bootstrap: str) -> None:
    """Finalize share.version 1 (off by default, as in Kafka 4.1, where share groups are a
    preview): what `kafka-features.sh upgrade --feature share.version=1` sends, once, to the
    bootstrap broker. On a cluster (a node of several brokers included) the levels are the
    cluster's (/feature, pybroker.cluster.features): every broker serves share groups once
    it is finalized, which this waits for, as the tool's user would before starting
    consumers."""
    r = send_request(bootstrap, ApiKey.UPDATE_FEATURES, 1, {
        "timeout_ms": 60000, "validate_only": False,
        "feature_updates": [{"feature": "share.version", "max_version_level": 1,
                             "upgrade_type": 1}]})
    assert r.error_code == 0, r
    answer = send_request(bootstrap, ApiKey.METADATA, 12, {
        "topics": [], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    deadline = time.monotonic() + 15
    for broker in answer.brokers:
        while not _finalizes_share_groups(f"{broker.host}:{broker.port}"):
            assert time.monotonic() < deadline, f"share.version 1 not on broker {broker}"
            time.sleep(0.05)


def _finalizes_share_groups(address: str) -> bool:
    r = send_request(address, ApiKey.API_VERSIONS, 3, {
        "client_software_name": "t", "client_software_version": "1"})
    return any(f.name == "share.version" and f.max_version_level >= 1
               for f in r.finalized_features)


def _leader(bootstrap: str, topic: str, partition: int) -> tuple[int, str]:
    leader = partition_leader(bootstrap, topic, partition)
    assert leader is not None, f"{bootstrap} names no leader of {topic}-{partition}"
    return leader


def leader_address(bootstrap: str, topic: str, partition: int) -> str:
    """host:port of the partition's leader, from the Metadata `bootstrap` answers, as a client
    finds where to send a Produce or Fetch (on a node of several brokers, or a cluster, the
    bootstrap broker leads only some partitions)."""
    return _leader(bootstrap, topic, partition)[1]


def leader_id(bootstrap: str, topic: str, partition: int) -> int:
    """The broker id of the partition's leader, from the Metadata `bootstrap` answers: what a
    tool prints as `Leader:` (on a node of several brokers not always the first one's)."""
    return _leader(bootstrap, topic, partition)[0]


def named_coordinator(bootstrap: str, key: str, key_type: int = 0,
                      timeout: float = 30.0) -> tuple[int, str]:
    """(broker id, host:port) of the coordinator of group (`key_type` 0) or transactional id
    (1) `key`, from FindCoordinator to `bootstrap`, asked again while it names none, as every
    client does: the first ask on a fresh broker only starts creating the internal topic
    and answers COORDINATOR_NOT_AVAILABLE (as Kafka 4.1.1's)."""
    deadline = time.monotonic() + timeout
    while (found := find_coordinator(bootstrap, key, key_type)) is None:
        assert time.monotonic() < deadline, f"{bootstrap} names no coordinator of {key}"
        time.sleep(0.02)
    return found


def coordinator_id(bootstrap: str, key: str, key_type: int = 0) -> int:
    """The broker id of the coordinator of group (`key_type` 0) or transactional id (1)
    `key`, from FindCoordinator to `bootstrap`: what a tool prints as its coordinator."""
    return named_coordinator(bootstrap, key, key_type)[0]


def controller_address(bootstrap: str) -> str:
    """host:port of the active controller, per the Metadata `bootstrap` answers: where an
    admin client sends what the controller alone serves (ElectLeaders, as ZooKeeper-mode
    Kafka; the other brokers answer NOT_CONTROLLER). A single broker is its own."""
    answer = send_request(bootstrap, ApiKey.METADATA, 12, {
        "topics": [], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    (found,) = [b for b in answer.brokers if b.node_id == answer.controller_id]
    return f"{found.host}:{found.port}"


def group_beside(bootstrap: str, group: str, prefix: str) -> str:
    """A group id starting with `prefix` that the coordinator of `group` coordinates too:
    `prefix` itself on a single broker, where one broker coordinates every group. A request
    naming several groups (DescribeGroups, DeleteGroups, OffsetFetch v8) is answered for
    each by the broker it goes to, which on a node of several brokers, as in a cluster,
    answers NOT_COORDINATOR for another broker's groups."""
    home = coordinator_id(bootstrap, group)
    for n in range(1000):
        candidate = prefix if n == 0 else f"{prefix}-{n}"
        if coordinator_id(bootstrap, candidate) == home:
            return candidate
    raise AssertionError(f"no group {prefix}-N beside {group} on broker {home}")


def coordinator_address(bootstrap: str, key: str, key_type: int = 0,
                        timeout: float = 30.0) -> str:
    """host:port of the coordinator of group (`key_type` 0) or transactional id (1) `key`,
    as a client finds it: FindCoordinator to `bootstrap` (on a node of several brokers, or a
    cluster, another broker may coordinate it). Once that broker serves it: a leader named a
    moment ago may still be loading the partition's groups or transactions and answer
    COORDINATOR_LOAD_IN_PROGRESS (a Produce it verifies against it, NOT_ENOUGH_REPLICAS),
    which a client retries and a raw test does not (the cluster tier's helpers wait the same
    way). A broker named before it has taken up the partition's leadership (a node's
    worker, or a node just restarted whose leaderships move back to their preferred
    workers) answers NOT_COORDINATOR; a client then finds the coordinator again, and so
    does this."""
    deadline = time.monotonic() + timeout
    address = named_coordinator(bootstrap, key, key_type, timeout)[1]
    while True:
        if key_type == 0:
            code = send_request(address, ApiKey.DESCRIBE_GROUPS, 5, {
                "groups": [key], "include_authorized_operations": False}).groups[0].error_code
        else:
            code = send_request(address, ApiKey.DESCRIBE_TRANSACTIONS, 0, {
                "transactional_ids": [key]}).transaction_states[0].error_code
        if code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR):
            return address
        assert time.monotonic() < deadline, f"{address} still answers {code!r} for {key}"
        time.sleep(0.05)
        if code == ErrorCode.NOT_COORDINATOR:
            address = named_coordinator(bootstrap, key, key_type,
                                        max(deadline - time.monotonic(), 0.1))[1]


def wait_for_coordinators(conn: RawConnection, groups: list[str]) -> None:
    """Until the groups' coordinators answer: Kafka's load after its first answer."""
    deadline = time.monotonic() + 60
    while True:
        found = conn.request(ApiKey.FIND_COORDINATOR, 4, {
            "key_type": 0, "coordinator_keys": groups})
        # FindCoordinator answers before the coordinator has loaded its partition; only
        # then do the group APIs stop answering NOT_COORDINATOR / LOAD_IN_PROGRESS.
        described = conn.request(ApiKey.DESCRIBE_GROUPS, 5, {
            "groups": groups, "include_authorized_operations": False}).groups
        if all(c.error_code == ErrorCode.NONE for c in found.coordinators) and not any(
                d.error_code in (ErrorCode.NOT_COORDINATOR,
                                 ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
                for d in described):
            return
        assert time.monotonic() < deadline, "no group coordinator"
        time.sleep(0.5)
