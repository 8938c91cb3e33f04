"""The mixed-group questions asked of Apache Kafka 4.1.1 and of pybroker alike, with the same
raw requests, for each `group.consumer.migration.policy` (tests/reference/
test_kafka_group_migration*.py).

A classic member (JoinGroup, SyncGroup as leader) makes a live classic group; a consumer
heartbeat upgrades it; the classic member is told to rejoin, rejoins as a classic member of the
consumer group (no leader: the server assigns) and syncs the server's assignment; the consumer
member leaves, which turns the group classic again. Generations and epochs are compared as
steps from the first generation, since both brokers count from the same start. Then the
refusals: a classic group of another protocol type is not upgraded (GROUP_ID_NOT_FOUND), and a
classic JoinGroup of another protocol type into a consumer group is INCONSISTENT_GROUP_PROTOCOL.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from compat.apache_kafka import ApacheKafka
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.client.consumer_protocol import (
    decode_assignment, encode_assignment, encode_subscription,
)
from pybroker.testing.broker import broker_in_thread
from tests.integration.raw import RawConnection, create_topic, wait_for_coordinators

TOPIC = "migrating"


def _join(conn: RawConnection, group: str, member_id: str = "",
          protocol_type: str = "consumer") -> Any:
    """JoinGroup v9; a new member goes through both rounds."""
    request = {"group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000,
               "member_id": member_id, "group_instance_id": None,
               "protocol_type": protocol_type,
               "protocols": [{"name": "range", "metadata": encode_subscription([TOPIC])}],
               "reason": None}
    joined = conn.request(ApiKey.JOIN_GROUP, 9, request)
    if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        joined = conn.request(ApiKey.JOIN_GROUP, 9, {**request, "member_id": joined.member_id})
    return joined


def _sync(conn: RawConnection, group: str, member_id: str, generation: int,
          assignments: list[dict] | None = None) -> Any:
    return conn.request(ApiKey.SYNC_GROUP, 5, {
        "group_id": group, "generation_id": generation, "member_id": member_id,
        "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
        "assignments": assignments or []})


def _heartbeat(conn: RawConnection, group: str, member_id: str, generation: int) -> int:
    return conn.request(ApiKey.HEARTBEAT, 4, {
        "group_id": group, "generation_id": generation, "member_id": member_id,
        "group_instance_id": None}).error_code


def _consumer(conn: RawConnection, group: str, member: str, epoch: int,
              owned: list | None = None) -> Any:
    return conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None,
        "rack_id": None, "rebalance_timeout_ms": 30000 if epoch == 0 else -1,
        "subscribed_topic_names": [TOPIC] if epoch == 0 else None,
        "subscribed_topic_regex": None, "server_assignor": None,
        "topic_partitions": [] if epoch == 0 else owned})


def _type(conn: RawConnection, group: str) -> tuple[str, str] | None:
    listed = conn.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [],
                                                  "types_filter": []}).groups
    return next(((g.group_type, g.group_state) for g in listed if g.group_id == group), None)


def _answers(bootstrap: str) -> dict[str, object]:
    create_topic(bootstrap, TOPIC, 2)
    got: dict[str, object] = {}
    with RawConnection(bootstrap, timeout=30) as conn:
        wait_for_coordinators(conn, ["mixed", "connect"])
        joined = _join(conn, "mixed")
        first, member = joined.generation_id, joined.member_id
        synced = _sync(conn, "mixed", member, first, [{
            "member_id": member, "assignment": encode_assignment({TOPIC: [0, 1]})}])
        got["classic: join, sync"] = (joined.error_code, synced.error_code)

        consumer = str(uuid.uuid4())
        hb = _consumer(conn, "mixed", consumer, 0)
        got["consumer joins"] = (hb.error_code, hb.member_epoch - first,
                                 False if hb.assignment is None else
                                 sum(len(t.partitions) for t in hb.assignment.topic_partitions))
        got["listed: upgraded"] = _type(conn, "mixed")
        got["classic heartbeat"] = _heartbeat(conn, "mixed", member, first)
        described = conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
            "group_ids": ["mixed"], "include_authorized_operations": False}).groups[0]
        got["described"] = (described.error_code, described.group_epoch - first,
                            sorted(m.member_type for m in described.members))

        # the classic member rejoins until its heartbeat is quiet, syncing each time
        rounds = []
        generation = first
        for _ in range(4):
            rejoined = _join(conn, "mixed", member)
            generation = rejoined.generation_id
            synced = _sync(conn, "mixed", member, generation)
            beat = _heartbeat(conn, "mixed", member, generation)
            rounds.append((rejoined.error_code, rejoined.leader == member,
                           rejoined.protocol_name,
                           generation - first, synced.error_code,
                           decode_assignment(synced.assignment).by_topic(), beat))
            if beat == ErrorCode.NONE:
                break
        got["classic rejoins"] = rounds
        got["classic commits: at its epoch, stale"] = tuple(conn.request(
            ApiKey.OFFSET_COMMIT, 8, {
                "group_id": "mixed", "generation_id_or_member_epoch": epoch,
                "member_id": member, "group_instance_id": None, "topics": [{
                    "name": TOPIC, "partitions": [{
                        "partition_index": 0, "committed_offset": 1,
                        "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
        ).topics[0].partitions[0].error_code for epoch in (generation, generation - 1))
        old = conn.request(ApiKey.DESCRIBE_GROUPS, 5, {
            "groups": ["mixed"], "include_authorized_operations": False}).groups[0]
        got["described as classic"] = (old.error_code, old.group_state, old.protocol_type,
                                       len(old.members))
        # the consumer member takes what the classic member released
        hb = _consumer(conn, "mixed", consumer, hb.member_epoch, [])
        got["consumer gets"] = (hb.error_code, hb.member_epoch - first, None if
                                hb.assignment is None else
                                sorted(p for t in hb.assignment.topic_partitions
                                       for p in t.partitions))
        got["consumer leaves"] = _consumer(conn, "mixed", consumer, -1).error_code
        got["listed: downgraded"] = _type(conn, "mixed")
        got["classic heartbeat after"] = _heartbeat(conn, "mixed", member, generation)

        joined = _join(conn, "connect", protocol_type="connect")
        _sync(conn, "connect", joined.member_id, joined.generation_id)
        got["other protocol type: consumer joins"] = \
            _consumer(conn, "connect", str(uuid.uuid4()), 0).error_code
        taken = str(uuid.uuid4())
        _consumer(conn, "taken", taken, 0)
        got["consumer group: classic join of another type"] = \
            _join(conn, "taken", protocol_type="connect").error_code
    return got


def compare(apache_kafka: ApacheKafka, tmp_path: Path, overrides: dict[str, str]
            ) -> tuple[object, object]:
    """The answers of both brokers under the same policy, which must agree; the group's kind
    after the upgrade and after the downgrade."""
    kafka = _answers(apache_kafka.bootstrap)
    # Kafka's keys, none one of broker_in_thread's own keywords (mypy holds the str values
    # against all of those)
    with broker_in_thread(tmp_path / "logs", **overrides) as info:  # type: ignore[arg-type]
        ours = _answers(info.bootstrap)
    assert ours == kafka
    return (ours["listed: upgraded"][0],  # type: ignore[index]
            ours["listed: downgraded"][0])  # type: ignore[index]
