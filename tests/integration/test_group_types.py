"""A group id belongs to one kind of group: classic, consumer (KIP-848) or share (KIP-932).
Asking for it as another kind gets Kafka's GROUP_ID_NOT_FOUND ("not a ... group") instead of
a second membership under the same id; online migration between kinds is not served."""
from __future__ import annotations

import uuid
from pathlib import Path

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from tests.helpers import broker_in_thread
from tests.integration.raw import RawConnection, create_topic, enable_share_groups


def _join(conn: RawConnection, group: str) -> int:
    return conn.request(ApiKey.JOIN_GROUP, 9, {
        "group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
        "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}], "reason": None}).error_code


def _consumer_heartbeat(conn: RawConnection, group: str) -> int:
    return conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": 0,
        "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
        "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
        "server_assignor": None, "topic_partitions": []}).error_code


def _share_heartbeat(conn: RawConnection, group: str) -> int:
    return conn.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": 0,
        "rack_id": None, "subscribed_topic_names": ["t"]}).error_code


def test_each_group_id_is_one_kind_of_group(tmp_path: Path) -> None:
    with broker_in_thread(tmp_path / "logs") as info:
        enable_share_groups(info.bootstrap)
        create_topic(info.bootstrap, "t")
        with RawConnection(info.bootstrap) as conn:
            assert _consumer_heartbeat(conn, "consumer") == ErrorCode.NONE
            assert _share_heartbeat(conn, "share") == ErrorCode.NONE
            assert _join(conn, "classic") == ErrorCode.MEMBER_ID_REQUIRED  # it may join

            assert _join(conn, "consumer") == ErrorCode.GROUP_ID_NOT_FOUND
            assert _share_heartbeat(conn, "consumer") == ErrorCode.GROUP_ID_NOT_FOUND
            assert _join(conn, "share") == ErrorCode.GROUP_ID_NOT_FOUND
            assert _consumer_heartbeat(conn, "share") == ErrorCode.GROUP_ID_NOT_FOUND
            assert _share_heartbeat(conn, "classic") == ErrorCode.GROUP_ID_NOT_FOUND
