"""ConsumerGroupHeartbeat and ConsumerGroupDescribe on a broker in process, by raw requests:
what the stock clients never send (bad input, limits) gets Kafka's error codes, and the
group.version feature switches the APIs."""
from __future__ import annotations

import uuid
from pathlib import Path

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from tests.integration.raw import create_topic, send_request


def _heartbeat(bootstrap: str, member: str, epoch: int = 0, **fields):  # type: ignore[no-untyped-def]
    body = {"group_id": "g", "member_id": member, "member_epoch": epoch, "instance_id": None,
            "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": ["t"],
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []}
    body.update(fields)
    return send_request(bootstrap, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body)


def test_bad_heartbeats_get_kafkas_codes(tmp_path: Path) -> None:
    from tests.helpers import broker_in_thread

    with broker_in_thread(tmp_path / "logs", group_consumer_max_size="1") as info:
        b = info.bootstrap
        create_topic(b, "t", 2)
        first = _heartbeat(b, "m1")
        assert (first.error_code, first.member_epoch) == (0, 1)
        assert {p for t in first.assignment.topic_partitions for p in t.partitions} == {0, 1}
        assert _heartbeat(b, "m2").error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
        assert _heartbeat(b, "").error_code == ErrorCode.INVALID_REQUEST
        assert _heartbeat(b, "m3", topic_partitions=None).error_code == \
            ErrorCode.INVALID_REQUEST
        assert _heartbeat(b, "m3", server_assignor="cooperative-sticky").error_code == \
            ErrorCode.UNSUPPORTED_ASSIGNOR
        assert _heartbeat(b, "m1", epoch=7, rebalance_timeout_ms=-1,
                          subscribed_topic_names=None, topic_partitions=None).error_code == \
            ErrorCode.FENCED_MEMBER_EPOCH
        assert _heartbeat(b, str(uuid.uuid4()), epoch=1).error_code == \
            ErrorCode.UNKNOWN_MEMBER_ID
        described = send_request(b, ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {
            "group_ids": ["g", "nope"], "include_authorized_operations": False}).groups
        assert [(d.error_code, d.group_state, len(d.members)) for d in described] == \
            [(0, "Stable", 1), (ErrorCode.GROUP_ID_NOT_FOUND, "", 0)]


def test_group_version_0_turns_the_consumer_protocol_off(tmp_path: Path) -> None:
    from tests.helpers import broker_in_thread

    with broker_in_thread(tmp_path / "logs") as info:
        b = info.bootstrap
        versions = {"client_software_name": "raw", "client_software_version": "1"}
        keys = {k.api_key for k in send_request(b, ApiKey.API_VERSIONS, 3, versions).api_keys}
        assert {ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE} <= keys
        off = send_request(b, ApiKey.UPDATE_FEATURES, 1, {
            "timeout_ms": 1000, "validate_only": False, "feature_updates": [
                {"feature": "group.version", "max_version_level": 0, "upgrade_type": 2}]})
        assert off.error_code == 0
        keys = {k.api_key for k in send_request(b, ApiKey.API_VERSIONS, 3, versions).api_keys}
        assert ApiKey.CONSUMER_GROUP_HEARTBEAT not in keys
        assert _heartbeat(b, "m1").error_code == ErrorCode.UNSUPPORTED_VERSION


def _commit(bootstrap: str, member: str, epoch: int, version: int = 9):  # type: ignore[no-untyped-def]
    resp = send_request(bootstrap, ApiKey.OFFSET_COMMIT, version, {
        "group_id": "g", "generation_id_or_member_epoch": epoch, "member_id": member,
        "group_instance_id": None, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
             "committed_metadata": None}]}]})
    return resp.topics[0].partitions[0].error_code


def _fetch(bootstrap: str, member: str | None, epoch: int):  # type: ignore[no-untyped-def]
    resp = send_request(bootstrap, ApiKey.OFFSET_FETCH, 9, {
        "groups": [{"group_id": "g", "member_id": member, "member_epoch": epoch,
                    "topics": [{"name": "t", "partition_indexes": [0]}]}],
        "require_stable": False})
    group = resp.groups[0]
    offsets = [p.committed_offset for t in group.topics for p in t.partitions]
    return group.error_code, offsets


def test_offsets_of_a_consumer_group_check_the_member_epoch(tmp_path: Path) -> None:
    from tests.helpers import broker_in_thread

    with broker_in_thread(tmp_path / "logs") as info:
        b = info.bootstrap
        create_topic(b, "t", 1)
        assert _heartbeat(b, "m1").member_epoch == 1
        assert _commit(b, "m1", 2) == ErrorCode.STALE_MEMBER_EPOCH
        assert _commit(b, "nobody", 1) == ErrorCode.UNKNOWN_MEMBER_ID
        assert _commit(b, "m1", 1, version=8) == ErrorCode.UNSUPPORTED_VERSION
        assert _commit(b, "", -1) == ErrorCode.UNKNOWN_MEMBER_ID  # not while it has members
        assert _fetch(b, "m1", 1) == (0, [-1])
        assert _commit(b, "m1", 1) == ErrorCode.NONE
        assert _fetch(b, "m1", 1) == (0, [5])
        assert _fetch(b, None, -1) == (0, [5])  # the admin client
        assert _fetch(b, "m1", 3)[0] == ErrorCode.STALE_MEMBER_EPOCH
        assert _fetch(b, "nobody", 1)[0] == ErrorCode.UNKNOWN_MEMBER_ID
        txn = send_request(b, ApiKey.TXN_OFFSET_COMMIT, 3, {
            "transactional_id": "tx", "group_id": "g", "producer_id": 7, "producer_epoch": 0,
            "generation_id": 4, "member_id": "m1", "group_instance_id": None,
            "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": 9, "committed_leader_epoch": -1,
                 "committed_metadata": None}]}]})
        assert txn.topics[0].partitions[0].error_code == ErrorCode.ILLEGAL_GENERATION
        left = _heartbeat(b, "m1", epoch=-1, rebalance_timeout_ms=-1,
                          subscribed_topic_names=None, topic_partitions=None)
        assert left.member_epoch == -1
        assert _commit(b, "", -1) == ErrorCode.NONE  # an empty group: the admin may commit


def test_consumer_group_describe_v1_carries_the_member_type() -> None:
    """Kafka 4.1.1 serves ConsumerGroupDescribe v0-1; v1 adds MemberType (int8, after the
    target assignment). The member bytes below are what Kafka 4.1.1's
    ConsumerGroupDescribeResponseData.Member writes for member "m", client "c", host "h",
    MemberType 1, at v1 and (without the type) at v0."""
    from protocol.codec import encode_response

    member = {"member_id": "m", "instance_id": None, "rack_id": None, "member_epoch": 0,
              "client_id": "c", "client_host": "h", "subscribed_topic_names": [],
              "subscribed_topic_regex": None, "assignment": {"topic_partitions": []},
              "target_assignment": {"topic_partitions": []}, "member_type": 1}
    body = {"throttle_time_ms": 0, "groups": [{
        "error_code": 0, "error_message": None, "group_id": "g", "group_state": "Stable",
        "group_epoch": 1, "assignment_epoch": 1, "assignor_name": "uniform",
        "members": [member], "authorized_operations": -2147483648}]}
    v1 = bytes.fromhex("026d000000000000026302680100010001000100")
    v0 = bytes.fromhex("026d0000000000000263026801000100010000")
    assert v1 in encode_response(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, 7, body)
    assert v0 in encode_response(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 7, body)


def test_a_member_is_described_as_a_consumer_protocol_member(tmp_path: Path) -> None:
    from tests.helpers import broker_in_thread

    with broker_in_thread(tmp_path / "logs") as info:
        b = info.bootstrap
        create_topic(b, "t", 1)
        assert _heartbeat(b, "m1").error_code == 0
        (group,) = send_request(b, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
            "group_ids": ["g"], "include_authorized_operations": False}).groups
        assert [(m.member_id, m.member_type) for m in group.members] == [("m1", 1)]


def test_group_consumer_assignors_picks_the_default_and_server_assignor_still_wins(
        tmp_path: Path) -> None:
    """The first of group.consumer.assignors (here by Kafka's class name) is the default; a
    member's ServerAssignor (group.remote.assignor) wins when the list has it, and is
    UNSUPPORTED_ASSIGNOR when it does not."""
    from tests.helpers import broker_in_thread

    def assignor(b: str, group: str) -> str:
        (described,) = send_request(b, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
            "group_ids": [group], "include_authorized_operations": False}).groups
        return str(described.assignor_name)

    with broker_in_thread(tmp_path / "logs", group_consumer_assignors=(
            "org.apache.kafka.coordinator.group.assignor.RangeAssignor,uniform")) as info:
        b = info.bootstrap
        create_topic(b, "t", 2)
        assert _heartbeat(b, "m1", group_id="by-default").error_code == 0
        assert assignor(b, "by-default") == "range"
        assert _heartbeat(b, "m2", group_id="asked", server_assignor="uniform").error_code == 0
        assert assignor(b, "asked") == "uniform"
    with broker_in_thread(tmp_path / "logs2", group_consumer_assignors="range") as info:
        create_topic(info.bootstrap, "t", 2)
        refused = _heartbeat(info.bootstrap, "m1", server_assignor="uniform")
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            "Assignor uniform is not supported. Supported assignors: range.")
