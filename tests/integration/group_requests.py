"""Raw group requests of a group that changes type (classic <-> consumer, KIP-848's
migration): tests/integration/test_group_migration.py and its cluster twin."""
from __future__ import annotations

from typing import Any

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.client.consumer_protocol import encode_assignment, encode_subscription
from tests.integration.group_topics import PARTITIONS
from tests.integration.raw import RawConnection, coordinator_address, send_request


def _group_type(bootstrap: str, group: str) -> str | None:
    """The group's type as its coordinator lists it (a broker lists the groups it
    coordinates: on a node, maybe not `bootstrap`)."""
    listed = send_request(coordinator_address(bootstrap, group), ApiKey.LIST_GROUPS, 5,
                          {"states_filter": [], "types_filter": []}).groups
    return next((g.group_type for g in listed if g.group_id == group), None)


def _raw_classic_member(conn: RawConnection, group: str, topic: str) -> tuple[str, int]:
    """A classic member (JoinGroup v9's two rounds, then SyncGroup as the leader)."""
    request = {"group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000,
               "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
               "protocols": [{"name": "range", "metadata": encode_subscription([topic])}],
               "reason": None}
    first = conn.request(ApiKey.JOIN_GROUP, 9, request)
    joined = conn.request(ApiKey.JOIN_GROUP, 9, {**request, "member_id": first.member_id})
    assert joined.error_code == ErrorCode.NONE
    synced = conn.request(ApiKey.SYNC_GROUP, 5, {
        "group_id": group, "generation_id": joined.generation_id,
        "member_id": joined.member_id, "group_instance_id": None, "protocol_type": "consumer",
        "protocol_name": "range", "assignments": [{
            "member_id": joined.member_id,
            "assignment": encode_assignment({topic: list(range(PARTITIONS))})}]})
    assert synced.error_code == ErrorCode.NONE
    return joined.member_id, joined.generation_id


def _consumer_join(conn: RawConnection, group: str, topic: str, member: str) -> Any:
    return conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": 0, "instance_id": None,
        "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic],
        "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})


def _consumer_leave(conn: RawConnection, group: str, member: str, epoch: int) -> int:
    return conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": -1, "instance_id": None,
        "rack_id": None, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
        "subscribed_topic_regex": None, "server_assignor": None,
        "topic_partitions": None}).error_code
