"""The share coordinator's APIs (KIP-932, 83-87) over the wire, on one broker (its own share
coordinator for every key): what a data partition's leader on another broker sends. The
cluster test (tests/cluster/test_share_failover.py) has them carry a failover."""
from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any, Iterator
from uuid import UUID

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from tests.helpers import serving_broker
from tests.integration.raw import RawConnection, enable_share_groups
from tests.integration.share_member import ACCEPT, SHORT, ack_codes, acquired, started

STATE_APIS = {ApiKey.INITIALIZE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE,
              ApiKey.WRITE_SHARE_GROUP_STATE, ApiKey.DELETE_SHARE_GROUP_STATE,
              ApiKey.READ_SHARE_GROUP_STATE_SUMMARY}
TOPIC = UUID(int=42)  # the coordinator keeps state by topic id; it need not be a topic here


@pytest.fixture
def bootstrap(tmp_path: Path) -> Iterator[str]:
    with serving_broker(tmp_path / "logs", **SHORT) as info:
        yield info.bootstrap


def _body(group: str, **partition: Any) -> dict:
    return {"group_id": group, "topics": [{"topic_id": TOPIC, "partitions": [
        {"partition": 0, **partition}]}]}


def _one(response: Any) -> Any:
    (topic,) = response.results
    (partition,) = topic.partitions
    return partition


def _read(conn: RawConnection, group: str, leader_epoch: int) -> Any:
    return _one(conn.request(ApiKey.READ_SHARE_GROUP_STATE, 0,
                             _body(group, leader_epoch=leader_epoch)))


def _write(conn: RawConnection, group: str, leader_epoch: int, start: int,
           batches: list[tuple[int, int, int, int]]) -> Any:
    return _one(conn.request(ApiKey.WRITE_SHARE_GROUP_STATE, 0, _body(
        group, state_epoch=0, leader_epoch=leader_epoch, start_offset=start,
        state_batches=[{"first_offset": f, "last_offset": last, "delivery_state": s,
                        "delivery_count": n} for f, last, s, n in batches])))


def _advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    r = RawConnection(bootstrap).request(ApiKey.API_VERSIONS, 3, {
        "client_software_name": "t", "client_software_version": "1"})
    return {a.api_key: (a.min_version, a.max_version) for a in r.api_keys}


def test_advertised_at_version_0_once_share_groups_are_on(bootstrap: str) -> None:
    """As Kafka 4.1.1: v0 of each, with the other share-group APIs (share.version 1)."""
    assert not STATE_APIS & set(_advertised(bootstrap))
    enable_share_groups(bootstrap)
    advertised = _advertised(bootstrap)
    assert {k: advertised.get(k) for k in STATE_APIS} == {k: (0, 0) for k in STATE_APIS}


def _find(conn: RawConnection, key: str, version: int = 6) -> Any:
    (found,) = conn.request(ApiKey.FIND_COORDINATOR, version, {
        "key_type": 2, "coordinator_keys": [key]}).coordinators
    return found


def _find_named(conn: RawConnection, key: str, timeout: float = 30.0) -> Any:
    """`_find` asked again while it answers COORDINATOR_NOT_AVAILABLE, as Kafka's persister
    does: the first ask has `__share_group_state` created and answers so at once."""
    deadline = time.monotonic() + timeout
    while (found := _find(conn, key)).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE:
        assert time.monotonic() < deadline, f"no share coordinator named for {key}"
        time.sleep(0.02)
    return found


KEY = "g:AAAAAAAAAAAAAAAAAAAAKg:0"  # group g, TOPIC, partition 0


def _to_coordinator(bootstrap: str, key: str = KEY, timeout: float = 30.0) -> RawConnection:
    """A connection to the share coordinator of `key` (group:topicId:partition), found as a
    partition's leader finds it (FindCoordinator, key type 2): on a node, any of its
    brokers. Once that broker serves the key: FindCoordinator names the leader of the key's
    `__share_group_state` partition, which the asking may have just created, and that leader
    answers COORDINATOR_LOAD_IN_PROGRESS until it has loaded the partition, which Kafka's
    persister retries and a raw test does not (as `raw.coordinator_address` waits for a
    group's or a transaction's coordinator). ReadShareGroupStateSummary asks, as it takes
    no leader epoch and changes nothing."""
    with RawConnection(bootstrap) as conn:
        found = _find_named(conn, key)
    assert found.error_code == 0, found
    group, topic, partition = key.rsplit(":", 2)
    probe = {"group_id": group, "topics": [{
        "topic_id": UUID(bytes=base64.urlsafe_b64decode(topic + "==")),
        "partitions": [{"partition": int(partition), "leader_epoch": -1}]}]}
    coordinator = RawConnection(f"{found.host}:{found.port}")
    deadline = time.monotonic() + timeout
    while _one(coordinator.request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, probe)) \
            .error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        assert time.monotonic() < deadline, f"{found.host}:{found.port} still loading {key}"
        time.sleep(0.05)
    return coordinator


def test_find_coordinator_for_a_share_key(bootstrap: str) -> None:
    """Key type 2 (v6): the leader of the key's __share_group_state partition, the topic
    created by the asking (which answers COORDINATOR_NOT_AVAILABLE meanwhile), as Kafka's
    persister finds its share coordinator; a key that is not "group:topicId:partition" is
    INVALID_REQUEST, and so is the key type before v6."""
    enable_share_groups(bootstrap)
    conn = RawConnection(bootstrap)
    found = _find_named(conn, KEY)
    brokers = conn.request(ApiKey.METADATA, 12, {
        "topics": [], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False}).brokers
    assert found.error_code == 0
    assert (found.node_id, found.host, found.port) in {(b.node_id, b.host, b.port)
                                                       for b in brokers}
    for bad in ("g:not-an-id:0", "g:AAAAAAAAAAAAAAAAAAAAKg:x", ":AAAAAAAAAAAAAAAAAAAAKg:0"):
        assert _find(conn, bad).error_code == ErrorCode.INVALID_REQUEST, bad
    assert _find(conn, "g:AAAAAAAAAAAAAAAAAAAAKg:0", 5).error_code == ErrorCode.INVALID_REQUEST


def test_write_read_summary_initialize_delete_and_fencing(bootstrap: str) -> None:
    enable_share_groups(bootstrap)
    conn = _to_coordinator(bootstrap)  # the topic is made
    # no state yet: Kafka's uninitialized answer, not an error
    r = _read(conn, "g", 3)
    assert (r.error_code, r.state_epoch, r.start_offset, r.state_batches) == (0, 0, -1, [])
    assert _write(conn, "g", 3, 10, [(10, 11, 0, 1), (12, 12, 2, 1)]).error_code == 0
    r = _read(conn, "g", 3)
    assert (r.error_code, r.start_offset) == (0, 10)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in r.state_batches] == [(10, 11, 0, 1), (12, 12, 2, 1)]
    # a newer leader read it: the older one is fenced, on write and on read
    assert _read(conn, "g", 4).error_code == 0
    assert _write(conn, "g", 3, 13, []).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert _read(conn, "g", 3).error_code == ErrorCode.FENCED_LEADER_EPOCH
    s = _one(conn.request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, _body("g", leader_epoch=4)))
    assert (s.error_code, s.state_epoch, s.leader_epoch, s.start_offset) == (0, 0, 3, 10)
    # initialize: a fresh start at an offset and a state epoch
    r = _one(conn.request(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0,
                          _body("g", state_epoch=1, start_offset=20)))
    assert r.error_code == 0
    r = _read(conn, "g", -1)
    assert (r.state_epoch, r.start_offset, r.state_batches) == (1, 20, [])
    # the leader's next write, at the state epoch it read, is fenced: it must read again
    assert _write(conn, "g", 4, 21, []).error_code == ErrorCode.FENCED_STATE_EPOCH
    assert _one(conn.request(ApiKey.DELETE_SHARE_GROUP_STATE, 0, _body("g"))).error_code == 0
    r = _read(conn, "g", -1)
    assert (r.start_offset, r.state_epoch) == (-1, 2)  # none, at the epoch past the deleted
    # a leader that still holds the deleted state cannot write it back; one that read it
    # afresh can
    assert _write(conn, "g", 4, 21, []).error_code == ErrorCode.FENCED_STATE_EPOCH
    r = _one(conn.request(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0,
                          _body("g", state_epoch=2, start_offset=5)))
    assert r.error_code == 0
    assert (_read(conn, "g", -1).start_offset, _read(conn, "g", -1).state_epoch) == (5, 2)
    assert _one(conn.request(ApiKey.DELETE_SHARE_GROUP_STATE, 0, _body("g"))).error_code == 0
    # no group id: INVALID_REQUEST for each partition
    assert _read(conn, "", 1).error_code == ErrorCode.INVALID_REQUEST
    assert _write(conn, "", 1, 0, []).error_code == ErrorCode.INVALID_REQUEST


def test_a_deleted_keys_fence_outlives_a_restart(tmp_path: Path) -> None:
    """The fence of a deleted key (a write at its state epoch or older is FENCED_STATE_EPOCH)
    is read back from the tombstone's header when the coordinator loads the partition again."""
    with serving_broker(tmp_path / "logs", **SHORT) as info:
        enable_share_groups(info.bootstrap)
        conn = _to_coordinator(info.bootstrap)
        r = _one(conn.request(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0,
                              _body("g", state_epoch=3, start_offset=20)))
        assert r.error_code == 0
        assert _one(conn.request(ApiKey.DELETE_SHARE_GROUP_STATE, 0, _body("g"))).error_code \
            == 0
        conn.close()
    with serving_broker(tmp_path / "logs", **SHORT) as info:
        conn = _to_coordinator(info.bootstrap)
        r = _read(conn, "g", -1)
        assert (r.error_code, r.start_offset, r.state_epoch) == (0, -1, 4)
        stale = _one(conn.request(ApiKey.WRITE_SHARE_GROUP_STATE, 0, _body(
            "g", state_epoch=3, leader_epoch=0, start_offset=21, state_batches=[])))
        assert stale.error_code == ErrorCode.FENCED_STATE_EPOCH
        fresh = _one(conn.request(ApiKey.WRITE_SHARE_GROUP_STATE, 0, _body(
            "g", state_epoch=4, leader_epoch=0, start_offset=21, state_batches=[])))
        assert fresh.error_code == 0


def test_what_the_leader_wrote_is_what_the_coordinator_reads_back(bootstrap: str) -> None:
    """The share-partition's own writes go through the coordinator: an acknowledgement is
    in the state the APIs read."""
    m = started(bootstrap, 3)
    assert acquired(m.fetch(max_wait_ms=5000)) == [(0, 2, 1)]
    assert ack_codes(m.acknowledge([(0, 0, ACCEPT)])) == [0]
    topic_id = base64.urlsafe_b64encode(m.topic_id.bytes).rstrip(b"=").decode()
    with _to_coordinator(bootstrap, f"{m.group}:{topic_id}:0") as coordinator:
        r = _one(coordinator.request(ApiKey.READ_SHARE_GROUP_STATE, 0, {
            "group_id": m.group, "topics": [{"topic_id": m.topic_id, "partitions": [
                {"partition": 0, "leader_epoch": -1}]}]}))
    assert r.error_code == 0 and r.start_offset == 1
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in r.state_batches] == [
        (1, 2, 0)]  # acquired, and written Available: locks do not outlive the leader
