"""A classic API's offset commit with a share group's id, on Apache Kafka 4.1.1 and on
pybroker side by side (issue #34): the same raw OffsetCommit requests (a standalone commit at
v9 and at v7, and one naming the share member at its epoch), a transactional one, an
OffsetDelete, an OffsetFetch and a ListGroups go to both, with the group holding a member and once it is empty.

A share group's id is the share group's: its offsets are the share-partitions' start
offsets, set by AlterShareGroupOffsets, never a classic group's committed offsets."""
from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from compat.apache_kafka import ApacheKafka
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.testing.broker import broker_in_thread
from tests.integration.raw import (
    RawConnection, create_topic, enable_share_groups, wait_for_coordinators,
)


def _share_heartbeat(conn: RawConnection, member: str, epoch: int) -> Any:
    return conn.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
        "group_id": "sg", "member_id": member, "member_epoch": epoch, "rack_id": None,
        "subscribed_topic_names": ["commits"] if epoch == 0 else None})


def _commit(conn: RawConnection, version: int, member: str = "", epoch: int = -1
            ) -> list[int]:
    r = conn.request(ApiKey.OFFSET_COMMIT, version, {
        "group_id": "sg", "generation_id_or_member_epoch": epoch, "member_id": member,
        "group_instance_id": None, "retention_time_ms": -1, "topics": [{
            "name": "commits", "partitions": [{
                "partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                "committed_metadata": None}]}]})
    return [p.error_code for t in r.topics for p in t.partitions]


def _fetch(conn: RawConnection) -> tuple[int, list[tuple[int, int, int]]]:
    r = conn.request(ApiKey.OFFSET_FETCH, 9, {
        "groups": [{"group_id": "sg", "member_id": None, "member_epoch": -1,
                    "topics": None}], "require_stable": False})
    group = r.groups[0]
    return group.error_code, [(p.partition_index, p.committed_offset, p.error_code)
                              for t in group.topics for p in t.partitions]


def _txn_commit(conn: RawConnection) -> tuple[int, list[int]]:
    """A transactional producer's commit of the group's offsets (InitProducerId,
    AddOffsetsToTxn, TxnOffsetCommit v4): the AddOffsetsToTxn code, the commit's codes."""
    deadline = time.monotonic() + 60
    while True:  # FindCoordinator has Kafka create __transaction_state, then it loads
        conn.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx"]})
        init = conn.request(ApiKey.INIT_PRODUCER_ID, 3, {
            "transactional_id": "tx", "transaction_timeout_ms": 10_000, "producer_id": -1,
            "producer_epoch": -1})
        if init.error_code not in (ErrorCode.NOT_COORDINATOR,
                                   ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                   ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            break
        assert time.monotonic() < deadline, "no transaction coordinator"
        time.sleep(0.5)
    assert init.error_code == 0, init
    ids = {"transactional_id": "tx", "producer_id": init.producer_id,
           "producer_epoch": init.producer_epoch}
    added = conn.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, {**ids, "group_id": "sg"})
    r = conn.request(ApiKey.TXN_OFFSET_COMMIT, 4, {
        **ids, "group_id": "sg", "generation_id": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": "commits", "partitions": [{
            "partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
            "committed_metadata": None}]}]})
    return added.error_code, [p.error_code for t in r.topics for p in t.partitions]


def _offset_delete(conn: RawConnection) -> tuple[int, list[int]]:
    r = conn.request(ApiKey.OFFSET_DELETE, 0, {"group_id": "sg", "topics": [
        {"name": "commits", "partitions": [{"partition_index": 0}]}]})
    return r.error_code, [p.error_code for t in r.topics for p in t.partitions]


def _listed(conn: RawConnection) -> list[tuple[str, str, str]]:
    return sorted((g.group_id, g.group_type, g.protocol_type) for g in conn.request(
        ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []}).groups)


def _answers(bootstrap: str) -> dict[str, object]:
    enable_share_groups(bootstrap)
    create_topic(bootstrap, "commits", 1)
    got: dict[str, object] = {}
    with RawConnection(bootstrap, timeout=30) as conn:
        wait_for_coordinators(conn, ["sg"])
        member = str(uuid.uuid4())
        joined = _share_heartbeat(conn, member, 0)
        got["share heartbeat"] = joined.error_code
        got["member: standalone v9"] = _commit(conn, 9)
        got["member: standalone v7"] = _commit(conn, 7)
        got["member: as the share member v9"] = _commit(conn, 9, member, joined.member_epoch)
        got["member: fetch"] = _fetch(conn)
        got["member: listed"] = _listed(conn)
        got["leave"] = _share_heartbeat(conn, member, -1).error_code
        got["empty: standalone v9"] = _commit(conn, 9)
        got["empty: standalone v7"] = _commit(conn, 7)
        got["empty: fetch"] = _fetch(conn)
        got["empty: offset delete"] = _offset_delete(conn)
        got["empty: transactional commit"] = _txn_commit(conn)
        got["empty: listed"] = _listed(conn)
    return got


def test_offset_commit_with_a_share_groups_id_as_kafka_answers(
        apache_kafka: ApacheKafka, tmp_path: Path) -> None:
    kafka = _answers(apache_kafka.bootstrap)
    with broker_in_thread(tmp_path / "logs") as info:
        ours = _answers(info.bootstrap)
    assert ours == kafka, (ours, kafka)
