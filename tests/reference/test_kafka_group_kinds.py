"""How a group id changes kind, on Apache Kafka 4.1.1 and on pybroker side by side, under
`group.consumer.migration.policy=disabled` (issue #33 item 2); the mixed groups of the other
policies are test_kafka_group_migration.py's.

The same raw requests go to both, each broker under the policy: an empty consumer group taken
by a classic JoinGroup, a consumer heartbeat into a classic group with a member (refused), and
a classic JoinGroup into a consumer group with members (taken in as a classic member of the
consumer group, under every policy) answer alike."""
from __future__ import annotations

import uuid
from pathlib import Path

from compat.apache_kafka import ApacheKafka
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.client.consumer_protocol import encode_assignment, encode_subscription
from pybroker.testing.broker import broker_in_thread
from tests.integration.raw import RawConnection, create_topic, wait_for_coordinators

APACHE_KAFKA_OVERRIDES = {"group.consumer.migration.policy": "disabled"}


def _heartbeat(conn: RawConnection, group: str, member: str, epoch: int = 0) -> int:
    return conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None,
        "rack_id": None, "rebalance_timeout_ms": 30000 if epoch == 0 else -1,
        "subscribed_topic_names": ["kinds"] if epoch == 0 else None,
        "subscribed_topic_regex": None, "server_assignor": None,
        "topic_partitions": [] if epoch == 0 else None}).error_code


def _join(conn: RawConnection, group: str) -> tuple[int, str, int]:
    """A classic member through JoinGroup v9's two rounds (one when the first fails)."""
    request = {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
               "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
               "protocols": [{"name": "range", "metadata": encode_subscription(["kinds"])}],
               "reason": None}
    first = conn.request(ApiKey.JOIN_GROUP, 9, request)
    if first.error_code != ErrorCode.MEMBER_ID_REQUIRED:
        return first.error_code, "", -1
    joined = conn.request(ApiKey.JOIN_GROUP, 9, {**request, "member_id": first.member_id})
    return joined.error_code, joined.member_id, joined.generation_id


def _listed(conn: RawConnection) -> list[tuple[str, str, str]]:
    return sorted((g.group_id, g.group_type, g.group_state) for g in conn.request(
        ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []}).groups)


def _answers(bootstrap: str) -> dict[str, object]:
    create_topic(bootstrap, "kinds", 2)
    got: dict[str, object] = {}
    with RawConnection(bootstrap, timeout=30) as conn:
        wait_for_coordinators(conn, ["empty", "classic", "consumer"])
        member = str(uuid.uuid4())
        got["empty: heartbeat, leave"] = (_heartbeat(conn, "empty", member),
                                          _heartbeat(conn, "empty", member, -1))
        got["empty: listed before"] = _listed(conn)
        got["empty: classic join"] = _join(conn, "empty")[0]

        code, member_id, generation = _join(conn, "classic")
        synced = conn.request(ApiKey.SYNC_GROUP, 5, {
            "group_id": "classic", "generation_id": generation, "member_id": member_id,
            "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": member_id,
                             "assignment": encode_assignment({"kinds": [0, 1]})}]})
        got["classic: join, sync"] = (code, synced.error_code)
        got["classic: consumer heartbeat"] = _heartbeat(conn, "classic", str(uuid.uuid4()))
        got["classic: its member's heartbeat"] = conn.request(ApiKey.HEARTBEAT, 4, {
            "group_id": "classic", "generation_id": generation, "member_id": member_id,
            "group_instance_id": None}).error_code

        got["consumer: heartbeat"] = _heartbeat(conn, "consumer", str(uuid.uuid4()))
        got["consumer: classic join"] = _join(conn, "consumer")[0]
        got["listed after"] = [(g, t) for g, t, _ in _listed(conn)]
    return got


def test_group_kinds_as_kafka_answers_under_policy_disabled(
        apache_kafka: ApacheKafka, tmp_path: Path) -> None:
    kafka = _answers(apache_kafka.bootstrap)
    with broker_in_thread(tmp_path / "logs", **APACHE_KAFKA_OVERRIDES) as info:
        ours = _answers(info.bootstrap)
    assert ours == kafka
    assert ours["empty: listed before"] == [("empty", "consumer", "Empty")]
    assert ours["classic: consumer heartbeat"] == ErrorCode.GROUP_ID_NOT_FOUND
    assert ours["consumer: classic join"] == ErrorCode.NONE
    assert ours["listed after"] == [
        ("classic", "classic"), ("consumer", "consumer"), ("empty", "classic")]
